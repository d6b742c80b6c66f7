"""Train the shipped model zoo (experiments/zoo/) resumably: a thin call of interp.sweep with the zoo's names.

python experiments/train_zoo.py            # train whatever is missing or unfinished
python experiments/train_zoo.py --list     # print the equivalent `interp train` command of every model
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from interp.sweep import RunSpec, config_from_options, end_table, sweep

ZOO = Path(__file__).resolve().parent / "zoo"

# (name, arch, layers, noise, seed); the fast preset.
MODELS = [
    *[(f"{a}{L}_uniform5", a, L, "uniform:5", 0) for L in (1, 2, 4) for a in ("full", "diag", "gdpp")],
    *[(f"{a}4_cat13", a, 4, "categorical:1,3", 0) for a in ("full", "diag", "gdpp")],
    ("diag4_cat13_s1", "diag", 4, "categorical:1,3", 1),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the commands and exit")
    ap.add_argument("--only", nargs="*", help="names to train (default all)")
    ap.add_argument("--workers", type=int, default=1, help="runs trained at once (default 1)")
    args = ap.parse_args()
    specs = []
    for name, arch, layers, noise, seed in MODELS:
        if args.only and name not in args.only:
            continue
        opts = dict(arch=arch, layers=layers, noise=noise, seed=seed)
        if args.list:
            print(
                shlex.join(
                    ["interp", "train", *(f"--{k}={v}" for k, v in opts.items()), f"--out=experiments/zoo/{name}"]
                )
            )
            continue
        specs.append(RunSpec(name, opts, config_from_options(opts)))
    if specs:
        states = sweep(specs, ZOO, workers=args.workers)
        print(end_table(states, 10_000))
        return 0 if all(s.status == "done" for s in states) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
