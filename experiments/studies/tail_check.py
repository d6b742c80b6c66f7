"""Are a model's tails tame? Mean, median, worst sequence and the mean without the 10 worst on the evaluation
sequences of `interp table` (100 000, seed 0), then the worst sequence and the number of blow-ups on 10⁶ more (seed 7).

    OMP_NUM_THREADS=1 python experiments/studies/tail_check.py RUN [RUN ...] [--out FILE.md]

A blow-up is a sequence whose adjusted loss exceeds 100·d (interp.train.GUARD_CAP · d: 1 000 for d = 10), where
trained models' ordinary worst sequences stay below 150. Each run is evaluated on its own training prior.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, ScoredSet, adjusted_losses
from interp.files import atomic_write_text
from interp.run import Run, load
from interp.train import GUARD_CAP

TRIM = 10
TAIL_SEED = 7  # the tail sequences: a second, larger evaluation set, disjoint from the table's (seed 0) by seed
_TAIL_SETS: dict[EvalSet, ScoredSet] = {}  # tail sequences with their oracle, drawn once per prior (~2 GB for 10⁶)


def tail(model, cfg, n_seq: int, seed: int = TAIL_SEED) -> dict:
    """Mean, worst and number of blow-ups (adjusted loss above GUARD_CAP·d) of `model` on `n_seq` tail sequences."""
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=n_seq, seed=seed, x_cov=cfg.x_cov)
    if cfg.x_cov is None:  # runs of one prior share the set
        if data not in _TAIL_SETS:
            _TAIL_SETS[data] = ScoredSet.of(data)
        data = _TAIL_SETS[data]
    diff = adjusted_losses({"m": model}, data)["m"]
    blowups = int((diff > GUARD_CAP * cfg.model.d).sum())
    return {"n_seq": n_seq, "seed": seed, "mean": diff.mean().item(), "worst": diff.max().item(), "blowups": blowups}


def check(run: Path, n_seq: int, tail_seq: int, tail_seed: int) -> dict:
    cfg = Run(run).config()
    model = load(run)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=n_seq, seed=0, x_cov=cfg.x_cov)
    diff = adjusted_losses({"m": model}, data)["m"]
    t = tail(model, cfg, tail_seq, tail_seed)
    return dict(
        cfg=cfg,
        est=LossEstimate.of(diff),
        trimmed=diff.sort().values[:-TRIM].mean().item(),
        tail_mean=t["mean"],
        tail_worst=t["worst"],
        blowups=t["blowups"],
    )


def num(v: float) -> str:
    return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n-seq", type=int, default=100_000)
    ap.add_argument("--tail-seq", type=int, default=1_000_000)
    ap.add_argument("--tail-seed", type=int, default=7)
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    lines = [
        f"| run | stress | adjusted ({args.n_seq:,}) | median | worst | mean without {TRIM} worst "
        f"| {args.tail_seq:,} more: mean | worst | blow-ups |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for run in args.runs:
        r = check(run, args.n_seq, args.tail_seq, args.tail_seed)
        est = r["est"]
        lines.append(
            f"| `{run}` | {r['cfg'].stress} | {num(est.mean)} ± {num(est.stderr)} | {est.median:.4f} | "
            f"{est.worst:.4g} | {r['trimmed']:.4f} | {num(r['tail_mean'])} | {r['tail_worst']:.4g} | {r['blowups']} |"
        )
        print(lines[-1], flush=True)
    if args.out:
        atomic_write_text(args.out, "\n".join(lines) + "\n")  # never a half-written table
    return 0


if __name__ == "__main__":
    sys.exit(main())
