"""The Table 1 zoo in the report: a directory of standalone checkpoints read as light entries (their loss from the
directory's evals.json, the 7-layer per-σ profile computed once and cached), Figure 1 over all ten priors, the
Table 1 view's colours and pending cells, and the CLI's default."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from interp.config import TrainConfig
from interp.evalcache import EvalCache, cache_key
from interp.evalset import EvalSet
from interp.evaluate import TABLE1_COLUMNS, paper_value
from interp.report import data as report_data
from interp.report import figures
from interp.report.data import CACHE_FILE, EVALS_FILE, Settings, gather
from interp.run import resolve_model
from tests.helpers import random_diag

pytestmark = pytest.mark.slow

CELLS = [
    ("uniform1", "uniform:1", "diag", 1),
    ("uniform1", "uniform:1", "full", 7),
    ("cat13", "categorical:1,3", "gdpp", 7),
]
KNOWN = 2.0  # diag1 on uniform:1: evals.json says its loss is KNOWN times the paper's


def _write(path: Path, noise: str, arch: str, L: int, seed: int = 0, scale: float = 0.01) -> Path:
    from interp.checkpoints import save_checkpoint

    model = random_diag(d=10, n_layers=L, param=arch, scale=scale, seed=seed)
    cfg = TrainConfig(model=model.cfg, noise=noise, seed=seed + 3, steps=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, model, 10, cfg, embed_config=True)
    return path


LIGHT = lambda e: False  # noqa: E731  (gather's probe: every standalone file a light entry, as these tests ask)


def make_zoo(root: Path, name: str = "table1") -> Path:
    """root/table1/<prior>/<arch><L>.safetensors for CELLS, and an evals.json holding diag1's loss on the quick
    settings' sequences (KNOWN × the paper's, a small standard error)."""
    zoo = root / name
    for slug, noise, arch, L in CELLS:
        _write(zoo / slug / f"{arch}{L}.safetensors", noise, arch, L)
    s = Settings.quick()
    m = resolve_model(zoo / "uniform1" / "diag1.safetensors")
    paper = paper_value("diag", "uniform:1", 1)
    on = EvalSet("uniform:1", d=10, n=20, n_seq=s.n_seq, seed=s.seed)
    EvalCache(zoo / EVALS_FILE).put(
        cache_key(m.sha256, on), {"mean": KNOWN * paper, "stderr": 0.01 * paper, "n_seq": s.n_seq}
    )
    return zoo


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("t1")
    zoo = make_zoo(root)
    return zoo, gather([zoo], Settings.quick(), probe=LIGHT)


def _cell(fig, row: str, col: str):
    """(colour value, text) of one cell of the Table 1 view's coloured trace, and the pending trace's text."""
    pending, coloured = fig.data
    i, j = list(coloured.y).index(row), list(coloured.x).index(col)
    return coloured.z[i][j], coloured.text[i][j], pending.z[i][j], pending.text[i][j], coloured.customdata[i][j]


def test_light_entries_read_their_loss_from_evals_json(zoo):
    root, data = zoo
    assert data.entries == [] and [e.label for e in data.light] == [
        "table1/uniform1/diag1",
        "table1/uniform1/full7",
        "table1/cat13/gdpp7",
    ]  # Table 1's column order, then depth
    diag1 = data.light[0]
    assert data.loss(diag1).mean == pytest.approx(KNOWN * paper_value("diag", "uniform:1", 1))
    assert diag1.seed == 3 and data.last_profile(diag1) is None  # 1 layer: no profile
    sigmas, mean, se = data.last_profile(data.light[1])
    assert sigmas == [0.0, 1.0, 2.0] and len(mean) == len(se) == 3 and all(math.isfinite(v) for v in mean)
    assert set(data.baselines) == set(TABLE1_COLUMNS)  # every prior's baselines, uniform:0 without a model
    assert len(EvalCache(root / CACHE_FILE).values()) == 8  # the baselines of the priors no model is on


def test_table1_view_colours_a_cell_by_its_ratio_and_shows_pending(zoo):
    _, data = zoo
    panel = figures.table1(data, list(TABLE1_COLUMNS))
    fig = panel.figure
    assert "Vladymyrov et al. 2024, Table 1" in panel.caption
    assert len(fig.data[1].y) == 21 and list(fig.data[1].x)[:2] == ["U(0, 0)", "U(0, 1)"] and len(fig.data[1].x) == 10
    z, text, pz, ptext, hover = _cell(fig, "L=1 DIAG", "U(0, 1)")
    assert z == pytest.approx(math.log10(KNOWN)) and text == "2" and pz is None and ptext == ""
    assert f"paper {paper_value('diag', 'uniform:1', 1):.4g}" in hover
    assert "ours / paper 2 ± 0.01" in hover and "seed 3" in hover and "diag1.safetensors" in hover
    z, text, pz, ptext, hover = _cell(fig, "L=7 FULL", "U(0, 1)")
    ratio = data.loss(data.light[1]).mean / paper_value("full", "uniform:1", 7)
    assert z == pytest.approx(max(-1, min(1, math.log10(ratio)))) and z > math.log10(1.1)  # random weights: red
    for row, col in (("L=3 FULL", "U(0, 5)"), ("L=7 DIAG", "U(0, 0)"), ("L=1 DIAG", "{1,3}")):
        z, text, pz, ptext, hover = _cell(fig, row, col)
        assert z is None and text == "" and pz == 0 and ptext == "pending" and "pending: no model yet" in hover
    assert sum(t == "pending" for row in fig.data[0].text for t in row) == 210 - len(data.light)
    assert fig.data[1].zmin == -1 and fig.data[1].zmax == 1  # log10 of the ratio: centred at 1
    assert fig.data[0].colorscale[0][1] == fig.data[0].colorscale[-1][1] == figures.paper.PENDING  # grey, never green


def test_figure1_has_one_panel_per_prior_with_the_paper(zoo):
    _, data = zoo
    fig = figures.loss_vs_layers(data).figure
    assert [a.text for a in fig.layout.annotations] == [f"noise {p}" for p in TABLE1_COLUMNS]
    axes = [f"x{k if k > 1 else ''}" for k in range(1, 11)]
    for k, ax in enumerate(axes):
        names = {t.name for t in fig.data if (t.xaxis or "x") == ax}
        assert {"GD++ (paper)", "DIAG (paper)", "FULL (paper)", "ConstRR", "Bayes floor"} <= names, TABLE1_COLUMNS[k]
        yaxis = fig.layout[f"yaxis{k + 1 if k else ''}"]
        assert yaxis.type == "log"
    first = [t for t in fig.data if (t.xaxis or "x") == "x"]  # uniform:0: no model, the paper and baselines
    assert not any(t.name in ("GD++", "DIAG", "FULL") for t in first)
    diag = next(t for t in fig.data if t.name == "DIAG" and t.xaxis == "x2")
    assert list(diag.x) == [1] and diag.customdata[0][0] == "table1/uniform1/diag1"
    assert diag.y[0] == pytest.approx(KNOWN * paper_value("diag", "uniform:1", 1))
    prof = figures.last_layer_profiles(data, list(TABLE1_COLUMNS)).figure
    assert [a.text for a in prof.layout.annotations][:10] == [f"noise {p}" for p in TABLE1_COLUMNS]
    names = {t.name for t in prof.data}
    assert {"FULL L=7", "GD++ L=7", "Bayes (prior optimum)"} <= names and "Bayes floor" not in names


def test_the_best_model_of_a_cell_is_the_lower_of_probed_and_light(zoo):
    from report_synthetic import synthetic

    from interp.report.data import LightRecord
    from interp.report.groups import best_models, best_runs

    _, light = zoo
    half = 0.5 * paper_value("diag", "uniform:1", 1)
    data = synthetic(
        [("full7_run", "full", 7, "uniform:1", 500.0), ("diag1_run", "diag", 1, "uniform:1", half)], 10, 20
    )
    data.light, data.light_records, data.light_dirs = light.light, light.light_records, light.light_dirs
    data.baselines = {**light.baselines, **data.baselines}
    best = best_models(data)
    assert best["uniform:1", "diag", 1].label == "diag1_run"  # the probed run: lower than evals.json's 2 × paper
    assert best["uniform:1", "full", 7].label == "table1/uniform1/full7"  # the light entry: lower than 500
    assert best_runs(data)["uniform:1", "full", 7].label == "full7_run"  # the probed views keep their runs
    z, *_ = _cell(figures.table1(data, list(TABLE1_COLUMNS)).figure, "L=1 DIAG", "U(0, 1)")
    assert z == pytest.approx(math.log10(0.5))  # better than the paper: green
    assert isinstance(data.light_records["table1/uniform1/full7"], LightRecord)


def test_a_light_profile_is_computed_once_then_read_from_the_cache(tmp_path, monkeypatch):
    zoo = make_zoo(tmp_path)
    evals = (zoo / EVALS_FILE).read_bytes()
    calls = []
    real = report_data.sigma_profile

    def counting(predictors, sigmas, data):
        if "m" in predictors:  # a light entry's (the baselines' are keyed by name)
            calls.append(data.noise)
        return real(predictors, sigmas, data)

    monkeypatch.setattr(report_data, "sigma_profile", counting)
    first = gather([zoo], Settings.quick(), with_drift=False, probe=LIGHT)
    assert len(calls) == 2 and not any(r.cached for r in first.light_records.values())
    again = gather([zoo], Settings.quick(), with_drift=False, probe=LIGHT)
    assert len(calls) == 2 and all(r.cached for r in again.light_records.values())
    assert again.light_records == {k: type(r)(**{**r.__dict__, "cached": True}) for k, r in first.light_records.items()}
    assert (zoo / "uniform1" / CACHE_FILE).is_file() and (zoo / EVALS_FILE).read_bytes() == evals  # never written
    _write(zoo / "uniform1" / "full7.safetensors", "uniform:1", "full", 7, seed=5)  # a better seed lands
    third = gather([zoo], Settings.quick(), with_drift=False, probe=LIGHT)
    assert len(calls) == 3  # the rewritten file misses, the others hit
    assert third.light_records["table1/uniform1/full7"].cached is False
    assert third.light_records["table1/cat13/gdpp7"].cached is True


def test_cli_default_reads_the_zoo_and_its_table1(tmp_path, monkeypatch, capsys):
    import interp.report as report
    from interp.cli import main
    from interp.report.data import default_models
    from tests.helpers import trained

    root = tmp_path / "zoo"
    trained(root / "diag1_uniform1", "diag", "uniform:1", steps=10, batch=64)
    zoo = make_zoo(root, "best")
    assert default_models(root) == [root / "diag1_uniform1", zoo]
    monkeypatch.setattr(report, "default_zoo", lambda: root)
    out = tmp_path / "r.html"
    assert main(["report", "-o", str(out), "--quick"]) == 0
    printed = capsys.readouterr().out
    assert "diag1_uniform1" in printed and "best/uniform1/full7" in printed  # a 7-layer cell of the zoo: probed
    page = out.read_text()
    for card in ("loss-vs-layers", "table1", "profiles-7-layers"):
        assert f'<div class="card" id="{card}">' in page, card
    for card in ("heatmaps", "omegas"):  # per-prior views: one card per prior, behind the prior selector
        assert f'<div class="card" id="{card}-uniform1" data-prior="uniform:1"' in page, card
