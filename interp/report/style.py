"""One look for every figure: colours per architecture (shaded by depth), baselines as grey-ish lines, and one
marker symbol (or line dash) per noise prior, so that runs of the same architecture and depth on two priors differ."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from interp.params import DIAG, FULL, GDPP, of

ARCH_COLOR = {GDPP.name: "#3B9B4A", DIAG.name: "#2F6DB5", FULL.name: "#D8453B"}  # by ModelConfig.param
BASELINE_STYLE = {  # name -> (label, colour, dash)
    "constrr": ("ConstRR", "#8C8C8C", "dash"),
    "adarr": ("AdaRR", "#B07AA1", "dot"),
    "tunedrr": ("TunedRR", "#9C6B4E", "dashdot"),
    "bayes": ("Bayes floor", "#1A1A1A", "solid"),
}
# At one fixed σ the Bayes predictor of the prior is no floor (ConstRR beats it at σ = 3 on uniform:5): only on
# average over the prior is it optimal. The per-σ views name it so.
FIXED_SIGMA_LABEL = {"bayes": "Bayes (prior optimum)"}
FONT = "Inter, 'Helvetica Neue', Helvetica, Arial, sans-serif"
BAND = "rgba(120, 120, 120, 0.12)"  # the in-distribution σ range
BAND_STRONG = "rgba(120, 120, 120, 0.25)"  # narrow bands at the σ values of a categorical prior
LAYER_DASH = ["dot", "dash", "dashdot", "longdash"]
PRIOR_SYMBOL = ["circle", "diamond", "square", "triangle-up", "cross", "x"]  # the report's priors, in order
PRIOR_DASH = ["solid", "dash", "dot", "dashdot", "longdash"]  # the same, for views drawn with lines only
MENU_ROOM = 40  # px above the plot for a row of buttons (groups.depth_menu)
MARGIN = dict(l=70, r=30, t=50, b=60)  # px around the plotting area (more on top for buttons, below for a legend)


def arch_label(arch: str) -> str:
    """How the report writes an architecture (ModelConfig.param): its label (interp.params: GD++, DIAG, FULL)."""
    return of(arch).label


def _mix(hex_color: str, t: float) -> str:
    """Blend a colour toward white by t in [0, 1]."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * t) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


def model_color(arch: str, n_layers: int, depths: list[int]) -> str:
    """The architecture's colour, lighter for shallower models among the depths present."""
    depths = sorted(set(depths))
    if len(depths) <= 1:
        return ARCH_COLOR.get(arch, "#555555")
    rank = depths.index(n_layers) if n_layers in depths else len(depths) - 1
    return _mix(ARCH_COLOR.get(arch, "#555555"), 0.55 * (1 - rank / (len(depths) - 1)))


def ramp(arch: str, k: int, count: int, light: float = 0.7) -> str:
    """k-th of `count` shades of the architecture colour, from `light` toward white to full (per-layer curves; text
    takes a smaller `light` to stay legible)."""
    return _mix(ARCH_COLOR.get(arch, "#555555"), light * (1 - k / max(count - 1, 1)) if count > 1 else 0.0)


def layer_dash(l: int, L: int) -> str:
    """Dash of layer l (1-based) of an L-layer model: layer 1 dotted, 2 dashed, 3 dash-dot, ..., the last solid."""
    return "solid" if l == L else LAYER_DASH[(l - 1) % len(LAYER_DASH)]


def prior_symbol(noise: str, priors: list[str]) -> str:
    """The marker symbol of a run trained on `noise` among the report's priors (in their order)."""
    return PRIOR_SYMBOL[priors.index(noise) % len(PRIOR_SYMBOL)] if noise in priors else PRIOR_SYMBOL[0]


def prior_dash(noise: str, priors: list[str]) -> str:
    """The line dash of a run trained on `noise`, for views that draw lines without markers."""
    return PRIOR_DASH[priors.index(noise) % len(PRIOR_DASH)] if noise in priors else PRIOR_DASH[0]


def plot_height(height: int) -> int:
    """Pixel height of the plotting area of a figure of `height` (apply_theme adds the room for buttons and a legend
    below to the figure's height and margins alike, so it leaves this unchanged)."""
    return height - MARGIN["t"] - MARGIN["b"]


def _theme() -> go.layout.Template:
    """plotly_white's 2-D part with the report's font, legend and framed axes: one template object, set on every
    figure in one assignment (the theme as per-axis updates was half of a cached report's time; a template's
    `xaxis` applies to every x axis of a figure, `annotationdefaults` to every annotation that sets no font)."""
    white = go.layout.Template(pio.templates["plotly_white"]).to_plotly_json()
    axis = dict(showline=True, linecolor="#999", mirror=True, ticks="outside", gridcolor="#eee", zeroline=False)
    axis |= dict(exponentformat="power")
    layout = {k: white["layout"][k] for k in WHITE_LAYOUT}
    layout |= dict(
        font=dict(family=FONT, size=13, color="#222"),
        hoverlabel=dict(align="left", font=dict(family=FONT, size=12)),
        legend=dict(
            font=dict(size=12),
            bgcolor="rgba(255,255,255,0.85)",
            itemclick="toggle",
            itemdoubleclick="toggleothers",
            groupclick="togglegroup",
        ),
        xaxis={**white["layout"]["xaxis"], **axis},
        yaxis={**white["layout"]["yaxis"], **axis},
        annotationdefaults={**white["layout"]["annotationdefaults"], "font": dict(family=FONT)},
    )
    return go.layout.Template(layout=layout, data={k: white["data"][k] for k in ("scatter", "heatmap", "bar")})


# the parts of plotly_white's layout that 2-D figures use (its polar, ternary, geo and 3-D scene defaults are left out)
WHITE_LAYOUT = ("autotypenumbers", "colorway", "hovermode", "paper_bgcolor", "plot_bgcolor", "colorscale")
WHITE_LAYOUT += ("coloraxis", "shapedefaults", "title")
THEME = _theme()


def apply_theme(fig: go.Figure, height: int = 420) -> go.Figure:
    top = MARGIN["t"] + (MENU_ROOM if fig.layout.updatemenus else 0)  # buttons sit above the subplot titles
    height += top - MARGIN["t"]
    fig.update_layout(template=THEME, height=height, margin=dict(MARGIN, t=top))
    for a in fig.layout.annotations:  # subplot titles; data labels keep their size
        if a.xref == "paper":
            a.font.size = 14
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    if entries > 10:  # a long legend would scroll beside the plot: lay it out in rows below instead
        rows = -(-entries // 6)
        fig.update_layout(
            height=height + 10 + 26 * rows,  # the plotting area keeps its height (plot_height)
            margin=dict(b=MARGIN["b"] + 10 + 26 * rows),
            legend=dict(orientation="h", yref="container", y=0.005, yanchor="bottom", x=0, xanchor="left"),
        )
    return fig
