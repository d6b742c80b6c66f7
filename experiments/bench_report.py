"""Benchmark of `interp report`, the README's first command, on the shipped zoo (issue 49, item 4: at most 150 s
without caches on a 2-core machine, seconds from the caches).

    python experiments/bench_report.py      # writes experiments/results/bench_report.md

Runs the CLI as a user would, in fresh processes with its defaults (two measuring processes of one torch thread
each): once with --no-cache (everything computed: evaluation, per-σ and per-layer profiles, probes, FULL ablations,
the layer schedule, drift checkpoints, Theorem 5.1, baselines), then once to fill the caches, then once more from
the caches. Wall time of each process, import time included. With --extra RUN ..., also times one uncached report
over the default models plus those runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from interp.kernel import cpu_model
from interp.report import default_drift, default_models, default_zoo
from interp.report.data import TABLE1_ZOO, is_probed_cell, standalone_entries

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "interp.cli", "report", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"interp report failed ({res.returncode}): {res.stderr[-2000:]}")
    return wall, res.stdout + res.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_report.md"))
    ap.add_argument("--html", default="figures/report.html")
    ap.add_argument("--extra", nargs="*", default=[], help="more run directories for a second, larger uncached report")
    args = ap.parse_args()
    zoo = default_zoo()
    runs, drift = default_models(zoo), default_drift(zoo)
    cells = [s.entry for s in standalone_entries([str(zoo / TABLE1_ZOO)])]
    probed = [e for e in cells if is_probed_cell(e)]
    cold, log = run(["-o", args.html, "--no-cache"])
    fill, _ = run(["-o", args.html])
    warm, _ = run(["-o", args.html])
    extra_rows = []
    if args.extra:
        paths = [str(p) for p in runs] + args.extra
        big, _ = run([*paths, "-o", "/tmp/bench_report_extra.html", "--no-cache"])
        extra_rows = [
            f"| no cache, {len(paths)} models: the zoo and {', '.join(Path(p).name for p in args.extra)} "
            f"| {big:.1f} s |"
        ]
    size = (ROOT / args.html).stat().st_size / 1e6
    lines = [
        "# Benchmark: `interp report` on the zoo",
        "",
        "```bash",
        "python experiments/bench_report.py" + (" --extra " + " ".join(args.extra) if args.extra else ""),
        "# which times, in fresh processes (two measuring processes, one torch thread each):",
        f"interp report -o {args.html} --no-cache   # everything computed",
        f"interp report -o {args.html}              # fills <run>/report_cache.json",
        f"interp report -o {args.html}              # from the caches",
        "```",
        "",
        f"The default report: {len(cells)} best models of the Table 1 zoo ({TABLE1_ZOO}/), {len(probed)} of them "
        f"probed (every depth on uniform:5 and {{1,3}}, 4 and 7 layers on the other priors), the others light "
        f"entries (loss, per-σ profile), and the drift curves of {', '.join(str(d.name) + '/' for d in drift)}; "
        f"{cpu_model() or platform.machine()} ({torch.backends.cpu.get_cpu_capability()}), {os.cpu_count()} cores, "
        f"torch {torch.__version__}.",
        "",
        "| run | wall time |",
        "|---|---|",
        f"| no cache (everything computed) | {cold:.1f} s |",
        f"| filling the caches | {fill:.1f} s |",
        f"| from the caches | {warm:.1f} s |",
        *extra_rows,
        "",
        f"The report is {size:.1f} MB (plotly.js embedded once, about 4.8 MB). Target (issue 49): at most 150 s "
        "without a cache on 2 cores, seconds from the caches.",
        "",
        "Log of the uncached run (per-model seconds on stderr, then the summary table):",
        "",
        "```",
        log.strip(),
        "```",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(line for line in lines if line.startswith("|")))


if __name__ == "__main__":
    main()
