"""The linear-attention family side by side (experiments/family.py, docs/variants.md): adjusted loss against layers per
variant, each layer's readout gap, the gates' token weights ω_j against position and σ and the values the gates take,
each variant's paired difference from FULL by σ, its implied ridge λ by σ and what each layer is worth (each skipped in
turn). Drawn only where the report's models sit beside a family study (<their folder's parent>/family/summary.json:
interp.report.data)."""

from __future__ import annotations

import plotly.graph_objects as go

from interp.evaluate import TABLE1_COLUMNS
from interp.render import number
from interp.report.data import ReportData
from interp.report.figures.base import _axes, _pos, _subplots, view
from interp.tasks import prior_slug

FLOOR = 1e-18  # a readout gap at rounding is drawn here on the log axis
PALETTE = ["#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#7F7F7F", "#BCBD22"]
PALETTE += ["#17BECF", "#393B79", "#AD494A", "#637939"]


def _priors(data: ReportData) -> list:
    """One panel per training prior of the study, where the report sits beside one (else the views are left out)."""
    cells = (data.family or {}).get("cells") or []
    priors = list(dict.fromkeys(c["prior"] for c in cells))
    column = {p: i for i, p in enumerate(TABLE1_COLUMNS)}  # in Table 1's column order, others after as they come
    priors = sorted(priors, key=lambda p: (column.get(p, len(column)), priors.index(p)))
    return [(prior, [c for c in cells if c["prior"] == prior]) for prior in priors]


def _priors_where(has):
    """`_priors` left to the priors with a cell for which has(cell) holds (a view that draws only such cells)."""
    return lambda data: [(prior, cells) for prior, cells in _priors(data) if any(has(c) for c in cells)]


def _colors(cells: list) -> dict:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted({c["variant"] for c in cells}))}


@view(
    lambda data, item: f"family-loss-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: adjusted loss vs number of layers",
    section="probes",
    height=440,
    probed=False,
    each=_priors,
    caption=(
        "Each variant's best seed (experiments/family_grid.toml, FULL's fast-preset budget at each depth), adjusted "
        "loss on the prior's sequences, log y, ± one standard error; the Table 1 zoo's FULL and DIAG of each depth "
        "as the paired differences in experiments/results/variants.md. A _quad cell is scored on its quadratic task."
    ),
)
def family_loss(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors, fig = _colors(cells), go.Figure()
    for name in sorted({c["variant"] for c in cells}):
        rows = sorted((c for c in cells if c["variant"] == name), key=lambda c: c["layers"])
        fig.add_trace(
            go.Scatter(
                x=[c["layers"] for c in rows],
                y=[c["loss"]["mean"] for c in rows],
                error_y=dict(type="data", array=[c["loss"]["stderr"] for c in rows], visible=True),
                mode="lines+markers",
                name=name,
                line=dict(color=colors[name]),
                hovertemplate=f"{name}, L=%{{x}}: %{{y:.4g}}<extra></extra>",
            )
        )
    _axes(fig, "layers L", "adjusted loss", ylog=True, dtick=1)
    return fig


@view(
    lambda data, item: f"family-readout-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: how linear each layer's readout is",
    section="probes",
    height=440,
    probed=False,
    each=_priors,
    caption=(
        "Per layer l of each variant's deepest best seed, the median over sequences of |ŷ^l − ⟨w^l, x_t⟩| with w^l "
        "= ∂ŷ^l/∂x_t (interp.probes.readout): rounding (drawn at 1e-18) for the linear family, whose query never "
        "writes; softmax, the kernels' normaliser and nonlinear FFNs leave it. Log y."
    ),
)
def family_readout(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors, fig = _colors(cells), go.Figure()
    for name in sorted({c["variant"] for c in cells}):
        cell = max((c for c in cells if c["variant"] == name), key=lambda c: c["layers"])
        gaps = cell["readout_gap_median"][1:]
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(gaps) + 1)),
                y=[max(g, FLOOR) for g in gaps],
                mode="lines+markers",
                name=f"{name} (L={cell['layers']})",
                line=dict(color=colors[name]),
            )
        )
    _axes(fig, "layer l", "readout gap (median)", ylog=True, dtick=1)
    return fig


@view(
    lambda data, item: f"family-weights-{prior_slug(item[0])}",
    lambda data, item: f"Gating is weighting on {item[0]}: the weight ω_j of each context token",
    section="probes",
    height=440,
    probed=False,
    each=_priors,
    caption=(
        "Each decay / gate variant's first layer (dashed) and last layer (solid) fitted to weighted preconditioned GD, "
        "w = Γ Σ_j ω_j y_j x_j (Li et al. 2025, Gating is Weighting; interp.probes.readout.token_weights), ω of mean "
        "1: left, ω_j against the position j (1 = earliest); right, the mean ω of a sequence against its noise σ; the "
        "hover gives the fit's residual. The task wants equal weights (ω = 1). Layer 1 reads the raw labels: there a "
        "weight that moves with σ is the gate's own. Later layers read labels the layers before changed, and fit the "
        "form less well; RetNet, whose decay cannot read the data, is the reference: a trend it shares comes from "
        "those labels, not from a gate (experiments/results/variants.md)."
    ),
)
def family_weights(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors = _colors(cells)
    fig = _subplots(2, titles=["ω_j against position j", "mean ω against the sequence's σ"], horizontal_spacing=0.12)
    for c in sorted((c for c in cells if "token_weights" in c), key=lambda c: (c["variant"], c["layers"])):
        tw, label = c["token_weights"], f"{c['variant']} (L={c['layers']})"
        layers = sorted({0, len(tw["by_position"]) - 1})  # the first and the last layer
        for i in layers:
            name = f"{label}, layer {i + 1}"
            res = tw["residual"][i]
            style = dict(color=colors[c["variant"]], dash="solid" if i == layers[-1] else "dash")
            pos = tw["by_position"][i]
            fig.add_trace(
                go.Scatter(x=list(range(1, len(pos) + 1)), y=pos, mode="lines+markers", name=name, legendgroup=name,
                           line=style, hovertemplate=f"{name}: ω_%{{x}} = %{{y:.3f}} (fit residual {res:.2g})"
                           "<extra></extra>"),
                row=1, col=1,
            )  # fmt: skip
            fig.add_trace(
                go.Scatter(x=tw["sigma"], y=tw["by_sigma"][i], mode="lines+markers", name=name, legendgroup=name,
                           showlegend=False, line=style, hovertemplate=f"{name}: σ = %{{x:.2f}}, mean ω = "
                           f"%{{y:.3f}} (fit residual {res:.2g})<extra></extra>"),
                row=1, col=2,
            )  # fmt: skip
    _axes(fig, "position j", "ω_j", row=1, col=1)
    _axes(fig, "σ", "mean ω", row=1, col=2)
    return fig


def _gate_cells(cells: list) -> list:
    """Each variant's deepest cell with gate values (interp.probes.readout.gate_values)."""
    gated = [c for c in cells if "gates" in c]
    deepest = {c["variant"]: c for c in sorted(gated, key=lambda c: c["layers"])}
    return [deepest[v] for v in sorted(deepest)]


@view(
    lambda data, item: f"family-gates-{prior_slug(item[0])}",
    lambda data, item: f"The gates on {item[0]}: the values each layer's decay, gate or delta step takes",
    section="probes",
    height=440,
    probed=False,
    each=_priors_where(lambda c: "gates" in c),
    caption=(
        "Each gated variant's deepest best seed, per layer l (interp.probes.readout.gate_values): left, the mean of "
        "RetNet's γ, the gated model's a_j and GLA's α_j over the sequences of the lowest σ group (dashed) and of the "
        "highest (solid); middle, the first context token's weight in the state S_n the query reads, ∏_{m=2..n} a_m "
        "(median; 1 for a gate left open); right, DeltaNet's step β_j the same way as the left. A gate that closes "
        "more on noisy sequences forgets their early tokens: the solid line below the dashed one."
    ),
)
def family_gates(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors = _colors(cells)
    titles = ["decay / gate by layer", "first token's weight in S_n", "DeltaNet's β by layer"]
    fig = _subplots(3, titles=titles, horizontal_spacing=0.08)
    for c in _gate_cells(cells):
        g, label = c["gates"], f"{c['variant']} (L={c['layers']})"
        layers = list(range(1, len(g["mean"]) + 1))
        col = 3 if g["gate"] == "beta" else 1
        for end, dash in ((0, "dash"), (-1, "solid")):
            name, sigma = f"{label}, σ ≈ {g['sigma'][end]:.2f}", g["sigma"][end]
            fig.add_trace(
                go.Scatter(x=layers, y=[row[end] for row in g["by_sigma"]], mode="lines+markers", name=name,
                           legendgroup=label, line=dict(color=colors[c["variant"]], dash=dash),
                           hovertemplate=f"{label}, layer %{{x}}, σ ≈ {sigma:.2f}: mean {g['gate']} = %{{y:.4f}}"
                           "<extra></extra>"),
                row=1, col=col,
            )  # fmt: skip
        if "first_token_weight" in g:
            fig.add_trace(
                go.Scatter(x=layers, y=g["first_token_weight"], mode="lines+markers", name=label, legendgroup=label,
                           showlegend=False, line=dict(color=colors[c["variant"]]),
                           hovertemplate=f"{label}, layer %{{x}}: first token's weight %{{y:.3f}}<extra></extra>"),
                row=1, col=2,
            )  # fmt: skip
    for col, y in ((1, "mean γ, a_j, α_j"), (2, "∏_{m=2..n} a_m (median)"), (3, "mean β_j")):
        _axes(fig, "layer l", y, row=1, col=col, dtick=1)
    return fig


SHOWN_GAP = 0.3  # a cell further than this from FULL somewhere (softmax, the kernels) starts hidden, as the quad task's


DASH = {2: "dot", 4: "dash"}  # the depth of a cell by its line: deeper ones solid


@view(
    lambda data, item: f"family-sigma-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: where in noise each variant gains or loses on FULL",
    section="probes",
    height=440,
    probed=False,
    each=_priors_where(lambda c: "vs_full_by_sigma" in c),
    caption=(
        "Each cell's best seed minus the Table 1 zoo's FULL of its depth, paired per sequence, within groups of the "
        "sequences' noise σ (each σ of a categorical prior, else four equal bins, at their centres), ± one standard "
        "error; below 0 the variant's loss is lower. Dotted: 2 layers, dashed: 4, solid: 7. A variant that only fits "
        "better gains alike at every σ; one that adapts to the noise gains at the ends. Cells that differ from FULL "
        "by more than 0.3 somewhere (softmax, the kernels) and those of the quadratic task start hidden: click the "
        "legend."
    ),
)
def family_by_sigma(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors, fig = _colors(cells), go.Figure()
    rows = sorted((c for c in cells if "vs_full_by_sigma" in c), key=lambda c: (c["variant"], c["layers"]))
    for c in rows:
        by, name = c["vs_full_by_sigma"], f"{c['variant']} (L={c['layers']})"
        means = [e["mean"] for e in by["diff"]]
        fig.add_trace(
            go.Scatter(
                x=by["sigma"], y=means, mode="lines+markers", name=name,
                error_y=dict(type="data", array=[e["stderr"] for e in by["diff"]], visible=True),
                line=dict(color=colors[c["variant"]], dash=DASH.get(c["layers"], "solid")),
                visible=True if max(abs(m) for m in means) <= SHOWN_GAP and not c.get("quad") else "legendonly",
                hovertemplate=f"{name}: σ ≈ %{{x:.2f}}, − FULL = %{{y:+.4f}}<extra></extra>",
            )
        )  # fmt: skip
    fig.add_hline(y=0, line=dict(color="#888", width=1))
    _axes(fig, "σ", "adjusted loss − FULL's (paired)")
    return fig


def _paper_task_with(key: str):
    """cell -> whether it is a cell of the paper's task holding `key` (the quadratic task's cells are left out: its
    Bayes predictor is not a ridge, and the study reads its layers on the paper's task only)."""
    return lambda cell: key in cell and not cell.get("quad")


_lambda_cell = _paper_task_with("implied_lambda")


SHOWN_RELERR = 0.3  # a cell whose w^L is further than this from its nearest ridge solution starts hidden


@view(
    lambda data, item: f"family-lambda-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: how much each variant shrinks, by noise",
    section="probes",
    height=440,
    probed=False,
    each=_priors_where(_lambda_cell),
    caption=(
        "For each sequence, the λ whose ridge solution (Σ + λI)⁻¹α is nearest to the last layer's w^L = ∂ŷ/∂x_t "
        "(interp.probes.readout.implied_ridge), median per σ group, log y; grey: the Table 1 zoo's FULL of each depth "
        "on the same sequences (in a study of experiments/family.py); dashed black: the Bayes ridge's λ = σ². A model "
        "that adapts its step to the noise follows σ²; one that takes the same step whatever the noise is flat. "
        "Dotted: 2 layers, dashed: 4, solid: 7. Cells whose w^L is far from every ridge solution (softmax, the "
        "kernels) start hidden; the quadratic task's cells are left out."
    ),
)
def family_lambda(data: ReportData, item) -> go.Figure:
    _, cells = item
    colors, fig = _colors(cells), go.Figure()
    rows = [c for c in cells if _lambda_cell(c)]
    fulls = {c["layers"]: c["full_implied_lambda"] for c in rows if "full_implied_lambda" in c}
    curves = [(f"FULL (zoo, L={L})", lam, "#999999", L, True) for L, lam in sorted(fulls.items())]
    for c in sorted(rows, key=lambda c: (c["variant"], c["layers"])):
        lam = c["implied_lambda"]
        relerr = lam["median_relerr"][-1]  # None where λ is undefined (a near-zero w^L)
        near = relerr is not None and relerr <= SHOWN_RELERR
        curves.append((f"{c['variant']} (L={c['layers']})", lam, colors[c["variant"]], c["layers"], near))
    sigma = []
    for name, lam, color, L, shown in curves:
        sigma = lam["sigma"]
        fig.add_trace(
            go.Scatter(
                x=lam["sigma"], y=lam["median_by_sigma"][-1], mode="lines+markers", name=name,
                line=dict(color=color, dash=DASH.get(L, "solid")), visible=True if shown else "legendonly",
                hovertemplate=f"{name}: σ ≈ %{{x:.2f}}, median implied λ %{{y:.4g}} (rank corr. with σ "
                f"{number(lam['spearman_sigma'][-1], 2)}, ridge rel. error {number(lam['median_relerr'][-1], 2)})"
                "<extra></extra>",
            )
        )  # fmt: skip
    if sigma:
        xs = [sigma[0] + i * (sigma[-1] - sigma[0]) / 40 for i in range(41)]
        fig.add_trace(
            go.Scatter(x=xs, y=[x * x for x in xs], mode="lines", name="Bayes ridge λ = σ²",
                       line=dict(color="#1A1A1A", dash="dash", width=1.5),
                       hovertemplate="λ = σ² = %{y:.4g} at σ = %{x:.3g}<extra></extra>")
        )  # fmt: skip
    _axes(fig, "σ", "implied ridge λ (median)", ylog=True)
    return fig


BLOWN = 1e4  # a skipped layer after which some sequence blows up is drawn here (a cross) on the log axis
SKIP_PLACES = (("prior", "on the prior"), ("noise_free", "at σ = 0 (½ MSE)"))


_skip_cell = _paper_task_with("layer_skip")


def _skip_curve(skip: dict) -> tuple[list, list, list]:
    """(y, marker symbols, hover notes) of one layer_skip record: each skipped layer's loss over the model's own."""
    y, symbols, notes = [], [], []
    for value, blown in zip(skip["skipped"], skip["blowups"]):
        ratio = None if value is None else value / skip["loss"]
        y.append(BLOWN if value is None else _pos(ratio))
        symbols.append("x" if value is None else "circle")
        notes.append(f"blows up ({blown} sequences beyond 100·d)" if value is None else f"× {number(ratio, 3)}")
    return y, symbols, notes


def _per_layer_curves(cells: list, key: str, full_key, near=lambda record: True) -> list:
    """(name, record, color, L, shown) of a per-layer view: the Table 1 zoo's FULL of each depth in grey (its record
    full_key(cell), read off the first cell of that depth), then every cell holding `key` in its variant's color, the
    deepest cell of each variant shown where near(its record) and the others hidden until clicked."""
    colors = _colors(cells)
    rows = sorted(filter(_paper_task_with(key), cells), key=lambda c: (c["variant"], c["layers"]))
    deepest = {c["variant"]: c["layers"] for c in rows}  # sorted by depth: the last one wins
    curves = []
    for L in sorted({c["layers"] for c in rows}):
        full = full_key(next(c for c in rows if c["layers"] == L))
        if full is not None:
            curves.append((f"FULL (zoo, L={L})", full, "#999999", L, True))
    for c in rows:
        shown = c["layers"] == deepest[c["variant"]] and near(c[key])
        curves.append((f"{c['variant']} (L={c['layers']})", c[key], colors[c["variant"]], c["layers"], shown))
    return curves


@view(
    lambda data, item: f"family-skip-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: what each layer is worth",
    section="probes",
    height=440,
    probed=False,
    each=_priors_where(_skip_cell),
    caption=(
        "Each layer of a cell's best seed skipped in turn (its residual update removed, attention and FFN alike: "
        "interp.evaluate.skipped_layer_predictor): the loss then over the model's own, log y; left on the prior's "
        "sequences, right on the same sequences at σ = 0 (a prior whose σ reaches 0). A ratio near 1 (the grey line) "
        f"is a layer the model does not use there; a cross at {BLOWN:.0e}: some sequence blows up. Grey: the Table 1 "
        "zoo's FULL of each depth. Dotted: 2 layers, dashed: 4, solid: 7; the deepest cell of each variant is shown, "
        "the others start hidden (experiments/results/variants.md, Skipping a layer)."
    ),
)
def family_skip(data: ReportData, item) -> go.Figure:
    _, cells = item
    full = lambda c: {place: c["layer_skip"].get(f"full_{place}") for place, _ in SKIP_PLACES}  # noqa: E731
    fig = _subplots(2, titles=[title for _, title in SKIP_PLACES], horizontal_spacing=0.1)
    for name, skip, color, L, shown in _per_layer_curves(cells, "layer_skip", full):
        for col, (place, title) in enumerate(SKIP_PLACES, start=1):
            if skip.get(place) is None:
                continue
            y, symbols, notes = _skip_curve(skip[place])
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, L + 1)), y=y, mode="lines+markers", name=name, legendgroup=name,
                    showlegend=col == 1, marker=dict(symbol=symbols, size=8), customdata=notes,
                    line=dict(color=color, dash=DASH.get(L, "solid")), visible=True if shown else "legendonly",
                    hovertemplate=f"{name}, layer %{{x}} skipped {title}: %{{customdata}}<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    for col in (1, 2):
        fig.add_hline(y=1, line=dict(color="#888", width=1), row=1, col=col)
        _axes(fig, "layer l skipped", "loss ÷ the model's own", row=1, col=col, ylog=True, dtick=1)
    return fig


@view(
    lambda data, item: f"family-lambda-layers-{prior_slug(item[0])}",
    lambda data, item: f"The linear-attention family on {item[0]}: how each layer shrinks, at low and high noise",
    section="probes",
    height=440,
    probed=False,
    each=_priors_where(_lambda_cell),
    caption=(
        "The implied ridge λ of each layer's w^l = ∂ŷ^l/∂x_t (interp.probes.readout.implied_ridge), median over the "
        "sequences of the lowest σ group (left) and of the highest (right), log y; grey: the Table 1 zoo's FULL of "
        "each depth on the same sequences. A layer that solves lowers λ at low noise; a layer that only shrinks noisy "
        "contexts raises it at high noise and leaves it at low noise, the layers the noiseless solve does not use "
        "(the skip view). Dotted: 2 layers, dashed: 4, solid: 7; the deepest cell of each variant is shown, the "
        "others, and cells whose w^L is far from every ridge solution (softmax, the kernels), start hidden; the "
        "quadratic task's cells are left out."
    ),
)
def family_lambda_layers(data: ReportData, item) -> go.Figure:
    _, cells = item
    relerr = lambda lam: lam["median_relerr"][-1]  # noqa: E731  None where λ is undefined
    near = lambda lam: relerr(lam) is not None and relerr(lam) <= SHOWN_RELERR  # noqa: E731  as in family_lambda
    curves = _per_layer_curves(cells, "implied_lambda", lambda c: c.get("full_implied_lambda"), near)
    sigma = curves[0][1]["sigma"]
    ends = [(0, f"σ ≈ {sigma[0]:.2f}, the lowest group"), (len(sigma) - 1, f"σ ≈ {sigma[-1]:.2f}, the highest")]
    fig = _subplots(2, titles=[title for _, title in ends], horizontal_spacing=0.1)
    for name, lam, color, L, shown in curves:
        for col, (group, title) in enumerate(ends, start=1):
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, L + 1)), y=[_pos(row[group]) for row in lam["median_by_sigma"][1:]],
                    mode="lines+markers", name=name, legendgroup=name, showlegend=col == 1,
                    line=dict(color=color, dash=DASH.get(L, "solid")), visible=True if shown else "legendonly",
                    hovertemplate=f"{name}, {title}: λ after layer %{{x}} = %{{y:.4g}}<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    for col in (1, 2):
        _axes(fig, "layer l", "implied ridge λ (median)", row=1, col=col, ylog=True, dtick=1)
    return fig
