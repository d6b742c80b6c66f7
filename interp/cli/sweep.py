"""`interp sweep`: a grid of `interp train` runs under one root, resumable, on local processes or Ray."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from interp.cli import ArgError, existing_path, positive_float, positive_int
from interp.cli.train import add_run_options

HELP = "train a grid of runs (locally or on Ray), resumably"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help=HELP,
        description=(
            "Train every combination of the listed settings (e.g. --arch full diag --layers 1 2 --seeds 0 1) into "
            "ROOT/NAME, NAME from the run's settings. Any `interp train` option takes a list; a --grid file adds "
            "per-run overrides. Rerunning skips finished runs and resumes unfinished ones. Writes ROOT/sweep.json."
        ),
    )
    p.add_argument("--root", required=True, help="directory holding one run directory per grid point")
    p.add_argument(
        "--grid",
        type=existing_path,
        metavar="FILE",
        help="TOML (or .json) grid: option = value or [values], [[override]] tables with a where "
        "table; flags given here replace the file's values",
    )
    add_run_options(p, many=True)
    p.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local: worker processes on this machine (default); ray: one Ray task per run",
    )
    p.add_argument(
        "--workers", type=positive_int("--workers"), default=1, help="local backend: runs trained at once (default 1)"
    )
    p.add_argument("--address", help="ray backend: cluster address (default $RAY_ADDRESS, else a local instance)")
    p.add_argument(
        "--cpus-per-run", type=positive_float("--cpus-per-run"), help="ray backend: CPUs per run (default --threads)"
    )
    p.add_argument(
        "--gpus-per-run",
        type=positive_float("--gpus-per-run", allow_zero=True),
        default=0.0,
        help="ray backend: GPUs per run, fractions pack runs on one GPU (e.g. 0.25; needs --device cuda)",
    )
    p.add_argument(
        "--retries", type=_non_negative, default=2, help="times a run whose worker died is started again (default 2)"
    )
    p.add_argument(
        "--eval-seq",
        type=_non_negative,
        default=None,
        help="sequences for the end table's adjusted loss (default 10000; 0: none)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs and what would happen to each, train nothing")
    p.add_argument("--no-progress", action="store_true", help="no live progress line (run events are still printed)")
    p.set_defaults(func=cmd_sweep)


def _non_negative(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def cmd_sweep(args) -> int:
    from interp.run import Run
    from interp.sweep import (
        EVAL_SEQ,
        OPTIONS,
        SWEEP_FILE,
        end_table,
        expand,
        load_grid_file,
        plan,
        sweep,
        unmatched_where,
    )

    options, overrides = load_grid_file(args.grid) if args.grid else ({}, [])
    options.update({k: v for k, v in vars(args).items() if k in OPTIONS})
    for line in unmatched_where(options, overrides):  # a typo in a where changes no run: said before any work
        print(f"interp sweep: note: {args.grid}: {line}", file=sys.stderr)
    eval_seq = EVAL_SEQ if args.eval_seq is None else args.eval_seq
    if args.backend == "local" and (args.address or args.cpus_per_run or args.gpus_per_run):
        flag = "--address" if args.address else "--cpus-per-run" if args.cpus_per_run else "--gpus-per-run"
        raise ArgError(f"{flag}: only with --backend ray")
    if args.dry_run:
        states = plan(expand(options, overrides), args.root)
        for s in states:
            what = s.error or (
                "extend (spectral polish)"
                if s.extend
                else "done"
                if Run(s.run_dir).is_complete()
                else f"resume at step {s.step}"
                if s.step
                else "start"
            )
            print(f"{s.run_dir}: {what}")
        print(f"{len(states)} runs")
        return 0
    meta = {"command": ["interp", *args.argv], "cwd": os.getcwd()}
    states = sweep(
        options,
        Path(args.root),
        overrides,
        backend=args.backend,
        workers=args.workers,
        threads=args.threads,
        retries=args.retries,
        address=args.address,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
        eval_seq=eval_seq,
        progress=not args.no_progress,
        meta=meta,
    )
    print(end_table(states, eval_seq))
    failed = [s for s in states if s.status != "done"]
    if failed:
        where = Path(args.root) / SWEEP_FILE
        print(f"interp sweep: {len(failed)} of {len(states)} runs failed (see above and {where})", file=sys.stderr)
        return 1
    return 0
