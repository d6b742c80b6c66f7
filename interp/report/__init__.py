"""The interactive report: Plotly figures of everything interp measures, assembled into one offline HTML file.

report imports the library; nothing in the library imports report.
"""

from __future__ import annotations

import time
from pathlib import Path

from interp.files import atomic_write_text
from interp.report.data import ReportData, Settings, default_drift, default_models, default_zoo, gather, zoo_runs
from interp.report.figcache import FigureCache, cache_path
from interp.report.html import render, summary_rows, summary_text


def write_report(
    paths,
    out: str | Path = "figures/report.html",
    settings: Settings | None = None,
    noise: str | None = None,
    use_cache: bool = True,
    log=None,
    drift=(),
    workers: int = 1,
) -> tuple[Path, ReportData]:
    """Gather everything about the models at `paths` (and the drift curves of the runs `drift`; what the caches lack
    measured in `workers` processes) and write the HTML report to `out`, its figures kept beside it for the next
    report of the same data (interp.report.figcache; `use_cache=False` draws them all and leaves every cache alone)."""
    data = gather(paths, settings, noise=noise, use_cache=use_cache, log=log, drift=drift, workers=workers)
    out = Path(out)
    cache = FigureCache(cache_path(out), data, log=log) if use_cache else None
    t0 = time.perf_counter()
    atomic_write_text(out, render(data, cache=cache))
    data.timings["render"] = time.perf_counter() - t0
    if cache is not None:
        failed = cache.save()
        if log:
            log(failed or f"{cache.hits} of {len(cache.used)} figures from {cache.path}")
    if log:
        log(f"rendered in {data.timings['render']:.1f} s")
    return out, data


__all__ = [
    "ReportData",
    "Settings",
    "default_drift",
    "default_models",
    "default_zoo",
    "gather",
    "render",
    "summary_rows",
    "summary_text",
    "write_report",
    "zoo_runs",
]
