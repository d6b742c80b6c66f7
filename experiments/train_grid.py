"""Train a grid of models resumably: a thin call of `interp sweep` (interp/sweep.py), kept for old commands.

    python experiments/train_grid.py --root runs/table1 --arch full diag gdpp --layers 1 2 3 4 \
        --noise uniform:5 categorical:1,3 --seeds 0 1

is `interp sweep` with the same arguments, with this script's old defaults (--arch full diag gdpp,
--layers 1 2 3 4) and its old `--extra "..."` spelling of more options; `--order` is accepted and
ignored (the sweep trains seed 0 first, shallow models first). Run directories are
ROOT/{arch}{layers}_{prior}_s{seed} (prior: uniform5, cat13, ...).
"""

from __future__ import annotations

import shlex
import sys

from interp.cli import main


def sweep_argv(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--order", "--extra"):
            if argv[i] == "--extra" and i + 1 < len(argv):
                out += shlex.split(argv[i + 1])
            i += 2
            continue
        out.append(argv[i])
        i += 1
    defaults = [["--arch", "full", "diag", "gdpp"], ["--layers", "1", "2", "3", "4"]]
    return ["sweep", *[a for d in defaults if d[0] not in out for a in d], *out]


if __name__ == "__main__":
    sys.exit(main(sweep_argv(sys.argv[1:])))
