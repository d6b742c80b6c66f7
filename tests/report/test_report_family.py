"""The report's family views: drawn from a family study beside the models (experiments/family.py's summary.json),
left out without one."""

from __future__ import annotations

import json

import pytest

from interp.files import CheckpointError
from interp.report import figures
from interp.report.data import FAMILY_STUDY, DriftCurves, ReportData, Settings, family_study

VIEWS = ("family_loss", "family_readout", "family_weights", "family_gates", "family_by_sigma", "family_lambda")
VIEWS += ("family_skip", "family_lambda_layers")


def lam(by_sigma, relerr=0.1):
    """An implied-ridge record (interp.probes.readout.implied_ridge) whose last layer has these medians by σ."""
    return {"sigma": [1.0, 3.0], "median_by_sigma": [[None, None], by_sigma], "spearman_sigma": [None, 0.7],
            "median_relerr": [None, relerr], "oracle_by_sigma": [1.0, 9.0]}  # fmt: skip


def cell(prior, variant, L, loss, weights=False, gap=None):
    out = {
        "prior": prior, "variant": variant, "layers": L, "loss": {"mean": loss, "stderr": 0.01 * loss},
        "readout_gap_median": [0.0] + [1e-17 if variant != "softmax" else 1e-3] * L,
    }  # fmt: skip
    if weights:
        out["token_weights"] = {
            "by_position": [[0.5 + 0.1 * j + 0.01 * l for j in range(10)] for l in range(L)],
            "sigma": [1.0, 3.0],
            "by_sigma": [[0.9, 1.1]] * L,
            "residual": [0.01 * (l + 1) for l in range(L)],
        }
    if gap is not None:  # the paired difference from FULL in two σ groups
        out["vs_full_by_sigma"] = {
            "sigma": [1.0, 3.0],
            "diff": [{"mean": gap, "stderr": 0.01}, {"mean": -gap, "stderr": 0.02}],
        }
    return out


STUDY = {
    "meta": {},
    "cells": [
        cell("uniform:5", "retnet", 2, 0.3, weights=True, gap=0.05),
        cell("uniform:5", "retnet", 4, 0.1, weights=True, gap=0.02),
        cell("uniform:5", "softmax", 2, 0.5, gap=0.6),
        cell("categorical:1,3", "retnet", 2, 0.25, weights=True),
    ],
}


def panels(family):
    data = ReportData([], {}, {}, {}, DriftCurves(), Settings.quick(), family=family)
    return [p for v in figures.REGISTRY if v.draw.__name__ in VIEWS for p in v.panels(data)]


def test_every_view_draws_one_panel_per_prior():
    drawn = panels(STUDY)
    assert sorted(p.id for p in drawn) == sorted(
        [f"family-{v}-{p}" for v in ("loss", "readout", "weights") for p in ("uniform5", "cat13")]
        + ["family-sigma-uniform5"]  # only uniform:5's cells hold the paired difference by σ
    )
    quad = cell("uniform:5", "lsa_quad1", 2, 0.1, gap=0.01) | {"quad": 1.0}
    by_sigma = next(p.figure for p in panels({"cells": [*STUDY["cells"], quad]}) if p.id == "family-sigma-uniform5")
    shown = {t.name: (t.line.dash, t.visible, list(t.y)) for t in by_sigma.data}
    assert shown == {
        "retnet (L=2)": ("dot", True, [0.05, -0.05]),
        "retnet (L=4)": ("dash", True, [0.02, -0.02]),
        "softmax (L=2)": ("dot", "legendonly", [0.6, -0.6]),  # far from FULL: hidden until clicked
        "lsa_quad1 (L=2)": ("dot", "legendonly", [0.01, -0.01]),  # on the quadratic task: hidden too
    }
    # the implied ridge λ by σ: each cell beside the zoo's FULL of its depth (once per depth) and the Bayes σ²
    lams = [
        cell("uniform:5", "retnet", 2, 0.3)
        | {"implied_lambda": lam([4.0, 6.0]), "full_implied_lambda": lam([3.0, 8.0])},
        cell("uniform:5", "delta", 2, 0.2)
        | {"implied_lambda": lam([2.0, 9.0]), "full_implied_lambda": lam([3.0, 8.0])},
        cell("uniform:5", "softmax", 2, 0.5) | {"implied_lambda": lam([1.0, 1.0], relerr=0.6)},
        cell("uniform:5", "gla", 7, 3.5)  # a near-zero w^L: λ and its fit undefined (nan, None in JSON)
        | {"implied_lambda": lam([None, None], relerr=None) | {"spearman_sigma": [None, None]}},
        quad | {"implied_lambda": lam([5.0, 5.0])},
    ]
    (fig,) = [p.figure for p in panels({"cells": lams}) if p.id == "family-lambda-uniform5"]
    curves = {t.name: (t.visible, list(t.y)) for t in fig.data}
    assert curves == {
        "FULL (zoo, L=2)": (True, [3.0, 8.0]),
        "delta (L=2)": (True, [2.0, 9.0]),
        "retnet (L=2)": (True, [4.0, 6.0]),
        "softmax (L=2)": ("legendonly", [1.0, 1.0]),  # far from every ridge solution: hidden until clicked
        "gla (L=7)": ("legendonly", [None, None]),  # no ridge solution to be near: hidden, its hover says "–"
        "Bayes ridge λ = σ²": (None, curves["Bayes ridge λ = σ²"][1]),
    }
    assert curves["Bayes ridge λ = σ²"][1][0] == 1.0 and curves["Bayes ridge λ = σ²"][1][-1] == 9.0
    assert fig.layout.yaxis.type == "log" and "family-lambda-cat13" not in [p.id for p in panels(STUDY)]
    backwards = [p.id for p in panels({"cells": STUDY["cells"][::-1]}) if p.id.startswith("family-loss")]
    assert backwards == ["family-loss-uniform5", "family-loss-cat13"]  # Table 1's column order, as the other views
    loss = next(p.figure for p in drawn if p.id == "family-loss-uniform5")
    assert {t.name: list(t.x) for t in loss.data} == {"retnet": [2, 4], "softmax": [2]}
    assert loss.layout.yaxis.type == "log"
    gap = next(p.figure for p in drawn if p.id == "family-readout-uniform5")
    assert {t.name: max(t.y) for t in gap.data} == {"retnet (L=4)": 1e-17, "softmax (L=2)": 1e-3}
    weights = next(p.figure for p in drawn if p.id == "family-weights-uniform5")
    # the first (dashed) and last layer of two retnet depths, in two panels each
    shown = {(t.name, t.line.dash, t.y[0]) for t in weights.data if t.showlegend is not False}
    assert shown == {
        ("retnet (L=2), layer 1", "dash", 0.5),
        ("retnet (L=2), layer 2", "solid", 0.51),
        ("retnet (L=4), layer 1", "dash", 0.5),
        ("retnet (L=4), layer 4", "solid", 0.53),
    }
    assert len(weights.data) == 8 and "fit residual 0.04" in weights.data[-1].hovertemplate


def skip(loss, skipped, blowups=None):
    """A layer_skip place record (experiments/family.py): the model's loss and each skipped layer's (None: blown)."""
    return {"loss": loss, "skipped": skipped, "blowups": blowups or [0 if v is not None else 3 for v in skipped]}


def test_the_skip_view_draws_each_layers_worth_beside_full_on_the_prior_and_at_sigma_zero():
    full2, full4 = skip(0.2, [None, 0.8]), skip(0.05, [None, None, 0.3, 0.2])
    cells = [
        cell("uniform:5", "delta", 2, 0.2)
        | {"layer_skip": {"prior": skip(0.2, [2.0, 1.0]), "noise_free": skip(0.5, [1.0, 2.5]), "full_prior": full2}},
        cell("uniform:5", "delta", 4, 0.1)
        | {"layer_skip": {"prior": skip(0.1, [None, 0.2, 0.4, 0.1]), "full_prior": full4}},
        cell("uniform:5", "lsa_quad1", 2, 0.1) | {"quad": 1.0, "layer_skip": {"prior": skip(0.1, [0.5, 0.5])}},
        cell("categorical:1,3", "causal", 2, 0.3),
    ]
    drawn = panels({"cells": cells})
    assert [p.id for p in drawn if p.id.startswith("family-skip")] == ["family-skip-uniform5"]  # none on {1,3}
    fig = next(p.figure for p in drawn if p.id == "family-skip-uniform5")
    traces = {(t.name, t.xaxis): (list(t.y), list(t.marker.symbol), t.visible) for t in fig.data}
    blown = figures.family.BLOWN
    assert traces == {
        ("FULL (zoo, L=2)", "x"): ([blown, pytest.approx(4.0)], ["x", "circle"], True),
        ("FULL (zoo, L=4)", "x"): (
            [blown, blown, pytest.approx(6.0), pytest.approx(4.0)],
            ["x", "x", "circle", "circle"],
            True,
        ),
        ("delta (L=2)", "x"): ([10.0, 5.0], ["circle"] * 2, "legendonly"),  # not its deepest cell: hidden
        ("delta (L=2)", "x2"): ([2.0, 5.0], ["circle"] * 2, "legendonly"),  # at σ = 0
        ("delta (L=4)", "x"): ([blown, 2.0, 4.0, 1.0], ["x", "circle", "circle", "circle"], True),
    }  # the quadratic task's cell is left out
    hover = next(t for t in fig.data if t.name == "delta (L=4)").customdata
    assert list(hover) == ["blows up (3 sequences beyond 100·d)", "× 2", "× 4", "× 1"]
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"


def test_the_lambda_layers_view_draws_each_layers_lambda_at_the_lowest_and_highest_sigma():
    def by_layer(rows):  # an implied_ridge record with these medians by σ after layers 1..L
        L1 = len(rows) + 1
        return {"sigma": [0.5, 2.0, 4.0], "median_by_sigma": [[None] * 3, *rows], "spearman_sigma": [None] * L1,
                "median_relerr": [None] + [0.1] * (L1 - 1)}  # fmt: skip

    cells = [
        cell("uniform:5", "delta", 2, 0.2)
        | {"implied_lambda": by_layer([[5.0, 6.0, 7.0], [0.5, 4.0, 16.0]]),
           "full_implied_lambda": by_layer([[9.0, 9.0, 9.0], [0.3, 4.0, 15.0]])},
        cell("uniform:5", "delta", 4, 0.1)
        | {"implied_lambda": by_layer([[8.0, 8.0, 8.0], [4.0, 5.0, 6.0], [4.0, 6.0, 12.0], [None, 4.0, 16.0]])},
        cell("uniform:5", "lsa_quad1", 2, 0.1) | {"quad": 1.0, "implied_lambda": by_layer([[1.0] * 3] * 2)},
        cell("uniform:5", "softmax", 2, 0.5)
        | {"implied_lambda": by_layer([[20.0] * 3] * 2) | {"median_relerr": [None, 0.5, 0.6]}},
    ]  # fmt: skip
    (fig,) = [p.figure for p in panels({"cells": cells}) if p.id.startswith("family-lambda-layers")]
    traces = {(t.name, t.xaxis): (list(t.y), t.visible) for t in fig.data}
    assert traces == {
        ("FULL (zoo, L=2)", "x"): ([9.0, 0.3], True),  # the lowest σ group, layer by layer
        ("FULL (zoo, L=2)", "x2"): ([9.0, 15.0], True),  # the highest
        ("delta (L=2)", "x"): ([5.0, 0.5], "legendonly"),  # not the variant's deepest cell: hidden
        ("delta (L=2)", "x2"): ([7.0, 16.0], "legendonly"),
        ("delta (L=4)", "x"): ([8.0, 4.0, 4.0, None], True),  # an undefined λ is a gap
        ("delta (L=4)", "x2"): ([8.0, 6.0, 12.0, 16.0], True),
        ("softmax (L=2)", "x"): ([20.0, 20.0], "legendonly"),  # far from every ridge solution: hidden
        ("softmax (L=2)", "x2"): ([20.0, 20.0], "legendonly"),
    }  # the quadratic task's cell is left out; no FULL of 4 layers in this study
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["σ ≈ 0.50, the lowest group", "σ ≈ 4.00, the highest"] and fig.layout.yaxis2.type == "log"


def gates(gate, L, low, high, first=True):
    """A gate_values record of L layers whose mean is `low` on the lowest σ group and `high` on the highest."""
    out = {"gate": gate, "sigma": [1.0, 3.0], "mean": [(low + high) / 2] * L, "by_head": [[low]] * L,
           "by_sigma": [[low + 0.001 * l, high + 0.001 * l] for l in range(L)]}  # fmt: skip
    return out | ({"first_token_weight": [0.9 - 0.1 * l for l in range(L)]} if first else {})


def test_the_gates_view_draws_each_variants_deepest_gates_by_sigma_and_delta_apart():
    cells = [
        cell("uniform:5", "gla", 2, 0.3) | {"gates": gates("alpha", 2, 0.99, 0.98)},
        cell("uniform:5", "gla", 4, 0.1) | {"gates": gates("alpha", 4, 0.97, 0.9)},
        cell("uniform:5", "delta", 2, 0.2) | {"gates": gates("beta", 2, 0.03, 0.03, first=False)},
        cell("uniform:5", "causal", 2, 0.3),
        cell("categorical:1,3", "causal", 2, 0.3),
    ]
    drawn = panels({"cells": cells})
    assert [p.id for p in drawn if p.id.startswith("family-gates")] == ["family-gates-uniform5"]  # no gate on {1,3}
    fig = next(p.figure for p in drawn if p.id == "family-gates-uniform5")
    traces = {(t.name, t.xaxis, t.line.dash): list(t.y) for t in fig.data}
    assert traces == {
        ("gla (L=4), σ ≈ 1.00", "x", "dash"): [0.97, 0.971, 0.972, 0.973],  # the deepest cell only
        ("gla (L=4), σ ≈ 3.00", "x", "solid"): [0.9, 0.901, 0.902, 0.903],
        ("gla (L=4)", "x2", None): pytest.approx([0.9, 0.8, 0.7, 0.6]),
        ("delta (L=2), σ ≈ 1.00", "x3", "dash"): [0.03, 0.031],  # β apart: a step, not a decay
        ("delta (L=2), σ ≈ 3.00", "x3", "solid"): [0.03, 0.031],
    }
    gla = next(t for t in fig.data if t.name == "gla (L=4), σ ≈ 3.00")
    assert "σ ≈ 3.00: mean alpha = " in gla.hovertemplate and list(gla.x) == [1, 2, 3, 4]


def test_no_study_no_panels_and_the_study_is_found_beside_the_models(tmp_path):
    assert panels(None) == []
    zoo = tmp_path / "zoo"
    (zoo / "family").mkdir(parents=True)
    (zoo / "full2_uniform5").mkdir()
    (zoo / FAMILY_STUDY).write_text(json.dumps(STUDY))
    assert family_study([zoo / "full2_uniform5"]) == STUDY and family_study([tmp_path / "x" / "run"]) is None
    (zoo / FAMILY_STUDY).write_text('{"cells": 3}')
    with pytest.raises(CheckpointError, match="not a family study"):
        family_study([zoo / "full2_uniform5"])


def test_family_runs_given_to_the_report_are_read_by_the_family_views(tmp_path):
    """A family model among the report's paths is not probed as the paper's (a RetNet has no P, Q): it is measured on
    its own task (a --quad run on the quadratic one), read by the one readout, drawn in the family views beside any
    study and listed in the summary without a paper value; its record is cached like the others."""
    from interp import load
    from interp.config import ModelConfig, TrainConfig
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.report import summary_rows, write_report
    from interp.train import train

    runs = []
    for name, attention, quad in (("retnet1", "retnet", 0.0), ("quad1", "lsa", 1.0), ("full1", "lsa", 0.0)):
        cfg = TrainConfig(
            model=ModelConfig(d=10, n_layers=1, attention=attention), noise="uniform:1", steps=4, batch=32, quad=quad
        )
        train(cfg, tmp_path / name, progress=False)
        runs.append(tmp_path / name)
    settings = Settings.quick()
    logged = []
    path, data = write_report(runs, tmp_path / "r.html", settings, log=logged.append)
    assert [e.label for e in data.entries] == ["full1"] and [e.label for e in data.family_entries] == [
        "retnet1",
        "quad1",
    ]
    cells = {c["variant"]: c for c in data.family["cells"]}
    assert set(cells) == {"retnet", "lsa_quad1"} and cells["retnet"]["layers"] == 1
    on_task = lambda quad: EvalSet("uniform:1", n_seq=settings.n_seq, seed=settings.seed, quad=quad)  # noqa: E731
    assert cells["retnet"]["loss"]["mean"] == pytest.approx(adjusted_loss(load(runs[0]), on_task(0.0)).mean, rel=1e-12)
    assert cells["lsa_quad1"]["loss"]["mean"] == pytest.approx(
        adjusted_loss(load(runs[1]), on_task(1.0)).mean, rel=1e-12
    )
    assert max(cells["retnet"]["readout_gap_median"]) < 1e-6 and "token_weights" in cells["retnet"]
    rows = {r["name"]: r for r in summary_rows(data)}
    assert rows["retnet1"]["kind"] == "family" and rows["retnet1"]["paper"] is None
    assert rows["retnet1"]["mean"] == cells["retnet"]["loss"]["mean"] and rows["full1"]["paper"] is not None
    html = path.read_text()
    assert 'id="family-loss-uniform1"' in html and 'id="family-weights-uniform1"' in html
    assert 'id="family-lambda-uniform1"' in html  # the readout's implied ridge λ, with no zoo FULL beside it here
    assert any("1 probed models, 2 of the linear-attention family, 0 records cached" in m for m in logged), logged
    logged.clear()
    _, again = write_report(runs, tmp_path / "r.html", settings, log=logged.append)
    assert again.family == data.family and any(", 0 to measure" in m for m in logged), logged
    only, family_only = write_report(runs[:2], tmp_path / "family.html", settings)  # no model of the paper's
    assert family_only.entries == [] and set(family_only.baselines) == {"uniform:1"}  # the RetNet's prior's
    page = only.read_text()
    assert 'id="family-loss-uniform1"' in page and "No model of the paper&#x27;s" in page
    assert "and 2 models of the linear-attention family" in page and "retnet1" in page.split("<footer>")[1]
