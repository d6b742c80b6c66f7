"""Train a grid of models (arch x layers x prior x seed) resumably, one at a time, one thread each.

    python experiments/train_grid.py --root runs/table1 --arch full diag gdpp --layers 1 2 3 4 \
        --noise uniform:5 categorical:1,3 --seeds 0 1

Run directories are ROOT/{arch}{layers}_{prior}_s{seed} (prior: uniform5, cat13, ...). Finished runs
are skipped, interrupted ones resumed, so the same command can be re-run after a kill. Each run
directory gets a COMMAND file with the exact `interp train` command that started it.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from interp.run import Run
from interp.train import is_complete, prior_slug


def run_name(arch: str, layers: int, noise: str, seed: int) -> str:
    return f"{arch}{layers}_{prior_slug(noise)}_s{seed}"


def train_run(run: Path, cmd: list[str], cwd: Path | None = None) -> int:
    """Train `cmd` (an `interp train ... --out RUN` command) into `run`: skip it when finished, resume
    it when interrupted, start it afresh otherwise; write COMMAND when it completes."""
    where = run if cwd is None else cwd / run
    if is_complete(where):
        print(f"{run}: done", flush=True)
        return 0
    if Run.is_run(where):  # Run restarts one killed before its first resume state
        todo = ["interp", "train", "--resume", str(run), "--threads", "1", "--no-progress"]
    else:
        shutil.rmtree(where, ignore_errors=True)
        todo = cmd
    print(f"{run}: {shlex.join(todo)}", flush=True)
    rc = subprocess.call(todo, cwd=cwd)
    if rc == 0:
        (where / "COMMAND").write_text(shlex.join(cmd) + "\n")
    else:
        print(f"{run}: failed with exit status {rc}", flush=True)
    return rc


def train_one(root: Path, arch: str, layers: int, noise: str, seed: int, extra: list[str]) -> int:
    run = root / run_name(arch, layers, noise, seed)
    cmd = ["interp", "train", "--arch", arch, "--layers", str(layers), "--noise", noise, "--seed", str(seed),
           "--threads", "1", "--no-progress", *extra, "--out", str(run)]
    return train_run(run, cmd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, type=Path)
    ap.add_argument("--arch", nargs="+", default=["full", "diag", "gdpp"])
    ap.add_argument("--layers", nargs="+", type=int, default=[1, 2, 3, 4])
    ap.add_argument("--noise", nargs="+", default=["uniform:5"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--order", choices=["layers", "seed"], default="seed",
                    help="seed: all of seed 0 first (default); layers: shallow models first")
    ap.add_argument("--extra", default="", help="more `interp train` arguments, quoted")
    args = ap.parse_args(argv)
    cells = [(s, L, noise, a) for s in args.seeds for noise in args.noise for L in args.layers for a in args.arch]
    if args.order == "layers":
        cells.sort(key=lambda c: (c[1], c[0]))
    failed = 0
    for seed, layers, noise, arch in cells:
        failed += train_one(args.root, arch, layers, noise, seed, shlex.split(args.extra)) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
