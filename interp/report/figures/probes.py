"""interp's probes of what a model computes: ω per layer, the implicit wˡ against solvers, the momentum ‖uˡ‖, the
implied ridge λ, the §5.2 rescaling and §5.3 effective step, the §5.3 layer schedule, and FULL's fit by DIAG."""

from __future__ import annotations

import plotly.graph_objects as go

from interp.report.data import Entry, ReportData
from interp.report.figures.base import (
    BY_DEPTH_TEXT,
    PRIOR_TEXT,
    Note,
    _axes,
    _by_depth,
    _color,
    _fmt,
    _name,
    _per_layer_lines,
    _pos,
    _priors,
    _subplots,
    _symbol,
    view,
)
from interp.report.style import BASELINE_STYLE, layer_dash

OMEGA_LABELS = ["ω<sub>xx</sub>", "ω<sub>xy</sub>", "ω<sub>yx</sub>", "ω<sub>yy</sub>"]


@view(
    "omegas",
    "ω per layer",
    section="probes",
    per_prior=True,
    height=430,
    caption=(
        "The four products ω_xx = Σp_x q_x, ω_xy, ω_yx, ω_yy of each layer (Vladymyrov et al. 2024, DIAG; README, "
        "Conventions): read from the weights for "
        "DIAG and GD++, from the nearest DIAG operator (orthogonal projection) for FULL. ω_yx < 0 is a gradient step "
        "on y, ω_xx < 0 preconditions x, ω_xy ≠ 0 builds the momentum buffer u, ω_yy < 0 shrinks the prediction more "
        "for noisier sequences (§5.2). GD++ has ω_xy = ω_yy = 0 by construction. " + PRIOR_TEXT + " " + BY_DEPTH_TEXT
    ),
)
def omegas(data: ReportData) -> go.Figure:
    fig = _subplots(4, titles=OMEGA_LABELS, horizontal_spacing=0.09)  # room for tick labels like −0.005
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
        _axes(fig, "layer l", "value" if k == 0 else None, 1, k + 1, dtick=1)  # the subplot titles name the ω
    return _by_depth(fig, data)


SOLVER_REFS = [
    ("relerr_ols", "vs OLS"),
    ("relerr_ridge_oracle", "vs oracle ridge (λ = σ²)"),
    ("relerr_gd", "vs GD-l (tuned step)"),
]


@view(
    "solvers",
    "Implicit wˡ against OLS, ridge and GD",
    section="probes",
    per_prior=True,
    height=420,
    caption=(
        "Theorem 4.1: after l layers the model predicts ⟨wˡ, x_t⟩ with a context-dependent wˡ. Shown is the mean "
        "relative distance of wˡ to OLS, to the oracle ridge solution (λ = σ², the target) and to l steps of gradient "
        "descent with a tuned step. Look for deep DIAG/FULL models moving away from GD-l and toward the oracle ridge; "
        "OLS is close only for nearly noiseless sequences. " + PRIOR_TEXT + " " + BY_DEPTH_TEXT
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
        _axes(fig, "layer l", "relative distance (log)" if c == 1 else None, 1, c, ylog=True, dtick=1)  # one scale
    return _by_depth(fig, data)


@view(
    "momentum",
    "Momentum ‖uˡ‖ by layer",
    section="probes",
    per_prior=True,
    height=380,
    caption=(
        "uˡ is the part of every x token that copies its own label (x_iˡ = Mˡ x_i + y_i uˡ); Lemma 4.4 shows it acts "
        "as the velocity buffer of a momentum method, fed by ω_xy. GD++ stays at zero by construction; a DIAG or FULL "
        "model that grows u uses momentum. " + PRIOR_TEXT + " " + BY_DEPTH_TEXT
    ),
)
def momentum(data: ReportData) -> go.Figure:
    fig = _subplots()
    _per_layer_lines(data, fig, lambda p, e: p.momentum.u_norm, start=0, hover="mean ‖u<sup>l</sup>‖")
    _axes(fig, "layer l (0 = input)", "mean ‖u<sup>l</sup>‖", dtick=1)
    return _by_depth(fig, data)


CONSTRR_DASH = ["dot", "dashdot", "longdashdot", "longdash"]  # ConstRR λ per prior (the oracle line is dashed)


@view(
    "implied-lambda",
    "Implied ridge λ against the true σ",
    section="probes",
    per_prior=True,
    height=470,
    caption=(
        "For each sequence, the λ whose ridge solution (Σ + λI)⁻¹α is nearest to the model's final wᴸ; medians per "
        "σ bin. A model that estimates the noise follows the dashed λ = σ² line; a constant-λ ridge (GD++, "
        "ConstRR) is flat. The gap between the curves and the diagonal is the price of not knowing σ. "
        + PRIOR_TEXT
        + " "
        + BY_DEPTH_TEXT
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
                marker=dict(size=7, symbol=_symbol(e, data)),
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
    priors = _priors(data)
    for prior in priors:
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
                    line=dict(
                        color=BASELINE_STYLE["constrr"][1], dash=CONSTRR_DASH[priors.index(prior) % 4], width=1.6
                    ),
                    hovertemplate=f"ConstRR λ tuned on {prior}: {lam_c:.4g}<extra></extra>",
                )
            )
    _axes(fig, "true noise σ of the sequence (bin centre)", "implied ridge λ (log)", ylog=True)
    return _by_depth(fig, data)


@view(
    "rescaling-step",
    "Rescaling and effective step against σ",
    section="probes",
    per_prior=True,
    height=470,
    caption=(
        "Per layer (layer 1 dotted, 2 dashed, 3 dash-dot, the last solid), the median over sequences in each σ bin. "
        "Left: the factor 1 + ω_yy λˡ by which layer l multiplies every label; below 1 and falling with σ is "
        "ridge-like shrinkage. Right: the gradient step a layer takes, which shrinks for noisy sequences when "
        "ω_xy, ω_yx < 0 (early stopping). " + PRIOR_TEXT + " " + BY_DEPTH_TEXT
    ),
)
def rescaling_and_step(data: ReportData) -> go.Figure:
    fig = _subplots(
        2,
        titles=[
            "rescaling 1 + ω<sub>yy</sub><sup>l</sup> λ<sup>l</sup> (§5.2)",
            "effective step −ω<sub>yx</sub><sup>l</sup>(1 + ω<sub>xy</sub><sup>l−1</sup>ρ) (§5.3)",
        ],
        horizontal_spacing=0.16,  # room for long tick labels (a near-constant step: 0.02552) and a title
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
                        marker=dict(size=6, symbol=_symbol(e, data)),
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
    section="probes",
    per_prior=True,
    height=lambda data: max(380, 140 + 22 * len(_scheduled(data))),
    caption=(
        "§5.3's two-step update: a layer that moves the x's by the labels (x←y), then a gradient step on the labels "
        "(y←x). Left, one row per model: each layer's label from zeroing one block of its update at a time "
        "(interp.probes.schedule): x←y (orange) when zeroing its x←y block raises the adjusted loss by more than 5 % "
        "of the model's and 2 standard errors (or blows it up), y←x (blue) the same for its y←x block, both "
        "(purple), – neither; hover shows all four blocks' sizes and loss increases. Right: the relative size of "
        "each layer's x←y update (solid; ‖x←y update‖ / ‖x‖ over the context tokens, median over sequences) and y←x "
        "update (dotted; / ‖y‖). Look for runs of x←y layers followed by a y←x layer, and for FULL doing its x←y "
        "updates in layers whose DIAG projection has ω_xy ≈ 0. " + PRIOR_TEXT + " " + BY_DEPTH_TEXT
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
            showlegend=False,
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
                    marker=dict(size=6, symbol=_symbol(e, data)),
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
    section="probes",
    per_prior=True,
    height=420,
    caption=(
        "Each FULL layer computes a linear map S ↦ Σ P S Q of the context statistics. Left: R² of that map fitted by "
        "the 4-parameter DIAG form on the layer's own inputs (hover: the loss change when the layer is replaced by its "
        "DIAG projection). Middle: the weight-space share outside DIAG. Right: singular values of the remainder, one "
        "line per layer (last layer solid): a flat spectrum is noise, one dominant value is a low-rank component. "
        + PRIOR_TEXT
        + " "
        + BY_DEPTH_TEXT
    ),
)
def full_fits(data: ReportData) -> "go.Figure | Note":
    fulls = [e for e in data.entries if not e.parameterization.has_omegas]  # DIAG and GD++ are their ω's
    if not fulls:
        return Note("No FULL model in this report.", title="FULL-to-DIAG fit and the remainder")
    fig = _subplots(
        3,
        titles=["DIAG-form fit R²", "share of ‖K‖² outside DIAG", "remainder singular values"],
        horizontal_spacing=0.11,
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
                marker=dict(size=8, symbol=_symbol(e, data)),
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
                marker=dict(size=8, symbol=_symbol(e, data)),
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
                    marker=dict(size=5, symbol=_symbol(e, data)),
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
