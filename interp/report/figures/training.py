"""Over training: the training curves from metrics.jsonl and the drift of FULL runs toward DIAG
(interp.probes.drift on a few checkpoints)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from interp.report.data import ReportData
from interp.report.figures.base import (
    BY_DEPTH_TEXT,
    RUN_PALETTE,
    Note,
    _axes,
    _by_depth,
    _clip_spikes,
    _color,
    _dash,
    _name,
    _pos,
    _subplots,
    _symbol,
    view,
)
from interp.report.style import layer_dash


@view(
    "training",
    "Training curves",
    section="training",
    height=400,
    per_prior=True,
    caption=(
        "The training objective (½·MSE on fresh batches, not adjusted) logged during training, as a running median "
        "over 7 log points (deep models see rare batches with enormous loss; hover shows the logged value; the "
        "axis starts clipped above the spikes, the autoscale button shows them). Plateaus followed by sudden drops "
        "are typical of deep unnormalised models (Vladymyrov et al. 2024, training setup); a curve still falling at "
        "the end means more steps would help. Runs trained on different priors differ in line style (solid, dashed, "
        "dotted, in the order of the summary table). " + BY_DEPTH_TEXT
    ),
)
def training_curves(data: ReportData) -> "go.Figure | Note":
    fig = _subplots()
    for e in [*data.entries, *data.drift_entries]:  # probed runs, and the runs kept for their trajectory
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
                line=dict(color=_color(e, data), width=1.8, dash=_dash(e, data)),
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
    section="training",
    height=720,
    per_prior=True,
    caption=(
        "Measured on a few checkpoints of every FULL run (interp.probes.drift; one colour per run; layer 1 dotted, "
        "2 dashed, 3 dash-dot, the last solid). Does FULL drift "
        "toward the DIAG structure? Look for the share outside DIAG falling and R² rising as training proceeds, and "
        "for the dotted DIAG-projection loss meeting the model's loss: where they stay apart, the non-DIAG remainder "
        "carries function. A low effective rank of the remainder means a low-rank component, a high one noise. "
        "A loss far above the others (a DIAG projection can blow up to 10^30) lies above the axis, which is cut "
        "a decade above nine tenths of the points: a triangle at the top edge marks it, its hover gives the value. "
        "Runs on different priors differ in marker symbol. " + BY_DEPTH_TEXT
    ),
)
def drift(data: ReportData) -> "go.Figure | Note":
    d = data.drift
    if not d.available:
        return Note(f"Drift curves are not available: {d.reason or ''}", title="Drift over training steps")
    if not d.runs:  # a prior of the report with no FULL run among the drift runs
        return Note("No FULL run trained on this prior is among the drift runs.", title="Drift over training steps")
    titles = [
        "share of ‖K‖² outside DIAG",
        "DIAG-form fit R²",
        "adjusted loss: model (solid), DIAG projection (dotted)",
        "effective rank of the remainder",
    ]
    fig = _subplots(2, rows=2, titles=titles, horizontal_spacing=0.09, vertical_spacing=0.16)
    for i, (label, recs) in enumerate(d.runs.items()):
        e = next(x for x in [*data.entries, *data.drift_entries] if x.label == label)
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
                        marker=dict(size=5, symbol=_symbol(e, data)),
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
                    marker=dict(size=5, symbol=_symbol(e, data)),
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
    _clip_spikes(fig, 2, 1)  # one blown-up DIAG projection would flatten the gap the panel is about
    return _by_depth(fig, data)


def _rolling_median(values: list, window: int) -> list:
    half = window // 2
    out = []
    for i in range(len(values)):
        part = sorted(v for v in values[max(0, i - half) : i + half + 1] if v is not None)
        out.append(part[len(part) // 2] if part else None)
    return out
