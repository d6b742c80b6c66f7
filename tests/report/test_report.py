"""interp report: one self-contained HTML file, every section, labelled axes, unique ids, cached records and
baselines, the CLI shell."""

from __future__ import annotations

import dataclasses
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs
from report_fixtures import CAT, NOISE, make_runs, quick_report

pytestmark = pytest.mark.slow

PANELS = [
    "loss-vs-layers",
    f"profiles-{NOISE.replace(':', '-')}",
    "profiles-categorical-1-3",
    "heatmaps",
    "after-k-layers",
    "omegas",
    "solvers",
    "momentum",
    "implied-lambda",
    "rescaling-step",
    "schedule",
    "full-fits",
    "training",
    "drift",
]


PER_PRIOR = {"heatmaps", "after-k-layers", "omegas", "solvers", "momentum", "implied-lambda", "rescaling-step"}
PER_PRIOR |= {"schedule", "full-fits", "training", "drift"}  # one card per prior behind the report's prior selector
PANEL_IDS = [i for p in PANELS for i in ([f"{p}-uniform1", f"{p}-cat13"] if p in PER_PRIOR else [p])]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    path, data = quick_report(root)
    return path, data, path.read_text()


def test_self_contained_with_plotly_js_once(report):
    path, _, html = report
    head = get_plotlyjs()[:80]
    assert html.count(head) == 1  # plotly.js embedded exactly once
    assert not re.search(r"<script[^>]+src=", html)  # nothing fetched: no external scripts
    assert not re.search(r"<link[^>]+href=[\"']?https?:", html)
    assert "mathjax" not in html.lower().split("</head>")[1][:2000]
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")


def test_every_section_in_toc_with_caption_and_figure(report):
    _, _, html = report
    assert 'id="summary"' in html
    for pid in PANELS:
        assert f'href="#{pid}"' in html, pid
        # a per-prior view's cards are "{pid}-{prior}": the first one's
        card = re.split(rf'<div class="card" id="{pid}(-[a-z0-9-]+)?"', html, maxsplit=1)[-1].split(
            '<div class="card"'
        )[0]
        assert '<p class="look">' in card, pid  # a text saying what to look for
        assert f'id="fig-{pid}' in card and "Plotly.newPlot" in card, pid


def _axes(fig):
    layout = fig.to_plotly_json()["layout"]
    return {k: v for k, v in layout.items() if re.fullmatch(r"[xy]axis\d*", k)}


def _titled(axis: dict) -> bool:
    return bool((axis.get("title") or {}).get("text"))


def test_every_axis_labelled_and_every_trace_hovers(report):
    """Every x axis in use has a title, and so does the leftmost y axis in use of every row of panels (a panel beside
    it may leave its y title out: side by side, a second title would reach into the panel on its left)."""
    from interp.report.html import sections

    _, data, _ = report
    panels = [p for _, _, ps in sections(data) for p in ps]
    assert [p.id for p in panels] == PANEL_IDS
    for p in panels:
        if p.group == "categorical:1,3" and p.anchor in ("after-k-layers", "full-fits", "drift"):
            assert p.note  # the fixture's {1,3} model is a 1-layer DIAG: nothing after K layers, no FULL, no drift
            continue
        assert p.figure is not None, f"{p.id}: {p.note}"
        used = {t.xaxis or "x" for t in p.figure.data} | {t.yaxis or "y" for t in p.figure.data}
        axes = {name.replace("axis", ""): axis for name, axis in _axes(p.figure).items()}
        rows: dict[tuple, list] = {}
        for short, axis in axes.items():
            if short not in used or axis.get("visible") is False:
                continue
            if short.startswith("x"):
                assert _titled(axis), f"{p.id}: {short} has no title"
            else:
                x0 = axes.get(axis.get("anchor") or "x", {}).get("domain", [0, 1])[0]
                rows.setdefault(tuple(axis.get("domain", [0, 1])), []).append((x0, short, axis))
        for row in rows.values():
            _, short, axis = min(row, key=lambda r: r[0])
            assert _titled(axis), f"{p.id}: {short}, the leftmost y axis of its row, has no title"
        for t in p.figure.data:
            assert t.hovertemplate, f"{p.id}: a trace without hover text"


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]


def test_element_ids_are_unique_and_every_link_has_a_target(report):
    _, _, html = report
    parser = _Ids()
    parser.feed(html)
    repeated = sorted({i for i in parser.ids if parser.ids.count(i) > 1})
    assert repeated == [] and len(parser.ids) > 2 * len(PANELS), repeated  # once "training": a section and a panel
    links = re.findall(r'href="#([^"]+)"', html)
    assert set(links) <= set(parser.ids) and len(links) == len(PANELS) + 1


def test_views_are_registered_in_order():
    """The report draws the registered views, section by section; none is listed by hand, none twice."""
    from interp.report import figures
    from interp.report.figures import REGISTRY, SECTIONS, view

    names = [v.draw.__name__ for v in REGISTRY]
    assert names == [
        "loss_vs_layers",
        "table1",
        "sigma_profiles",
        "last_layer_profiles",
        "heatmaps",
        "after_k_layers",
        "omegas",
        "solvers",
        "momentum",
        "implied_lambda",
        "rescaling_and_step",
        "schedule",
        "full_fits",
        "theorem51",
        "variants_linearity",
        "variants_loss",
        "family_loss",
        "family_readout",
        "family_weights",
        "family_gates",
        "family_by_sigma",
        "family_lambda",
        "family_skip",
        "family_lambda_layers",
        "training_curves",
        "drift",
    ]
    assert [v.section for v in REGISTRY] == sorted((v.section for v in REGISTRY), key=list(SECTIONS).index)
    assert [v.draw for v in REGISTRY] == [getattr(figures, n) for n in names]  # what the tests call is what is drawn
    with pytest.raises(ValueError, match="unknown section"):
        view("x", "x", "x", 100, section="elsewhere")


def test_log_axes_where_the_paper_uses_them(report):
    from interp.report import figures

    _, data, _ = report
    fig = figures.loss_vs_layers(data).figure
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"  # one panel per prior
    assert [a.text for a in fig.layout.annotations] == [f"noise {NOISE}", f"noise {CAT}"]
    assert {t.xaxis for t in fig.data} == {"x", "x2"}  # each prior's curves in its own panel
    prof = figures.sigma_profiles(data, NOISE).figure
    assert prof.layout.yaxis.type == "log"
    assert [(sh.x0, sh.x1) for sh in prof.layout.shapes] == [(0, 1.0)] * len(prof.layout.annotations)  # the band
    cat = figures.sigma_profiles(data, CAT).figure
    assert sorted((sh.x0, sh.x1) for sh in cat.layout.shapes) == [(0.85, 1.15), (2.85, 3.15)]


def test_fixed_sigma_views_call_bayes_the_prior_optimum(report):
    """At one fixed σ the Bayes predictor of the prior is no floor (ConstRR beats it at σ = 3 on uniform:5): the per-σ
    views name it "Bayes (prior optimum)" and never call it a floor; the loss on the prior keeps "Bayes floor"."""
    from interp.report import figures

    _, data, html = report
    for prior in (NOISE, CAT):
        panel = figures.sigma_profiles(data, prior)
        names = {t.name for t in panel.figure.data}
        assert "Bayes (prior optimum)" in names and "Bayes floor" not in names
        assert "floor" not in panel.caption.lower()
        assert all("floor" not in t.hovertemplate.lower() for t in panel.figure.data)
    assert "floor" not in figures.after_k_layers(data).caption.lower()
    assert "Bayes floor" in {t.name for t in figures.loss_vs_layers(data).figure.data}


def test_runs_on_two_priors_differ_in_marker_or_dash(report):
    """diag1 (uniform:1) and diag1_cat13 ({1,3}) share architecture, depth and so colour: the probe views tell them
    apart by marker symbol, the training curves (lines only) by dash."""
    from interp.report import figures

    _, data, _ = report
    views = (figures.omegas, figures.solvers, figures.momentum, figures.implied_lambda, figures.rescaling_and_step)
    for v in (*views, figures.schedule):
        fig = v(data).figure
        style = {t.legendgroup: (t.line.color, t.marker.symbol) for t in fig.data if t.type == "scatter"}
        assert style["diag1"][0] == style["diag1_cat13"][0], v.__name__  # one colour per architecture and depth
        assert style["diag1"][1] != style["diag1_cat13"][1], v.__name__
    fig = figures.training_curves(data).figure
    dash = {t.legendgroup: t.line.dash for t in fig.data}
    assert dash["diag1"] != dash["diag1_cat13"] and dash["diag1"] == dash["gdpp1"]


def test_a_cached_report_computes_no_baseline(report, tmp_path, monkeypatch):
    """The second build of a report over the same models reads the baselines from the report caches (keyed by the
    prior, d, n, Λ, the sequences and the code): nothing evaluates or tunes a baseline. Other sequences: other key."""
    from interp import tuning
    from interp.report import data as report_data
    from interp.report import write_report
    from interp.report.data import Settings, _baseline_key, cache_files, cached_baseline_record

    _, data, _ = report

    def refuse(*args, **kwargs):
        raise AssertionError("a baseline was computed")

    monkeypatch.setattr(report_data, "baseline_record", refuse)
    monkeypatch.setattr(tuning, "baselines", refuse)
    logged = []
    _, again = write_report(
        [e.path for e in data.entries], tmp_path / "again.html", Settings.quick(), log=logged.append
    )
    assert again.baselines == data.baselines
    assert any("records cached, 0 to measure" in m for m in logged), logged
    key = _baseline_key(NOISE, Settings.quick(), 10, 20, None)
    assert key == _baseline_key("uniform:1.0", Settings.quick(), 10, 20, None)  # the prior's spec, not its spelling
    assert len({key, *(_baseline_key(NOISE, s, 10, 20, None) for s in _other_settings())}) == 5
    lam = [[2.0] + [0.0] * 9] + [[0.0] * 10] * 9
    others = [(CAT, 10, 20, None), (NOISE, 5, 20, None), (NOISE, 10, 8, None), (NOISE, 10, 20, lam)]
    assert len({key, *(_baseline_key(p, Settings.quick(), d, n, c) for p, d, n, c in others)}) == 5
    mine = [e for e in data.entries if e.noise == NOISE]
    with pytest.raises(AssertionError, match="a baseline was computed"):  # other sequences: computed afresh
        cached_baseline_record(NOISE, _other_settings()[0], 10, 20, None, cache_files(mine))


def _undated(html: str) -> str:
    return re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d", "Generated", html)


def test_a_second_report_draws_no_figure(report, monkeypatch):
    """The figure cache beside the HTML (interp.report.figcache): a second report of the same data and code takes
    every panel from it, draws none, and writes the same HTML; other data, other code or a damaged file draw anew."""
    from interp.report import figcache, render, write_report
    from interp.report.data import Settings
    from interp.report.figcache import FigureCache, cache_path
    from interp.report.figures import base

    path, data, html = report
    stored = cache_path(path)
    assert stored == path.with_name("report.panels.jsonl") and stored.is_file()
    lines = stored.read_text().splitlines()
    cache = FigureCache(stored, data)
    monkeypatch.setattr(base, "make_subplots", lambda *a, **k: pytest.fail("a figure was drawn"))
    again = render(data, cache=cache)
    assert cache.hits == len(cache.used) == len(lines) - 1 == html.count('<div class="card"') - 1  # - the summary
    assert _undated(again) == _undated(html)
    logged = []  # the whole command again: the records now read from their caches, the figures from theirs
    write_report([e.path for e in data.entries], path, Settings.quick(), log=logged.append)
    assert f"{cache.hits} of {cache.hits} figures from {stored}" in logged, logged
    assert _undated(path.read_text()) == _undated(html)
    monkeypatch.undo()

    only = {"omegas", "table1"}
    fewer = dataclasses.replace(data, entries=data.entries[:-1])
    cache = FigureCache(stored, fewer)  # other data
    render(fewer, only=only, cache=cache)
    assert cache.hits == 0 and len(cache.used) > 0
    monkeypatch.setattr(figcache, "code_digest", lambda: "other code")
    cache = FigureCache(stored, data)
    assert cache.stored == {}

    monkeypatch.undo()
    cache = FigureCache(stored, data)
    render(data, only=only, cache=cache)
    assert cache.hits == len(cache.used) > 0
    cache.save()  # keeps this report's panels only
    assert len(stored.read_text().splitlines()) == 1 + len(cache.used) < len(lines)
    stored.write_bytes(b"\xff{ not json")
    logged = []
    cache = FigureCache(stored, data, log=logged.append)
    assert cache.stored == {} and logged == [f"{stored}: not a figure cache of this interp; drawing every figure again"]
    render(data, cache=cache)
    cache.save()
    assert FigureCache(stored, data).stored.keys() == cache.used.keys()  # rewritten whole
    blocked = path.with_name("blocked.panels.jsonl")  # a cache that cannot be written: the report stands without it
    blocked.mkdir()
    logged = []
    out, _ = write_report(
        [e.path for e in data.entries], path.with_name("blocked.html"), Settings.quick(), log=logged.append
    )
    assert _undated(out.read_text()) == _undated(html)
    assert f"{blocked}: cannot write the figure cache (Is a directory)" in logged, logged


def _other_settings():
    from interp.report.data import Settings

    q = Settings.quick()
    return [
        dataclasses.replace(q, **kw) for kw in ({"seed": 1}, {"n_seq": 999}, {"profile_seq": 299}, {"sigma_step": 0.5})
    ]


def test_summary_rows_match_records_and_paper(report):
    from interp.report import summary_rows, summary_text

    _, data, html = report
    rows = summary_rows(data)
    models = [r for r in rows if r["kind"] == "model"]
    assert [r["name"] for r in models] == ["gdpp1", "diag1", "full2", "diag1_cat13"]
    for r in models:
        assert r["mean"] == data.records[r["name"]].loss.mean and math.isfinite(r["mean"])
        assert r["paper"] is not None and r["ratio"] == pytest.approx(r["mean"] / r["paper"])  # Table 1 has uniform:1
    base = [r for r in rows if r["kind"] == "baseline"]
    assert sorted((r["noise"], r["name"]) for r in base) == sorted(
        (p, b) for p in (NOISE, CAT) for b in ("ConstRR", "AdaRR", "TunedRR", "Bayes floor")
    )
    for prior in (NOISE, CAT):
        bayes = next(r for r in base if r["name"] == "Bayes floor" and r["noise"] == prior)
        assert all(bayes["mean"] <= r["mean"] + 3 * r["stderr"] for r in rows if r["noise"] == prior)  # a floor
    text = summary_text(data)
    assert "full2" in text and "Bayes floor" in text
    assert f"{models[0]['mean']:.4g}" in html


def test_quick_is_a_preview_with_no_ratio_its_noise_cannot_support(report):
    """--quick (Settings.quick): the summary says it is a preview, every loss carries ± its standard error and its
    sequence count, and a ratio to the paper is shown only where interp.evaluate.precise supports it."""
    from interp.evaluate import precise
    from interp.render import loss
    from interp.report import summary_rows, summary_text

    _, data, html = report
    assert data.settings.preview
    text = summary_text(data)
    assert text.startswith("preview (--quick): 1 000 sequences per loss") and "preview (--quick)" in html
    rows = summary_rows(data)
    lines = text.splitlines()
    for r in rows:
        line = next(ln for ln in lines if ln.startswith(r["name"] + " ") and r["noise"] in ln)
        assert loss(r["mean"], r["stderr"], 1000) in line
        assert r["precise"] == precise(r["mean"], r["stderr"])
        if r["paper"] and not r["precise"]:
            assert line.rstrip().endswith("○") and f"{r['ratio']:.2f}" not in line.split("(1 000 seq.)")[1]
    if any(r["paper"] and not r["precise"] for r in rows):
        assert "○: standard error above 10% of the value" in text


def test_heatmaps_share_one_symmetric_scale_per_model(report):
    from interp.report import figures

    _, data, _ = report
    fig = figures.heatmaps(data).figure
    by_model = {}
    for t in fig.data:
        label = t.hovertemplate.split("<br>")[0]
        by_model.setdefault(label, set()).add((t.zmin, t.zmax))
    assert set(by_model) == {"gdpp1", "diag1", "full2", "diag1_cat13"}
    for scales in by_model.values():
        assert len(scales) == 1
        lo, hi = scales.pop()
        assert lo == -hi and hi > 0
    assert len(fig.layout.updatemenus[0].buttons) == 4
    assert fig.layout.updatemenus[0].buttons[0].label == "full2"  # the deepest FULL model first (the paper's Figure 4)


def test_schedule_view_shows_every_models_labels_and_sizes(report):
    """One heatmap row per model (its layer labels as cell text, all four block sizes in the hover), one x←y and one
    y←x size line per model; a record without a schedule (cached before it existed) is left out, none gives a note."""
    from interp.report import figures
    from interp.report.figures import SCHEDULE_CODE, SCHEDULE_TEXT

    _, data, _ = report
    fig = figures.schedule(data).figure
    heat = fig.data[0]
    assert list(heat.y) == [e.label for e in data.entries] and list(heat.x) == [1, 2]
    for label, z_row, text_row, hover_row in zip(heat.y, heat.z, heat.text, heat.customdata):
        s = data.records[label].probe.schedule
        assert s.labels is not None and len(s.labels) == len(s.relative)
        assert [z for z in z_row if z is not None] == [SCHEDULE_CODE[v] for v in s.labels]
        assert [t for t in text_row if t] == [SCHEDULE_TEXT[v] for v in s.labels]
        assert all("x←y" in h and "y←x" in h and "Δ adjusted loss" in h for h in hover_row if h)
    lines = [t for t in fig.data[1:] if t.legendgroup in data.records]
    assert len(lines) == 2 * len(data.entries)
    full2 = data.records["full2"]
    bare = dataclasses.replace(full2, probe=dataclasses.replace(full2.probe, schedule=None))
    stripped = dataclasses.replace(data, records={**data.records, "full2": bare})
    assert "full2" not in list(figures.schedule(stripped).figure.data[0].y)
    only = [e for e in data.entries if e.label == "full2"]
    panel = figures.schedule(dataclasses.replace(data, entries=only, records={"full2": bare}))
    assert panel.figure is None and "No layer schedule" in panel.note


def test_records_are_cached_next_to_the_checkpoint(report, tmp_path):
    from interp.report.data import CACHE_FILE, Settings, gather

    path, data, _ = report
    for e in data.entries:
        assert (e.run_dir / CACHE_FILE).is_file()
    again = gather([e.path for e in data.entries], Settings.quick())
    assert all(r.cached for r in again.records.values())
    assert again.records["full2"].loss == data.records["full2"].loss
    assert again.records["full2"].probe == data.records["full2"].probe  # the typed record reads back as written
    other = gather([data.entries[0].path], Settings.quick().__class__(**{**Settings.quick().__dict__, "seed": 1}))
    assert other.records["gdpp1"].cached is False  # other settings, other key


def test_drift_section_says_when_unavailable(report):
    from interp.report import figures
    from interp.report.data import Settings, drift_records

    _, data, _ = report
    assert data.drift.available and set(data.drift.runs) == {"full2"}
    points = data.drift.runs["full2"]
    assert [p.step for p in points] == sorted(p.step for p in points) and len(points[-1].share_outside) == 2
    no_full = [e for e in data.entries if e.arch != "full"]
    missing = drift_records(no_full, Settings.quick())
    assert not missing.available and "no FULL run" in missing.reason
    data_missing = type(data)(**{**data.__dict__, "drift": missing})
    panel = figures.drift(data_missing)
    assert panel.figure is None and "not available" in panel.note and panel.title == "Drift over training steps"


def test_library_never_imports_report_or_cli():
    root = Path(__file__).resolve().parents[2] / "interp"
    for src in root.rglob("*.py"):
        rel = src.relative_to(root).parts
        if rel[0] in ("report", "cli"):
            continue
        text = src.read_text()
        assert not re.search(r"^\s*(from|import) interp\.(report|cli)", text, re.M), src


def test_cli_report(tmp_path, capsys):
    from interp.cli import main

    runs = make_runs(tmp_path / "runs")[:2]  # (trains all four: a few seconds)
    out = tmp_path / "r.html"
    assert main(["report", *map(str, runs), "-o", str(out), "--quick"]) == 0
    printed = capsys.readouterr().out
    assert out.is_file() and str(out) in printed and "adjusted" in printed and "gdpp1" in printed
    assert main(["report", str(runs[0]), "-o", str(tmp_path), "--quick"]) == 2  # -o is a directory
    assert "is a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        main(["report", str(tmp_path / "missing")])
    assert err.value.code == 2


def test_a_sweep_root_and_its_glob(tmp_path, capsys):
    """`interp report ROOT` and `interp report ROOT/*` (the shell's glob of a sweep root): the run directories under
    it, its sweep.json, its evaluation cache and a stray text file skipped with a note, never read as checkpoints."""
    from interp.cli import main
    from interp.report.data import entries_of, model_paths
    from tests.helpers import trained

    root = tmp_path / "grid"
    for name, param in (("diag1", "diag"), ("gdpp1", "gdpp")):
        trained(root / name, param, NOISE, steps=20, batch=256)
    (root / "sweep.json").write_text('{"runs": {}}\n')
    (root / "table1_evals.json").write_text("{}\n")
    (root / "notes.txt").write_text("trained on the laptop\n")
    (root / "queued").mkdir()  # a run directory without a checkpoint yet
    (root / "queued" / "config.json").write_text("{}")

    notes: list[str] = []
    assert model_paths([root], notes.append) == [root / "gdpp1", root / "diag1"]  # the zoo's order
    assert notes == []
    glob = sorted(root.iterdir())
    assert model_paths(glob, notes.append) == [root / "diag1", root / "gdpp1"]  # as given
    skipped = {Path(n.split(":")[0].removeprefix("skipping ")).name for n in notes}
    assert skipped == {"notes.txt", "sweep.json", "table1_evals.json", "queued"}
    assert model_paths([root, root / "diag1"]) == [root / "gdpp1", root / "diag1"]  # each model once
    assert [e.label for e in entries_of(glob)] == ["diag1", "gdpp1"]
    with pytest.raises(ValueError, match="no models to report on"):
        entries_of([root / "sweep.json"])

    out = tmp_path / "r.html"
    assert main(["report", *map(str, glob), "-o", str(out), "--quick"]) == 0
    printed, err = capsys.readouterr()
    assert out.is_file() and "diag1" in printed and "gdpp1" in printed
    assert "skipping" in err and "sweep.json: not a checkpoint file" in err
    assert main(["report", str(root), "-o", str(out), "--quick"]) == 0
    assert "gdpp1" in capsys.readouterr().out


def test_several_runs_at_one_depth(report):
    from interp.report import figures
    from interp.report.data import Settings, gather
    from interp.run import Run

    _, data, _ = report
    full = next(e for e in data.entries if e.label == "full2")
    early = Run(full.run_dir).checkpoints()[1][1]
    both = gather([full.path, early], Settings.quick(), with_drift=False)
    assert [e.label for e in both.entries] == ["full2", f"full2@{Run(full.run_dir).checkpoints()[1][0]}"]
    fig = figures.loss_vs_layers(both).figure
    line = next(t for t in fig.data if t.name == "FULL")
    others = next(t for t in fig.data if t.name == "FULL (other runs)")
    assert len(line.x) == len(others.x) == 1  # the line joins the best run per depth; the other is a marker
    best = min(r.loss.mean for r in both.records.values())
    assert line.customdata[0][1] == best
    names = [t.name for t in figures.omegas(both).figure.data if t.showlegend is not False]
    assert len(set(names)) == len(names) == 2  # legend names say which run when arch and depth coincide
    first = min(both.records, key=lambda label: both.records[label].loss.mean)
    prof = figures.sigma_profiles(both, NOISE).figure
    drawn = {t.hovertemplate.split("<br>")[0]: (t.name, t.visible) for t in prof.data if t.name.startswith("FULL")}
    assert drawn == {  # the same best run drawn in the per-σ profile, the other listed in the legend
        label: ("FULL", True) if label == first else ("FULL (other runs)", "legendonly") for label in both.records
    }


def test_per_run_views_open_at_the_deepest_depth(report):
    """ω, solvers, momentum, implied λ, rescaling, schedule, training: buttons per depth, the deepest (full2) shown
    first."""
    from interp.report import figures

    _, data, _ = report
    groups = {"L = 1": {"gdpp1", "diag1", "diag1_cat13"}, "L = 2": {"full2"}, "all depths": set(data.records)}
    views = (
        figures.omegas,
        figures.solvers,
        figures.momentum,
        figures.implied_lambda,
        figures.rescaling_and_step,
        figures.schedule,
    )
    for view in (*views, figures.training_curves):
        fig = view(data).figure
        (menu,) = fig.layout.updatemenus
        assert [b.label for b in menu.buttons] == list(groups) and menu.active == 1, view.__name__
        for b in menu.buttons:
            shown = {t.legendgroup for t, v in zip(fig.data, b.args[0]["visible"]) if v is True}
            assert shown & set(data.records) == groups[b.label], (view.__name__, b.label)
        assert {t.legendgroup for t in fig.data if t.visible is True} & set(data.records) == {"full2"}


def test_report_on_a_d5_model(tmp_path):
    """Nothing assumes d = 10: a FULL model with d = 5, n = 8, trained in the test, gets every panel, 6×6 heatmaps
    whose ticks and caption say so, and summary rows without a paper value (Table 1 has d = 10 only)."""
    from interp.config import ModelConfig, TrainConfig
    from interp.report import figures, write_report
    from interp.report.data import Settings
    from interp.report.html import sections
    from interp.train import train

    run = tmp_path / "full2_d5"
    cfg = TrainConfig(
        model=ModelConfig(d=5, n_layers=2, n_heads=1, param="full"),
        noise="uniform:1",
        n=8,
        seed=0,
        steps=30,
        batch=128,
        lr=1e-2,
        n_checkpoints=4,
        log_every=5,
        resume_every=30,
    )
    train(cfg, run, progress=False)
    path, data = write_report([run], tmp_path / "r.html", Settings.quick())
    e = data.entries[0]
    assert (e.d, e.n) == (5, 8) and path.is_file()
    panels = [p for _, _, ps in sections(data) for p in ps]
    assert all(p.figure is not None for p in panels), [p.id for p in panels if p.figure is None]
    heat = figures.heatmaps(data)
    assert list(heat.figure.data[0].x) == ["x1", "x2", "x3", "x4", "x5", "y"] and "6×6" in heat.caption
    assert len(data.records[e.label].probe.omegas.omega) == 2 and len(data.records[e.label].P[0]) == 6
    assert data.records[e.label].probe.d == 5 and data.records[e.label].loss.n_seq == Settings.quick().n_seq
    from interp.report import summary_rows

    model_row = next(r for r in summary_rows(data) if r["kind"] == "model")
    assert model_row["paper"] is None and math.isfinite(model_row["mean"])
    loss_panel = figures.loss_vs_layers(data).figure
    assert list(loss_panel.layout.xaxis.tickvals) == list(range(1, 8))  # Table 1's depths when no model is deeper


def test_report_on_a_run_trained_on_x_cov(tmp_path, monkeypatch):
    """A run trained on x ~ N(0, Λ): its record and its prior's baselines are measured on N(0, Λ) (the same numbers as
    per_layer_loss / evaluate on EvalSet(x_cov=Λ)), the summary says so; a run of the same prior on N(0, I) beside it
    is refused, as runs of another task size are (one set of baselines per prior)."""
    import functools

    from interp import tuning
    from interp.baselines import Bayes
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss, evaluate, per_layer_loss
    from interp.files import CheckpointError
    from interp.report import summary_rows
    from interp.report.data import Settings, gather
    from interp.run import Run
    from tests.helpers import trained

    lam = [[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]
    trained(tmp_path / "lam", "diag", "uniform:1", steps=10, d=3, n=8, batch=64, x_cov=lam)
    trained(tmp_path / "eye", "diag", "uniform:1", steps=2, d=3, n=8, batch=16)
    with pytest.raises(CheckpointError) as err:
        gather([tmp_path / "lam", tmp_path / "eye"], Settings.quick(), with_drift=False)
    assert "lam: d=3, n=8, x ~ N(0, diag:2,1,0.5), eye: d=3, n=8, x ~ N(0, I)" in str(err.value)
    monkeypatch.setattr(tuning, "tune_all", functools.partial(tuning.tune_all, n_seq=2_000))  # 50 000: minutes
    data = gather([tmp_path / "lam"], Settings.quick(), use_cache=False, with_drift=False)
    on = EvalSet("uniform:1", d=3, n=8, n_seq=Settings.quick().n_seq, seed=0, x_cov=lam)
    model = Run(tmp_path / "lam").load()[0]
    assert data.records["lam"].loss.mean == pytest.approx(adjusted_loss(model, on).mean, rel=1e-12)
    assert data.records["lam"].per_layer[-1].mean == pytest.approx(per_layer_loss(model, on)[-1].mean, rel=1e-6)
    base = data.baselines["uniform:1"]
    assert base.x_cov == lam and set(base.paper.values()) == {None}
    assert base.loss["bayes"].mean == pytest.approx(evaluate({"b": Bayes("uniform:1")}, on)["b"].mean, rel=1e-12)
    assert {r["what"] for r in summary_rows(data)} >= {
        "DIAG L=1, x ~ N(0, diag:2,1,0.5)",
        "baseline, x ~ N(0, diag:2,1,0.5)",
    }
