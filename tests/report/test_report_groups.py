"""Grouping many models: the best run per (prior, architecture, depth), and the depth buttons of the per-σ profiles,
the prediction after K layers and the per-run views, checked trace by trace on a hand-built report (d = 5)."""

from __future__ import annotations

import pytest
from report_synthetic import CAT, UNIFORM, synthetic, zoo_like

from interp.report import figures
from interp.report.groups import best_runs, depth_groups, profile_depths
from interp.report.style import MENU_ROOM


@pytest.fixture(scope="module")
def data():
    return zoo_like()


def _run(trace) -> str:
    return trace.hovertemplate.split("<br>")[0]  # every run's hover text starts with its label


def _axis(trace) -> int:
    return int(trace.xaxis[1:] or 1)


def _buttons(fig):
    (menu,) = fig.layout.updatemenus
    return menu, [(b.label, b.args[0]["visible"], b.args[0]["showlegend"], b.args[1]) for b in menu.buttons]


def test_best_run_per_cell_is_the_lowest_adjusted_loss(data):
    best = best_runs(data)
    assert len(best) == 20 + 4  # 7 depths × 3 architectures on uniform:5 less GD++ L=3; 4 cells on {1,3}
    assert best[UNIFORM, "full", 7].label == "full7_uniform5_s1"  # 0.05 against the first seed's 1/7 + 0.19
    assert best[UNIFORM, "diag", 4].label == "diag4_uniform5"  # 0.25 + 0.10 against the second seed's 0.9
    assert best[CAT, "full", 7].label == "full7_cat13_s1"
    for key, e in best.items():
        same = [x for x in data.entries if (x.noise, x.arch, x.n_layers) == key]
        assert data.records[e.label].loss.mean == min(data.records[x.label].loss.mean for x in same)
    tie = synthetic([("a", "full", 2, UNIFORM, 0.1), ("b", "full", 2, UNIFORM, 0.1), ("c", "full", 2, UNIFORM, 0.05)])
    assert best_runs(tie)[UNIFORM, "full", 2].label == "c"
    tie.records["c"].loss.mean = None  # a run without a finite loss never beats one with
    assert best_runs(tie)[UNIFORM, "full", 2].label == "a"  # a tie goes to the run given first
    # the loss-vs-depth line joins the same runs: its FULL points on uniform:5 are the best run of each depth
    line = next(t for t in figures.loss_vs_layers(data).figure.data if t.name == "FULL" and t.xaxis in (None, "x"))
    assert [c[0] for c in line.customdata] == [best[UNIFORM, "full", L].label for L in range(1, 8)]


def test_depth_groups_and_the_papers_depths():
    assert profile_depths(UNIFORM, [1, 2, 4, 7]) == [2, 4, 7]  # Figure 2, bottom row: 2–7 layers at σ_max = 5
    assert profile_depths("uniform:2", [1, 4, 7]) == [7]  # Figure 2, top rows: 7 layers
    assert profile_depths(CAT, [4, 7]) == [7]  # Figure 3
    assert profile_depths(CAT, [1, 2]) == [2]  # none of the paper's: the deepest
    groups, default = depth_groups([1, 2, 4, 5, 6, 7], [2, 4, 5, 6, 7])
    assert [g for g, _ in groups] == ["L = 2, 4–7", "L = 1", "L = 2", "L = 4", "L = 5", "L = 6", "L = 7", "all depths"]
    assert default == 0 and groups[-1][1] == [1, 2, 4, 5, 6, 7]
    groups, default = depth_groups([4, 7], [7])
    assert groups == [("L = 4", [4]), ("L = 7", [7]), ("all depths", [4, 7])] and default == 1
    groups, default = depth_groups([2, 3], [2, 3], every=True)  # the default is already every depth: no repeat
    assert [g for g, _ in groups] == ["L = 2–3", "L = 2", "L = 3"] and default == 0


def _profile_truth(data, fig, prior):
    """Per trace: its panel's depth (from the subplot title) and its state when that depth is shown."""
    titles = {k + 1: int(a.text.split("= ")[1]) for k, a in enumerate(fig.layout.annotations) if a.text.startswith("L")}
    runs, best = {e.label: e for e in data.entries}, best_runs(data)
    out = []
    for t in fig.data:
        depth = titles[_axis(t)]
        e = runs.get(_run(t))
        if e is not None:
            assert (e.noise, e.n_layers) == (prior, depth)  # every run sits in the panel of its depth
        out.append((depth, "legendonly" if e is not None and best[e.noise, e.arch, e.n_layers] is not e else True))
    return out


UNIFORM_GROUPS = [
    ("L = 2–7", [2, 3, 4, 5, 6, 7]),
    *((f"L = {L}", [L]) for L in range(1, 8)),
    ("all depths", list(range(1, 8))),
]
CAT_GROUPS = [("L = 4", [4]), ("L = 7", [7]), ("all depths", [4, 7])]


@pytest.mark.parametrize("prior, groups, default", [(UNIFORM, UNIFORM_GROUPS, 0), (CAT, CAT_GROUPS, 1)])
def test_profiles_show_the_papers_figure_and_each_depth_a_click_away(data, prior, groups, default):
    fig = figures.sigma_profiles(data, prior).figure
    menu, buttons = _buttons(fig)
    assert [b[0] for b in buttons] == [g for g, _ in groups] and menu.active == default
    paper = groups[default][1]  # Figure 2, bottom row (2–7 layers at σ_max = 5); Figure 3 (7 layers on {1,3})
    labels, best = {e.label for e in data.entries}, best_runs(data)
    drawn = {_run(t) for t in fig.data if t.visible is True and _run(t) in labels}
    assert drawn == {e.label for (p, _, L), e in best.items() if p == prior and L in paper}
    listed = {_run(t) for t in fig.data if t.visible == "legendonly"}
    others = {e.label for e in data.entries if e.noise == prior and e.n_layers in paper} - drawn
    assert listed == others and others  # the other seeds of the paper's depths: in the legend, not drawn
    truth = _profile_truth(data, fig, prior)
    depths = sorted({d for d, _ in truth})
    for (label, visible, legend, layout), (_, shown) in zip(buttons, groups):
        assert visible == [on if d in shown else False for d, on in truth], label
        groups_shown = [t.legendgroup for t, v in zip(fig.data, visible) if v is not False]
        entries = [t.legendgroup for t, s in zip(fig.data, legend) if s]
        assert sorted(entries) == sorted(set(groups_shown)), label  # one legend entry per group shown
        domains = sorted(layout[f"xaxis{k if k > 1 else ''}.domain"] for k, L in enumerate(depths, 1) if L in shown)
        assert all(0 <= a < b <= 1 for a, b in domains) and all(p[1] < q[0] for p, q in zip(domains, domains[1:]))
        for k, L in enumerate(depths, 1):
            ax = k if k > 1 else ""
            assert layout[f"xaxis{ax}.visible"] == layout[f"annotations[{k - 1}].visible"] == (L in shown)
            a, _ = layout[f"xaxis{ax}.domain"]
            assert L in shown or all(b < a for _, b in domains)  # a hidden panel overlaps no shown one
        bands = [layout[f"shapes[{m}].visible"] for m in range(len(fig.layout.shapes))]
        assert bands == [depths[int(sh.xref[1:] or 1) - 1] in shown for sh in fig.layout.shapes]
    start = buttons[menu.active]
    assert [t.visible for t in fig.data] == start[1] and [t.showlegend for t in fig.data] == start[2]
    assert fig.layout.xaxis.domain == tuple(start[3]["xaxis.domain"])  # the figure opens as its default button
    assert fig.layout.margin.t == 50 + MENU_ROOM and fig.layout.height == 470 + MENU_ROOM  # room for the buttons


def test_after_k_layers_rows_per_prior_and_a_button_per_depth(data):
    fig = figures.after_k_layers(data).figure
    menu, buttons = _buttons(fig)
    assert [b[0] for b in buttons] == [f"L = {L}" for L in range(2, 8)] and menu.active == 5  # the deepest first
    best, runs = best_runs(data), {e.label: e for e in data.entries}
    cols = 3  # GD++, DIAG, FULL; rows: uniform:5, then {1,3}
    for label, visible, legend, layout in buttons:
        L = int(label[4:])
        drawn = [t for t, v in zip(fig.data, visible) if v is True]
        assert {_run(t) for t in drawn} == {e.label for (p, a, d), e in best.items() if d == L}, label
        for t in drawn:  # each best run: one curve per K = 1..L, in the row of its prior and column of its arch
            e = runs[_run(t)]
            row, col = divmod(_axis(t) - 1, cols)
            assert ([UNIFORM, CAT][row], ["gdpp", "diag", "full"][col]) == (e.noise, e.arch)
        for name in {_run(t) for t in drawn}:
            assert sorted(t.customdata[0][1] for t in drawn if _run(t) == name) == list(range(1, L + 1))
        listed = {_run(t) for t, v in zip(fig.data, visible) if v == "legendonly"}
        assert listed == {e.label for e in data.entries if e.n_layers == L} - {_run(t) for t in drawn}, label
        assert sum(legend) == (1 if listed else 0)  # one legend entry draws the other runs of this depth
        k_labels = [i for i, a in enumerate(fig.layout.annotations) if a.text.startswith("K=")]
        assert sum(layout[f"annotations[{i}].visible"] for i in k_labels) == L * len({_run(t) for t in drawn})
        titles = [layout[f"annotations[{i}].text"] for i in range(2 * cols)]
        assert titles[2] == f"FULL L={L}, {best[UNIFORM, 'full', L].label}"
        assert titles[3] == (f"GD++ L={L}: no run")  # no GD++ on {1,3}


def test_per_run_views_start_at_the_deepest_depth(data):
    fig = figures.training_curves(data).figure
    menu, buttons = _buttons(fig)
    assert [b[0] for b in buttons] == [*(f"L = {L}" for L in range(1, 8)), "all depths"] and menu.active == 6
    best = best_runs(data)
    for label, visible, legend, _ in buttons:
        shown = range(1, 8) if label == "all depths" else [int(label[4:])]
        want = {e.label: (True if best[e.noise, e.arch, e.n_layers] is e else "legendonly") for e in data.entries}
        assert {_run(t): v for t, v in zip(fig.data, visible) if v is not False} == {
            e.label: want[e.label] for e in data.entries if e.n_layers in shown
        }
        assert legend == [v is not False for v in visible]  # one trace per run: each shown run has its entry
    assert {_run(t) for t in fig.data if t.visible is True} == {
        "gdpp7_uniform5",
        "diag7_uniform5",
        "full7_uniform5_s1",
        "diag7_cat13",
        "full7_cat13_s1",
    }


def test_k_labels_stay_apart_in_every_panel_and_depth(data):
    """The K = k labels of one panel sit at least K_LABEL_PX px apart on the row's scale at that depth (the curves of
    the synthetic runs end 0.07 decades apart for K = 1, 2 of 7), in the order of the curves' ends, on the scale."""
    from interp.report.figures.paper import K_LABEL_PX, _after_k_height, _row_px

    fig = figures.after_k_layers(data).figure
    menu, buttons = _buttons(fig)
    cols = 3
    for label, visible, legend, layout in buttons:
        L = int(label[4:])
        panels = {}
        for i, a in enumerate(fig.layout.annotations):
            if a.text.startswith("K=") and layout[f"annotations[{i}].visible"]:
                panels.setdefault(a.yref, []).append((int(a.text[2:]), a.y))
        assert panels, label
        for yref, labels in panels.items():
            n = int(yref[1:] or 1)
            row = (n - 1) // cols + 1
            lo, hi = layout[f"yaxis{n if n > 1 else ''}.range"]
            px = _row_px(fig, row, cols, _after_k_height(data))
            ys = sorted(y for _, y in labels)
            assert len(labels) == L and all((b - a) / (hi - lo) * px >= K_LABEL_PX - 1e-6 for a, b in zip(ys, ys[1:]))
            assert all(lo <= y <= hi for y in ys), (label, yref)
            order = [k for k, _ in sorted(labels, key=lambda kv: kv[1])]
            assert order == list(range(L, 0, -1)), (label, yref)  # K = L lowest: the synthetic loss falls with K


def test_spread_keeps_order_gaps_and_bounds():
    from interp.report.figures.paper import _spread

    assert _spread([0.0, 5.0, 10.0], 1.0, -100, 100) == [0.0, 5.0, 10.0]  # far apart: untouched
    assert _spread([1.0, 1.0, 1.0], 1.0, -100, 100) == [0.0, 1.0, 2.0]  # crowded: centred on the wishes
    assert _spread([3.0, 0.0, 0.2], 1.0, -100, 100) == [3.0, -0.4, 0.6]  # order of the wishes kept
    assert _spread([9.9, 10.0], 1.0, 0, 10) == [9.0, 10.0]  # pushed down from the top
    assert _spread([0.0, 0.1, 0.2], 1.0, 0, 10) == [0.0, 1.0, 2.0]  # pushed up from the bottom


def test_drift_axis_survives_a_spike():
    """One DIAG projection blown up to 1e30 does not set the loss panel's scale: the axis ends a decade above nine
    tenths of the points, a triangle of the spike's run marks it at the top edge and its hover gives the value."""
    from interp.report.data import DriftCurves, DriftPoint

    data = synthetic([("full4", "full", 4, UNIFORM, 0.1), ("full7", "full", 7, CAT, 0.05)])
    runs = {}
    for e in data.entries:
        L, pts = e.n_layers, []
        for i, step in enumerate((10, 100, 1000, 10_000)):
            loss = 3.0 / (1 + i)
            proj = 1.7e30 if (e.label, step) == ("full7", 1000) else 1.2 * loss
            pts.append(DriftPoint(step, [0.5] * L, [0.5] * L, [3.0] * L, [0.4] * L, [0.2] * L, loss, proj, 0.0, 0.0))
        runs[e.label] = pts
    data.drift = DriftCurves(runs)
    fig = figures.drift(data).figure
    lo, hi = fig.layout.yaxis3.range
    assert hi < 2 and 10**hi > 3.6  # every other point (at most 3.6) on the scale, 1e30 off it
    (mark,) = [t for t in fig.data if t.mode == "markers"]
    assert mark.legendgroup == "full7" and list(mark.x) == [1000] and mark.yaxis == "y3" and mark.marker.symbol
    assert mark.y[0] <= 10**hi and mark.customdata[0] == 1.7e30 and "above the axis" in mark.hovertemplate
    clean = synthetic([("full4", "full", 4, UNIFORM, 0.1)])
    clean.drift = DriftCurves({"full4": runs["full4"]})
    assert figures.drift(clean).figure.layout.yaxis3.range is None  # nothing to clip: autorange
