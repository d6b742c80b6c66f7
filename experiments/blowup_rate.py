"""How often does a model blow up? The expected number of blow-ups (adjusted loss above 100·d, or not finite) in 10⁶
sequences of its training prior, estimated by importance sampling (interp.evaluate.blowup_rate), with its standard
error, for each run.

    OMP_NUM_THREADS=1 python experiments/blowup_rate.py RUN [RUN ...] [--n-seq 1000000] [--seed 0] [--count N]
        [--out FILE.md]

--count N also counts the blow-ups among N plain sequences of the prior (EvalSet seed 11, disjoint from the table's
seeds 0 and 1): the direct measurement the estimate stands in for, Poisson with mean rate·N.

A worst sequence in 10⁶ is a coin whose odds this is: at a rate of 1 per 10⁶ a sample of 10⁶ holds a blow-up with
probability 1 − 1/e. About 25 s per run per 10⁶ proposal sequences on one thread (d = 10, n = 20).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import BLOWUP_SCALE, BlowupRate, adjusted_losses, blowup_rate
from interp.run import resolve_model
from interp.train import GUARD_CAP

PER = 1_000_000  # the table's sample size (aim (c): the worst sequence in 10⁶)
COUNT_SEED = 11


def rate(run: Path, n_seq: int, seed: int) -> BlowupRate:
    m = resolve_model(run)
    cfg = m.config
    return blowup_rate(m.model, cfg.noise, cfg.model.d, cfg.n, GUARD_CAP * cfg.model.d, n_seq=n_seq, seed=seed,
                       x_cov=cfg.x_cov)  # fmt: skip


def count(run: Path, n_seq: int) -> int:
    """Blow-ups (adjusted loss above 100·d, or not finite) among n_seq plain sequences of the run's prior."""
    m = resolve_model(run)
    cfg = m.config
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=n_seq, seed=COUNT_SEED, x_cov=cfg.x_cov)
    diff = adjusted_losses({"m": m.model}, data)["m"]
    return int((~(diff <= GUARD_CAP * cfg.model.d)).sum())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n-seq", type=int, default=PER, help="proposal sequences per run")
    ap.add_argument("--seed", type=int, default=0, help="the proposal's torch.Generator seed")
    ap.add_argument("--count", type=int, default=0, help="also count blow-ups on this many plain sequences")
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counted = f" counted in {args.count:,} plain sequences (expected) |" if args.count else ""
    lines = [
        f"| run | blow-ups per 10⁶ (± s.e.) | proposal hits of {args.n_seq:,} (half at {BLOWUP_SCALE}×) |{counted}",
        "|---|---|---|" + ("---|" if args.count else ""),
    ]
    print("\n".join(lines), flush=True)
    for run in args.runs:
        est = rate(run, args.n_seq, args.seed)
        mean, se = est.per(PER)
        row = f"| `{run}` | {mean:.3g} ± {se:.2g} | {est.hits} |"
        if args.count:
            row += f" {count(run, args.count)} ({est.rate * args.count:.3g}) |"
        lines.append(row)
        print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
