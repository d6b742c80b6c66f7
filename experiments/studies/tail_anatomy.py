"""Which contexts carry a model's tail? On `--n-seq` sequences of the run's own prior (default 10⁶, seed 1: the
confirmation sequences of `interp table --confirm-seq 1000000`), print the mean, median and worst adjusted loss, the
number of blow-ups (above 100·d, interp.train.GUARD_CAP · d), the quantiles of each context feature, the features of
the `--top` worst sequences, and how the worst sequence's prediction moves when its context labels y_i are scaled
(a polynomial of degree k in y grows like t^k).

Features: λ_max and λ_min of XᵀX, ‖w‖, σ_τ, Σ_i y_i², ‖x_t‖.

    OMP_NUM_THREADS=1 python experiments/studies/tail_anatomy.py RUN [RUN ...] [--n-seq N] [--seed S] [--top K]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, adjusted_losses, as_predictor
from interp.run import Run, load
from interp.tasks import TaskBatch
from interp.train import GUARD_CAP

FEATURES = ("λ_max", "λ_min", "‖w‖", "σ", "Σy²", "‖x_t‖")
Y_SCALES = (0.8, 0.9, 1.0, 1.1, 1.2)


def features(batch: TaskBatch) -> torch.Tensor:
    """[batch, 6] float64: λ_max, λ_min of XᵀX, ‖w‖, σ_τ, Σ_i y_i², ‖x_t‖."""
    x = batch.x.double()
    ev = torch.linalg.eigvalsh(x.mT @ x)
    cols = (ev[:, -1], ev[:, 0], batch.w.double().norm(dim=-1), batch.sigma.double(), batch.y.double().square().sum(-1))
    return torch.stack([*cols, batch.x_query.double().norm(dim=-1)], -1)


def anatomy(run: Path, n_seq: int, seed: int) -> dict:
    """Per-sequence adjusted losses D [n_seq] and features F [n_seq, 6] of `run` on its prior, and the y-scale scan
    [(t, prediction)] of its worst sequence."""
    cfg = Run(run).config()
    model = load(run)
    predict = as_predictor(model)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=n_seq, seed=seed, x_cov=cfg.x_cov)
    feats, diffs, worst = [], [], None
    for b in data.batches():  # batch by batch, so that 10⁶ sequences are never held at once
        diff = adjusted_losses({"m": model}, ScoredSet.of_batches([b]))["m"].double()
        feats.append(features(b))
        diffs.append(diff)
        i = int(diff.argmax())
        if worst is None or diff[i] > worst[0]:
            worst = (float(diff[i]), TaskBatch(*(t[i : i + 1].clone() for t in (b.tokens, b.target, b.sigma, b.w))))
    b = worst[1]
    scan = []
    for t in Y_SCALES:
        tokens = b.tokens.clone()
        tokens[:, :-1, -1] *= t
        with torch.no_grad():
            scan.append((t, float(predict(TaskBatch(tokens, b.target, b.sigma, b.w)))))
    return dict(cfg=cfg, D=torch.cat(diffs), F=torch.cat(feats), target=float(b.target), scan=scan, seed=seed)


def render(run: Path, a: dict, top: int) -> str:
    cfg, D, F, scan = a["cfg"], a["D"], a["F"], a["scan"]
    cap = GUARD_CAP * cfg.model.d
    lines = [
        f"## {run}",
        "",
        f"{len(D):,} sequences of {cfg.noise} (seed {a['seed']}): mean {D.mean():.4g}, median {D.median():.4g}, "
        f"worst {D.max():.4g}, blow-ups (above {cap:g}) {int((D > cap).sum())}, above 100: {int((D > 100).sum())}",
        "",
        "| | adjusted loss | " + " | ".join(FEATURES) + " |",
        "|---|---|" + "---|" * len(FEATURES),
    ]
    for q in (0.5, 0.99, 0.9999):
        lines.append(
            f"| quantile {q} | {D.quantile(q):.3g} | " + " | ".join(f"{v:.1f}" for v in F.quantile(q, 0)) + " |"
        )
    for rank, i in enumerate(D.argsort(descending=True)[:top].tolist(), 1):
        lines.append(f"| worst {rank} | {D[i]:.4g} | " + " | ".join(f"{v:.1f}" for v in F[i]) + " |")
    lines += ["", f"The worst sequence with its labels y_i scaled by t (target {a['target']:.3g}):", ""]
    lines.append("| t | " + " | ".join(f"{t:g}" for t, _ in scan) + " |")
    lines.append("|---|" + "---|" * len(scan))
    lines.append("| prediction | " + " | ".join(f"{p:.3g}" for _, p in scan) + " |")
    (t0, p0), (t1, p1) = scan[-2], scan[-1]
    if abs(p0) > 0 and abs(p1) > 100 * abs(a["target"]):
        exponent = math.log(abs(p1 / p0)) / math.log(t1 / t0)
        lines += ["", f"local growth exponent between t = {t0:g} and {t1:g}: {exponent:.1f}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n-seq", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for run in args.runs:
        print(render(run, anatomy(run, args.n_seq, args.seed), args.top), flush=True)


if __name__ == "__main__":
    main()
