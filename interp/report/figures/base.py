"""The view registry and what every view shares: Panel, Note, `@view`, and the small helpers of drawing.

`@view(id, title, caption, height, section)` registers a function that draws a figure from the ReportData: the
report (html.sections) draws every registered view, section by section in SECTIONS' order and, within a section,
in the order of registration (the order of the view modules' imports in figures/__init__.py, then of definition).
The decorated function returns a Panel (figure, title, what to look for): the theme applied and, where the function
returns a Note instead, that note. Captions sit beside the code that draws them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.evaluate import TABLE1_COLUMNS
from interp.report.data import Entry, ReportData
from interp.report.groups import Tag, best_runs, depth_groups, depth_menu, run_tag
from interp.report.style import BAND, BAND_STRONG, apply_theme, arch_label, model_color, prior_dash, prior_symbol
from interp.table import PAPER_ORDER
from interp.tasks import as_prior, prior_slug

RANK = {a.name: 10 * (i + 1) for i, a in enumerate(PAPER_ORDER)}  # legend order: architectures, then baselines
RUN_PALETTE = ["#D8453B", "#2F6DB5", "#3B9B4A", "#E08A1E", "#7B4FA0", "#17A2B8", "#8C564B", "#D45F9E"]
SECTIONS = {"paper": "The paper's views", "probes": "What interp finds inside", "training": "Over training"}


# ---------------------------------------------------------------------------- panels and the registry
@dataclass
class Panel:
    """One figure of the report (or a note where there is nothing to draw)."""

    id: str
    title: str
    caption: str  # what to look for
    figure: go.Figure | None = None
    note: str | None = None
    group: str | None = None  # the prior of a per-prior view's panel (the report's prior selector shows one group)
    anchor: str | None = None  # a per-prior view's id, shared by its panels (the table of contents links it once)


@dataclass
class Note:
    """What a view returns when it has nothing to draw (its title may differ from the drawn one)."""

    text: str
    title: str | None = None


@dataclass(frozen=True)
class View:
    """A registered view: `draw(data, *args) -> Panel`, once per item of `each(data)` (once, without arguments, when
    `each` is None)."""

    name: str
    section: str
    draw: Callable[..., Panel]
    each: Callable[[ReportData], list] | None = None

    def panels(self, data: ReportData, cache=None) -> list[Panel]:
        """Its panels; `cache` (an interp.report.figcache.FigureCache of `data`) returns those it holds."""
        calls = [()] if self.each is None else [(item,) for item in self.each(data)]
        if cache is None:
            return [self.draw(data, *args) for args in calls]
        return [cache.panel(self.name, args, lambda args=args: self.draw(data, *args)) for args in calls]


REGISTRY: list[View] = []
NO_PROBED = (
    "No probed model in this report: a directory of standalone checkpoints (the Table 1 zoo) gives only each file's "
    "loss and 7-layer profile. Pass run directories or the checkpoint files themselves to probe them."
)

Text = "str | Callable[..., str]"  # a fixed string, or one computed from the view's arguments


def view(
    id: Text,
    title: Text,
    caption: Text,
    height: "int | Callable[..., int]",
    section: str,
    after: Callable[..., None] | None = None,
    each: Callable[[ReportData], list] | None = None,
    probed: bool = True,
    per_prior: bool = False,
):
    """Register a view in `section`: draw(data, *args) -> go.Figure | Note becomes (data, *args) -> Panel, drawn by
    the report once (or once per item of `each(data)`, passed as the one argument).

    id, title, caption and height are fixed or functions of (data, *args); `after(fig, data, *args)` adjusts the
    layout once the theme is applied (what the theme would otherwise overwrite). `probed`: the view draws the
    probed models (data.entries), and shows NO_PROBED where the report has none (only light entries). `per_prior`:
    drawn once per training prior of the probed models (`probed_priors`) from the report restricted to that prior
    (ReportData.for_prior), each panel's id suffixed with the prior and tagged with it for the prior selector."""
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r} (known: {', '.join(SECTIONS)})")

    def value(x, *args):
        return x(*args) if callable(x) else x

    def wrap(draw):
        if per_prior:
            base = wrap_one(lambda data: draw(data))

            @functools.wraps(draw)
            def by_prior(data: ReportData, prior: str | None = None) -> Panel:
                if prior is None:  # called directly: every prior's models in one panel
                    return base(data)
                out = base(data.for_prior(prior))
                out.anchor, out.group = out.id, prior
                out.id = f"{out.id}-{prior_slug(prior)}"
                return out

            return register(draw, by_prior, probed_priors)
        return register(draw, wrap_one(draw), each)

    def register(draw, panel, each):
        name = f"{draw.__module__}.{draw.__qualname__}"
        entry = View(name, section, panel, each)
        at = next((i for i, v in enumerate(REGISTRY) if v.name == name), None)  # a reloaded module: replace
        REGISTRY.append(entry) if at is None else REGISTRY.__setitem__(at, entry)
        return panel

    def wrap_one(draw):
        @functools.wraps(draw)
        def panel(data: ReportData, *args) -> Panel:
            out = Note(NO_PROBED) if probed and not data.entries else draw(data, *args)
            pid = value(id, data, *args)
            if isinstance(out, Note):
                return Panel(pid, out.title or value(title, data, *args), "", note=out.text)
            apply_theme(out, value(height, data, *args))
            if after is not None:
                after(out, data, *args)
            return Panel(pid, value(title, data, *args), value(caption, data, *args), out)

        return panel

    return wrap


def probed_priors(data: ReportData) -> list[str]:
    """The training priors of the probed models, in Table 1's column order (others after, as they come)."""
    priors = list(dict.fromkeys(e.noise for e in data.entries))
    order = {p: i for i, p in enumerate(TABLE1_COLUMNS)}
    return sorted(priors, key=lambda p: (order.get(p, len(order)), priors.index(p)))


def sections(data: ReportData, only=None, cache=None) -> list[tuple[str, str, list[Panel]]]:
    """(section id, heading, panels) of every registered view (of those whose function is named in `only`, where
    given), in order, the panels `cache` holds (a FigureCache of `data`) taken from it; ValueError on a repeated panel
    id."""
    views = [v for v in REGISTRY if only is None or v.draw.__name__ in only]
    out = []
    for sid, heading in SECTIONS.items():
        out.append((sid, heading, [p for v in views if v.section == sid for p in v.panels(data, cache)]))
    ids = [p.id for _, _, panels in out for p in panels]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"views with the same id: {', '.join(repeated)}")
    return out


# ---------------------------------------------------------------------------- drawing helpers
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


ROUNDING = 1e-14  # a baseline's adjusted loss below this is 0 at rounding level (uniform:0, σ = 0): not drawn


def _level(v):
    """A baseline's value on a log axis: none where it is 0 up to rounding (hover text keeps the exact number)."""
    return v if v is not None and v > ROUNDING else None


def _fmt(v, spec=".4g") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _name(e: Entry, data: ReportData) -> str:
    """Legend name: architecture and depth, plus the run's label where several models share them."""
    name = f"{arch_label(e.arch)} L={e.n_layers}"
    if sum((x.arch, x.n_layers) == (e.arch, e.n_layers) for x in data.entries) > 1:
        name += f" · {e.label}"
    return name + ("" if e.complete else f" (step {e.step})")


def _title(e: Entry) -> str:
    return f"{arch_label(e.arch)} L={e.n_layers}, {e.label}" + ("" if e.complete else f" (step {e.step})")


def _color(e: Entry, data: ReportData) -> str:
    return model_color(e.arch, e.n_layers, [x.n_layers for x in data.entries])


def _priors(data: ReportData) -> list[str]:
    return list(dict.fromkeys(e.noise for e in data.entries))


def short_path(path: str) -> str:
    """A model path relative to the working directory when it lies below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def _symbol(e: Entry, data: ReportData) -> str:
    """The marker of e's prior: runs of one architecture and depth on two priors share a colour, not a marker."""
    return prior_symbol(e.noise, _priors(data))


def _dash(e: Entry, data: ReportData) -> str:
    """The same as a line dash, for views drawn without markers."""
    return prior_dash(e.noise, _priors(data))


def _in_distribution(fig: go.Figure, noise: str, row=None, col=None) -> None:
    """Shade σ values the model was trained on: [0, σ_max] for uniform, the support points otherwise."""
    prior = as_prior(noise)
    kw = {} if row is None else dict(row=row, col=col, exclude_empty_subplots=False)
    if prior.kind == "uniform":
        fig.add_vrect(x0=0, x1=prior.sigma_max, fillcolor=BAND, line_width=0, layer="below", **kw)
    else:
        for s in prior.support:
            fig.add_vrect(x0=s - 0.15, x1=s + 0.15, fillcolor=BAND_STRONG, line_width=0, layer="below", **kw)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-")


def _per_layer_lines(
    data: ReportData, fig, getter, row=1, col=1, start: int = 1, log=False, hover="value", fmt=".5g", show_legend=True
) -> None:
    """One line per model of getter(probe, entry) against the layer index (from `start`), its prior's marker."""
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
                marker=dict(size=7, symbol=_symbol(e, data)),
                customdata=vals,
                hovertemplate=f"{e.label}<br>layer %{{x}}<br>{hover} %{{customdata:{fmt}}}<extra></extra>",
            ),
            row=row,
            col=col,
        )


def _clip_spikes(fig: go.Figure, row: int, col: int, q: float = 0.9, decades: float = 1.0) -> int:
    """Keep a few spikes from flattening a log axis: values more than `decades` above the q-quantile of the
    subplot's values lie above its range (their lines leave at the top), each marked by a triangle at the top edge
    whose hover text gives its true value (in a trace of the spike's run: the depth menu shows it with its run).
    Returns how many points were clipped; none leaves the axis on autorange."""
    traces = [t for t in fig.select_traces(row=row, col=col) if t.type == "scatter" and t.y is not None]
    vals = sorted(v for t in traces for v in t.y if v is not None and v > 0)
    if not vals:
        return 0
    limit = vals[int(q * (len(vals) - 1))] * 10**decades
    kept = [v for v in vals if v <= limit]
    if len(kept) == len(vals):
        return 0
    lo, hi = math.log10(kept[0]) - 0.1, math.log10(kept[-1]) + 0.15
    fig.update_yaxes(range=[lo, hi], row=row, col=col)
    edge = 10 ** (hi - 0.03 * (hi - lo))  # the markers' tips stay below the subplot title
    clipped = 0
    for t in traces:
        spikes = [(x, y) for x, y in zip(t.x, t.y) if y is not None and y > limit]
        if not spikes:
            continue
        clipped += len(spikes)
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in spikes],
                y=[edge] * len(spikes),
                mode="markers",
                name=t.name,
                legendgroup=t.legendgroup,
                showlegend=False,
                cliponaxis=False,
                marker=dict(symbol="triangle-up", size=11, color=t.line.color, line=dict(width=1, color="white")),
                customdata=[y for _, y in spikes],
                hovertemplate=f"{t.hovertemplate.split('<br>')[0] if t.hovertemplate else t.name}<br>x = %{{x}}"
                f"<br>above the axis (its top: {10**hi:.3g}): %{{customdata:.4g}}<extra></extra>",
            ),
            row=row,
            col=col,
        )
    return clipped


BY_DEPTH_TEXT = (
    "The buttons above pick the depth, the deepest first: the best run of each prior and architecture is drawn, "
    "other runs are listed in the legend (click to draw)."
)
PRIOR_TEXT = "Runs on different priors differ in marker symbol (in the order of the summary table: ●, ◆, ■)."


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
