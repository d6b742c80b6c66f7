"""The family study's pieces: the grid file (experiments/family_grid.toml, with the sweep's skip overrides), the
quadratic task, and a tiny sweep of the family end to end."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.presets import resolve
from interp.sweep.grid import SweepError, expand, load_grid_file
from interp.tasks import sample_tasks

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "experiments" / "family_grid.toml"


def test_the_family_grid_plans_every_variant_with_fulls_budget():
    specs = expand(*load_grid_file(GRID))
    assert not [s.error for s in specs if s.error]
    cells = collections.Counter((s.options["attention"], s.options["mlp"]) for s in specs)
    assert len(cells) == 10 and set(cells.values()) == {14}  # 2 priors × (3 seeds at 2 and 4 layers + 1 at 7)
    assert ("lsa", "none") not in cells and ("qkv", "quadratic") not in cells
    assert {s.options["seed"] for s in specs if s.options["layers"] == 7} == {0}
    for s in specs:  # the fast preset's steps and peak lr of FULL at that depth
        want = resolve(TrainConfig(model=ModelConfig(n_layers=s.cfg.model.n_layers), noise=s.cfg.noise))
        got = resolve(s.cfg)
        assert (got.steps, got.lr, got.stress) == (want.steps, want.lr, want.stress), s.name


def test_skip_overrides_match_lists_and_refuse_options_beside_them():
    specs = expand({"layers": [2, 4], "seed": [0, 1]}, [{"where": {"layers": 4, "seed": [1]}, "skip": True}])
    assert sorted((s.options["layers"], s.options["seed"]) for s in specs) == [(2, 0), (2, 1), (4, 0)]
    with pytest.raises(SweepError, match="skip"):
        expand({"layers": [2]}, [{"where": {"layers": 2}, "skip": True, "lr": 0.1}])


def test_the_quadratic_task_adds_c_x1_squared_minus_one_to_every_label():
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    plain, quad = sample_tasks(64, 3, 5, "uniform:1", g()), sample_tasks(64, 3, 5, "uniform:1", g(), quad=0.5)
    torch.testing.assert_close(quad.y - plain.y, 0.5 * (plain.x[..., 0] ** 2 - 1), rtol=0, atol=1e-6)
    torch.testing.assert_close(quad.target - plain.target, 0.5 * (plain.x_query[:, 0] ** 2 - 1), rtol=0, atol=1e-6)
    assert torch.equal(quad.tokens[:, -1, -1], torch.zeros(64))  # the query's label stays masked
    assert "quad" not in TrainConfig().to_dict() and TrainConfig(quad=0.5).to_dict()["quad"] == 0.5
