"""The paper's views (Vladymyrov et al. 2024, Figures 1–7): adjusted loss against depth, per-σ profiles, the Pˡ and Qˡ
heatmaps, and the prediction after K of L layers."""

from __future__ import annotations

import math
from typing import NamedTuple

import plotly.graph_objects as go

from interp.evaluate import paper_value
from interp.report.data import BASELINES, Entry, ReportData
from interp.report.figures.base import (
    RANK,
    Note,
    _axes,
    _color,
    _fmt,
    _in_distribution,
    _pos,
    _priors,
    _slug,
    _subplots,
    _title,
    view,
)
from interp.report.groups import Tag, best_runs, cell, depth_groups, depth_menu, profile_depths, run_tag
from interp.report.style import (
    BASELINE_STYLE,
    FIXED_SIGMA_LABEL,
    arch_label,
    model_color,
    plot_height,
    ramp,
)
from interp.table import PAPER_ORDER
from interp.tasks import as_prior

PAPER_DEPTHS = range(1, 8)  # Table 1 covers 1-7 layers


def _depths(data: ReportData) -> list[int]:
    """Table 1's depths, extended to the deepest model in the report."""
    return list(range(1, max([*PAPER_DEPTHS, *(e.n_layers for e in data.entries)]) + 1))


@view(
    "loss-vs-layers",
    "Adjusted loss vs number of layers",
    height=440,
    section="paper",
    caption=(
        "Filled markers are the models in this report (the line joins the best run per depth, as the paper reports the "
        "best of 5 seeds; faint markers are other runs), open markers the paper's Table 1 for 1–7 layers, horizontal "
        "lines the ridge baselines and the Bayes floor measured on the same sequences. Look for GD++ flattening onto "
        "ConstRR from 3 layers while DIAG and FULL keep falling toward TunedRR and the Bayes floor; a model far above "
        "its open marker is under-trained."
    ),
)
def loss_vs_layers(data: ReportData) -> go.Figure:
    priors, depths = _priors(data), _depths(data)
    fig = _subplots(len(priors), titles=[f"noise {p}" for p in priors], horizontal_spacing=0.08)
    shown = set()
    for c, prior in enumerate(priors, start=1):
        for arch in (a.name for a in PAPER_ORDER):
            shown |= _model_markers(fig, data, prior, arch, c, shown)
            if data.baselines[prior].x_cov is None:  # Table 1 has x ~ N(0, I)
                shown |= _paper_markers(fig, prior, arch, c, shown)
        shown |= _baseline_levels(fig, data.baselines[prior], c, [depths[0] - 0.2, depths[-1] + 0.2], shown)
        fig.update_xaxes(
            title_text="number of layers L", tickvals=depths, range=[depths[0] - 0.3, depths[-1] + 0.3], row=1, col=c
        )
        # one title for the row: a second would reach into the panel beside it
        fig.update_yaxes(title_text="adjusted loss (log)" if c == 1 else None, type="log", row=1, col=c)
    return fig


def _model_markers(fig, data: ReportData, prior: str, arch: str, col: int, shown: set) -> set:
    """The best run per depth joined by a line (the paper reports the best of 5 seeds), other runs faint."""
    ours = sorted((e for e in data.entries if e.noise == prior and e.arch == arch), key=lambda e: e.n_layers)
    cells = best_runs(data)
    best = {e.n_layers: cells[cell(e)] for e in ours}
    added = set()
    others = [e for e in ours if e not in best.values()]
    for kind, group in (("best", [best[L] for L in sorted(best)]), ("other", others)):
        if not group:
            continue
        rec = [data.records[e.label] for e in group]
        colour, key = _color(ours[-1], data), arch if kind == "best" else f"{arch}o"
        fig.add_trace(
            go.Scatter(
                x=[e.n_layers for e in group],
                y=[_pos(r.loss.mean) for r in rec],
                mode="lines+markers" if kind == "best" else "markers",
                name=arch_label(arch) if kind == "best" else f"{arch_label(arch)} (other runs)",
                legendgroup=arch,
                showlegend=key not in shown | added,
                legendrank=RANK[arch] + (0 if kind == "best" else 1),
                marker=dict(
                    size=10 if kind == "best" else 7,
                    color=colour,
                    line=dict(width=1, color="white"),
                    opacity=1 if kind == "best" else 0.55,
                ),
                line=dict(color=colour, width=2),
                customdata=[
                    [e.label, r.loss.mean, r.loss.stderr, paper_value(arch, prior, e.n_layers, x_cov=e.x_cov), e.step]
                    for e, r in zip(group, rec)
                ],
                hovertemplate="%{customdata[0]}<br>L = %{x}<br>adjusted loss %{customdata[1]:.5g}"
                " ± %{customdata[2]:.2g}<br>paper %{customdata[3]:.4g}<br>step %{customdata[4]}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        added.add(key)
    return added


def _paper_markers(fig, prior: str, arch: str, col: int, shown: set) -> set:
    """Table 1's values for 1–7 layers, open markers on a dotted line."""
    paper = [(L, v) for L in PAPER_DEPTHS if (v := paper_value(arch, prior, L)) is not None]
    if not paper:
        return set()
    colour = model_color(arch, 1, [1])
    fig.add_trace(
        go.Scatter(
            x=[L for L, _ in paper],
            y=[_pos(v) for _, v in paper],
            mode="lines+markers",
            name=f"{arch_label(arch)} (paper)",
            legendgroup=f"{arch}-paper",
            showlegend=f"{arch}p" not in shown,
            legendrank=RANK[arch] + 2,
            marker=dict(size=8, symbol="circle-open", color=colour),
            line=dict(color=colour, width=1, dash="dot"),
            opacity=0.75,
            hovertemplate=f"{arch_label(arch)} (paper, Table 1)<br>L = %{{x}}<br>adjusted loss %{{y:.4g}}"
            "<extra></extra>",
        ),
        row=1,
        col=col,
    )
    return {f"{arch}p"}


def _baseline_levels(fig, base, col: int, xs: list[float], shown: set) -> set:
    """Each baseline's adjusted loss as a horizontal line across the depths."""
    added = set()
    for b in BASELINES:
        if b not in base.loss:
            continue
        label, colour, dash = BASELINE_STYLE[b]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[_pos(base.loss[b].mean)] * 2,
                mode="lines",
                name=label,
                legendgroup=b,
                showlegend=b not in shown,
                legendrank=100 + BASELINES.index(b),
                line=dict(color=colour, dash=dash, width=1.6),
                hovertemplate=f"{label}: %{{y:.5g}} (paper {_fmt(base.paper.get(b))})<extra></extra>",
            ),
            row=1,
            col=col,
        )
        added.add(b)
    return added


def _band(data: ReportData, prior: str) -> str:
    return "[0, σ_max]" if as_prior(prior).kind == "uniform" else "the trained σ values"


MENU_TEXT = (
    "The buttons above pick the depths; each architecture shows its best run per depth (lowest adjusted loss, as "
    "the paper reports the best of 5 seeds; hover names the run), other runs are listed in the legend (click to draw)."
)


@view(
    lambda data, prior: f"profiles-{_slug(prior)}",
    lambda data, prior: f"Per-σ profiles, trained on {prior}",
    height=470,
    section="paper",
    each=_priors,
    caption=lambda data, prior: (
        f"Adjusted loss at each fixed evaluation σ, one panel per depth L; the grey band marks {_band(data, prior)}, "
        "the noise seen in training. Within the band a good model follows TunedRR or better. Bayes (prior optimum) is "
        "the Bayes-optimal predictor of the training prior: optimal on average over the prior, not at each fixed σ, "
        "where ConstRR or a model can pass below it. Outside the band (σ above σ_max) look at how gracefully a model "
        "extrapolates. GD++ bends like ConstRR: one noise "
        "level for every sequence. The first view is the paper's (Figure 2, bottom row: 2–7 layers at σ_max = 5; "
        "7 layers on the other priors, Figure 3). " + MENU_TEXT
    ),
)
def sigma_profiles(data: ReportData, prior: str) -> go.Figure:
    entries = [e for e in data.entries if e.noise == prior]
    depths = sorted({e.n_layers for e in entries})
    base, best = data.baselines[prior], best_runs(data)
    fig = _subplots(len(depths), titles=[f"L = {L}" for L in depths], shared_yaxes=True, horizontal_spacing=0.04)
    tags = []
    for c, L in enumerate(depths, start=1):
        _in_distribution(fig, prior, 1, c)
        for b in BASELINES:
            if b not in base.profile:
                continue
            label, colour, dash = BASELINE_STYLE[b]
            label = FIXED_SIGMA_LABEL.get(b, label)  # at a fixed σ the Bayes predictor is no floor
            fig.add_trace(
                go.Scatter(
                    x=base.sigmas,
                    y=[_pos(v) for v in base.profile[b]],
                    mode="lines",
                    name=label,
                    legendgroup=b,
                    legendrank=100 + BASELINES.index(b),
                    line=dict(color=colour, dash=dash, width=1.5),
                    hovertemplate=f"{label}<br>σ = %{{x}}<br>adjusted loss %{{y:.5g}}<extra></extra>",
                ),
                row=1,
                col=c,
            )
            tags.append(Tag(L))
        for e in (x for x in entries if x.n_layers == L):
            r, tag = data.records[e.label], run_tag(data, e, best)
            mean, se, main = r.profile_mean[-1], r.profile_stderr[-1], tag.on is True
            fig.add_trace(
                go.Scatter(
                    x=r.sigmas,
                    y=[_pos(v) for v in mean],
                    mode="lines+markers" if main else "lines",
                    name=arch_label(e.arch) + ("" if main else " (other runs)"),
                    legendgroup=e.arch if main else f"{e.arch}-other",
                    legendrank=RANK.get(e.arch, 40) + (0 if main else 1),
                    line=dict(color=_color(e, data), width=2.4 if main else 1.4),
                    opacity=None if main else 0.55,
                    marker=dict(size=6),
                    customdata=list(zip(mean, se)),
                    hovertemplate=f"{e.label}<br>σ = %{{x}}<br>adjusted loss %{{customdata[0]:.5g}} ± "
                    "%{customdata[1]:.2g}<extra></extra>",
                ),
                row=1,
                col=c,
            )
            tags.append(tag)
        _axes(fig, "evaluation noise σ", "adjusted loss (log)" if c == 1 else None, 1, c, ylog=True)
    vals = [v for e in entries for v in data.records[e.label].profile_mean[-1] if _pos(v)]
    vals += [v for b in base.profile.values() for s, v in zip(base.sigmas, b) if s > 0 and _pos(v)]
    if vals:  # σ = 0 baselines sit at rounding level (1e-13 and below): keep them off the scale
        fig.update_yaxes(range=[math.log10(min(vals)) - 0.2, math.log10(max(vals)) + 0.2])
    groups, default = depth_groups(depths, profile_depths(prior, depths))
    depth_menu(fig, tags, groups, default, layout=lambda shown: _panel_layout(fig, depths, shown))
    return fig


HIDDEN = [0.998, 1.0]  # x domain of a panel the depth menu hides: a sliver at the right edge
SHOWN = 0.99  # the shown panels end here: a hidden panel overlapping a shown one would hide the shown one's band


def _panel_layout(fig: go.Figure, depths: list[int], shown: list[int], spacing: float = 0.04) -> dict:
    """Relayout of a one-row figure with one panel per depth (subplot titles first among its annotations): the
    panels of the `shown` depths side by side over the width, the others hidden with their title and band."""
    width = (SHOWN - spacing * (len(shown) - 1)) / len(shown)
    out = {}
    for k, L in enumerate(depths):
        ax, j = (k + 1 if k else ""), (shown.index(L) if L in shown else None)
        x0, x1 = HIDDEN if j is None else (j * (width + spacing), j * (width + spacing) + width)
        out |= {
            f"xaxis{ax}.domain": [x0, x1],
            f"xaxis{ax}.visible": j is not None,
            f"yaxis{ax}.visible": j is not None,
            f"yaxis{ax}.showticklabels": j == 0,  # the shared scale's ticks on the leftmost panel shown
            f"yaxis{ax}.title.text": "adjusted loss (log)" if j == 0 else "",  # the shared scale's one title
            f"xaxis{ax}.title.text": _sigma_title(len(shown)),
            f"annotations[{k}].visible": j is not None,
            f"annotations[{k}].x": (x0 + x1) / 2,
        }
        out |= {f"shapes[{m}].visible": j is not None for m, sh in enumerate(fig.layout.shapes) if sh.xref == f"x{ax}"}
    return out


def _sigma_title(panels: int) -> str:
    """The x title of one of `panels` side by side: shorter where the panels are narrow (titles would touch)."""
    return "evaluation noise σ" if panels <= 5 else "evaluation σ" if panels <= 8 else "σ"


def _heatmap_order(data: ReportData) -> list[Entry]:
    """The deepest FULL model first, finished runs before running ones, {1,3} noise as in the paper's Figure 4."""
    return sorted(
        data.entries,
        key=lambda e: (e.parameterization.has_omegas, -e.n_layers, not e.complete, e.noise != "categorical:1,3"),
    )


def _heatmap_scale(data: ReportData, e: Entry) -> float:
    r = data.records[e.label]
    return max(abs(v) for mat in (r.P, r.Q) for layer in mat for row in layer for v in row) or 1.0


def _heatmap_menu(fig: go.Figure, data: ReportData) -> None:
    """The model menu (one entry per model, showing its Q and P traces) and the title of the first model."""
    order = _heatmap_order(data)
    menu, start = [], 0
    for e in order:  # each model drew 2 L traces (Q then P of every layer)
        vis = [start <= i < start + 2 * e.n_layers for i in range(len(fig.data))]
        start += 2 * e.n_layers
        menu.append(
            dict(label=f"{e.label}", method="update", args=[{"visible": vis}, {"title.text": _scale_title(data, e)}])
        )
    fig.update_layout(  # top left, one above the other: the title, the menu, then the subplot titles
        title=dict(
            text=_scale_title(data, order[0]),
            xref="paper",
            x=0,
            xanchor="left",
            yref="container",
            y=1,
            yanchor="top",
            pad=dict(t=10),
            font=dict(size=14),
        ),
        updatemenus=[
            dict(
                buttons=menu,
                direction="down",
                x=0,
                xanchor="left",
                y=1,
                yanchor="bottom",
                pad=dict(b=34, l=0, r=0, t=0),
                showactive=True,
                bgcolor="white",
            )
        ],
        margin=dict(t=104),
    )


def _scale_title(data: ReportData, e: Entry) -> str:
    return f"{_title(e)}: colour scale ±{_heatmap_scale(data, e):.3g}"


def _heatmap_caption(data: ReportData) -> str:
    D = data.entries[0].d + 1
    return (
        f"Every layer's {D}×{D} Q (top) and P (bottom), first head, on one symmetric colour scale per model "
        "(red positive, blue negative); pick the model in the menu. The paper (Figure 4) finds trained FULL models "
        '"very diagonal heavy, with some low-rank component": look for the x-block diagonal and the y-entry of '
        "each matrix, and for off-diagonal stripes, which are what DIAG cannot express. DIAG and GD++ are diagonal "
        "by construction."
    )


@view("heatmaps", "Pˡ and Qˡ heatmaps", height=600, section="paper", caption=_heatmap_caption, after=_heatmap_menu)
def heatmaps(data: ReportData) -> go.Figure:
    order = _heatmap_order(data)
    Lmax = max(e.n_layers for e in order)
    titles = [f"Q<sup>{l + 1}</sup>" for l in range(Lmax)] + [f"P<sup>{l + 1}</sup>" for l in range(Lmax)]
    fig = _subplots(Lmax, rows=2, titles=titles, horizontal_spacing=0.03, vertical_spacing=0.2)
    for m, e in enumerate(order):
        r, scale = data.records[e.label], _heatmap_scale(data, e)
        ticks = [f"x{i + 1}" for i in range(len(r.P[0]) - 1)] + ["y"]
        for row_i, (name, mats) in enumerate((("Q", r.Q), ("P", r.P)), start=1):
            for l, z in enumerate(mats):
                fig.add_trace(
                    go.Heatmap(
                        z=z,
                        x=ticks,
                        y=ticks,
                        zmin=-scale,
                        zmax=scale,
                        zmid=0,
                        colorscale="RdBu_r",
                        visible=m == 0,
                        showscale=(row_i == 1 and l == 0),
                        colorbar=dict(title=dict(text="entry"), thickness=14, len=0.9),
                        hovertemplate=f"{e.label}<br>{name}<sup>{l + 1}</sup>[%{{y}}, %{{x}}] = %{{z:.5g}}"
                        "<extra></extra>",
                    ),
                    row=row_i,
                    col=l + 1,
                )
    for c in range(1, Lmax + 1):
        for r_ in (1, 2):
            anchor = (r_ - 1) * Lmax + c
            fig.update_xaxes(title_text="column j", tickfont=dict(size=9), row=r_, col=c, showgrid=False, mirror=True)
            fig.update_yaxes(
                title_text="row i" if c == 1 else None,  # one title per row: the panels sit close together
                tickfont=dict(size=9),
                autorange="reversed",
                row=r_,
                col=c,
                showgrid=False,
                scaleanchor=f"x{anchor if anchor > 1 else ''}",
            )
    return fig


def _after_k_height(data: ReportData) -> int:
    return 330 * max(1, len(_priors_of(_deep(data)))) + 40


class End(NamedTuple):
    """The right end of one curve of the prediction after K layers, where its 'K=k' label goes."""

    k: int
    values: list  # the curve's positive values (for the row's scale)
    sigma: float
    value: float
    colour: str  # of the label


K_LABEL_PX = 12  # px between the 'K=k' labels at the curves' right ends (10 px text)
K_ROOM = 0.14  # the share of each panel's σ range left free on the right for the labels


@view(
    "after-k-layers",
    "Prediction after K layers",
    height=_after_k_height,
    section="paper",
    after=lambda fig, data: fig.update_layout(margin=dict(r=50)),
    caption=(
        "The prediction −y of the query read after K of L layers (README, Conventions), per evaluation σ, light "
        "(K = 1) to dark (K = L); one row per training prior, one column per architecture. Each layer should lower "
        "the curve everywhere; where an intermediate curve sits below the final one the model trades accuracy at that "
        "σ for accuracy elsewhere (the paper's Figures 5 and 7). The labels at the right name each curve's K; where "
        "curves end close together they are spread apart, in the order of the curves' ends. The buttons above pick "
        "the depth L, the deepest first; each panel shows the best run of its prior, architecture and depth (lowest "
        "adjusted loss; the title names it), and the legend's other runs draws the other seeds faint."
    ),
)
def after_k_layers(data: ReportData) -> "go.Figure | Note":
    deep = _deep(data)
    if not deep:
        return Note("No model with two or more layers.")
    priors, depths, best = _priors_of(_deep(data)), sorted({e.n_layers for e in deep}), best_runs(data)
    archs = sorted({e.arch for e in deep}, key=lambda a: RANK.get(a, 40))
    titles = [f"{arch_label(a)}" for _ in priors for a in archs]  # set per depth by the menu
    fig = _subplots(
        len(archs),
        rows=len(priors),
        titles=titles,
        horizontal_spacing=0.06,
        vertical_spacing=0.16 if len(priors) > 1 else 0.1,
        shared_yaxes=True,
    )
    tags, names = [], {}  # names: (cell index, depth) -> title
    ends = {}  # (row, col, depth) -> the best run's curves' right ends [(k, σ, value)]
    for r, prior in enumerate(priors, start=1):
        for c, arch in enumerate(archs, start=1):
            _in_distribution(fig, prior, r, c)
            for L in depths:
                top = best.get((prior, arch, L))
                names[(r - 1) * len(archs) + c - 1, L] = _title(top) if top else f"{arch_label(arch)} L={L}: no run"
                for e in sorted((e for e in deep if cell(e) == (prior, arch, L)), key=lambda e: e is not top):
                    tag = run_tag(data, e, best)
                    tags += [tag] * L
                    found = _k_curves(fig, data, e, r, c, main=tag.on is True)
                    if tag.on is True:
                        ends[r, c, L] = found
            sig = data.records[next(e.label for e in deep if e.noise == prior)].sigmas
            span = (max(sig) - min(sig)) or 1.0
            fig.update_xaxes(range=[min(sig) - 0.03 * span, max(sig) + K_ROOM * span], row=r, col=c)
            _axes(fig, "evaluation noise σ", f"{prior}: adjusted loss (log)" if c == 1 else None, r, c, ylog=True)
    ranges = _row_ranges(ends, priors, depths)
    row_px = {r: _row_px(fig, r, len(archs), _after_k_height(data)) for r in range(1, len(priors) + 1)}
    notes = [  # (depth, label) of every best run's curve
        (L, label)
        for (r, c, L), found in ends.items()
        for label in _k_labels(found, r, c, len(archs), ranges[r, L], row_px[r])
    ]
    fig.update_layout(annotations=[*fig.layout.annotations, *(a for _, a in notes)])  # add_annotation: quadratic

    def layout(shown: list[int]) -> dict:
        out = {f"annotations[{i}].text": names[i, shown[0]] for i in range(len(titles))}
        out |= {f"annotations[{len(titles) + i}].visible": L in shown for i, (L, _) in enumerate(notes)}
        for r in range(1, len(priors) + 1):  # the rows' scales: the labels were placed on them
            rng = ranges.get((r, shown[0]))
            for c in range(1, len(archs) + 1):
                ax = f"yaxis{(r - 1) * len(archs) + c if (r, c) != (1, 1) else ''}"
                out |= {f"{ax}.range": rng, f"{ax}.autorange": False} if rng else {f"{ax}.autorange": True}
        return out

    groups, default = depth_groups(depths, [depths[-1]], every=False)
    depth_menu(fig, tags, groups, default, layout)
    return fig


def _k_curves(fig: go.Figure, data: ReportData, e: Entry, r: int, c: int, main: bool) -> list[End]:
    """One curve per K = 1..L of run e in panel (r, c), another run's thin and faint under 'other runs'; returns the
    curves' right ends (none for a curve without a positive value)."""
    rec, L = data.records[e.label], e.n_layers
    ends = []
    for k in range(1, L + 1):
        mean = rec.profile_mean[k]
        fig.add_trace(
            go.Scatter(
                x=rec.sigmas,
                y=[_pos(v) for v in mean],
                mode="lines",
                name=f"K = {k}" if main else "other runs",
                legendgroup=f"K{k}" if main else "other",
                showlegend=False if main else None,
                line=dict(color=ramp(e.arch, k - 1, L), width=(2.2 if k == L else 1.6) if main else 1.0),
                opacity=None if main else 0.5,
                customdata=[[v, k] for v in mean],
                hovertemplate=f"{e.label}<br>after K = %{{customdata[1]}} of {L} layers<br>σ = %{{x}}"
                f"<br>adjusted loss %{{customdata[0]:.5g}}<extra></extra>",
            ),
            row=r,
            col=c,
        )
        last = next((j for j in range(len(mean) - 1, -1, -1) if _pos(mean[j])), None)
        if last is not None:
            text = ramp(e.arch, k - 1, L, light=0.45)  # the curve's shade, darker: 10 px text on white
            ends.append(End(k, [v for v in mean if _pos(v)], rec.sigmas[last], mean[last], text))
    return ends


def _row_ranges(ends: dict, priors: list[str], depths: list[int]) -> dict:
    """(row, depth) -> the log10 range of the row's shared y axis over the best runs' curves at that depth."""
    out = {}
    for r in range(1, len(priors) + 1):
        for L in depths:
            vals = [
                math.log10(v)
                for (rr, _, LL), found in ends.items()
                if (rr, LL) == (r, L)
                for f in found
                for v in f.values
            ]
            if vals:
                lo, hi = min(vals), max(vals)
                pad = 0.06 * (hi - lo) + 0.02
                out[r, L] = [lo - pad, hi + pad]
    return out


def _row_px(fig: go.Figure, r: int, cols: int, height: int) -> float:
    """Pixel height of the panels of row r (its y domain of the plotting area)."""
    y0, y1 = fig.layout[f"yaxis{(r - 1) * cols + 1 if r > 1 else ''}"].domain
    return (y1 - y0) * plot_height(height)


def _k_labels(found: list[End], r: int, c: int, cols: int, rng: list[float], px: float) -> list[dict]:
    """'K=k' at the right end of each curve of one panel, moved apart to K_LABEL_PX px where ends crowd."""
    if not found or not rng:
        return []
    per_px = (rng[1] - rng[0]) / px  # log10 units per pixel
    wish = [math.log10(f.value) for f in found]
    placed = _spread(wish, K_LABEL_PX * per_px, rng[0] + 6 * per_px, rng[1] - 6 * per_px)
    n = (r - 1) * cols + c
    ax = "" if n == 1 else n
    return [
        dict(
            x=f.sigma,
            y=y,
            xref=f"x{ax}",
            yref=f"y{ax}",
            text=f"K={f.k}",
            showarrow=False,
            xanchor="left",
            xshift=3,
            font=dict(size=10, color=f.colour),
        )
        for f, y in zip(found, placed)
    ]


def _spread(wish: list[float], gap: float, lo: float, hi: float) -> list[float]:
    """Positions at least `gap` apart in the order of `wish`, each group of crowded ones centred on its wishes,
    kept within [lo, hi] where they fit."""
    order = sorted(range(len(wish)), key=lambda i: wish[i])
    groups: list[list[float]] = []  # runs of labels that touch: [wishes]

    def start(g: list[float]) -> float:
        return min(max(sum(g) / len(g) - gap * (len(g) - 1) / 2, lo), hi - gap * (len(g) - 1))

    for i in order:
        groups.append([wish[i]])
        while len(groups) > 1 and start(groups[-1]) < start(groups[-2]) + gap * len(groups[-2]):
            last = groups.pop()
            groups[-1] += last
    placed = [start(g) + gap * j for g in groups for j in range(len(g))]
    out = [0.0] * len(wish)
    for i, y in zip(order, placed):
        out[i] = y
    return out


def _priors_of(entries: list[Entry]) -> list[str]:
    return list(dict.fromkeys(e.noise for e in entries))


def _deep(data: ReportData) -> list[Entry]:
    return [e for e in data.entries if e.n_layers >= 2]
