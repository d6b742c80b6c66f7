"""Train a grid of models resumably: a thin call of `interp sweep` (interp/sweep.py), kept for old commands.

    python experiments/train_grid.py --root runs/table1 --arch full diag gdpp --layers 1 2 3 4 \
        --noise uniform:5 categorical:1,3 --seeds 0 1 --workers 2

is `interp sweep` with the same arguments; every `interp sweep` option works. Run directories are
ROOT/{arch}{layers}_{prior}_s{seed} (prior: uniform5, cat13, ...).
"""

from __future__ import annotations

import sys

from interp.cli import main

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
