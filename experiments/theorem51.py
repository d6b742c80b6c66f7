"""Theorem 5.1 on trained GD++ models (Vladymyrov et al. 2024): is the noise-free error second order in depth, and is
each layer's preconditioning step the map s ↦ s(1 − γs)²?

    OMP_NUM_THREADS=1 python experiments/theorem51.py                       # the Table 1 zoo's GD++ on uniform:0
    OMP_NUM_THREADS=1 python experiments/theorem51.py MODEL ... --noise uniform:0 --eval-seq 20000 --worst 3

For each model, interp.probes.theorem51 (interp.probes.preconditioning): the adjusted loss after K = 0..L layers on
its prior (at σ = 0 the oracle is exact, so this is ½·MSE), the order of convergence from one layer to the next
(log ε_{K+1} / log ε_K: 2 for second order) and its fit (slope of log(−log ε_K) against K: log 2 ≈ 0.69 per layer),
and per layer γ_l = −ω_xx^l, the median γ_l · s_max(Σ^l) (the theorem's choice is 1/3), the median and
90th-percentile condition number of Σ^l, and how far the measured eigenvalues of Σ^{l+1} are from the map applied to
Σ^l's; then, across the models, interp.probes.theorem51_depths: the final loss against the depth and its order.
`--worst N` adds the N sequences with the largest error after all layers and their raw spectra. Prints markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.files import InvalidArgument
from interp.probes.preconditioning import Theorem51, check_gdpp, context_spectra, theorem51, theorem51_depths
from interp.run import resolve_model

ZOO = Path(__file__).resolve().parent / "zoo" / "best" / "uniform0"


def _order(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _fit(fit) -> str:
    if fit.start is None:
        return "no fit (fewer than two falling losses below 1)"
    return f"slope {fit.slope:.3f} per layer from K = {fit.start} (order {fit.order:.2f}; second order: log 2 = 0.693)"


def worst_contexts(model, data: EvalSet, count: int) -> str:
    """The `count` sequences of `data` with the largest ½(ŷ − y_t)² after all layers, with the share of the mean they
    carry and their raw context's extreme eigenvalues (interp.probes.context_spectra, l = 0), as one markdown line."""
    losses, tokens = [], []
    for b in data.batches():
        with torch.no_grad():
            losses.append(0.5 * (model(b.tokens) - b.target) ** 2)
        tokens.append(b.tokens)
    loss = torch.cat(losses)
    top = loss.topk(min(count, len(loss))).indices
    s = context_spectra(model, torch.cat(tokens)[top])[0]  # [count, d], ascending
    share = loss[top].sum() / loss.sum()
    each = "; ".join(
        f"{loss[i]:.2g} (s_min {s[k, 0]:.2f}, s_max {s[k, -1]:.1f}, κ {s[k, -1] / s[k, 0]:.0f})"
        for k, i in enumerate(top.tolist())
    )
    return f"The {count} worst sequences after all layers carry {share:.0%} of the mean: {each}."


def report(path: Path, noise: str | None, eval_seq: int, probe_seq: int, worst: int = 0) -> tuple[str, Theorem51]:
    m = resolve_model(path)
    check_gdpp(m.model)  # the map s ↦ s(1 − γs)² is GD++'s: refused before the evaluation
    noise = noise or m.noise
    if noise is None:
        raise InvalidArgument(f"{path} does not record its training prior; pass --noise")
    data = EvalSet(noise, d=m.d, n=m.n or 20, n_seq=eval_seq, seed=0, x_cov=m.x_cov)
    rec = theorem51(m.model, data, probe_seq=probe_seq)  # InvalidArgument for a prior with noise
    pre = rec.preconditioning
    L = m.model.cfg.n_layers
    lines = [
        f"### `{path}` (GD++-{L}, {noise}, {m.model.cfg.dtype})",
        "",
        f"Adjusted loss after K layers ({rec.n_seq} sequences, seed 0), and per layer the preconditioning of the",
        f"context ({rec.probe_seq} sequences): γ = −ω_xx, median γ·s_max(Σ), median / 90th-percentile κ(Σ) after",
        "the layer, and the largest gap between the measured eigenvalues after the layer and s(1 − γs)² of those",
        "before it (relative to s_max).",
        "",
        "| K | loss after K layers (median, worst) | order log ε_K / log ε_{K−1} (of the median) | γ of layer K "
        "| γ·s_max | κ median / q90 | map error |",
        "|---|---|---|---|---|---|---|",
    ]
    for K in range(L + 1):
        row = [
            str(K),
            f"{rec.loss[K]:.3g} ± {rec.loss_stderr[K]:.2g} ({rec.loss_median[K]:.3g}, {rec.loss_worst[K]:.3g})",
            f"{_order(rec.order[K - 1])} ({_order(rec.order_median[K - 1])})" if K else "–",
        ]
        if K == 0:
            row += ["–", "–", f"{pre.kappa[0]:.1f} / {pre.kappa_q90[0]:.1f}", "–"]
        else:
            row += [
                f"{pre.gamma[K - 1]:.4g}",
                f"{pre.gamma_smax[K - 1]:.3f}",
                f"{pre.kappa[K]:.2f} / {pre.kappa_q90[K]:.2f}",
                f"{pre.map_error[K - 1]:.1e}",
            ]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"Fitted order: {_fit(rec.fit)}."]
    if worst:
        lines += ["", worst_contexts(m.model, data, worst)]
    return "\n".join(lines) + "\n", rec


def across_depths(records: list[Theorem51]) -> str:
    """The final loss of each model against its depth (interp.probes.theorem51_depths), as markdown."""
    dep = theorem51_depths(records)
    lines = [
        "### Across depths",
        "",
        "| L | loss after all L layers (median) | order log ε_L / log ε_{L−1} (of the median) "
        "| κ median entering layer L |",
        "|---|---|---|---|",
    ]
    for i, L in enumerate(dep.depth):
        order = f"{_order(dep.order[i - 1])} ({_order(dep.order_median[i - 1])})" if i else "–"
        loss = f"{dep.loss[i]:.3g} ± {dep.loss_stderr[i]:.2g} ({dep.loss_median[i]:.3g})"
        lines.append(f"| {L} | {loss} | {order} | {dep.kappa_last[i]:.3g} |")
    lines += ["", f"Fitted order across depths: {_fit(dep.fit)}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path, help="GD++ checkpoints or runs (default: the zoo's uniform:0 GD++)")
    ap.add_argument("--noise", help="evaluate on this prior (default: each model's own)")
    ap.add_argument("--eval-seq", type=int, default=100_000)
    ap.add_argument("--probe-seq", type=int, default=4_000)
    ap.add_argument("--worst", type=int, default=0, help="also list the N worst sequences' raw spectra (default 0)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    models = args.models or sorted(ZOO.glob("gdpp*.safetensors"), key=lambda p: int(p.stem[4:]))
    if not models:
        print(f"theorem51: no models given and none in {ZOO}", file=sys.stderr)
        return 2
    records = []
    for path in models:
        try:
            text, rec = report(path, args.noise, args.eval_seq, args.probe_seq, args.worst)
        except InvalidArgument as e:  # a missing or unreadable file, or not a GD++ model: one line, exit status 2
            print(f"theorem51: {path}: {e}" if str(path) not in str(e) else f"theorem51: {e}", file=sys.stderr)
            return 2
        print(text)
        records.append(rec)
    if len({len(r.loss) for r in records}) == len(records) > 1:  # one model per depth: compare the depths
        print(across_depths(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
