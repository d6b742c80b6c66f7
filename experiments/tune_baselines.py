"""Tune ConstRR, TunedRR and GD-k (k = 1..7) for the paper's priors; writes interp/data/baselines_tuned.json.

    OMP_NUM_THREADS=1 python experiments/tune_baselines.py            # all of Table 1's priors
    OMP_NUM_THREADS=1 python experiments/tune_baselines.py --noise uniform:5

Tuning uses interp.tuning.TUNE_SEQ sequences from seed TUNE_SEED, disjoint from evaluation (seed 0);
each record keeps its coarse and fine grids, the tuned values and the tuning-set losses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from interp.evaluate import TABLE1_COLUMNS
from interp.tuning import CACHE_FILE, cache_key, tune_all

OUT = Path(__file__).resolve().parents[1] / "interp" / "data" / CACHE_FILE


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", nargs="+", default=list(TABLE1_COLUMNS))
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--gd-steps", type=int, nargs="+", default=list(range(1, 8)))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    table = json.loads(args.out.read_text()) if args.out.exists() else {}
    for noise in args.noise:
        t0 = time.perf_counter()
        rec = tune_all(noise, args.d, args.n, gd_steps=args.gd_steps)
        table[cache_key(noise, args.d, args.n)] = rec
        tr = rec.get("tunedrr", {})
        print(
            f"{noise}: ConstRR λ={rec['constrr']['lam']:.4g} (adj {rec['constrr']['adjusted']:.4f}); "
            f"TunedRR mult={tr.get('mult', float('nan')):.3g} clip={tr.get('clip')} (adj "
            f"{tr.get('adjusted', float('nan')):.4f}); "
            f"GD-1 η={rec['gd']['1']['eta']:.4g}  [{time.perf_counter() - t0:.0f}s]",
            flush=True,
        )
        args.out.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
