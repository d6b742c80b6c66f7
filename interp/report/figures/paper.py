"""The paper's views (Vladymyrov et al. 2024, Figures 1–7): adjusted loss against depth, per-σ profiles, the Pˡ and Qˡ
heatmaps, and the prediction after K of L layers."""

from __future__ import annotations

import math
from typing import NamedTuple

import plotly.graph_objects as go

from interp.evaluate import TABLE1_COLUMNS, paper_value, precise
from interp.report.data import BASELINES, LIGHT_DEPTH, Entry, ReportData
from interp.report.figures.base import (
    RANK,
    Note,
    _axes,
    _clip_spikes,
    _color,
    _fmt,
    _in_distribution,
    _level,
    _pos,
    _priors,
    _slug,
    _subplots,
    _title,
    short_path,
    view,
)
from interp.report.groups import (
    Tag,
    best_models,
    best_runs,
    cell,
    depth_groups,
    depth_menu,
    profile_depths,
    run_tag,
)
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
GRID_COLS = 5  # panels per row of a view with one panel per prior (Table 1's ten priors: two rows)


def _depths(data: ReportData) -> list[int]:
    """Table 1's depths, extended to the deepest model in the report."""
    return list(range(1, max([*PAPER_DEPTHS, *(e.n_layers for e in data.models)]) + 1))


def _columns(data: ReportData) -> list[str]:
    """The priors of the views with one panel per prior: with a Table 1 zoo, Table 1's columns in the paper's order
    (then any other prior of the models); else the priors of the models."""
    ours = list(dict.fromkeys(e.noise for e in data.models))
    if not data.light_dirs:
        return ours
    return [*TABLE1_COLUMNS, *(p for p in ours if p not in TABLE1_COLUMNS)]


def _with_table1(data: ReportData) -> list:
    """The views of the Table 1 zoo: drawn once (over Table 1's priors) when the report has one, else not at all."""
    return [_columns(data)] if data.light_dirs else []


def _grid(count: int) -> tuple[int, int]:
    """(rows, columns) of one panel per prior: one row for up to three, else rows of GRID_COLS."""
    cols = count if count <= 3 else GRID_COLS
    return -(-count // cols), cols


def _grid_height(data: ReportData, *args) -> int:
    rows, _ = _grid(len(_columns(data)))
    return 440 if rows == 1 else 110 + 290 * rows


def _cells(priors: list[str]):
    """(row, column, prior) of each panel of a prior grid."""
    _, cols = _grid(len(priors))
    return [(k // cols + 1, k % cols + 1, p) for k, p in enumerate(priors)]


def _prior_grid(priors: list[str]) -> go.Figure:
    rows, cols = _grid(len(priors))
    return _subplots(
        cols,
        rows,
        titles=[f"noise {p}" for p in priors],
        horizontal_spacing=0.08 if rows == 1 else 0.045,
        vertical_spacing=0.17,
    )


@view(
    "loss-vs-layers",
    "Adjusted loss vs number of layers",
    height=_grid_height,
    section="paper",
    probed=False,
    caption=(
        "Vladymyrov et al. 2024, Figure 1, one panel per training prior (all ten of Table 1, in its column order, when "
        "the report has the Table 1 zoo). Filled markers are our models (the line joins the best model per depth, "
        "from the probed runs and the Table 1 zoo together, as the paper reports the best of 5 seeds; faint markers "
        "are the others), open markers the paper's Table 1 for 1–7 layers, horizontal lines the ridge baselines and "
        "the Bayes floor measured on the same sequences (on uniform:0 they are 0, off the log scale). Look for GD++ "
        "flattening onto ConstRR from 3 layers while DIAG and FULL keep falling toward TunedRR and the Bayes floor; a "
        "model far above its open marker is under-trained, a triangle at a panel's top edge a value above its axis "
        "(a diverged model; hover for it)."
    ),
)
def loss_vs_layers(data: ReportData) -> "go.Figure | Note":
    if not data.models:  # only the family's models: their own views draw them
        return Note(
            "No model of the paper's (FULL, DIAG, GD++) in this report; the family's models are in the family views."
        )
    priors, depths = _columns(data), _depths(data)
    fig = _prior_grid(priors)
    shown = set()
    for r, c, prior in _cells(priors):
        for arch in (a.name for a in PAPER_ORDER):
            shown |= _model_markers(fig, data, prior, arch, r, c, shown)
            if data.baselines[prior].x_cov is None:  # Table 1 has x ~ N(0, I)
                shown |= _paper_markers(fig, prior, arch, r, c, shown)
        shown |= _baseline_levels(fig, data.baselines[prior], r, c, [depths[0] - 0.2, depths[-1] + 0.2], shown)
        fig.update_xaxes(
            title_text="number of layers L", tickvals=depths, range=[depths[0] - 0.3, depths[-1] + 0.3], row=r, col=c
        )
        # one title per row: a second would reach into the panel beside it
        fig.update_yaxes(title_text="adjusted loss (log)" if c == 1 else None, type="log", row=r, col=c)
        _clip_spikes(fig, r, c)
    return fig


def _model_markers(fig, data: ReportData, prior: str, arch: str, row: int, col: int, shown: set) -> set:
    """The best model per depth joined by a line (the paper reports the best of 5 seeds), other models faint."""
    ours = sorted((e for e in data.models if e.noise == prior and e.arch == arch), key=lambda e: e.n_layers)
    cells = best_models(data)
    best = {e.n_layers: cells[cell(e)] for e in ours}
    added = set()
    others = [e for e in ours if e not in best.values()]
    for kind, group in (("best", [best[L] for L in sorted(best)]), ("other", others)):
        if not group:
            continue
        est = [data.loss(e) for e in group]
        colour, key = model_color(arch, 1, [1]), arch if kind == "best" else f"{arch}o"
        fig.add_trace(
            go.Scatter(
                x=[e.n_layers for e in group],
                y=[_pos(x.mean) for x in est],
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
                    [e.label, x.mean, x.stderr, paper_value(arch, prior, e.n_layers, x_cov=e.x_cov), e.step, e.seed]
                    for e, x in zip(group, est)
                ],
                hovertemplate="%{customdata[0]}<br>L = %{x}<br>adjusted loss %{customdata[1]:.5g}"
                " ± %{customdata[2]:.2g}<br>paper %{customdata[3]:.4g}<br>step %{customdata[4]}, seed "
                "%{customdata[5]}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        added.add(key)
    return added


def _paper_markers(fig, prior: str, arch: str, row: int, col: int, shown: set) -> set:
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
        row=row,
        col=col,
    )
    return {f"{arch}p"}


def _baseline_levels(fig, base, row: int, col: int, xs: list[float], shown: set) -> set:
    """Each baseline's adjusted loss as a horizontal line across the depths."""
    added = set()
    for b in BASELINES:
        if b not in base.loss:
            continue
        label, colour, dash = BASELINE_STYLE[b]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[_level(base.loss[b].mean)] * 2,
                mode="lines",
                name=label,
                legendgroup=b,
                showlegend=b not in shown,
                legendrank=100 + BASELINES.index(b),
                line=dict(color=colour, dash=dash, width=1.6),
                customdata=[base.loss[b].mean] * 2,  # the exact value, drawn or not
                hovertemplate=f"{label}: %{{customdata:.5g}} (paper {_fmt(base.paper.get(b))})<extra></extra>",
            ),
            row=row,
            col=col,
        )
        added.add(b)
    return added


RATIO_RANGE = 1.0  # the colour scale of ours / paper spans 10^±1 (0.1× to 10×), centred at 1
RATIO_COLORS = [  # over log10(ours / paper) from -1 to 1: green up to 1.1×, yellow at 1.5×, red from 3×
    (0.0, "#1b7837"),
    (0.5, "#5aae61"),
    (0.5 + math.log10(1.1) / 2, "#a6dba0"),
    (0.5 + math.log10(1.5) / 2, "#fee08b"),
    (0.5 + math.log10(3) / 2, "#f46d43"),
    (1.0, "#a50026"),
]
PENDING = "#e4e6ea"


def _column_label(prior: str) -> str:
    """Table 1's column header: σ_max of a uniform prior, the set of a categorical one."""
    p = as_prior(prior)
    return f"U(0, {p.sigma_max:g})" if p.kind == "uniform" else "{" + ",".join(f"{s:g}" for s in p.support) + "}"


def _table1_cell(data: ReportData, e: Entry | None, prior: str, arch: str, L: int) -> tuple:
    """(colour value: log10 of ours / paper clipped to the scale, None when pending; cell text; hover text)."""
    paper = paper_value(arch, prior, L)
    head = f"{arch_label(arch)} L={L} on {prior}<br>paper {_fmt(paper)}"
    if e is None:
        return None, "pending", f"{head}<br>pending: no model yet"
    est = data.loss(e)
    finite = est.mean is not None and math.isfinite(est.mean)
    ratio = est.mean / paper if finite and paper else None
    if not finite:  # a diverged model: as bad as the scale goes
        z, text = RATIO_RANGE, "∞"
    elif ratio is None:  # no paper value to compare with
        z, text = None, "–"
    else:
        z = max(-RATIO_RANGE, min(RATIO_RANGE, math.log10(ratio) if ratio > 0 else -RATIO_RANGE))
        text = _fmt(ratio, ".3g") + ("" if precise(est.mean, est.stderr) else " ○")
    mark = text.endswith("○")
    where = "Table 1 zoo" if e in data.light else "probed run"
    hover = (
        f"{head}<br>ours {_fmt(est.mean, '.4g')} ± {_fmt(est.stderr, '.2g')} ({est.n_seq:,} seq.)<br>ours / paper "
        + (f"{_fmt(ratio, '.3g')} ± {_fmt(est.stderr / paper, '.2g')}" if ratio is not None else "–")
        + ("<br>○: standard error above 10% of the value" if mark else "")
        + f"<br>seed {_fmt(e.seed)}, step {_fmt(e.step)} ({where})<br>{short_path(str(e.checkpoint))}"
    )
    return z, text, hover


@view(
    "table1",
    "Table 1: ours against the paper",
    height=720,
    section="paper",
    probed=False,
    each=_with_table1,
    caption=(
        "Vladymyrov et al. 2024, Table 1: one cell per depth and architecture (rows) and training prior (columns), "
        "coloured by our best model's adjusted loss over the paper's (ours / paper, log scale centred at 1: green at "
        "or below 1.1×, yellow near 1.5×, red from 3×; below 1 we beat the paper). Our best model of a cell is the "
        "lower of the probed runs and the Table 1 zoo; hover for ours ± its standard error, the paper's value, the "
        "ratio, the seed and the file. Grey cells are pending (no model yet); ○ marks a ratio the noise cannot "
        "support (standard error above 10% of the value)."
    ),
)
def table1(data: ReportData, priors: list[str]) -> go.Figure:
    cols = [p for p in priors if p in TABLE1_COLUMNS]
    rows = [(L, a.name) for L in PAPER_DEPTHS for a in PAPER_ORDER]
    best = best_models(data)
    cells = [[_table1_cell(data, best.get((p, arch, L)), p, arch, L) for p in cols] for L, arch in rows]
    x = [_column_label(p) for p in cols]
    y = [f"L={L} {arch_label(arch)}" for L, arch in rows]
    z = [[c[0] for c in row] for row in cells]
    text = [[c[1] for c in row] for row in cells]
    hover = [[c[2] for c in row] for row in cells]
    ticks = [0.1, 0.3, 1, 3, 10]
    fig = go.Figure()
    fig.add_trace(
        go.Heatmap(
            z=[[0 if t == "pending" else None for t in tr] for tr in text],
            x=x,
            y=y,
            colorscale=[[0, PENDING], [1, PENDING]],
            showscale=False,
            hoverongaps=False,
            text=[[t if t == "pending" else "" for t in tr] for tr in text],
            texttemplate="%{text}",
            textfont=dict(size=10, color="#7a808a"),
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=x,
            y=y,
            zmin=-RATIO_RANGE,
            zmax=RATIO_RANGE,
            colorscale=[[p, c] for p, c in RATIO_COLORS],
            hoverongaps=False,
            text=[[t if v is not None else "" for v, t in zip(zr, tr)] for zr, tr in zip(z, text)],
            texttemplate="%{text}",
            textfont=dict(size=10),
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            colorbar=dict(
                title=dict(text="ours / paper"),
                tickvals=[math.log10(t) for t in ticks],
                ticktext=["≤0.1×", "0.3×", "1×", "3×", "≥10×"],
                thickness=14,
            ),
            xgap=2,
            ygap=2,
        )
    )
    fig.update_xaxes(title_text="training noise prior (Table 1's columns)", side="top", showgrid=False)
    fig.update_yaxes(title_text="layers and architecture", autorange="reversed", showgrid=False)
    return fig


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
        tags += [Tag(L)] * _baseline_profiles(fig, base, 1, c)
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
    _profile_range(fig, base, [data.records[e.label].profile_mean[-1] for e in entries])
    groups, default = depth_groups(depths, profile_depths(prior, depths))
    depth_menu(fig, tags, groups, default, layout=lambda shown: _panel_layout(fig, depths, shown))
    return fig


def _baseline_profiles(fig, base, row: int, col: int, legend: bool = True) -> int:
    """Each baseline's adjusted loss at each fixed σ in one panel; returns how many traces it added."""
    added = 0
    for b in BASELINES:
        if b not in base.profile:
            continue
        label, colour, dash = BASELINE_STYLE[b]
        label = FIXED_SIGMA_LABEL.get(b, label)  # at a fixed σ the Bayes predictor is no floor
        fig.add_trace(
            go.Scatter(
                x=base.sigmas,
                y=[_level(v) for v in base.profile[b]],
                mode="lines",
                name=label,
                legendgroup=b,
                showlegend=None if legend else False,
                legendrank=100 + BASELINES.index(b),
                line=dict(color=colour, dash=dash, width=1.5),
                customdata=base.profile[b],
                hovertemplate=f"{label}<br>σ = %{{x}}<br>adjusted loss %{{customdata:.5g}}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        added += 1
    return added


def _profile_range(fig, base, curves: list[list], row=None, col=None) -> None:
    """The log y range of a per-σ panel over the models' curves and the baselines, σ = 0 baselines left out: they
    sit at rounding level (1e-13 and below)."""
    vals = [v for curve in curves for v in curve if _pos(v)]
    vals += [v for b in base.profile.values() for s, v in zip(base.sigmas, b) if s > 0 and _pos(v)]
    if vals:
        at = {} if row is None else dict(row=row, col=col)
        fig.update_yaxes(range=[math.log10(min(vals)) - 0.2, math.log10(max(vals)) + 0.2], **at)


@view(
    "profiles-7-layers",
    "Per-σ profiles of the 7-layer models, every prior",
    height=_grid_height,
    section="paper",
    probed=False,
    each=_with_table1,
    caption=(
        "Vladymyrov et al. 2024, Figure 2 (top row: one panel per uniform σ_max) and Figure 3 (the categorical "
        "priors): the adjusted loss at each fixed evaluation σ from 0 to σ_max + 1 of our best 7-layer GD++, DIAG "
        "and FULL of each training prior (the lower of the probed runs and the Table 1 zoo; hover names it), with "
        "the baselines at the same σ's. The grey band marks the noise seen in training. Within it a good model "
        "follows TunedRR or better; Bayes (prior optimum) is optimal on average over the prior, not at each fixed "
        "σ. Look for GD++ bending like ConstRR and for how gracefully DIAG and FULL extrapolate past σ_max; a "
        "triangle at a panel's top edge marks a value above its axis (hover for it)."
    ),
)
def last_layer_profiles(data: ReportData, priors: list[str]) -> go.Figure:
    fig, best = _prior_grid(priors), best_models(data)
    for r, c, prior in _cells(priors):
        _in_distribution(fig, prior, r, c)
        base, curves = data.baselines[prior], []
        _baseline_profiles(fig, base, r, c, legend=(r, c) == (1, 1))
        for arch in (a.name for a in PAPER_ORDER):
            e = best.get((prior, arch, LIGHT_DEPTH))
            found = None if e is None else data.last_profile(e)
            if found is None:
                continue
            sigmas, mean, se = found
            curves.append(mean)
            fig.add_trace(
                go.Scatter(
                    x=sigmas,
                    y=[_pos(v) for v in mean],
                    mode="lines+markers",
                    name=f"{arch_label(arch)} L={LIGHT_DEPTH}",
                    legendgroup=arch,
                    showlegend=not any(t.legendgroup == arch for t in fig.data),
                    legendrank=RANK[arch],
                    line=dict(color=model_color(arch, 1, [1]), width=2.2),
                    marker=dict(size=5),
                    customdata=list(zip(mean, se)),
                    hovertemplate=f"{e.label}<br>σ = %{{x}}<br>adjusted loss %{{customdata[0]:.5g}} ± "
                    "%{customdata[1]:.2g}<extra></extra>",
                ),
                row=r,
                col=c,
            )
        _axes(fig, "evaluation noise σ", "adjusted loss (log)" if c == 1 else None, r, c, ylog=True)
        _profile_range(fig, base, curves, r, c)
        _clip_spikes(fig, r, c)  # a model that blows up far past σ_max leaves at the top, marked
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


@view(
    "heatmaps",
    "Pˡ and Qˡ heatmaps",
    height=600,
    section="paper",
    caption=_heatmap_caption,
    after=_heatmap_menu,
    per_prior=True,
)
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
    per_prior=True,
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
