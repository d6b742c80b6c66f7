"""Plotly figures of the report: one short function per view, registered with its title and caption.

`@view(id, title, caption, height)` turns a function that draws a figure from the ReportData into one
that returns a Panel (figure, title, what to look for): it applies the theme and, where the function
returns a Note instead, shows that note. Captions sit beside the code that draws them.

The paper's views (Vladymyrov et al. 2024, Figures 1–7): loss vs layers, per-σ profiles,
P^l / Q^l heatmaps, prediction after K layers. interp's own: ω per layer, implicit w^l against solvers,
momentum ‖u^l‖, implied ridge λ, rescaling and effective step, the §5.3 layer schedule, FULL-to-DIAG fits, training
and drift curves.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.evaluate import paper_value
from interp.report.data import BASELINES, Entry, ReportData
from interp.report.groups import Tag, best_runs, cell, depth_groups, depth_menu, profile_depths, run_tag
from interp.report.style import ARCH_NAME, BAND, BAND_STRONG, BASELINE_STYLE, apply_theme, layer_dash, model_color, ramp
from interp.tasks import as_prior

PAPER_DEPTHS = range(1, 8)  # Table 1 covers 1-7 layers
RANK = {"gdpp": 10, "diag": 20, "full": 30}  # legend order: architectures, then baselines
RUN_PALETTE = ["#D8453B", "#2F6DB5", "#3B9B4A", "#E08A1E", "#7B4FA0", "#17A2B8", "#8C564B", "#D45F9E"]


# ---------------------------------------------------------------------------- the panel builder
@dataclass
class Panel:
    """One figure of the report (or a note where there is nothing to draw)."""

    id: str
    title: str
    caption: str  # what to look for
    figure: go.Figure | None = None
    note: str | None = None


@dataclass
class Note:
    """What a view returns when it has nothing to draw (its title may differ from the drawn one)."""

    text: str
    title: str | None = None


Text = "str | Callable[..., str]"  # a fixed string, or one computed from the view's arguments


def view(
    id: Text, title: Text, caption: Text, height: "int | Callable[..., int]", after: Callable[..., None] | None = None
):
    """Register a view: draw(data, *args) -> go.Figure | Note becomes (data, *args) -> Panel.

    id, title, caption and height are fixed or functions of (data, *args); `after(fig, data, *args)`
    adjusts the layout once the theme is applied (what the theme would otherwise overwrite)."""

    def value(x, *args):
        return x(*args) if callable(x) else x

    def wrap(draw):
        @functools.wraps(draw)
        def panel(data: ReportData, *args) -> Panel:
            out = draw(data, *args)
            pid = value(id, data, *args)
            if isinstance(out, Note):
                return Panel(pid, out.title or value(title, data, *args), "", note=out.text)
            apply_theme(out, value(height, data, *args))
            if after is not None:
                after(out, data, *args)
            return Panel(pid, value(title, data, *args), value(caption, data, *args), out)

        return panel

    return wrap


def _subplots(cols: int = 1, rows: int = 1, titles=None, **spacing) -> go.Figure:
    if titles is None:
        return make_subplots(rows=rows, cols=cols, **spacing)
    return make_subplots(rows=rows, cols=cols, subplot_titles=titles, **spacing)


def _axes(fig: go.Figure, x: str, y: str, row=None, col=None, xlog=False, ylog=False, **xkw) -> None:
    """Title both axes of one subplot (log where asked)."""
    at = {} if row is None else dict(row=row, col=col)
    fig.update_xaxes(title_text=x, **({"type": "log"} if xlog else {}), **xkw, **at)
    fig.update_yaxes(title_text=y, **({"type": "log"} if ylog else {}), **at)


def _pos(v):
    """Log axes drop values <= 0 (hover text keeps the exact numbers elsewhere)."""
    return v if v is not None and v > 0 else None


def _fmt(v, spec=".4g") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _name(e: Entry, data: ReportData) -> str:
    """Legend name: architecture and depth, plus the run's label where several models share them."""
    name = f"{ARCH_NAME.get(e.arch, e.arch)} L={e.n_layers}"
    if sum((x.arch, x.n_layers) == (e.arch, e.n_layers) for x in data.entries) > 1:
        name += f" · {e.label}"
    return name + ("" if e.complete else f" (step {e.step})")


def _title(e: Entry) -> str:
    return f"{ARCH_NAME.get(e.arch, e.arch)} L={e.n_layers}, {e.label}" + ("" if e.complete else f" (step {e.step})")


def _color(e: Entry, data: ReportData) -> str:
    return model_color(e.arch, e.n_layers, [x.n_layers for x in data.entries])


def _priors(data: ReportData) -> list[str]:
    return list(dict.fromkeys(e.noise for e in data.entries))


def _in_distribution(fig: go.Figure, noise: str, row=None, col=None) -> None:
    """Shade σ values the model was trained on: [0, σ_max] for uniform, the support points otherwise."""
    prior = as_prior(noise)
    kw = {} if row is None else dict(row=row, col=col, exclude_empty_subplots=False)
    if prior.kind == "uniform":
        fig.add_vrect(x0=0, x1=prior.sigma_max, fillcolor=BAND, line_width=0, layer="below", **kw)
    else:
        for s in prior.support:
            fig.add_vrect(x0=s - 0.15, x1=s + 0.15, fillcolor=BAND_STRONG, line_width=0, layer="below", **kw)


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-")


def _per_layer_lines(
    data: ReportData, fig, getter, row=1, col=1, start: int = 1, log=False, hover="value", fmt=".5g", show_legend=True
) -> None:
    """One line per model of getter(probe, entry) against the layer index (from `start`)."""
    for e in data.entries:
        vals = getter(data.records[e.label].probe, e)
        if vals is None:
            continue
        fig.add_trace(
            go.Scatter(
                x=list(range(start, start + len(vals))),
                y=[(_pos(v) if log else v) for v in vals],
                mode="lines+markers",
                name=_name(e, data),
                legendgroup=e.label,
                showlegend=show_legend,
                line=dict(color=_color(e, data), width=2),
                marker=dict(size=7),
                customdata=vals,
                hovertemplate=f"{e.label}<br>layer %{{x}}<br>{hover} %{{customdata:{fmt}}}<extra></extra>",
            ),
            row=row,
            col=col,
        )


BY_DEPTH_TEXT = (
    "The buttons above pick the depth, the deepest first: the best run of each prior and architecture is drawn, "
    "other runs are listed in the legend (click to draw)."
)


def _by_depth(fig: go.Figure, data: ReportData) -> go.Figure:
    """The depth menu of a view whose traces belong to runs by legend group (the run's label): the deepest runs
    shown first, the best run per (prior, architecture, depth) drawn, other runs listed; other lines always shown."""
    runs, best = {e.label: e for e in data.entries}, best_runs(data)
    tags = [
        run_tag(data, runs[t.legendgroup], best)
        if t.legendgroup in runs
        else Tag(None, True if t.visible is None else t.visible)
        for t in fig.data
    ]
    depths = sorted({t.depth for t in tags if t.depth is not None})
    if depths:
        groups, default = depth_groups(depths, depths[-1:])
        depth_menu(fig, tags, groups, default)
    return fig


# ---------------------------------------------------------------------------- the paper's views
def _depths(data: ReportData) -> list[int]:
    """Table 1's depths, extended to the deepest model in the report."""
    return list(range(1, max([*PAPER_DEPTHS, *(e.n_layers for e in data.entries)]) + 1))


@view(
    "loss-vs-layers",
    "Adjusted loss vs number of layers",
    height=440,
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
        for arch in ("gdpp", "diag", "full"):
            shown |= _model_markers(fig, data, prior, arch, c, shown)
            if data.baselines[prior].x_cov is None:  # Table 1 has x ~ N(0, I)
                shown |= _paper_markers(fig, prior, arch, c, shown)
        shown |= _baseline_levels(fig, data.baselines[prior], c, [depths[0] - 0.2, depths[-1] + 0.2], shown)
        fig.update_xaxes(
            title_text="number of layers L", tickvals=depths, range=[depths[0] - 0.3, depths[-1] + 0.3], row=1, col=c
        )
        fig.update_yaxes(title_text="adjusted loss (log)", type="log", row=1, col=c)
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
                name=ARCH_NAME[arch] if kind == "best" else f"{ARCH_NAME[arch]} (other runs)",
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
            name=f"{ARCH_NAME[arch]} (paper)",
            legendgroup=f"{arch}-paper",
            showlegend=f"{arch}p" not in shown,
            legendrank=RANK[arch] + 2,
            marker=dict(size=8, symbol="circle-open", color=colour),
            line=dict(color=colour, width=1, dash="dot"),
            opacity=0.75,
            hovertemplate=f"{ARCH_NAME[arch]} (paper, Table 1)<br>L = %{{x}}<br>adjusted loss %{{y:.4g}}"
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
    caption=lambda data, prior: (
        f"Adjusted loss at each fixed evaluation σ, one panel per depth L; the grey band marks {_band(data, prior)}, "
        "the noise seen in training. Within the band a good model follows TunedRR or better and approaches the Bayes "
        "floor; outside it (σ above σ_max) look at how gracefully it extrapolates. GD++ bends like ConstRR: one noise "
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
                    name=ARCH_NAME.get(e.arch, e.arch) + ("" if main else " (other runs)"),
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
        _axes(fig, "evaluation noise σ", "adjusted loss (log)" if c == 1 else "adjusted loss", 1, c, ylog=True)
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
            f"yaxis{ax}.title.text": "adjusted loss (log)" if j == 0 else "adjusted loss",
            f"annotations[{k}].visible": j is not None,
            f"annotations[{k}].x": (x0 + x1) / 2,
        }
        out |= {f"shapes[{m}].visible": j is not None for m, sh in enumerate(fig.layout.shapes) if sh.xref == f"x{ax}"}
    return out


def _heatmap_order(data: ReportData) -> list[Entry]:
    """The deepest FULL model first, finished runs before running ones, {1,3} noise as in the paper's Figure 4."""
    return sorted(
        data.entries, key=lambda e: (e.arch != "full", -e.n_layers, not e.complete, e.noise != "categorical:1,3")
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
    fig.update_layout(
        title=dict(text=_scale_title(data, order[0]), x=0.01, font=dict(size=14)),
        updatemenus=[
            dict(
                buttons=menu,
                direction="down",
                x=1.0,
                xanchor="right",
                y=1.16,
                yanchor="top",
                showactive=True,
                bgcolor="white",
            )
        ],
        margin=dict(t=90),
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


@view("heatmaps", "Pˡ and Qˡ heatmaps", height=600, caption=_heatmap_caption, after=_heatmap_menu)
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
                title_text="row i",
                tickfont=dict(size=9),
                autorange="reversed",
                row=r_,
                col=c,
                showgrid=False,
                scaleanchor=f"x{anchor if anchor > 1 else ''}",
            )
    return fig


@view(
    "after-k-layers",
    "Prediction after K layers",
    height=lambda data: 330 * max(1, len(_priors_of(_deep(data)))) + 40,
    after=lambda fig, data: fig.update_layout(margin=dict(r=50)),
    caption=(
        "The prediction −y of the query read after K of L layers (README, Conventions), per evaluation σ, light "
        "(K = 1) to dark (K = L); one row per training prior, one column per architecture. Each layer should lower "
        "the curve everywhere; where an intermediate curve sits below the final one the model trades accuracy at that "
        "σ for accuracy elsewhere (the paper's Figures 5 and 7). The buttons above pick the depth L, the deepest "
        "first; each panel shows the best run of its prior, architecture and depth (lowest adjusted loss; the "
        "title names it), and the legend's other runs draws the other seeds faint."
    ),
)
def after_k_layers(data: ReportData) -> "go.Figure | Note":
    deep = _deep(data)
    if not deep:
        return Note("No model with two or more layers.")
    priors, depths, best = _priors_of(deep), sorted({e.n_layers for e in deep}), best_runs(data)
    archs = sorted({e.arch for e in deep}, key=lambda a: RANK.get(a, 40))
    titles = [f"{ARCH_NAME.get(a, a)}" for _ in priors for a in archs]  # set per depth by the menu
    fig = _subplots(
        len(archs),
        rows=len(priors),
        titles=titles,
        horizontal_spacing=0.06,
        vertical_spacing=0.16 if len(priors) > 1 else 0.1,
        shared_yaxes=True,
    )
    tags, notes, names = [], [], {}  # notes: (depth, K-label) of the best runs; names: (cell index, depth) -> title
    for r, prior in enumerate(priors, start=1):
        for c, arch in enumerate(archs, start=1):
            _in_distribution(fig, prior, r, c)
            for L in depths:
                top = best.get((prior, arch, L))
                names[(r - 1) * len(archs) + c - 1, L] = _title(top) if top else f"{ARCH_NAME[arch]} L={L}: no run"
                for e in sorted((e for e in deep if cell(e) == (prior, arch, L)), key=lambda e: e is not top):
                    tag = run_tag(data, e, best)
                    tags += [tag] * L
                    notes += [(L, a) for a in _k_curves(fig, data, e, r, c, main=tag.on is True) if tag.on is True]
            _axes(
                fig,
                "evaluation noise σ",
                f"{prior}: adjusted loss (log)" if c == 1 else "adjusted loss",
                r,
                c,
                ylog=True,
            )
    fig.update_layout(annotations=[*fig.layout.annotations, *(a for _, a in notes)])  # add_annotation: quadratic

    def layout(shown: list[int]) -> dict:
        out = {f"annotations[{i}].text": names[i, shown[0]] for i in range(len(titles))}
        return out | {f"annotations[{len(titles) + i}].visible": L in shown for i, (L, _) in enumerate(notes)}

    groups, default = depth_groups(depths, [depths[-1]], every=False)
    depth_menu(fig, tags, groups, default, layout)
    return fig


def _k_curves(fig: go.Figure, data: ReportData, e: Entry, r: int, c: int, main: bool) -> list[dict]:
    """One curve per K = 1..L of run e in panel (r, c), another run's thin and faint under 'other runs'; returns the
    'K=k' labels for the right ends of the curves."""
    rec, L = data.records[e.label], e.n_layers
    labels = []
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
            t = fig.data[-1]
            labels.append(
                dict(
                    x=rec.sigmas[last],
                    y=math.log10(mean[last]),
                    xref=t.xaxis,
                    yref=t.yaxis,
                    text=f"K={k}",
                    showarrow=False,
                    xanchor="left",
                    font=dict(size=10, color=ramp(e.arch, k - 1, L)),
                )
            )
    return labels


def _priors_of(entries: list[Entry]) -> list[str]:
    return list(dict.fromkeys(e.noise for e in entries))


def _deep(data: ReportData) -> list[Entry]:
    return [e for e in data.entries if e.n_layers >= 2]


# ---------------------------------------------------------------------------- interp's probes
OMEGA_LABELS = ["ω<sub>xx</sub>", "ω<sub>xy</sub>", "ω<sub>yx</sub>", "ω<sub>yy</sub>"]


@view(
    "omegas",
    "ω per layer",
    height=430,
    caption=(
        "The four products ω_xx = Σp_x q_x, ω_xy, ω_yx, ω_yy of each layer (Vladymyrov et al. 2024, DIAG; README, "
        "Conventions): read from the weights for "
        "DIAG and GD++, from the nearest DIAG operator (orthogonal projection) for FULL. ω_yx < 0 is a gradient step "
        "on y, ω_xx < 0 preconditions x, ω_xy ≠ 0 builds the momentum buffer u, ω_yy < 0 shrinks the prediction more "
        "for noisier sequences (§5.2). GD++ has ω_xy = ω_yy = 0 by construction. " + BY_DEPTH_TEXT
    ),
)
def omegas(data: ReportData) -> go.Figure:
    fig = _subplots(4, titles=OMEGA_LABELS, horizontal_spacing=0.07)
    for k in range(4):
        _per_layer_lines(
            data,
            fig,
            lambda p, e, k=k: [om[k] for om in p.omegas.omega],
            1,
            k + 1,
            hover=OMEGA_LABELS[k].replace("<sub>", "_").replace("</sub>", ""),
            show_legend=k == 0,
        )
        _axes(fig, "layer l", "value", 1, k + 1, dtick=1)
    return _by_depth(fig, data)


SOLVER_REFS = [
    ("relerr_ols", "vs OLS"),
    ("relerr_ridge_oracle", "vs oracle ridge (λ = σ²)"),
    ("relerr_gd", "vs GD-l (tuned step)"),
]


@view(
    "solvers",
    "Implicit wˡ against OLS, ridge and GD",
    height=420,
    caption=(
        "Theorem 4.1: after l layers the model predicts ⟨wˡ, x_t⟩ with a context-dependent wˡ. Shown is the mean "
        "relative distance of wˡ to OLS, to the oracle ridge solution (λ = σ², the target) and to l steps of gradient "
        "descent with a tuned step. Look for deep DIAG/FULL models moving away from GD-l and toward the oracle ridge; "
        "OLS is close only for nearly noiseless sequences. " + BY_DEPTH_TEXT
    ),
)
def solvers(data: ReportData) -> go.Figure:
    fig = _subplots(3, titles=[t for _, t in SOLVER_REFS], shared_yaxes=True, horizontal_spacing=0.04)
    for c, (key, _) in enumerate(SOLVER_REFS, start=1):
        _per_layer_lines(
            data,
            fig,
            lambda p, e, key=key: getattr(p.solvers, key)[1:],
            1,
            c,
            log=True,
            hover="‖w<sup>l</sup> − w<sub>ref</sub>‖/‖w<sub>ref</sub>‖",
            show_legend=c == 1,
        )
        _axes(fig, "layer l", "relative distance (log)" if c == 1 else "relative distance", 1, c, ylog=True, dtick=1)
    return _by_depth(fig, data)


@view(
    "momentum",
    "Momentum ‖uˡ‖ by layer",
    height=380,
    caption=(
        "uˡ is the part of every x token that copies its own label (x_iˡ = Mˡ x_i + y_i uˡ); Lemma 4.4 shows it acts "
        "as the velocity buffer of a momentum method, fed by ω_xy. GD++ stays at zero by construction; a DIAG or FULL "
        "model that grows u uses momentum. " + BY_DEPTH_TEXT
    ),
)
def momentum(data: ReportData) -> go.Figure:
    fig = _subplots()
    _per_layer_lines(data, fig, lambda p, e: p.momentum.u_norm, start=0, hover="mean ‖u<sup>l</sup>‖")
    _axes(fig, "layer l (0 = input)", "mean ‖u<sup>l</sup>‖", dtick=1)
    return _by_depth(fig, data)


@view(
    "implied-lambda",
    "Implied ridge λ against the true σ",
    height=470,
    caption=(
        "For each sequence, the λ whose ridge solution (Σ + λI)⁻¹α is nearest to the model's final wᴸ; medians per "
        "σ bin. A model that estimates the noise follows the dashed λ = σ² line; a constant-λ ridge (GD++, "
        "ConstRR) is flat. The gap between the curves and the diagonal is the price of not knowing σ. " + BY_DEPTH_TEXT
    ),
)
def implied_lambda(data: ReportData) -> go.Figure:
    fig = _subplots()
    sig_all = []
    for e in data.entries:
        p = data.records[e.label].probe.implied_lambda
        lam = p.median_by_sigma[-1]
        sig_all += p.sigma
        fig.add_trace(
            go.Scatter(
                x=p.sigma,
                y=[_pos(v) for v in lam],
                mode="lines+markers",
                name=_name(e, data),
                legendgroup=e.label,
                line=dict(color=_color(e, data), width=2),
                marker=dict(size=7),
                customdata=lam,
                hovertemplate=f"{e.label}, last layer<br>σ ≈ %{{x:.3g}}<br>median implied λ %{{customdata:.5g}}"
                "<extra></extra>",
            )
        )
    if sig_all:
        lo, hi = min(sig_all), max(sig_all)
        xs = [lo + i * (hi - lo) / 60 for i in range(61)]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[x * x for x in xs],
                mode="lines",
                name="oracle λ = σ²",
                line=dict(color="#1A1A1A", dash="dash", width=1.5),
                hovertemplate="oracle λ = σ² = %{y:.4g} at σ = %{x:.3g}<extra></extra>",
            )
        )
    for prior in _priors(data):
        lam_c = next(
            (data.records[e.label].probe.const_ridge.lambda_constrr for e in data.entries if e.noise == prior), None
        )
        if lam_c and sig_all:
            fig.add_trace(
                go.Scatter(
                    x=[min(sig_all), max(sig_all)],
                    y=[lam_c, lam_c],
                    mode="lines",
                    name=f"ConstRR λ ({prior})",
                    line=dict(color=BASELINE_STYLE["constrr"][1], dash="dot", width=1.6),
                    hovertemplate=f"ConstRR λ tuned on {prior}: {lam_c:.4g}<extra></extra>",
                )
            )
    _axes(fig, "true noise σ of the sequence (bin centre)", "implied ridge λ (log)", ylog=True)
    return _by_depth(fig, data)


@view(
    "rescaling-step",
    "Rescaling and effective step against σ",
    height=470,
    caption=(
        "Per layer (layer 1 dotted, 2 dashed, 3 dash-dot, the last solid), the median over sequences in each σ bin. "
        "Left: the factor 1 + ω_yy λˡ by which layer l multiplies every label; below 1 and falling with σ is "
        "ridge-like shrinkage. Right: the gradient step a layer takes, which shrinks for noisy sequences when "
        "ω_xy, ω_yx < 0 (early stopping). " + BY_DEPTH_TEXT
    ),
)
def rescaling_and_step(data: ReportData) -> go.Figure:
    fig = _subplots(
        2,
        titles=[
            "rescaling 1 + ω<sub>yy</sub><sup>l</sup> λ<sup>l</sup> (§5.2)",
            "effective step −ω<sub>yx</sub><sup>l</sup>(1 + ω<sub>xy</sub><sup>l−1</sup>ρ) (§5.3)",
        ],
        horizontal_spacing=0.09,
    )
    for c, key in enumerate(("rescaling", "effective_step"), start=1):
        for e in data.entries:
            p, L = getattr(data.records[e.label].probe, key), e.n_layers
            for l, vals in enumerate(p.median_by_sigma, start=1):
                fig.add_trace(
                    go.Scatter(
                        x=p.sigma,
                        y=vals,
                        mode="lines+markers",
                        name=_name(e, data),
                        legendgroup=e.label,
                        showlegend=(c == 1 and l == 1),
                        line=dict(color=_color(e, data), width=2, dash=layer_dash(l, L)),
                        marker=dict(size=5),
                        hovertemplate=f"{e.label}, layer {l}<br>σ ≈ %{{x:.3g}}<br>median %{{y:.5g}}<extra></extra>",
                    ),
                    row=1,
                    col=c,
                )
        fig.update_xaxes(title_text="true noise σ of the sequence (bin centre)", row=1, col=c)
    fig.update_yaxes(title_text="factor on every y", row=1, col=1)
    fig.update_yaxes(title_text="GD step size", row=1, col=2)
    return _by_depth(fig, data)


SCHEDULE_CODE = {"neither": 0, "x-from-y": 1, "y-step": 2, "both": 3}
SCHEDULE_TEXT = {"neither": "–", "x-from-y": "x←y", "y-step": "y←x", "both": "both"}
SCHEDULE_COLORS = ["#ECECEC", "#E08A1E", "#2F6DB5", "#7B4FA0"]  # neither, x-from-y, y-step, both
ARROWS = {"x<-x": "x←x", "x<-y": "x←y", "y<-x": "y←x", "y<-y": "y←y"}


def _scheduled(data: ReportData) -> list[Entry]:
    """The models whose probe record has a layer schedule (records cached before it existed have none)."""
    return [e for e in data.entries if (p := data.records[e.label].probe) is not None and p.schedule is not None]


def _schedule_hover(e: Entry, s, l: int) -> str:
    sizes = ", ".join(f"{ARROWS.get(b, b)} {_fmt(v, '.3f')}" for b, v in zip(s.blocks, s.relative[l]))
    out = f"{e.label}, layer {l + 1}: {s.labels[l] if s.labels else 'no ablation'}<br>relative size: {sizes}"
    if s.increase is not None:
        inc = ", ".join(
            f"{ARROWS.get(b, b)} {'blow-up' if m is None else format(m, '+.3g')}" + (f" ({n} blow-ups)" if n else "")
            for b, m, n in zip(s.blocks, s.increase[l], s.blowups[l])
        )
        out += f"<br>Δ adjusted loss when zeroed: {inc}<br>(model {s.base:.4g}, {s.ablation_seq} sequences)"
    return out


@view(
    "schedule",
    "Layer schedule (§5.3): x-from-y and y-step layers",
    height=lambda data: max(380, 140 + 22 * len(_scheduled(data))),
    caption=(
        "§5.3's two-step update: a layer that moves the x's by the labels (x←y), then a gradient step on the labels "
        "(y←x). Left, one row per model: each layer's label from zeroing one block of its update at a time "
        "(interp.probes.schedule): x←y (orange) when zeroing its x←y block raises the adjusted loss by more than 5 % "
        "of the model's and 2 standard errors (or blows it up), y←x (blue) the same for its y←x block, both "
        "(purple), – neither; hover shows all four blocks' sizes and loss increases. Right: the relative size of "
        "each layer's x←y update (solid; ‖x←y update‖ / ‖x‖ over the context tokens, median over sequences) and y←x "
        "update (dotted; / ‖y‖). Look for runs of x←y layers followed by a y←x layer, and for FULL doing its x←y "
        "updates in layers whose DIAG projection has ω_xy ≈ 0. " + BY_DEPTH_TEXT
    ),
)
def schedule(data: ReportData) -> "go.Figure | Note":
    entries = _scheduled(data)
    if not entries:
        return Note("No layer schedule in these records (computed by interp.probes.schedule).")
    Lmax = max(e.n_layers for e in entries)
    fig = _subplots(
        2,
        titles=["label per layer (single-block ablation)", "relative size: x←y (solid), y←x (dotted)"],
        horizontal_spacing=0.16,
        column_widths=[0.45, 0.55],
    )
    z, text, hover = [], [], []
    for e in entries:
        s = data.records[e.label].probe.schedule
        L = len(s.relative)
        labels = s.labels or [None] * L
        z.append([SCHEDULE_CODE.get(labels[l]) if l < L else None for l in range(Lmax)])
        text.append([(SCHEDULE_TEXT.get(labels[l], "?") if l < L else "") for l in range(Lmax)])
        hover.append([_schedule_hover(e, s, l) if l < L else "" for l in range(Lmax)])
    n = len(SCHEDULE_COLORS)  # one flat colour per label code 0..3 on z in [-0.5, 3.5]
    scale = [[t, c] for k, c in enumerate(SCHEDULE_COLORS) for t in (k / n, (k + 1) / n)]
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=list(range(1, Lmax + 1)),
            y=[e.label for e in entries],
            text=text,
            texttemplate="%{text}",
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            hoverongaps=False,
            zmin=-0.5,
            zmax=3.5,
            colorscale=scale,
            showscale=False,
            xgap=2,
            ygap=2,
        ),
        row=1,
        col=1,
    )
    for e in entries:
        s, colour = data.records[e.label].probe.schedule, _color(e, data)
        layers = list(range(1, len(s.relative) + 1))
        for k, dash in ((1, "solid"), (2, "dot")):
            vals = [row[k] for row in s.relative]
            fig.add_trace(
                go.Scatter(
                    x=layers,
                    y=[_pos(v) for v in vals],
                    mode="lines+markers",
                    name=_name(e, data),
                    legendgroup=e.label,
                    showlegend=k == 1,
                    line=dict(color=colour, width=2, dash=dash),
                    marker=dict(size=6),
                    customdata=[[v, lab] for v, lab in zip(vals, s.labels or [""] * len(vals))],
                    hovertemplate=f"{e.label}<br>layer %{{x}} (%{{customdata[1]}})<br>{ARROWS[s.blocks[k]]} "
                    "relative size %{customdata[0]:.4g}<extra></extra>",
                ),
                row=1,
                col=2,
            )
    fig.update_xaxes(title_text="layer l", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="model", autorange="reversed", tickfont=dict(size=10), row=1, col=1)
    _axes(fig, "layer l", "relative size (log)", 1, 2, ylog=True, dtick=1)
    return _by_depth(fig, data)


@view(
    "full-fits",
    "FULL-to-DIAG fit and the remainder's spectrum",
    height=420,
    caption=(
        "Each FULL layer computes a linear map S ↦ Σ P S Q of the context statistics. Left: R² of that map fitted by "
        "the 4-parameter DIAG form on the layer's own inputs (hover: the loss change when the layer is replaced by its "
        "DIAG projection). Middle: the weight-space share outside DIAG. Right: singular values of the remainder, one "
        "line per layer (last layer solid): a flat spectrum is noise, one dominant value is a low-rank component. "
        + BY_DEPTH_TEXT
    ),
)
def full_fits(data: ReportData) -> "go.Figure | Note":
    fulls = [e for e in data.entries if e.arch == "full"]
    if not fulls:
        return Note("No FULL model in this report.", title="FULL-to-DIAG fit and the remainder")
    fig = _subplots(
        3,
        titles=["DIAG-form fit R²", "share of ‖K‖² outside DIAG", "remainder singular values"],
        horizontal_spacing=0.08,
    )
    for e in fulls:
        p, colour, L = data.records[e.label].probe, _color(e, data), e.n_layers
        delta = (p.ablation.delta_per_layer if p.ablation else None) or [None] * L
        r2, layers = p.fits.diag.r2, list(range(1, L + 1))
        fig.add_trace(
            go.Scatter(
                x=layers,
                y=r2,
                mode="lines+markers",
                name=_name(e, data),
                legendgroup=e.label,
                line=dict(color=colour, width=2),
                marker=dict(size=8),
                customdata=[[v, _fmt(d, "+.3g")] for v, d in zip(r2, delta)],
                hovertemplate=f"{e.label}<br>layer %{{x}}<br>R² %{{customdata[0]:.5f}}"
                "<br>Δ adjusted loss if DIAG-projected %{customdata[1]}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        share = p.projection.share_outside
        fig.add_trace(
            go.Scatter(
                x=layers,
                y=[_pos(v) for v in share],
                mode="lines+markers",
                name=_name(e, data),
                legendgroup=e.label,
                showlegend=False,
                line=dict(color=colour, width=2),
                marker=dict(size=8),
                customdata=share,
                hovertemplate=f"{e.label}<br>layer %{{x}}<br>off-DIAG share %{{customdata:.4g}}<extra></extra>",
            ),
            row=1,
            col=2,
        )
        for l, sv in enumerate(p.projection.remainder_sv, start=1):
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(sv) + 1)),
                    y=[_pos(v) for v in sv],
                    mode="lines+markers",
                    name=_name(e, data),
                    legendgroup=e.label,
                    showlegend=False,
                    line=dict(color=colour, width=1.6, dash=layer_dash(l, L)),
                    marker=dict(size=5),
                    customdata=sv,
                    hovertemplate=f"{e.label}, layer {l}<br>singular value #%{{x}}: %{{customdata:.4g}}<extra></extra>",
                ),
                row=1,
                col=3,
            )
    fig.update_xaxes(title_text="layer l", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="layer l", dtick=1, row=1, col=2)
    fig.update_xaxes(title_text="index (largest first)", dtick=1, row=1, col=3)
    fig.update_yaxes(title_text="R²", row=1, col=1)
    fig.update_yaxes(title_text="share (log)", type="log", row=1, col=2)
    fig.update_yaxes(title_text="singular value (log)", type="log", row=1, col=3)
    return _by_depth(fig, data)


# ---------------------------------------------------------------------------- over training
@view(
    "training",
    "Training curves",
    height=400,
    caption=(
        "The training objective (½·MSE on fresh batches, not adjusted) logged during training, as a running median "
        "over 7 log points (deep models see rare batches with enormous loss; hover shows the logged value; the "
        "axis starts clipped above the spikes, the autoscale button shows them). Plateaus followed by sudden drops "
        "are typical of deep unnormalised models (Vladymyrov et al. 2024, training setup); a curve still falling at "
        "the end means more steps would help. " + BY_DEPTH_TEXT
    ),
)
def training_curves(data: ReportData) -> "go.Figure | Note":
    fig = _subplots()
    for e in data.entries:
        cur = data.curves.get(e.label)
        if not cur:
            continue
        smooth = _rolling_median(cur["loss"], 7)
        fig.add_trace(
            go.Scatter(
                x=cur["step"],
                y=[_pos(v) for v in smooth],
                mode="lines",
                name=_name(e, data),
                legendgroup=e.label,
                line=dict(color=_color(e, data), width=1.8),
                customdata=list(zip(smooth, cur["loss"])),
                hovertemplate=f"{e.label}<br>step %{{x}}<br>running median %{{customdata[0]:.5g}}"
                "<br>logged ½·MSE %{customdata[1]:.5g}<extra></extra>",
            )
        )
    if not fig.data:
        return Note("No run directory with metrics.jsonl among the models.")
    _axes(fig, "training step (log)", "training loss ½·MSE (log)", xlog=True, ylog=True)
    vals = sorted(v for t in fig.data for v in t.y if v is not None)
    # loss spikes of deep models (up to 1e18) would flatten everything else: start clipped at 10x the 90th percentile
    if vals:
        fig.update_yaxes(range=[math.log10(vals[0]) - 0.1, math.log10(vals[int(0.9 * (len(vals) - 1))]) + 1])
    return _by_depth(fig, data)


DRIFT_CURVES = ((1, 1, "share_outside", True), (1, 2, "r2_diag", False), (2, 2, "remainder_effective_rank", False))


@view(
    "drift",
    "Drift of FULL models over training",
    height=720,
    caption=(
        "Measured on a few checkpoints of every FULL run (interp.probes.drift; one colour per run; layer 1 dotted, "
        "2 dashed, 3 dash-dot, the last solid). Does FULL drift "
        "toward the DIAG structure? Look for the share outside DIAG falling and R² rising as training proceeds, and "
        "for the dotted DIAG-projection loss meeting the model's loss: where they stay apart, the non-DIAG remainder "
        "carries function. A low effective rank of the remainder means a low-rank component, a high one noise. "
        + BY_DEPTH_TEXT
    ),
)
def drift(data: ReportData) -> "go.Figure | Note":
    d = data.drift
    if not d.available:
        return Note(f"Drift curves are not available: {d.reason or ''}", title="Drift over training steps")
    titles = [
        "share of ‖K‖² outside DIAG",
        "DIAG-form fit R²",
        "adjusted loss: model (solid), DIAG projection (dotted)",
        "effective rank of the remainder",
    ]
    fig = _subplots(2, rows=2, titles=titles, horizontal_spacing=0.09, vertical_spacing=0.16)
    for i, (label, recs) in enumerate(d.runs.items()):
        e = next(x for x in data.entries if x.label == label)
        colour = RUN_PALETTE[i % len(RUN_PALETTE)] if len(d.runs) > 1 else _color(e, data)  # runs apart, not by arch
        L, steps = e.n_layers, [r.step for r in recs]
        first = True
        for row, col, key, log in DRIFT_CURVES:
            if any(getattr(r, key) is None for r in recs):
                continue
            for l in range(L):
                vals = [getattr(r, key)[l] for r in recs]
                fig.add_trace(
                    go.Scatter(
                        x=steps,
                        y=[(_pos(v) if log else v) for v in vals],
                        mode="lines+markers",
                        name=_name(e, data),
                        legendgroup=label,
                        showlegend=first,
                        line=dict(color=colour, width=1.8, dash=layer_dash(l + 1, L)),
                        marker=dict(size=5),
                        customdata=vals,
                        hovertemplate=f"{label}, layer {l + 1}<br>step %{{x}}<br>{key} %{{customdata:.5g}}"
                        "<extra></extra>",
                    ),
                    row=row,
                    col=col,
                )
                first = False
        for key, dash in (("loss", "solid"), ("loss_diag_projection", "dot")):
            if any(getattr(r, key) is None for r in recs):
                continue
            vals = [getattr(r, key) for r in recs]
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=[_pos(v) for v in vals],
                    mode="lines+markers",
                    name=_name(e, data),
                    legendgroup=label,
                    showlegend=False,
                    line=dict(color=colour, width=1.8, dash=dash),
                    marker=dict(size=5),
                    customdata=[[v, r.gap_diag_projection] for v, r in zip(vals, recs)],
                    hovertemplate=f"{label} ({'model' if key == 'loss' else 'DIAG projection'})"
                    "<br>step %{x}<br>adjusted loss %{customdata[0]:.5g}<br>gap %{customdata[1]:+.4g}<extra></extra>",
                ),
                row=2,
                col=1,
            )
    for row, col, ytitle, log in (
        (1, 1, "share (log)", True),
        (1, 2, "R²", False),
        (2, 1, "adjusted loss (log)", True),
        (2, 2, "effective rank", False),
    ):
        fig.update_xaxes(title_text="training step (log)", type="log", row=row, col=col)
        fig.update_yaxes(title_text=ytitle, type="log" if log else "linear", row=row, col=col)
    return _by_depth(fig, data)


def _rolling_median(values: list, window: int) -> list:
    half = window // 2
    out = []
    for i in range(len(values)):
        part = sorted(v for v in values[max(0, i - half) : i + half + 1] if v is not None)
        out.append(part[len(part) // 2] if part else None)
    return out


# ---------------------------------------------------------------------------- the report's sections
def paper_panels(data: ReportData) -> list[Panel]:
    return [
        loss_vs_layers(data),
        *(sigma_profiles(data, p) for p in _priors(data)),
        heatmaps(data),
        after_k_layers(data),
    ]


def interp_panels(data: ReportData) -> list[Panel]:
    return [
        omegas(data),
        solvers(data),
        momentum(data),
        implied_lambda(data),
        rescaling_and_step(data),
        schedule(data),
        full_fits(data),
    ]


def trajectory_panels(data: ReportData) -> list[Panel]:
    return [training_curves(data), drift(data)]
