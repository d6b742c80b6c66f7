"""One self-contained HTML file: plotly.js embedded once, a table of contents, the summary table, the figures."""

from __future__ import annotations

import datetime as _dt
import html
import math

import plotly
import plotly.io as pio
from plotly.offline import get_plotlyjs

from interp.config import inputs_suffix
from interp.evaluate import MAX_REL_STDERR, LossEstimate, paper_value, precise
from interp.render import count, fixed, loss, ratio, table
from interp.report import figures
from interp.report.data import BASELINES, ReportData
from interp.report.figures import Panel
from interp.report.figures.base import short_path
from interp.report.style import ARCH_COLOR, BASELINE_STYLE, FONT, arch_label

PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png", "scale": 2}}

CSS = """
:root { --ink: #1f2328; --muted: #5b636e; --line: #e3e6ea; --accent: #2F6DB5; }
* { box-sizing: border-box; }
body { margin: 0; font-family: FONT; color: var(--ink); background: #f6f7f9; line-height: 1.5; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 28px 48px 18px; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 650; letter-spacing: -0.01em; }
header p { margin: 2px 0; color: var(--muted); font-size: 14px; }
main { display: grid; grid-template-columns: 250px minmax(0, 1fr); gap: 28px;
  padding: 24px 48px 60px; max-width: 1680px; }
nav { position: sticky; top: 16px; align-self: start; font-size: 14px; }
nav h2 { font-size: 12px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--muted); margin: 14px 0 6px; }
nav a { display: block; color: var(--ink); text-decoration: none; padding: 3px 8px; border-radius: 5px; }
nav a:hover { background: #e9eef6; color: var(--accent); }
section > h2 { font-size: 20px; margin: 30px 0 12px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 22px 10px; margin: 0 0 22px; }
.card h3 { margin: 0 0 4px; font-size: 17px; font-weight: 620; }
.card p.look { margin: 0 0 8px; color: var(--muted); font-size: 14px; max-width: 1100px; }
.card p.note { margin: 8px 0 14px; padding: 10px 14px; background: #fff8e6;
  border-left: 4px solid #e0a800; font-size: 14px; }
table.summary { border-collapse: collapse; font-size: 13.5px; width: 100%; font-variant-numeric: tabular-nums; }
table.summary th, table.summary td { padding: 5px 10px; border-bottom: 1px solid var(--line);
  text-align: right; white-space: nowrap; }
table.summary th { background: #f1f3f6; font-weight: 600; position: sticky; top: 0; }
table.summary td.l, table.summary th.l { text-align: left; }
table.summary tr.base td { color: var(--muted); }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  margin-right: 6px; vertical-align: middle; }
.tag { font-size: 11px; padding: 1px 6px; border-radius: 8px; background: #fff1d6; color: #8a5a00; margin-left: 6px; }
.good { color: #1d7a34; } .bad { color: #b3261e; }
footer { color: var(--muted); font-size: 12.5px; padding: 0 48px 30px; }
code { background: #eef0f3; padding: 1px 5px; border-radius: 4px; font-size: 12.5px; }
label.prior { display: block; padding: 3px 8px; color: var(--muted); font-size: 13px; }
label.prior select { margin-top: 4px; width: 100%; font-size: 14px; padding: 3px 4px; }
""".replace("FONT", FONT)


def _fmt(v, spec=".4g") -> str:
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return "–"
    if v != 0 and abs(v) < 1e-3:
        return format(v, ".2e")
    return format(v, spec)


def _against_paper(est, paper: float | None) -> dict:
    """A summary row's loss fields: mean ± stderr on n_seq sequences, and its ratio to the paper where there is one."""
    return dict(
        mean=est.mean,
        stderr=est.stderr,
        n_seq=est.n_seq,
        paper=paper,
        ratio=est.mean / paper if paper else None,
        ratio_se=est.stderr / paper if paper else None,
        precise=precise(est.mean, est.stderr),
    )


def summary_rows(data: ReportData) -> list[dict]:
    """One row per model, then the baselines of each prior: adjusted loss next to the paper's Table 1."""
    rows = []
    for e in data.entries:
        loss = data.records[e.label].loss
        paper = paper_value(e.arch, e.noise, e.n_layers, e.d, e.n, e.x_cov) if e.n_heads == 1 else None
        rows.append(
            dict(
                kind="model",
                name=e.label,
                arch=e.arch,
                what=f"{arch_label(e.arch)} L={e.n_layers}" + inputs_suffix(e.x_cov),
                noise=e.noise,
                step=e.step,
                total=e.total_steps,
                complete=e.complete,
                **_against_paper(loss, paper),
            )
        )
    for e in data.family_entries:  # the linear-attention family's models: their own task, no paper value
        rec = data.family_records[e.label]
        rows.append(
            dict(
                kind="family",
                name=e.label,
                arch="family",
                what=rec.cell["variant"] + f" L={e.n_layers}" + inputs_suffix(e.x_cov),
                noise=e.noise,
                step=e.step,
                total=e.total_steps,
                complete=e.complete,
                **_against_paper(LossEstimate.from_json(rec.cell["loss"]), None),
            )
        )
    for prior, base in data.baselines.items():
        for b in BASELINES:
            if b in base.loss:
                est, paper = base.loss[b], base.paper.get(b)
                rows.append(
                    dict(
                        kind="baseline",
                        name=BASELINE_STYLE[b][0],
                        arch=b,
                        what="baseline" + inputs_suffix(base.x_cov),
                        noise=prior,
                        step=None,
                        total=None,
                        complete=True,
                        **_against_paper(est, paper),
                    )
                )
    return rows


def _ratio(row: dict) -> str:
    """ours / paper ± its standard error (the paper's value taken as exact); "○" where the noise cannot support it
    (interp.evaluate.precise), "–" without a paper value."""
    return ratio(row["mean"], row["stderr"], row["paper"], row["precise"])


NOISY_NOTE = f"○: standard error above {MAX_REL_STDERR:.0%} of the value, too noisy for a ratio to the paper"


def _preview(data: ReportData) -> str:
    """The line that marks a --quick report's numbers as a preview (empty otherwise)."""
    if not data.settings.preview:
        return ""
    return (
        f"preview (--quick): {count(data.settings.n_seq)} sequences per loss, noisy numbers for a first look, not a "
        "reproduction; a ratio to the paper only where the standard error is within "
        f"{MAX_REL_STDERR:.0%} of the value"
    )


def summary_text(data: ReportData) -> str:
    """The summary table for a terminal: every loss with its standard error and its sequence count."""
    rows = summary_rows(data)
    head = ["model", "what", "noise", "step", "adjusted loss", "paper", "ours/paper"]
    body = [
        [
            r["name"],
            r["what"],
            r["noise"],
            "" if r["step"] is None else f"{r['step']}" + ("" if r["complete"] else "*"),
            loss(r["mean"], r["stderr"], r["n_seq"]),
            fixed(r["paper"]),
            _ratio(r),
        ]
        for r in rows
    ]
    s = data.settings
    lines = [_preview(data)] if s.preview else []
    lines.append(
        f"adjusted loss on seed {s.seed} of each model's training prior: "
        + (
            "the same sequences as interp eval's and interp table's defaults"
            if (s.seed, s.n_seq) == (0, 100_000)
            else f"{count(s.n_seq)} of them"
        )
    )
    lines.append(table(head, body, left=3))
    if any(not r["complete"] for r in rows):
        lines.append("* still training: the last checkpoint so far")
    if data.light:
        lines.append(
            f"and {len(data.light)} cells of the Table 1 zoo ({', '.join(map(short_path, data.light_dirs))}): their "
            "loss and 7-layer profile, against the paper in the report's Table 1 view"
        )
    if any(r["paper"] and not r["precise"] for r in rows):
        lines.append(NOISY_NOTE + (" (rerun without --quick)" if s.preview else ""))
    return "\n".join(lines)


def _summary_html(data: ReportData) -> str:
    s = data.settings
    rows = summary_rows(data)
    preview = _preview(data)
    out = [f'<p class="note">{html.escape(preview)}</p>'] if preview else []
    out.append(
        '<table class="summary"><thead><tr><th class="l">model</th><th class="l">what</th><th class="l">noise</th>'
        "<th>step</th><th>adjusted loss</th><th>± s.e.</th><th>paper (Table 1)</th>"
        "<th>ours / paper</th></tr></thead><tbody>"
    )
    for r in rows:
        colour = ARCH_COLOR.get(r["arch"]) or BASELINE_STYLE.get(r["arch"], ("", "#999"))[1]
        tag = "" if r["complete"] else '<span class="tag">training</span>'
        step = (
            ""
            if r["step"] is None
            else (f"{r['step']}" if r["total"] in (None, r["step"]) else f"{r['step']} / {r['total']}")
        )
        shown = r["ratio"] if r["precise"] else None  # a ratio the noise supports
        cls = "" if shown is None else (" good" if shown <= 1.05 else " bad" if shown > 1.5 else "")
        out.append(
            f'<tr class="{"base" if r["kind"] == "baseline" else ""}">'
            f'<td class="l"><span class="dot" style="background:{colour}"></span>{html.escape(r["name"])}{tag}</td>'
            f'<td class="l">{html.escape(r["what"])}</td><td class="l">{html.escape(r["noise"])}</td>'
            f'<td>{step}</td><td title="{r["mean"]!r}">{_fmt(r["mean"])}</td><td>{_fmt(r["stderr"], ".2g")}</td>'
            f'<td>{_fmt(r["paper"])}</td><td class="{cls.strip()}">{_ratio(r)}</td></tr>'
        )
    out.append("</tbody></table>")
    out.append(
        f'<p class="look">Adjusted loss = ½·MSE minus the oracle ridge\'s ½·MSE on the same {s.n_seq:,} sequences '
        f"of the model's training prior (seed {s.seed}). The paper's numbers are the best of 5 seeds after 200 000 "
        "steps; ratios (± one standard error) above 1.5 are red, at or below 1.05 green"
        + ("; " + html.escape(NOISY_NOTE) if any(r["paper"] and not r["precise"] for r in rows) else "")
        + ".</p>"
    )
    return "\n".join(out)


def _panel_html(p: Panel, prior: str | None = None) -> str:
    """One card; a per-prior panel (`p.group`) is tagged with its prior and hidden unless it is `prior`."""
    shown = p.group is None or p.group == prior
    tag = (
        "" if p.group is None else f' data-prior="{html.escape(p.group)}"' + ("" if shown else ' style="display:none"')
    )
    parts = [f'<div class="card" id="{p.id}"{tag}><h3>{html.escape(p.title)}</h3>']
    if p.caption:
        parts.append(f'<p class="look">{html.escape(p.caption)}</p>')
    if p.note:
        parts.append(f'<p class="note">{html.escape(p.note)}</p>')
    if p.figure is not None:
        parts.append(
            pio.to_html(
                p.figure,  # a go.Figure (validated as it was built) or a cached one's dict
                validate=False,
                full_html=False,
                include_plotlyjs=False,
                include_mathjax=False,
                div_id=f"fig-{p.id}",
                config=PLOT_CONFIG,
                default_width="100%",
            )
        )
    parts.append("</div>")
    return "\n".join(parts)


DEFAULT_PRIOR = "uniform:5"  # the prior selector's first choice where the report has it (the paper's Figures 1-2)

# The prior selector: show the per-prior panels of one prior, and fit the figures that were hidden when drawn.
PRIOR_SCRIPT = """
function showPrior(prior) {
  document.querySelectorAll('[data-prior]').forEach(function (card) {
    var on = card.dataset.prior === prior;
    card.style.display = on ? '' : 'none';
    if (on) card.querySelectorAll('.plotly-graph-div').forEach(function (g) { Plotly.Plots.resize(g); });
  });
  document.querySelectorAll('select.prior-select').forEach(function (s) { s.value = prior; });
}
"""


def _prior_selector(priors: list[str], default: str) -> str:
    options = "".join(
        f'<option value="{html.escape(p)}"{" selected" if p == default else ""}>{html.escape(p)}</option>'
        for p in priors
    )
    return (
        '<h2>Prior</h2><label class="prior">per-model views of the models trained on<br>'
        f'<select class="prior-select" onchange="showPrior(this.value)">{options}</select></label>'
    )


def _grouped(panels: list[Panel], prior: str | None) -> list[str]:
    """The cards of a section, each per-prior view's panels inside one element holding the view's id."""
    out, open_anchor = [], None
    for p in panels:
        if p.anchor != open_anchor:
            if open_anchor is not None:
                out.append("</div>")
            if p.anchor is not None:
                out.append(f'<div id="{p.anchor}">')
            open_anchor = p.anchor
        out.append(_panel_html(p, prior))
    if open_anchor is not None:
        out.append("</div>")
    return out


def sections(data: ReportData, only=None, cache=None) -> list[tuple[str, str, list[Panel]]]:
    """(section id, heading, panels) of every view registered in interp.report.figures (those named in `only`,
    where given), in order; `cache`: a FigureCache of `data` (interp.report.figcache)."""
    return figures.sections(data, only, cache)


def render(data: ReportData, title: str = "interp report", only=None, cache=None) -> str:
    """The whole report as one HTML string (no network needed to open it); `only`: the names of the view functions
    to draw (default: all); `cache`: a FigureCache of `data`, whose panels are not drawn again."""
    secs = [s for s in sections(data, only, cache) if s[2]]
    priors = list(dict.fromkeys(p.group for _, _, panels in secs for p in panels if p.group is not None))
    prior = DEFAULT_PRIOR if DEFAULT_PRIOR in priors else (priors[0] if priors else None)
    toc = ["<nav>", *([_prior_selector(priors, prior)] if len(priors) > 1 else [])]
    toc.append('<h2>Contents</h2><a href="#summary">Summary table</a>')
    for sid, name, panels in secs:
        toc.append(f"<h2>{html.escape(name)}</h2>")
        links: dict[str, str] = {}
        for p in panels:  # a per-prior view once, by its first panel's title
            links.setdefault(p.anchor or p.id, p.title)
        toc += [f'<a href="#{pid}">{html.escape(title)}</a>' for pid, title in links.items()]
    toc.append("</nav>")
    body = [
        '<section id="summary"><h2>Summary: adjusted loss against the paper</h2>'
        f'<div class="card">{_summary_html(data)}</div></section>'
    ]
    for sid, name, panels in secs:
        body.append(f'<section id="section-{sid}"><h2>{html.escape(name)}</h2>')  # panel ids may be "training"
        body += _grouped(panels, prior)
        body.append("</section>")
    s = data.settings
    now = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    priors = ", ".join(dict.fromkeys(e.noise for e in (*data.models, *data.family_entries)))
    light = (
        f" and {len(data.light)} cells of the Table 1 zoo (their loss and 7-layer per-σ profile, not probed)"
        if data.light
        else ""
    )
    family = (
        f" and {len(data.family_entries)} models of the linear-attention family (read by the family views)"
        if data.family_entries
        else ""
    )
    models = (*data.entries, *data.family_entries)
    sources = [short_path(p) for p in (*(e.path for e in models), *data.light_dirs)]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{CSS}</style>",
            f'<script type="text/javascript">{get_plotlyjs()}</script>',
            f'<script type="text/javascript">{PRIOR_SCRIPT}</script>',
            "</head><body>",
            f"<header><h1>{html.escape(title)}</h1>"
            f"<p>{len(data.entries)} probed linear transformers{html.escape(light)}{html.escape(family)} trained on "
            "in-context linear "
            f"regression ({html.escape(priors)}), "
            "after Vladymyrov et al., <i>Linear Transformers are Versatile In-Context Learners</i> (NeurIPS 2024).</p>"
            f"<p>Generated {now} by <code>interp report</code>; {s.n_seq:,} sequences per loss, {s.profile_seq:,} "
            f"per σ, {s.probe_seq:,} probed. Hover any point for exact values; click legend entries to hide or isolate "
            "them.</p></header>",
            "<main>",
            *toc,
            "<div>",
            *body,
            "</div></main>",
            f"<footer>plotly {plotly.__version__}; models: " + html.escape(", ".join(sources)) + "</footer>",
            "</body></html>",
        ]
    )
