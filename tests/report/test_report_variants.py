"""The report's variants views: drawn from a variants study beside the models, left out without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from interp.config import ModelConfig
from interp.evaluate import LossEstimate
from interp.files import CheckpointError
from interp.probes.linearity import StudyRow, VariantStudy, layer_linearity
from interp.report import figures
from interp.report.data import VARIANTS_STUDY, DriftCurves, ReportData, Settings, variants_study
from interp.variants import build
from tests.helpers import random_full, small_batch

SHIPPED = Path(__file__).resolve().parents[2] / "experiments" / "zoo" / VARIANTS_STUDY
VIEWS = ("variants_linearity", "variants_loss")


def study() -> VariantStudy:
    """Two depths, a FULL model (residual at rounding) and a softmax one (not), with made-up losses."""
    tokens, rows = small_batch(d=4).tokens, []
    for L in (2, 3):
        softmax = build(ModelConfig(d=4, n_layers=L, attention="softmax", init_scale=0.5 * L))
        for name, label, model, loss in (
            ("full", "FULL", random_full(n_layers=L), 0.2 / L),
            ("softmax", "softmax", softmax, 0.5),
        ):
            summary = layer_linearity(model, tokens).summary()
            est = LossEstimate(loss, 0.01, 100, loss, 2 * loss)
            rows.append(StudyRow(name, label, L, f"{name}{L}", est, summary, steps=10))
    return VariantStudy(rows, {"n_seq": 100}, {"n_seq": 16}, {"cpu": "test"}, "python experiments/variants.py", 1.0)


def data_of(variants: VariantStudy | None) -> ReportData:
    return ReportData([], {}, {}, {}, DriftCurves(), Settings.quick(), variants=variants)


def panels(data: ReportData):
    return [p for v in figures.REGISTRY if v.draw.__name__ in VIEWS for p in v.panels(data)]


def test_both_views_draw_a_study():
    drawn = panels(data_of(study()))
    assert [p.id for p in drawn] == ["variants-linearity", "variants-loss"]
    lin, loss = (p.figure for p in drawn)
    assert {t.name for t in lin.data} == {"FULL", "softmax"} and len(lin.data) == 4  # one trace per model and depth
    full = [t for t in lin.data if t.name == "FULL"]
    assert all(max(t.y) < 1e-12 for t in full)  # Theorem 4.1: rounding (drawn at the floor)
    assert all(min(t.y) > 1e-4 for t in lin.data if t.name == "softmax")
    assert lin.layout.yaxis.type == "log" and lin.layout.xaxis.title.text == "layer l"
    assert [list(t.x) for t in loss.data] == [[2, 3], [2, 3]] and loss.layout.yaxis.type == "log"


def test_no_study_no_panels():
    assert panels(data_of(None)) == []


def test_the_study_is_found_beside_the_models(tmp_path):
    zoo = tmp_path / "zoo"
    (zoo / "variants").mkdir(parents=True)
    (zoo / "full2_uniform5").mkdir()
    s = study()
    (zoo / VARIANTS_STUDY).write_text(json.dumps(s.to_json()))
    found = variants_study([zoo / "full2_uniform5"])
    assert found == s and variants_study([tmp_path / "elsewhere" / "run"]) is None
    (zoo / VARIANTS_STUDY).write_text('{"rows": 3}')
    with pytest.raises(CheckpointError, match="not a variants study"):
        variants_study([zoo / "full2_uniform5"])


@pytest.mark.skipif(not SHIPPED.is_file(), reason="the variants zoo is not shipped")
def test_the_shipped_study_draws():
    shipped = variants_study([SHIPPED.parent.parent / "best"])
    assert shipped is not None and {r.name for r in shipped.rows} >= {"full", "ffn_relu", "softmax"}
    assert [p.figure is not None for p in panels(data_of(shipped))] == [True, True]
    assert torch.isfinite(torch.tensor([r.loss.mean for r in shipped.rows])).all()
