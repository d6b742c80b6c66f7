"""The polish's tail term, scanned: a trained run's final model polished again with interp.train.polish at each
--kappa (TrainConfig.polish_tail; 0 is the plain polish), then scored as the table and aim (c) score it (the measurement
behind interp.presets.NOISY_POLISH_TAIL; experiments/results/presets.md, session 17):

    OMP_NUM_THREADS=1 python experiments/studies/tail_polish_scan.py RUN --kappa 0 1e-4 1e-3 1e-2 [--out F.md]

For each κ (and the run as it is): the mean and worst of 10⁶ sequences of eval seed 0 (the table's choice), and on
--n-seq sequences of eval seed 11 (experiments/studies/blowup_rate.py's) the blow-ups (above 100·d, or not finite),
the mean, and the mean without the blow-ups. --rounds rounds of polish (default 4), polish data from
torch.Generator(--seed); about 2 min a κ for a 3-layer model.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses
from interp.files import atomic_write_text
from interp.run import resolve_model
from interp.train import GUARD_CAP, polish

TABLE_SEQ = 1_000_000


def score(model, cfg, n_seq: int) -> dict:
    """The table's mean and worst (eval seed 0, 10⁶) and the blow-up count, mean and mean without (seed 11, n_seq)."""
    size = dict(d=cfg.model.d, n=cfg.n, x_cov=cfg.x_cov)
    table = adjusted_losses({"m": model}, EvalSet(cfg.noise, n_seq=TABLE_SEQ, seed=0, **size))["m"]
    count = adjusted_losses({"m": model}, EvalSet(cfg.noise, n_seq=n_seq, seed=11, **size))["m"]
    tame = count <= GUARD_CAP * cfg.model.d  # nan and inf are blow-ups
    return dict(
        mean=table.mean().item(),
        worst=table.max().item(),
        blowups=int((~tame).sum()),
        count_mean=count.mean().item(),
        tame_mean=count[tame].mean().item(),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--kappa", type=float, nargs="*", default=[], help="none: score the run alone")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n-seq", type=int, default=5 * TABLE_SEQ)
    ap.add_argument("--seed", type=int, default=12345, help="seed of the polish's data")
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = resolve_model(args.run)
    cfg, trained = m.config, m.model
    lines = [
        f"| {args.run} | 10⁶ (seed 0): mean | worst | blow-ups in {args.n_seq:,} (seed 11) | their mean | "
        "without the blow-ups | polish wall |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for kappa in [None, *args.kappa]:
        model, wall = trained, ""
        if kappa is not None:
            model = trained.embed(trained.cfg)  # a copy: every κ starts from the run's model
            t0 = time.perf_counter()
            polish(
                model,
                dataclasses.replace(cfg, polish_tail=kappa),
                torch.Generator().manual_seed(args.seed),
                args.rounds,
            )
            wall = f"{time.perf_counter() - t0:.0f} s"
        s = score(model, cfg, args.n_seq)
        name = "the run" if kappa is None else f"polished again, κ = {kappa:g}"
        lines.append(
            f"| {name} | {s['mean']:.5g} | {s['worst']:.4g} | {s['blowups']} | {s['count_mean']:.5g} | "
            f"{s['tame_mean']:.5g} | {wall} |"
        )
        print(lines[-1], flush=True)
    if args.out:
        atomic_write_text(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
