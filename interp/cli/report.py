"""`interp report`: one self-contained interactive HTML file about the given models (default: the shipped zoo)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from interp.cli import ArgError, check_output, existing_path, noise_spec, note_training, positive_int

HELP = "write an interactive HTML report (default: the shipped zoo)"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "report",
        help=HELP,
        description=(
            "Evaluates and probes every model and writes one self-contained HTML file (opens offline): the paper's "
            "views (loss vs layers, Table 1, per-σ profiles, P/Q heatmaps, prediction after K layers) and interp's "
            "probes (ω's, implicit w against solvers, momentum, implied λ, rescaling and step, the layer schedule, "
            "FULL-to-DIAG fits, training and drift curves), the per-model views with a prior selector. "
            "Without arguments it reads the zoo's best model of every Table 1 cell, experiments/zoo/best/<prior>/"
            "<arch><L>.safetensors: every depth on uniform:5 and categorical:1,3 and the 4- and 7-layer models on all "
            "ten priors are probed, the other cells are light entries (their loss from the directory's evals.json, "
            "for the paper's views over all ten priors); and it reads the FULL-7 trajectories of "
            "experiments/zoo/trajectories for the drift curves of every prior. Any directory of standalone checkpoint "
            "files given (in it or one folder down, no run directories) is read the same way; to probe every such "
            "file, pass the files themselves. Results are cached per checkpoint in <run>/report_cache.json (a "
            "standalone file's in its directory's), the baselines of each prior with them; what the caches lack is "
            "measured in --workers processes. The figures are cached beside the HTML (report.panels.jsonl for "
            "report.html): a report of the same models by the same code draws none again."
        ),
    )
    p.add_argument(
        "models",
        nargs="*",
        type=existing_path,
        metavar="CKPT|RUN_DIR",
        help="checkpoint files, run directories, directories of runs, or directories of standalone checkpoints "
        "(default: the zoo's best models, experiments/zoo/best)",
    )
    p.add_argument(
        "--drift",
        nargs="+",
        type=existing_path,
        default=None,
        metavar="RUN_DIR",
        help="FULL run directories (or directories of runs) read for their drift curves only (default, without "
        "models: experiments/zoo/trajectories)",
    )
    p.add_argument(
        "-o", "--out", default="figures/report.html", help="HTML file to write (default figures/report.html)"
    )
    p.add_argument("--noise", type=noise_spec, help="noise prior for models that do not record theirs")
    p.add_argument("--quick", action="store_true", help="small sequence counts: a fast, noisier preview")
    p.add_argument("--no-cache", action="store_true", help="recompute everything and leave the caches alone")
    p.add_argument("--threads", type=positive_int("--threads", 1024), default=1, help="torch CPU threads (default 1)")
    p.add_argument(
        "--workers",
        type=positive_int("--workers", 64),
        default=2,
        help="processes that measure what the caches lack, one torch thread each (default 2; 1: all in this process)",
    )
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    import torch

    from interp.report import Settings, default_drift, default_models, default_zoo, summary_text, write_report

    torch.set_num_threads(args.threads)
    paths, drift = list(args.models), list(args.drift or [])
    if not paths:
        zoo = default_zoo()
        if zoo is None:
            raise ArgError("no models given and no experiments/zoo found; pass checkpoints or run directories")
        paths = default_models(zoo)
        drift = drift if args.drift else default_drift(zoo)
        if not paths:
            raise ArgError(f"{zoo}: holds no run directories with checkpoints and no best/ directory")
    out = Path(args.out)
    if not out.is_dir() and not out.parent.exists():
        _refuse_inside_a_run(out)  # before creating a directory there
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ArgError(f"--out: cannot create directory {out.parent} ({err.strerror})") from None
    check_output(args.out, "--out", [str(p) for p in [*paths, *drift]])
    note_training([*paths, *drift], "interp report")
    t0 = time.perf_counter()
    log = lambda msg: print(f"  {msg}", file=sys.stderr)  # noqa: E731
    print(f"interp report: {len(paths)} path(s)", file=sys.stderr)
    path, data = write_report(
        paths,
        out,
        Settings.quick() if args.quick else Settings(),
        noise=args.noise,
        use_cache=not args.no_cache,
        log=log,
        drift=drift,
        workers=args.workers,
    )
    print(summary_text(data))
    print(f"\nwrote {path} ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - t0:.0f} s)")
    return 0


def _refuse_inside_a_run(out: Path) -> None:
    """ArgError when the nearest existing directory above `out` is one of a run's own (its checkpoints/, say): the
    directories --out would create there are refused before one is made."""
    from interp.run import Run

    for above in Path(os.path.abspath(out)).parents:
        if above.exists():
            run = Run.owns(above)
            if run is not None:
                raise ArgError(f"--out: {out} is inside the run {run.path}'s own files; write elsewhere")
            return
