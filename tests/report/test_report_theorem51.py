"""The report's Theorem 5.1 view: GD++ at σ = 0 (the Table 1 zoo's uniform:0 files), cached per file, drawn whatever
depths are present, a note when there are none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from interp.report import figures
from interp.report.data import DriftCurves, ReportData, Settings, make_entry, theorem51_record, theorem51_records

ZOO = Path(__file__).resolve().parents[2] / "experiments" / "zoo" / "best" / "uniform0"
SETTINGS = Settings.quick()


def _data(light, t51) -> ReportData:
    return ReportData([], {}, {}, {}, DriftCurves(), SETTINGS, light=light, theorem51=t51)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """A copy of the zoo's uniform:0 GD++-2 and -3 (GD++-1 and 4..7 absent) and a DIAG-2, in a folder of its own."""
    if not all((ZOO / f"{a}.safetensors").is_file() for a in ("gdpp2", "gdpp3", "diag2")):
        pytest.skip("the Table 1 zoo's uniform:0 files are not shipped here")
    root = tmp_path_factory.mktemp("t51") / "uniform0"
    root.mkdir()
    for name in ("gdpp2", "gdpp3", "diag2"):
        shutil.copy(ZOO / f"{name}.safetensors", root / f"{name}.safetensors")
    entries = [make_entry(root / f"{name}.safetensors") for name in ("gdpp3", "gdpp2", "diag2")]
    return entries, theorem51_records(entries, SETTINGS)


def test_records_only_gdpp_at_sigma_zero_and_reads_them_back_from_the_cache(zoo):
    entries, recs = zoo
    assert sorted(recs) == ["gdpp2", "gdpp3"]  # the DIAG file gets none
    rec = recs["gdpp3"]
    assert len(rec.loss) == 4 and rec.n_seq == SETTINGS.n_seq and rec.probe_seq == SETTINGS.probe_seq
    assert max(rec.preconditioning.map_error) < 1e-13
    again = theorem51_record(entries[0], SETTINGS)
    assert again.cached is True and again.to_json() == rec.to_json()


def test_the_view_draws_the_depths_present(zoo):
    entries, recs = zoo
    panel = figures.theorem51(_data(entries, recs))
    assert panel.figure is not None and panel.id == "theorem51" and "Theorem 5.1" in panel.caption
    fig = panel.figure
    losses = [t for t in fig.data if t.legendgroup in ("gdpp2", "gdpp3")]
    assert len(losses) == 2 and [len(t.x) for t in losses] == [3, 4]
    paper = [t for t in fig.data if "paper" in (t.name or "")]
    assert len(paper) == 1 and list(paper[0].x) == [2, 3]  # Table 1's GD++-2 and -3 at σ_max = 0
    measured = [t for t in fig.data if t.legendgroup == "measured"]
    curves = [t for t in fig.data if t.legendgroup == "map"]
    assert len(measured) == len(curves) == 3  # one panel per layer of the deepest model, GD++-3
    assert len(measured[0].x) == 16 * 10  # 16 sequences × d eigenvalues
    assert all(tr.hovertemplate for tr in fig.data)  # the report's rule: every trace hovers, every x axis is titled
    assert all(ax.title.text for name in fig.layout if name.startswith("xaxis") for ax in [fig.layout[name]])
    for l, (pts, line) in enumerate(zip(measured, curves)):  # the points lie on the curve s(1 − γs)²
        gamma = float(recs["gdpp3"].preconditioning.gamma[l])
        assert all(abs(y - x * (1 - gamma * x) ** 2) <= 1e-12 * max(pts.x) for x, y in zip(pts.x, pts.y))
        assert max(line.x) >= max(pts.x)


def test_the_report_leaves_the_view_out_without_gdpp_at_sigma_zero(zoo):
    entries, recs = zoo
    (v,) = [v for v in figures.REGISTRY if v.draw.__name__ == "theorem51"]
    assert v.section == "probes"
    assert v.panels(_data(entries, {})) == [] and v.panels(_data([], {})) == []
    assert [p.id for p in v.panels(_data(entries, recs))] == ["theorem51"]
    panel = figures.theorem51(_data(entries, {}))  # called by hand: a note says what it needs
    assert panel.figure is None and "uniform:0" in panel.note
