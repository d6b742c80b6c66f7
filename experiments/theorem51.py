"""Theorem 5.1 on trained GD++ models (Vladymyrov et al. 2024): is the noise-free error second order in depth, and is
each layer's preconditioning step the map s ↦ s(1 − γs)²?

    OMP_NUM_THREADS=1 python experiments/theorem51.py                       # the Table 1 zoo's GD++ on uniform:0
    OMP_NUM_THREADS=1 python experiments/theorem51.py MODEL ... --noise uniform:0 --eval-seq 20000

For each model: the adjusted loss after K = 0..L layers on its prior (interp.evaluate.per_layer_loss; at σ = 0 the
oracle is exact, so this is ½·MSE), the order of convergence from one layer to the next (log ε_{K+1} / log ε_K: 2
for second order), and per layer, from interp.probes.preconditioning, γ_l = −ω_xx^l, the median γ_l · s_max(Σ^l)
(the theorem's choice is 1/3), the median and 90th-percentile condition number of Σ^l, and how far the measured
eigenvalues of Σ^{l+1} are from the map applied to Σ^l's. Prints markdown.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import per_layer_loss
from interp.files import InvalidArgument
from interp.probes.preconditioning import preconditioning
from interp.run import resolve_model

ZOO = Path(__file__).resolve().parent / "zoo" / "table1" / "uniform0"


def order(prev: float, cur: float) -> str:
    """log ε_{K+1} / log ε_K, where both are below 1 (the order of convergence); '–' otherwise."""
    if not (0 < cur < 1 and 0 < prev < 1):
        return "–"
    return f"{math.log(cur) / math.log(prev):.2f}"


def report(path: Path, noise: str | None, eval_seq: int, probe_seq: int) -> str:
    m = resolve_model(path)
    if m.model.cfg.param != "gdpp":  # the map s ↦ s(1 − γs)² is GD++'s; checked before the evaluation's minute
        raise InvalidArgument(f"{path}: a {m.model.cfg.param.upper()} model; Theorem 5.1's check needs a GD++ one")
    noise = noise or m.noise
    data = EvalSet(noise, d=m.d, n=m.n or 20, n_seq=eval_seq, seed=0, x_cov=m.x_cov)
    curve = per_layer_loss(m.model, data)
    tokens = data.replace(n_seq=probe_seq).draw().tokens.to(torch.float64)
    pre = preconditioning(m.model, tokens)
    L = m.model.cfg.n_layers
    lines = [
        f"### `{path}` (GD++-{L}, {noise}, {m.model.cfg.dtype})",
        "",
        f"Adjusted loss after K layers ({eval_seq} sequences, seed 0), and per layer the preconditioning of the",
        f"context ({probe_seq} sequences): γ = −ω_xx, median γ·s_max(Σ), median / 90th-percentile κ(Σ) entering the",
        "layer, and the largest gap between the measured eigenvalues after the layer and s(1 − γs)² of those before it",
        "(relative to s_max).",
        "",
        "| K | loss after K layers (median, worst) | order log ε_K / log ε_{K−1} | γ of layer K | γ·s_max "
        "| κ median / q90 | map error |",
        "|---|---|---|---|---|---|---|",
    ]
    for K, est in enumerate(curve):
        prev = curve[K - 1].mean if K else float("nan")
        row = [
            str(K),
            f"{est.mean:.3g} ± {est.stderr:.2g} ({est.median:.3g}, {est.worst:.3g})",
            order(prev, est.mean) if K else "–",
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
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path, help="GD++ checkpoints or runs (default: the zoo's uniform:0 GD++)")
    ap.add_argument("--noise", help="evaluate on this prior (default: each model's own)")
    ap.add_argument("--eval-seq", type=int, default=100_000)
    ap.add_argument("--probe-seq", type=int, default=4_000)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    models = args.models or sorted(ZOO.glob("gdpp*.safetensors"), key=lambda p: int(p.stem[4:]))
    if not models:
        print(f"theorem51: no models given and none in {ZOO}", file=sys.stderr)
        return 2
    for path in models:
        try:
            print(report(path, args.noise, args.eval_seq, args.probe_seq))
        except InvalidArgument as e:  # a missing or unreadable file, or not a GD++ model: one line, exit status 2
            print(f"theorem51: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
