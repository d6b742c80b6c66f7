"""Tiny trained runs and a quick report over them, shared by the report tests (d = 10, n = 20, two priors)."""

from __future__ import annotations

from pathlib import Path

from interp.config import ModelConfig, TrainConfig
from interp.train import train

NOISE = "uniform:1"
CAT = "categorical:1,3"
RUNS = {
    "gdpp1": ("gdpp", 1, NOISE),
    "diag1": ("diag", 1, NOISE),
    "full2": ("full", 2, NOISE),
    "diag1_cat13": ("diag", 1, CAT),
}


def make_runs(root: Path) -> list[Path]:
    """Run directories (GD++ 1 layer, DIAG 1 layer, FULL 2 layers on uniform:1, DIAG 1 layer on {1,3}), 40 steps,
    batch 256."""
    out = []
    for name, (param, layers, noise) in RUNS.items():
        run = root / name
        cfg = TrainConfig(
            model=ModelConfig(d=10, n_layers=layers, n_heads=1, param=param),
            noise=noise,
            seed=0,
            steps=40,
            batch=256,
            lr=1e-2,
            n_checkpoints=4,
            log_every=5,
            resume_every=40,
        )
        train(cfg, run, progress=False)
        out.append(run)
    return out


def quick_report(root: Path):
    """(html path, ReportData) of a --quick report over make_runs(root / 'runs')."""
    from interp.report import Settings, write_report

    runs = make_runs(root / "runs")
    return write_report(runs, root / "out" / "report.html", Settings.quick())
