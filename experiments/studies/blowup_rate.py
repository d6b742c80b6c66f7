"""How often does a model blow up? Blow-ups (adjusted loss above 100·d, or not finite) counted on --n-seq plain
sequences of the run's training prior (EvalSet seed 11, disjoint from the table's seeds 0 and 1), as a rate per 10⁶
with its Poisson standard error, and the chance that a sample of 10⁶ (aim (c) of the Table 1 reproduction) holds none.

    OMP_NUM_THREADS=1 python experiments/studies/blowup_rate.py RUN [RUN ...] [--n-seq 5000000] [--which] [--out F.md]

The sequences are streamed (not held), about 100 s per run for 5·10⁶ on one thread (d = 10, n = 20, 3 layers).
Importance sampling was tried first and not kept: proposals that scale every standard normal, or w and ξ alone, by
1.1–2× estimated 0.2–1.4 per 10⁶ where 5·10⁶ plain sequences counted 2.4–2.6 (presets.md, session 16).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses
from interp.files import atomic_write_text
from interp.run import resolve_model
from interp.train import GUARD_CAP

PER = 1_000_000  # the table's sample size (aim (c): the worst sequence in 10⁶)
COUNT_SEED = 11


def count(run: Path, n_seq: int) -> dict:
    """{"blowups", "n_seq", "rate", "stderr", "worst", "which"} (rate per sequence; which: the blown-up sequences'
    indices, the same sequences for every run of one prior) of the run's final model on its prior."""
    m = resolve_model(run)
    cfg = m.config
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=n_seq, seed=COUNT_SEED, x_cov=cfg.x_cov)
    diff = adjusted_losses({"m": m.model}, data)["m"]
    which = (~(diff <= GUARD_CAP * cfg.model.d)).nonzero().flatten().tolist()  # indices; nan and inf count
    k = len(which)
    return dict(
        blowups=k, n_seq=n_seq, rate=k / n_seq, stderr=math.sqrt(k) / n_seq, worst=diff.max().item(), which=which
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n-seq", type=int, default=5 * PER)
    ap.add_argument("--which", action="store_true", help="also print the blown-up sequences' indices, and those shared")
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    lines = [
        f"| run | blow-ups in {args.n_seq:,} | per 10⁶ (± s.e.) | P(none in 10⁶) | worst |",
        "|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    seen: list[set[int]] = []
    for run in args.runs:
        r = count(run, args.n_seq)
        seen.append(set(r["which"]))
        per, se = r["rate"] * PER, r["stderr"] * PER
        lines.append(f"| `{run}` | {r['blowups']} | {per:.3g} ± {se:.2g} | {math.exp(-per):.2f} | {r['worst']:.4g} |")
        print(lines[-1], flush=True)
    if args.which:
        for run, w in zip(args.runs, seen):
            print(f"{run}: {sorted(w)}")
        print(f"blown up in every run: {sorted(set.intersection(*seen))}")
    if args.out:
        atomic_write_text(args.out, "\n".join(lines) + "\n")  # never a half-written table
    return 0


if __name__ == "__main__":
    sys.exit(main())
