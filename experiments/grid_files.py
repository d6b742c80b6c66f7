"""The files of a sweep root worth committing: each complete run's config, its machine record (which CPU and training
path trained it: interp.run.Run.trained_on) and its final checkpoint (its whole trajectory for the drift study's runs),
nothing of unfinished runs, no resume state, lock or metrics log.

    git add -f $(python experiments/grid_files.py experiments/table1_grid)

A later `interp sweep` over the same root sees these runs complete (the final checkpoint is there) and skips them;
an unfinished run, of which nothing was committed, starts again from step 0 with the same seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.run import Run

TRAJECTORY = ("full7_uniform7_", "full7_cat135_")  # the drift study reads these runs' checkpoints


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    args = ap.parse_args()
    for run_dir in sorted(p for p in args.root.iterdir() if p.is_dir()):
        run = Run(run_dir)
        if not run.is_complete():
            continue
        ckpts = [p for _, p in run.checkpoints()]
        keep = ckpts if run_dir.name.startswith(TRAJECTORY) else ckpts[-1:]
        print(run.config_path)
        if run.trained_on_path.is_file():
            print(run.trained_on_path)
        for p in keep:
            print(p)


if __name__ == "__main__":
    main()
