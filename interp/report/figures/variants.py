"""The variants study (experiments/variants.py, docs/variants.md): how far FFN, softmax and kernel-attention models are
from Theorem 4.1's implicit linear model, layer by layer, and their adjusted loss beside FULL and DIAG. Drawn only
where the report's models sit beside a study (<their folder's parent>/variants/summary.json: interp.report.data)."""

from __future__ import annotations

import plotly.graph_objects as go

from interp.report.data import ReportData
from interp.report.figures.base import _axes, _fmt, _subplots, view
from interp.report.style import ARCH_COLOR

FLOOR = 1e-16  # a residual at rounding (FULL, DIAG, the linear FFN) is drawn here on the log axis
STYLE = {  # study row name -> (colour, dash, symbol)
    "full": (ARCH_COLOR["full"], "solid", "circle"),
    "diag": (ARCH_COLOR["diag"], "solid", "square"),
    "full_ctrl": (ARCH_COLOR["full"], "dot", "circle-open"),
    "ffn_linear": ("#7B4FA0", "dash", "diamond"),
    "ffn_relu": ("#E08A1E", "solid", "diamond"),
    "softmax": ("#17A2B8", "solid", "triangle-up"),
    "kernel": ("#8C564B", "solid", "x"),
}


def _study(data: ReportData) -> list:
    """The views' one panel where the report sits beside a variants study, else none (the report leaves them out)."""
    return [data.variants] if data.variants is not None and data.variants.rows else []


def _label(row) -> str:
    if row.steps is None:
        return f"{row.label} (Table 1 zoo)"
    return "FULL (same budget)" if row.name == "full_ctrl" else row.label


def _style(row) -> tuple[str, str, str]:
    return STYLE.get(row.name, ("#555555", "solid", "circle"))


@view(
    "variants-linearity",
    "Variants: distance from Theorem 4.1's implicit linear model",
    section="probes",
    height=440,
    probed=False,
    each=_study,
    caption=(
        "Per layer l, the best context-dependent linear map T^l with e_i^l ≈ T^l e_i, fitted by least squares on the "
        "n context tokens of each sequence (interp.probes.linearity), applied to the held-out query: the median over "
        "sequences of ‖e^l_{n+1} − T^l e_{n+1}‖ / ‖e^l_{n+1}‖, log y, one panel per depth. Vladymyrov et al. 2024, "
        "Theorem 4.1: for FULL and DIAG it is 0 (rounding, drawn at 1e-16), and so for linear attention with a "
        "linear FFN; an FFN with ReLU, softmax attention or kernel attention (elu+1) can leave it. Look for how far "
        "above rounding each variant sits and at which layer it departs; the hover shows the context fit's own "
        "residual and the prediction's gap from the readout ⟨w^l, x_t⟩ too "
        "(experiments/results/variants_short_budget.md)."
    ),
)
def variants_linearity(data: ReportData, study) -> go.Figure:
    depths = sorted({r.layers for r in study.rows})
    fig = _subplots(len(depths), titles=[f"{L} layers" for L in depths], horizontal_spacing=0.06)
    shown = set()
    for col, L in enumerate(depths, 1):
        for r in (r for r in study.rows if r.layers == L):
            color, dash, symbol = _style(r)
            lin = r.linearity
            layers = lin.layer[1:]
            stats = zip(lin.context_median, lin.query_median, lin.query_p90, lin.gap_median)
            text = [
                f"context {_fmt(c, '.2e')}<br>query {_fmt(q, '.2e')} (p90 {_fmt(p, '.2e')})<br>gap {_fmt(g, '.2e')}"
                for c, q, p, g in list(stats)[1:]
            ]
            fig.add_trace(
                go.Scatter(
                    x=layers,
                    y=[max(v, FLOOR) for v in lin.query_median[1:]],
                    mode="lines+markers",
                    name=_label(r),
                    legendgroup=r.name,
                    showlegend=r.name not in shown,
                    line=dict(color=color, dash=dash),
                    marker=dict(symbol=symbol, size=8),
                    text=text,
                    hovertemplate=f"{_label(r)}, layer %{{x}}<br>%{{text}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(r.name)
        _axes(fig, "layer l", "query residual (median)" if col == 1 else "", row=1, col=col, ylog=True, dtick=1)
    return fig


@view(
    "variants-loss",
    "Variants: adjusted loss vs number of layers",
    section="probes",
    height=420,
    probed=False,
    each=_study,
    caption=(
        "The adjusted loss (½·MSE minus the oracle ridge's, Table 1's metric) of every model of the variants study "
        "on its training prior, log y, ± one standard error. The Table 1 zoo's FULL and DIAG were trained with the "
        "fast preset (4 000 to 32 000 steps of 2 048 sequences); the variants and FULL (same budget) with one "
        "shorter recipe (experiments/results/variants_short_budget.md): compare a variant with FULL (same budget) "
        "for what the architecture changes, and with the zoo for how far the short recipe is from converged."
    ),
)
def variants_loss(data: ReportData, study) -> go.Figure:
    fig = go.Figure()
    for name in dict.fromkeys(r.name for r in study.rows):
        rows = sorted((r for r in study.rows if r.name == name), key=lambda r: r.layers)
        color, dash, symbol = _style(rows[0])
        fig.add_trace(
            go.Scatter(
                x=[r.layers for r in rows],
                y=[r.loss.mean for r in rows],
                error_y=dict(type="data", array=[r.loss.stderr for r in rows], visible=True),
                mode="lines+markers",
                name=_label(rows[0]),
                line=dict(color=color, dash=dash),
                marker=dict(symbol=symbol, size=9),
                hovertemplate=f"{_label(rows[0])}, L=%{{x}}: %{{y:.4g}}<extra></extra>",
            )
        )
    _axes(fig, "layers L", "adjusted loss", ylog=True, dtick=1)
    return fig
