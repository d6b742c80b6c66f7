"""The files of a sweep root worth committing: each complete run's config, its machine record (which CPU and training
path trained it: interp.run.Run.trained_on) and its final checkpoint (its whole trajectory for the drift study's runs),
no resume state, lock or metrics log.

    git add -f $(python experiments/grid_files.py experiments/table1_grid)

A later `interp sweep` over the same root sees these runs complete (the final checkpoint is there) and skips them.
With --unfinished it also lists each unfinished run's resume state (weights, Adam state, data RNG: interp.run), metrics
log, machine record and checkpoints, so a checkout that did not train it resumes it where the commit left it, exactly
(`interp train --resume`; the sweep resumes such a run on its own). Without them an unfinished run starts again from
step 0: the 7-layer family runs take hours, longer than a session that trained them part-way.

    git add -u experiments/family_grid
    git add -f $(python experiments/grid_files.py --unfinished experiments/family_grid)

(`git add -u` takes the later state of files an earlier commit of an unfinished run holds.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.run import Run

TRAJECTORY = ("full7_uniform7_", "full7_cat135_")  # the drift study reads these runs' checkpoints


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--unfinished", action="store_true", help="also list what resumes each unfinished run")
    args = ap.parse_args()
    if not args.root.is_dir():
        ap.error(f"{args.root}: not a directory (a sweep root)")
    for run_dir in sorted(p for p in args.root.iterdir() if p.is_dir()):
        run = Run(run_dir)
        if not run.is_complete():
            if args.unfinished and run.has_resume():
                files = [run.config_path, run.resume_path, run.trained_on_path, run.metrics_path]
                for p in [f for f in files if f.is_file()] + [p for _, p in run.checkpoints()]:
                    print(p)
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
