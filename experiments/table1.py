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
import json
import sys
from pathlib import Path

import torch

from interp.checkpoints import atomic_write_text
from interp.table import ARCH_NAMES, CACHE_FILE, table1

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", nargs="+", type=Path, default=[Path("experiments/zoo"), Path("runs/table1")])
    ap.add_argument("--arch", nargs="+", choices=list(ARCH_NAMES), help="subset of the grid (default all found)")
    ap.add_argument("--layers", nargs="+", type=int)
    ap.add_argument("--noise", nargs="+", help="priors, e.g. uniform:5 categorical:1,3 (default all found)")
    ap.add_argument("--seeds", nargs="+", type=int)
    ap.add_argument("--n-seq", type=int, default=100_000, help="evaluation sequences per model (default 100000)")
    ap.add_argument("--baseline-seq", type=int, default=1_000_000, help="sequences for baselines (default 1000000)")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=HERE / "results" / CACHE_FILE)
    ap.add_argument("--baselines-only", action="store_true", help="only the baseline rows and the Bayes floor")
    ap.add_argument("--out", type=Path, help="markdown file for the table (default: print)")
    ap.add_argument("--json", type=Path, help="all per-seed results as JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    text, data = table1(
        args.roots,
        args.arch,
        args.layers,
        args.noise,
        args.seeds,
        args.n_seq,
        args.baseline_seq,
        args.eval_seed,
        args.cache,
        args.baselines_only,
        log=print,
    )
    if args.out:
        atomic_write_text(args.out, text)
    print(text)
    if args.json:
        atomic_write_text(args.json, json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
