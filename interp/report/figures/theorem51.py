"""Theorem 5.1 (Vladymyrov et al. 2024) on the trained GD++ at σ = 0: the loss after K layers of every GD++-L on a
noise-free prior, and the preconditioning map s ↦ s(1 − γs)² measured layer by layer on the deepest of them."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.evaluate import paper_value
from interp.report.data import Entry, ReportData
from interp.report.figures.base import Note, _axes, _fmt, _pos, view
from interp.report.style import arch_label, model_color

CURVE_POINTS = 120  # points of the curve s(1 − γs)² per panel
LOSS_TITLE = "loss after K layers (log)"
TOP_WIDTH = 0.7  # of the plotting width: the loss panel's, the legend beside it (the layer panels take it all)
NONE_TEXT = (
    "No GD++ model on a noise-free prior (uniform:0) in this report: the view reads the Table 1 zoo's "
    "experiments/zoo/best/uniform0/gdpp<L>.safetensors, or any GD++ run trained on uniform:0."
)


def _models(data: ReportData) -> list[tuple[Entry, object]]:
    """(entry, interp.probes.Theorem51) of every GD++ model at σ = 0 the report holds, shallow to deep."""
    by_label = {e.label: e for e in data.models}
    out = [(by_label[k], r) for k, r in data.theorem51.items() if k in by_label]
    return sorted(out, key=lambda er: (er[0].n_layers, er[0].label))


def _legend_beside_loss(fig: go.Figure, data: ReportData, models: list | None = None) -> None:
    """The legend in the room right of the loss panel, not beside the figure (where it would narrow the one panel
    per layer below to the width of their titles at 5 layers and more); left below the figure where the theme lays a
    long legend out in rows."""
    if fig.layout.legend.orientation == "h":
        return
    fig.update_layout(
        xaxis=dict(domain=[0, TOP_WIDTH]),
        legend=dict(x=TOP_WIDTH + 0.03, xanchor="left", y=1, yanchor="top"),
    )
    fig.update_annotations(x=TOP_WIDTH / 2, selector=dict(text=LOSS_TITLE))  # its title over it again


def _with_gdpp0(data: ReportData) -> list:
    """The view's one panel where the report holds a GD++ model at σ = 0, else none (the report leaves it out)."""
    models = _models(data)
    return [models] if models else []


@view(
    "theorem51",
    "Theorem 5.1: GD++ at σ = 0",
    section="probes",
    height=780,
    probed=False,
    each=_with_gdpp0,
    after=_legend_beside_loss,
    caption=(
        "Vladymyrov et al. 2024, Theorem 5.1: GD++ reaches error ε after O(log κ + log log 1/ε) layers; each layer "
        "maps every eigenvalue s of the context's Σ = Σ_i x_i x_iᵀ to s(1 − γs)² with γ = −ω_xx (γ·s_max = 1/3 is "
        "the theorem's choice), shrinking the condition number κ, and once κ is near 1 the error squares per layer "
        "(log 1/ε doubles). Top: the loss after K layers (½·MSE: at σ = 0 it is the adjusted loss) of every GD++-L "
        "on a noise-free prior, log y, on the report's sequences of the prior; open diamonds the paper's Table 1 "
        "after all L layers. Look for the steepening fall of the deep models' last layers (second order) and for "
        "the intermediate K, which need not be small: the trained models do not descend greedily. Bottom, for the "
        "deepest model, one panel per layer l: each point is one eigenvalue s of Σ^(l−1) (x) against the measured "
        "eigenvalue after the layer on the same eigenvector (y), for the first sequences of the probe; the line is "
        "s(1 − γ_l s)². The points lie on it to rounding (GD++'s x-update is exactly the theorem's preconditioner); "
        "the title gives γ_l·s_max (median), and where it is above 1/3 the top of the spectrum folds down past the "
        "curve's peak at s = 1/(3γ). The last layer's ω_xx does not enter the loss (no layer reads its x's)."
    ),
)
def theorem51(data: ReportData, models: list | None = None) -> go.Figure | Note:
    models = _models(data) if models is None else models
    if not models:
        return Note(NONE_TEXT)
    L = max(e.n_layers for e, _ in models)
    deep_entry, deep = next((e, r) for e, r in reversed(models) if e.n_layers == L)
    sep = "<br>" if L > 4 else ": "  # the layer panels' titles: on two lines where the panels are narrow
    fig = make_subplots(
        rows=2,
        cols=L,
        specs=[[{"colspan": L}, *([None] * (L - 1))], [{} for _ in range(L)]],
        subplot_titles=[
            LOSS_TITLE,
            *(f"layer {l + 1}{sep}γ·s_max {_fmt(deep.preconditioning.gamma_smax[l], '.2f')}" for l in range(L)),
        ],
        vertical_spacing=0.16,
        horizontal_spacing=0.035 if L > 4 else 0.08,
        row_heights=[0.55, 0.45],
    )
    depths = [e.n_layers for e, _ in models]
    for e, rec in models:
        color = model_color(e.arch, e.n_layers, depths)
        fig.add_trace(
            go.Scatter(
                x=list(range(len(rec.loss))),
                y=[_pos(v) for v in rec.loss],
                mode="lines+markers",
                name=f"{arch_label(e.arch)}-{e.n_layers} · {e.label}",
                legendgroup=e.label,
                line=dict(color=color, width=2),
                marker=dict(size=7),
                customdata=[
                    [v, m, "–" if not K else _fmt(rec.order[K - 1], ".2f")]
                    for K, (v, m) in enumerate(zip(rec.loss, rec.loss_median))
                ],
                hovertemplate=f"{e.label}<br>after K = %{{x}} layers: %{{customdata[0]:.3g}}"
                "<br>median sequence %{customdata[1]:.3g}"
                "<br>order log ε_K / log ε_K−1: %{customdata[2]}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    paper = [(e.n_layers, v) for e, _ in models if (v := paper_value("gdpp", e.noise, e.n_layers)) is not None]
    if paper:
        fig.add_trace(
            go.Scatter(
                x=[K for K, _ in paper],
                y=[_pos(v) for _, v in paper],
                mode="markers",
                name="GD++ (paper, after all L layers)",
                marker=dict(symbol="diamond-open", size=10, color="#222", line=dict(width=1.5)),
                hovertemplate="paper, GD++-%{x}: %{y:.3g}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    _axes(fig, "layers K", "½·MSE after K layers", 1, 1, ylog=True, dtick=1)
    pre = deep.preconditioning
    for l in range(L):
        s = [v for seq in deep.before[l] for v in seq]
        after = [v for seq in deep.after[l] for v in seq]
        if not s:
            continue
        gamma = float(pre.gamma[l])
        top = max(s) * 1.05
        grid = [top * i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=[x * (1 - gamma * x) ** 2 for x in grid],
                mode="lines",
                name="s(1 − γs)², γ = −ω_xx",
                legendgroup="map",
                showlegend=l == 0,
                line=dict(color="#888", width=1.5, dash="dash"),
                hovertemplate=f"s(1 − γs)², γ = {gamma:.4g}<br>s %{{x:.4g}} ↦ %{{y:.4g}}<extra></extra>",
            ),
            row=2,
            col=l + 1,
        )
        fig.add_trace(
            go.Scatter(
                x=s,
                y=after,
                mode="markers",
                name=f"measured eigenvalues, {arch_label(deep_entry.arch)}-{L} · {deep_entry.label}",
                legendgroup="measured",
                showlegend=l == 0,
                marker=dict(size=5, color=model_color(deep_entry.arch, L, [L]), opacity=0.7),
                hovertemplate=f"layer {l + 1} (γ = {gamma:.4g}, map error {_fmt(float(pre.map_error[l]), '.1e')})"
                "<br>s before %{x:.4g}<br>after %{y:.4g}<extra></extra>",
            ),
            row=2,
            col=l + 1,
        )
        _axes(fig, "s before", "after" if l == 0 else None, 2, l + 1)
        fig.update_xaxes(nticks=4, row=2, col=l + 1)
    return fig
