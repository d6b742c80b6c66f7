"""A trained GD++ (or DIAG) run embedded exactly in a wider parameterization and polished there (the measurement
behind interp.presets.NOISE_FREE_NEST; experiments/results/presets.md, session 11):

    OMP_NUM_THREADS=1 python experiments/studies/nested_polish.py experiments/table1_grid/gdpp5_uniform0_s0 --arch diag

Prints the adjusted loss (mean ± s.e., median, worst of --eval-seq sequences of eval seed 0) of the run's model, of
its embedding (the same function), and after --rounds rounds of interp.train.polish in --arch's weights (polish data
from torch.Generator(--seed)), with each round's (before, after) on its check batch and the polish's wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.run import Run
from interp.train import polish


def show(name: str, est) -> None:
    print(f"{name}: {est.mean:.4g} ± {est.stderr:.2g} (median {est.median:.3g}, worst {est.worst:.3g})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a trained run directory")
    ap.add_argument("--arch", required=True, choices=("diag", "full"), help="the parameterization to embed it in")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--eval-seq", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=12345, help="seed of the polish's data")
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = Run(args.run)
    cfg, model = run.config(), run.load()[0]
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=args.eval_seq, seed=0, x_cov=cfg.x_cov)
    show(f"{model.arch.label} run", adjusted_loss(model, data))
    wide = model.embed(dataclasses.replace(model.cfg, param=args.arch))
    show(f"embedded in {wide.arch.label}", adjusted_loss(wide, data))
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(args.seed)
    rounds = polish(wide, dataclasses.replace(cfg, model=wide.cfg), gen, args.rounds)
    print("rounds (check batch before, after):", ", ".join(f"({a:.3g}, {b:.3g})" for a, b in rounds))
    print(f"polish wall: {time.perf_counter() - t0:.0f} s")
    show(f"polished in {wide.arch.label}", adjusted_loss(wide, data))


if __name__ == "__main__":
    main()
