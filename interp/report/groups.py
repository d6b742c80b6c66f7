"""Many models in one figure: the best run per (prior, architecture, depth), and buttons that show one depth at a time.

With 20–40 models, a view that draws one trace per model is unreadable. Each view tags its traces with the
depth they belong to and how they look when that depth is shown: the best run per cell drawn (the paper
reports the best of 5 seeds, Vladymyrov et al. 2024, Table 1), other runs only listed in the legend, a click
away. `depth_menu` puts one button per group of depths above the figure and sets the figure to the default
group; traces of the other depths are hidden (not drawn, not in the legend, untouched by legend clicks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import plotly.graph_objects as go

from interp.report.data import Entry, ReportData
from interp.tasks import as_prior

Cell = tuple  # (prior, architecture, depth)
PROFILE_DEPTHS = range(2, 8)  # Figure 2, bottom row: 2–7 layers at σ_max = 5; every other prior: 7 layers (Figure 3)


def cell(e: Entry) -> Cell:
    return (e.noise, e.arch, e.n_layers)


def _loss(data: ReportData, e: Entry) -> float:
    mean = data.loss(e).mean
    return math.inf if mean is None or math.isnan(mean) else mean


def _best(data: ReportData, models: list[Entry]) -> dict[Cell, Entry]:
    best: dict[Cell, Entry] = {}
    for e in models:
        if cell(e) not in best or _loss(data, e) < _loss(data, best[cell(e)]):
            best[cell(e)] = e
    return best


def best_runs(data: ReportData) -> dict[Cell, Entry]:
    """The probed run with the lowest adjusted loss in each (prior, architecture, depth) cell, as the paper reports
    the best of 5 seeds; a tie goes to the run given first, a run without a finite loss wins only an empty cell."""
    return _best(data, data.entries)


def best_models(data: ReportData) -> dict[Cell, Entry]:
    """The same over the probed runs and the light entries (the Table 1 zoo) together: the better of the two per
    cell, a tie to the probed run."""
    return _best(data, data.models)


@dataclass(frozen=True)
class Tag:
    """Where one trace belongs in a depth menu."""

    depth: int | None  # None: shown whatever the depths (a reference line)
    on: bool | str = True  # its visibility when its depth is shown: True, or "legendonly" (listed, drawn on a click)


def run_tag(data: ReportData, e: Entry, best: dict[Cell, Entry] | None = None) -> Tag:
    """The best run of its cell drawn, another run listed in the legend only."""
    best = best_runs(data) if best is None else best
    return Tag(e.n_layers, True if best[cell(e)] is e else "legendonly")


def _label(depths: list[int]) -> str:
    """'L = 4', 'L = 2–7', 'L = 1, 4–7'."""
    runs, out = [], []
    for L in sorted(depths):
        if runs and L == runs[-1][1] + 1:
            runs[-1][1] = L
        else:
            runs.append([L, L])
    for a, b in runs:
        out.append(f"{a}" if a == b else f"{a}–{b}")
    return "L = " + ", ".join(out)


def depth_groups(depths: list[int], default: list[int], every: bool = True) -> tuple[list[tuple[str, list[int]]], int]:
    """The buttons ([(label, depths)]) and the index of the default one: the default group when it holds several
    depths, one per depth, and all depths together (`every`) when that is another group."""
    depths = sorted(set(depths))
    default = sorted(set(default))
    groups = [] if len(default) == 1 else [(_label(default), default)]
    groups += [(f"L = {L}", [L]) for L in depths]
    if every and len(depths) > 1 and depths != default:
        groups.append(("all depths", depths))
    return groups, next(i for i, (_, g) in enumerate(groups) if g == default)


def profile_depths(prior: str, depths: list[int]) -> list[int]:
    """The depths the paper draws per-σ profiles for on this prior (Figure 2: 2–7 layers at σ_max = 5, 7 layers on
    the other uniform priors; Figure 3: 7 layers on categorical priors); the deepest present when none is."""
    p = as_prior(prior)
    want = PROFILE_DEPTHS if p.kind == "uniform" and p.sigma_max == 5 else (7,)
    return [L for L in sorted(depths) if L in want] or [max(depths)]


def masks(fig: go.Figure, tags: list[Tag], depths: list[int]) -> tuple[list, list[bool]]:
    """(visible, showlegend) of every trace when `depths` are shown: a trace of another depth is hidden, and each
    legend group keeps one entry, on its first shown trace that may have one (showlegend not False)."""
    visible, legend, seen = [], [], set()
    for t, tag in zip(fig.data, tags):
        shown = tag.depth is None or tag.depth in depths
        visible.append(tag.on if shown else False)
        entry = shown and t.showlegend is not False and (t.legendgroup is None or t.legendgroup not in seen)
        legend.append(bool(entry))
        if entry and t.legendgroup is not None:
            seen.add(t.legendgroup)
    return visible, legend


def depth_menu(
    fig: go.Figure,
    tags: list[Tag],
    groups: list[tuple[str, list[int]]],
    default: int = 0,
    layout: Callable[[list[int]], dict] | None = None,
) -> None:
    """Buttons above the figure, one per group of depths, each setting every trace's visibility and legend entry
    (and `layout(depths)`, a relayout dict, where given); the figure starts as its default button sets it. One
    group needs no button: the figure only takes its state."""
    if len(tags) != len(fig.data):
        raise ValueError(f"{len(tags)} tags for {len(fig.data)} traces")
    layout = layout or (lambda depths: {})
    buttons = []
    for label, depths in groups:
        visible, legend = masks(fig, tags, depths)
        buttons.append(
            dict(label=label, method="update", args=[{"visible": visible, "showlegend": legend}, layout(depths)])
        )
    fig.plotly_restyle(buttons[default]["args"][0])
    fig.plotly_relayout(buttons[default]["args"][1])
    if len(groups) > 1:
        fig.update_layout(
            updatemenus=[
                dict(
                    type="buttons",
                    direction="right",
                    buttons=buttons,
                    active=default,
                    showactive=True,
                    x=0,
                    xanchor="left",
                    y=1,
                    yanchor="bottom",
                    pad=dict(b=30, l=0, t=0, r=0),
                    bgcolor="white",
                    bordercolor="#c8ccd2",
                    font=dict(size=12),
                )
            ]
        )
