"""A ReportData built by hand (no model, no training): many runs over priors, depths and seeds, for the grouping tests.

Each run's numbers are chosen so that a test can tell them apart: its adjusted loss is `loss`, its profile after K
layers at σ is loss · (1 + σ) · (L + 1 − K), and its stderr a fiftieth of that.
"""

from __future__ import annotations

from pathlib import Path

from interp.evaluate import LossEstimate, sigma_grid
from interp.report.data import BASELINES, BaselineRecord, DriftCurves, Entry, ModelRecord, ReportData, Settings

UNIFORM = "uniform:5"
CAT = "categorical:1,3"


def synthetic(runs: list[tuple[str, str, int, str, float]], d: int = 5, n: int = 8) -> ReportData:
    """runs: (label, arch, depth, prior, adjusted loss); the task size d, n is the same for all (not the paper's)."""
    entries, records = [], {}
    for label, arch, L, prior, loss in runs:
        entries.append(Entry(label, label, Path(label), None, 100, 100, arch, L, 1, d, n, prior))
        sigmas = sigma_grid(prior, 1.0)
        mean = [[loss * (1 + s) * (L + 1 - K) for s in sigmas] for K in range(L + 1)]
        records[label] = ModelRecord(
            loss=LossEstimate(loss, loss / 50, 1000),
            per_layer=[LossEstimate(loss * (L + 1 - K), 0.0, 1000) for K in range(L + 1)],
            sigmas=sigmas,
            profile_mean=mean,
            profile_stderr=[[v / 50 for v in row] for row in mean],
            P=[],
            Q=[],
            probe=None,
            seconds=0.0,
        )
    baselines = {}
    for prior in dict.fromkeys(r[3] for r in runs):
        sigmas = sigma_grid(prior, 1.0)
        baselines[prior] = BaselineRecord(
            prior,
            sigmas,
            {b: LossEstimate(0.1 * (i + 1), 0.001, 1000) for i, b in enumerate(BASELINES)},
            {b: [0.1 * (i + 1) * (1 + s) for s in sigmas] for i, b in enumerate(BASELINES)},
            {b: None for b in BASELINES},
        )
    curves = {label: {"step": [1, 10, 100], "loss": [100 * loss, 10 * loss, loss]} for label, *_, loss in runs}
    return ReportData(entries, records, baselines, curves, DriftCurves(reason="synthetic"), Settings.quick())


def zoo_like() -> ReportData:
    """FULL, DIAG, GD++ at 1–7 layers on uniform:5 (no 3-layer GD++), two FULL seeds at 7 layers (the second better),
    two DIAG seeds at 4 layers (the first better); FULL and DIAG at 4 and 7 layers on {1,3}, two FULL seeds at 7."""
    runs = []
    for L in range(1, 8):
        for arch in ("gdpp", "diag", "full"):
            if (arch, L) != ("gdpp", 3):
                runs.append((f"{arch}{L}_uniform5", arch, L, UNIFORM, 1.0 / L + 0.01 * len(runs)))
    runs += [
        ("full7_uniform5_s1", "full", 7, UNIFORM, 0.05),
        ("diag4_uniform5_s1", "diag", 4, UNIFORM, 0.9),
        ("diag4_cat13", "diag", 4, CAT, 0.06),
        ("full4_cat13", "full", 4, CAT, 0.05),
        ("diag7_cat13", "diag", 7, CAT, 0.03),
        ("full7_cat13", "full", 7, CAT, 0.02),
        ("full7_cat13_s1", "full", 7, CAT, 0.015),
    ]
    return synthetic(runs)
