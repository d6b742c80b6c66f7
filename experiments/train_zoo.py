"""Train the shipped model zoo (experiments/zoo/), resumably, one model at a time on one thread.

    python experiments/train_zoo.py            # train whatever is missing or unfinished
    python experiments/train_zoo.py --list     # print the command of every zoo model

Each run directory gets a COMMAND file holding the exact command that trained it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_grid import train_run  # noqa: E402  (one resumable runner for the zoo and the grids)

ZOO = Path(__file__).resolve().parent / "zoo"

# (name, arch, layers, noise); seed 0, the fast preset.
MODELS = [
    *[(f"{a}1_uniform5", a, 1, "uniform:5") for a in ("full", "diag", "gdpp")],
    *[(f"{a}2_uniform5", a, 2, "uniform:5") for a in ("full", "diag", "gdpp")],
    *[(f"{a}4_uniform5", a, 4, "uniform:5") for a in ("full", "diag", "gdpp")],
    *[(f"{a}4_cat13", a, 4, "categorical:1,3") for a in ("full", "diag", "gdpp")],
]


def command(name: str, arch: str, layers: int, noise: str) -> list[str]:
    return ["interp", "train", "--arch", arch, "--layers", str(layers), "--noise", noise, "--seed", "0",
            "--threads", "1", "--no-progress", "--out", f"experiments/zoo/{name}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the commands and exit")
    ap.add_argument("--only", nargs="*", help="names to train (default all)")
    args = ap.parse_args()
    root = ZOO.parent.parent
    for name, arch, layers, noise in MODELS:
        if args.only and name not in args.only:
            continue
        cmd = command(name, arch, layers, noise)
        if args.list:
            print(shlex.join(cmd))
            continue
        train_run(Path("experiments/zoo") / name, cmd, cwd=root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
