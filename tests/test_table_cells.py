"""interp table, every cell: the best seed beside the paper with its ratio, the spread of the seeds, the best seed's
median and worst sequence with the blow-up flag at 100·d, pending cells, the aims summary, and their JSON."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from helpers import run_cli

from interp.config import ModelConfig, TrainConfig
from interp.run import Run
from interp.table import (
    BLOWUP,
    _cell,
    _fmt,
    aims,
    best_of_seeds,
    every_cell,
    paper_cells,
    render_aims,
    render_every_cell,
    seed_spread,
)
from interp.train import train

torch.set_num_threads(1)


def fake(arch, layers, noise, seed, mean=None, worst=1.0, complete=True) -> dict:
    """A run dict as interp.table.discover and evaluate_runs make it, with a known loss."""
    r = dict(run=f"root/{arch}{layers}_{noise}_s{seed}", arch=arch, layers=layers, noise=noise, seed=seed)
    r.update(complete=complete, step=4 if complete else 1)
    if complete:
        r.update(mean=mean, stderr=mean / 100, n_seq=1000, median=mean / 10, worst=worst)
    return r


# diag1|uniform:5 (paper 0.906): four seeds and one still training; FULL-7 (paper u4 0.035, u5 0.047, u6 0.05): one
# above 10% of the paper, one at it with a worst sequence exactly 100·d, one within 10% with a worst just above it;
# DIAG-7 on uniform:5 only training.
RUNS = [
    fake("diag", 1, "uniform:5", 0, 0.95),
    fake("diag", 1, "uniform:5", 1, 0.90, worst=80.0),
    fake("diag", 1, "uniform:5", 2, 1.20),
    fake("diag", 1, "uniform:5", 3, 1.00),
    fake("diag", 1, "uniform:5", 4, complete=False),
    fake("full", 7, "uniform:4", 0, 0.040),
    fake("full", 7, "uniform:5", 0, 0.046, worst=float(BLOWUP)),
    fake("full", 7, "uniform:6", 0, 0.054, worst=BLOWUP + 0.5),
    fake("diag", 7, "uniform:5", 0, complete=False),
]
UNIVERSE = paper_cells(["diag", "full"], [1, 7], ["uniform:0", "uniform:4", "uniform:5", "uniform:6"])


def rows_of(runs=RUNS, universe=UNIVERSE) -> dict:
    return {r["key"]: r for r in every_cell(best_of_seeds(runs), runs, universe)}


def test_a_cell_has_its_best_seed_the_ratio_and_the_spread_of_its_seeds():
    row = rows_of()["diag1|uniform:5"]
    assert (row["seed"], row["mean"], row["median"], row["worst"]) == (1, 0.90, 0.09, 80.0)
    assert row["run"] == "root/diag1_uniform:5_s1" and row["ratio"] == pytest.approx(0.90 / 0.906)
    assert row["n_complete"] == 4 and row["training"] == [4] and not row["pending"]
    assert row["spread"] == dict(best=0.90, median=pytest.approx(0.975), worst=1.20)
    assert row["seed_means"] == [[0, 0.95], [1, 0.90], [2, 1.20], [3, 1.00]]
    odd = seed_spread([{"mean": v} for v in (0.3, math.nan, 0.1)])  # a nan seed ranks last, never best
    assert odd["best"] == 0.1 and odd["median"] == 0.3 and math.isnan(odd["worst"])


def test_the_blow_up_flag_is_a_worst_sequence_above_100_d():
    rows = rows_of()
    assert BLOWUP == 1000  # d = 10
    assert rows["full7|uniform:6"]["blowup"] and not rows["full7|uniform:5"]["blowup"]  # 1000.5 and 1000.0
    assert not rows["diag1|uniform:5"]["blowup"]


def test_cells_without_a_complete_run_are_pending_and_in_the_paper_order():
    rows = rows_of()
    assert len(rows) == 16 and len(paper_cells()) == 210  # 2 archs x 2 depths x 4 priors; all of Table 1
    assert rows["diag7|uniform:5"]["pending"] and rows["diag7|uniform:5"]["training"] == [0]
    assert rows["full7|uniform:0"]["pending"] and rows["full7|uniform:0"]["paper"] == 2.5e-12
    assert "mean" not in rows["full7|uniform:0"]
    order = list(rows)  # prior, then depth, then the paper's architectures
    assert order[:4] == ["diag1|uniform:0", "full1|uniform:0", "diag7|uniform:0", "full7|uniform:0"]
    assert order.index("full7|uniform:4") < order.index("diag1|uniform:5")


def test_the_aims_are_counted_from_the_cells():
    aim = aims(list(rows_of().values()))
    a, b, c = aim["within_10pct"], aim["full7"], aim["blowups"]
    assert (a["n_cells"], a["n_complete"], a["n_met"], a["n_pending"]) == (16, 4, 3, 12)
    assert [e["key"] for e in a["not_met"]] == ["full7|uniform:4"]  # 0.040 / 0.035; 0.054 / 0.05 is within 10%
    assert a["not_met"][0]["ratio"] == pytest.approx(0.040 / 0.035)
    assert (b["n_cells"], b["n_at_or_below"], b["met"]) == (4, 1, False)
    assert [e["key"] for e in b["not_met"]] == ["full7|uniform:4", "full7|uniform:6"]
    assert [e["key"] for e in b["pending"]] == ["full7|uniform:0"]
    assert (c["n"], c["n_complete"], [e["key"] for e in c["cells"]]) == (1, 4, ["full7|uniform:6"])


def test_the_full7_aim_is_met_only_with_every_cell_done_and_at_or_below():
    done = [fake("full", 7, "uniform:5", 0, 0.047)]  # exactly the paper's value
    assert aims(list(rows_of(done, paper_cells(["full"], [7], ["uniform:5"])).values()))["full7"]["met"]
    pending = aims(list(rows_of(done, paper_cells(["full"], [7], ["uniform:5", "uniform:7"])).values()))["full7"]
    assert not pending["met"] and [e["key"] for e in pending["pending"]] == ["full7|uniform:7"]
    none = aims(list(rows_of(done, paper_cells(["diag"], [1], ["uniform:5"])).values()))["full7"]
    assert none["n_cells"] == 1 and none["met"]  # the run FULL-7 cell joins the rows though not asked for
    assert aims(list(rows_of([], paper_cells(["diag"], [1], ["uniform:5"])).values()))["full7"]["n_cells"] == 0


def test_the_aims_and_every_cell_render_the_numbers():
    rows = list(rows_of().values())
    text = render_aims(aims(rows))
    assert "Over the 16 cells" in text and "4 with a complete run, 12 pending" in text
    assert "**3 of 4** complete cells" in text and "Not (ours/paper): FULL L=7 uniform:4 (1.14×)" in text
    assert "**not met**: 1 of 4 at or below the paper" in text and "pending: FULL L=7 uniform:0." in text
    assert "100·d = 1000): **1 of 4**: FULL L=7 uniform:6 (worst 1e+03)" in text
    table = render_every_cell(rows)
    lines = {
        tuple(cell.strip() for cell in ln.split("|")[1:4]): ln for ln in table.splitlines() if ln.startswith("| u")
    }
    assert lines[("uniform:0", "7", "FULL")].startswith("| uniform:0 | 7 | FULL | pending | 2.50e-12 | – | 0 |")
    assert "| pending | 0.047 | – | 0 (+1 training) |" in lines[("uniform:5", "7", "DIAG")]
    best = lines[("uniform:5", "1", "DIAG")]
    assert "| 0.900 ± 0.009 | 0.906 | 0.99 ± 0.01 | 4 (+1 training) | 0.900 / 0.975 / 1.200 |" in best
    assert "| median 0.09, worst 80 |  | root/diag1_uniform:5_s1 (seed 1) |" in best
    assert "| median 0.0054, worst 1e+03 | blow-up ⚠ |" in lines[("uniform:6", "7", "FULL")]


def test_losses_keep_three_significant_digits_from_1e_12_to_a_blow_up():
    assert [_fmt(v) for v in (2.5e-12, 1.14e-07, 0.0024, 0.245, 1.65, 105.3, 3.66e22, 0)] == [
        "2.50e-12",
        "1.14e-07",
        "0.0024",
        "0.245",
        "1.650",
        "105",
        "3.66e+22",
        "0",
    ]
    # the grid's mark is aim (a)'s: no absolute tolerance, so 2e-5 does not reach the paper's 2.5e-12 at σ_max = 0
    assert _cell(2e-5, 2.5e-12, stderr=1e-7).endswith("✗") and _cell(0.0021, 0.002, stderr=1e-5).endswith("✓")


@pytest.fixture(scope="module")
def seeds_root(tmp_path_factory) -> Path:
    """Three tiny complete DIAG-1 uniform:5 runs (seeds 0, 1, 2) and a copy of seed 0 still training as seed 7."""
    root = tmp_path_factory.mktemp("cells") / "root"
    for seed in (0, 1, 2):
        cfg = TrainConfig(
            model=ModelConfig(n_layers=1, param="diag"),
            noise="uniform:5",
            seed=seed,
            steps=4,
            batch=64,
            n_checkpoints=2,
        )
        train(cfg, root / f"diag1_s{seed}", progress=False)
    shutil.copytree(root / "diag1_s0", root / "diag1_s7")
    path = Run(root / "diag1_s7").config_path
    raw = json.loads(path.read_text())
    raw["seed"], raw["steps"] = 7, 100  # its last checkpoint (step 4) is not its final one
    path.write_text(json.dumps(raw))
    return root


KNOWN = {0: (0.95, 90.0), 1: (0.88, 2.0e4), 2: (1.10, 70.0)}  # seed -> (mean, worst): seed 1 is best and blew up


def known_losses(runs, n_seq, eval_seed, cache, log=None):
    """evaluate_runs with known losses per seed (the table's evaluation replaced)."""
    for r in runs:
        if r["complete"]:
            mean, worst = KNOWN[r["seed"]]
            r.update(mean=mean, stderr=0.01, n_seq=n_seq, median=mean / 4, worst=worst)


def test_the_cli_reports_every_cell_and_the_aims_in_markdown_and_json(seeds_root, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("interp.table.evaluate_runs", known_losses)
    out, js = tmp_path / "t.md", tmp_path / "t.json"
    argv = ["table", seeds_root, "--n-seq", "200", "--cache", tmp_path / "c.json", "--out", out, "--json", js]
    code, printed, err = run_cli(capsys, *argv)
    assert code == 0, err
    data = json.loads(js.read_text())
    cell = data["cells"]["diag1|uniform:5"]
    assert cell["best_seed"] == 1 and cell["run"] == str(seeds_root / "diag1_s1")
    assert (cell["mean"], cell["stderr"], cell["median"], cell["worst"]) == (0.88, 0.01, 0.22, 2.0e4)
    assert cell["ratio"] == pytest.approx(0.88 / 0.906) and cell["paper"] == 0.906 and cell["blowup"] is True
    assert cell["n_complete"] == 3 and cell["seeds"] == [0, 1, 2] and cell["training"] == [7]
    assert cell["seed_means"] == [[0, 0.95], [1, 0.88], [2, 1.10]] and cell["spread"]["median"] == 0.95
    assert len(data["pending"]) == 209 and "full7|uniform:0" in data["pending"]  # every other cell of Table 1
    a, c = data["aims"]["within_10pct"], data["aims"]["blowups"]
    assert (a["n_cells"], a["n_complete"], a["n_met"], a["n_pending"]) == (210, 1, 1, 209)
    assert data["aims"]["full7"]["met"] is False and len(data["aims"]["full7"]["pending"]) == 10
    assert [e["key"] for e in c["cells"]] == ["diag1|uniform:5"]
    text = out.read_text()
    assert text in printed and f"Made by `interp table {seeds_root} --n-seq 200 --cache" in text
    assert text.index("### Aims") < text.index("| 1 | DIAG | ") < text.index("### Every cell")
    assert "| 1 | DIAG | 0.880 ± 0.01 (0.906) ✓ ⚠ |" in text  # the wide grid, as before
    assert "| uniform:5 | 1 | DIAG | 0.880 ± 0.01 | 0.906 | 0.97 ± 0.01 | 3 (+1 training) |" in text
    assert "| 0.880 / 0.950 / 1.100 | median 0.22, worst 2e+04 | blow-up ⚠ |" in text
    assert "| uniform:0 | 7 | FULL | pending | 2.50e-12 |" in text and f"{seeds_root / 'diag1_s7'} (step 4)" in text


def test_baselines_only_has_no_cells_and_no_aims(seeds_root, tmp_path, monkeypatch):
    from interp.table import table1

    monkeypatch.setattr("interp.table.evaluate_runs", known_losses)
    text, data = table1([seeds_root], n_seq=200, cache=tmp_path / "c.json", baselines_only=True, noise=["uniform:5"])
    assert data["cells"] == {} and data["pending"] == [] and "aims" not in data
    assert "### Aims" not in text and "| – | TunedRR |" in text
