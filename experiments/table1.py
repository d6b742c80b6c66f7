"""Reproduce Table 1 from the runs on this machine: a thin call of `interp table` (interp/table.py).

    # train the grid (resumably; see README "Sweeps"), then render the table:
    interp sweep --root runs/table1 --arch full diag gdpp --layers 1 2 3 4 5 6 7 \
        --noise uniform:0 uniform:1 uniform:2 uniform:3 uniform:4 uniform:5 uniform:6 uniform:7 \
        categorical:1,3 categorical:1,3,5 --seeds 0 1 2 3 4 --device cuda --backend ray --gpus-per-run 0.25
    OMP_NUM_THREADS=1 python experiments/table1.py --roots experiments/zoo runs/table1 \
        --out experiments/results/table1_cpu.md

This script only fixes the defaults used for experiments/results/: the roots experiments/zoo and
runs/table1, and the evaluation cache experiments/results/table1_evals.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interp.cli import main as interp_main
from interp.table import CACHE_FILE

HERE = Path(__file__).resolve().parent
DEFAULT_ROOTS = ["experiments/zoo", "runs/table1"]


def main(argv: list[str] | None = None) -> int:
    """`interp table` with this project's roots and cache as defaults; every other option is passed through."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", nargs="+", help=f"run roots (default: those of {DEFAULT_ROOTS} that exist)")
    args, rest = ap.parse_known_args(argv)
    roots = args.roots or [r for r in DEFAULT_ROOTS if Path(r).is_dir()]
    if "--cache" not in rest:
        rest += ["--cache", str(HERE / "results" / CACHE_FILE)]
    return interp_main(["table", *roots, *rest])


if __name__ == "__main__":
    sys.exit(main())
