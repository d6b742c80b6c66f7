"""Retrain the best seed of a Table 1 cell with its whole trajectory (issue 49: drift on all ten priors).

The Table 1 grid ships only each run's final checkpoint. The drift study needs the trajectory, so this script
retrains the best seed of every chosen cell (`experiments/results/table1_grid.json`, `interp table --json`) with the
same config (`interp train`, the fast preset, 30 geometric checkpoints) into `experiments/zoo/trajectories/<run>`;
where the grid itself kept that run's trajectory (FULL-7 on uniform:7 and {1,3,5}), it is copied instead.
Resumable: rerunning it resumes unfinished runs from their resume state and skips finished ones; `--workers` runs go
at once, each one torch thread (and `nice`, so interactive work keeps its core).

    OMP_NUM_THREADS=1 python experiments/train_trajectories.py --arch full --layers 7 --workers 2

A retrain counts as the zoo's model when its adjusted loss is within 2% of the zoo file's on the same sequences
(`experiments/drift_study.py --priors` checks it and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from interp.run import Run
from interp.tasks import prior_slug

ROOT = Path(__file__).resolve().parent
GRID = ROOT / "results" / "table1_grid.json"
GRID_RUNS = ROOT / "table1_grid"
OUT = ROOT / "zoo" / "trajectories"


def best_runs(arch: str, layers: int) -> list[tuple[str, int]]:
    """(prior, best seed) of every prior's (arch, layers) cell of the Table 1 grid, in the grid's prior order."""
    cells = json.loads(GRID.read_text())["cells"]
    return [
        (key.split("|")[1], cell["best_seed"]) for key, cell in cells.items() if key.split("|")[0] == f"{arch}{layers}"
    ]


def command(arch: str, layers: int, prior: str, seed: int) -> list[str]:
    out = OUT / f"{arch}{layers}_{prior_slug(prior)}_s{seed}"
    cmd = ["interp", "train", "--arch", arch, "--layers", str(layers), "--noise", prior, "--seed", str(seed)]
    cmd += ["--threads", "1", "--no-progress", "--out", str(out.relative_to(ROOT.parent))]
    if Run.is_run(out):
        cmd.append("--resume")
    return cmd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="full")
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    todo = []
    for prior, seed in best_runs(args.arch, args.layers):
        out = OUT / f"{args.arch}{args.layers}_{prior_slug(prior)}_s{seed}"
        if Run.is_run(out) and Run(out).is_complete():
            print(f"{out.name}: done", flush=True)
            continue
        kept = GRID_RUNS / out.name
        if not args.dry_run and Run.is_run(kept) and len(Run(kept).checkpoints()) > 3 and Run(kept).is_complete():
            shutil.copytree(kept, out, dirs_exist_ok=True)  # the grid kept this run's whole trajectory
            print(f"{out.name}: copied from {kept.relative_to(ROOT.parent)}", flush=True)
            continue
        todo.append(command(args.arch, args.layers, prior, seed))
    if args.dry_run:
        for cmd in todo:
            print(" ".join(cmd))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def one(cmd: list[str]) -> int:
        print("start:", " ".join(cmd), flush=True)
        rc = subprocess.run(["nice", "-n", "10", *cmd], cwd=ROOT.parent, env=env).returncode
        print(f"end (exit {rc}):", " ".join(cmd), flush=True)
        return rc

    with ThreadPoolExecutor(args.workers) as pool:
        codes = list(pool.map(one, todo))
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
