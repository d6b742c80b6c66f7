"""Table 1 of Vladymyrov et al. 2024 from trained runs: discover, evaluate (cached), best of seeds, render.

A run is any directory one level under a root holding a run config and checkpoints (what `interp train`
and `interp sweep` write); its cell is (arch, layers, prior) and its seed, all read from its config.json, which must
name them (REQUIRED: a missing field is never filled with a default; the run is skipped with a warning naming the
file), and which its final checkpoint must agree with (architecture, depth, d, heads, dtype, step, prior, seed; a
run whose checkpoint disagrees is skipped the same way). Only complete runs with the paper's setting (d = 10,
n = 20, one head, no --init, x ~ N(0, I)) are evaluated: adjusted loss of the final checkpoint on `n_seq` sequences
of evaluation seed `eval_seed`. The baseline rows (ConstRR, AdaRR, TunedRR) and the Bayes floor are evaluated on the
same sequences as the models of their column; `baseline_seq` adds rows of the baselines on that many sequences,
labelled with the count. A cell reports the best of its seeds, as the paper does, with that seed's median and worst
per-sequence loss; with `confirm_seq` the seed is chosen on those sequences and reported, with the baselines and the
aims, on as many other sequences of another seed (`confirm_cells`: the minimum over seeds is biased low on the
sequences it was chosen on). Every loss is printed with its standard error and its sequence count, and a cell is marked
against the paper only where the standard error is within 10% of the value (interp.evaluate.precise).

Above the table, the aims of the reproduction, counted from the data (`aims`): (a) cells within 10% of the paper or
at or below it, (b) every 7-layer FULL cell at or below it, (c) best seeds carried by a blow-up (a worst sequence
above 100·d). Below it, every cell of Vladymyrov et al. 2024, Table 1 in the selection, one row each in the paper's
order (`every_cell`): the best seed beside the paper with the ratio, the complete seeds and the spread of their means,
the best seed's median and worst sequence. A cell without a complete run is pending, and never counts as met.

Evaluations go through interp.evalcache (keyed by the checkpoint's bytes, the sequences and the evaluation code), so
a rerun, a copy of the runs elsewhere or a fresh clone with the committed cache only evaluates what is new.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable

from interp.config import TrainConfig, describe_covariance
from interp.evalcache import CACHE_FILE, EvalCache, baseline_subject, cached_loss, cached_losses
from interp.evalset import EvalSet
from interp.evaluate import TABLE1_COLUMNS, dominated, paper_table, paper_value, precise
from interp.files import (
    CheckpointError,
    InvalidArgument,
    InvalidType,
    as_path,
    atomic_write_bytes,
    read_regular_file,
)
from interp.limits import MAX_TEXT_BYTES
from interp.model import LinearTransformer
from interp.params import DIAG, FULL, GDPP, Parameterization, of
from interp.render import DASH, markdown, number
from interp.render import loss as loss_text
from interp.render import ratio as ratio_text
from interp.run import Run, load_with_digest
from interp.tasks import as_prior
from interp.tuning import TUNE_SEED, TUNE_SEQ, baselines, format_param, parameters, tuned

# The paper's order of the architectures (Table 1's rows at each depth, the report's legends): the most constrained
# first. How each is written is its `.label` (interp.params).
PAPER_ORDER: tuple[Parameterization, ...] = (GDPP, DIAG, FULL)
BASE_NAMES = {"constrr": "ConstRR", "adarr": "AdaRR", "tunedrr": "TunedRR", "bayes": "Bayes floor"}
N_SEQ = 100_000  # sequences per model and per baseline (the paper's evaluation size)
QUICK_SEQ = 10_000  # --quick: a preview
# config.json fields the table reads (a cell, a seed, whether the run is complete and a Table 1 setting): required,
# never defaulted. `init` and `x_cov` may be absent (configs written before those options: none, x ~ N(0, I)).
REQUIRED = ("model.param", "model.n_layers", "model.d", "model.n_heads", "noise", "seed", "n", "steps")
D = 10  # Table 1's input dimension: the only one tabulated
BLOWUP = 100 * D  # a worst sequence above 100·d is a blow-up (aim (c)): the 1-layer models' worst is about 100

__all__ = [
    "BLOWUP",
    "CACHE_FILE",
    "REQUIRED",
    "aims",
    "best_of_seeds",
    "discover",
    "every_cell",
    "paper_cells",
    "paper_order",
    "reaches",
    "render",
    "render_aims",
    "render_every_cell",
    "render_floor",
    "table1",
]


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def missing_fields(raw: dict) -> list[str]:
    """The REQUIRED fields a raw config.json object does not hold."""
    model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
    return [f for f in REQUIRED if (f.split(".", 1)[1] not in model if f.startswith("model.") else f not in raw)]


def disagreement(cfg: TrainConfig, model: LinearTransformer, meta: dict, step: int) -> str | None:
    """What a checkpoint (its model and metadata, saved at `step` by its file name) records against its run's config,
    in words; None when they agree."""
    c = model.cfg
    pairs = [
        ("arch", cfg.model.param, c.param),
        ("layers", cfg.model.n_layers, c.n_layers),
        ("d", cfg.model.d, c.d),
        ("heads", cfg.model.n_heads, c.n_heads),
        ("dtype", cfg.model.dtype, c.dtype),
    ]
    if meta.get("step") is not None:
        pairs.append(("step", step, meta["step"]))
    if meta.get("noise") is not None:
        pairs.append(("noise", as_prior(cfg.noise).spec, as_prior(meta["noise"]).spec))
    if meta.get("seed") is not None:
        pairs.append(("seed", cfg.seed, meta["seed"]))
    bad = [f"{name} {theirs!r} where config.json says {ours!r}" for name, ours, theirs in pairs if ours != theirs]
    return "; ".join(bad) or None


def discover(roots: list[Path], log: Callable[[str], None] = _log) -> list[dict]:
    """Every Table 1 run directory under the roots (one level deep), with its cell, seed and completeness; a complete
    run also with its final checkpoint and that file's digest."""
    runs = []
    for root in map(Path, roots):
        if not root.is_dir():
            continue
        for run in Run.find(root):
            try:
                cfg = run.config()
                done = run.is_complete()
                raw = json.loads(read_regular_file(run.config_path, 1 << 20, "run config"))
            except ValueError as err:  # CheckpointError is a ValueError
                log(f"skipping {run}: {err}")
                continue
            missing = missing_fields(raw)
            if missing:
                log(
                    f"skipping {run}: {run.config_path} has no {', '.join(missing)}; the table reads "
                    "them from the config and fills in no default"
                )
                continue
            if cfg.model.d != D or cfg.n != 20 or cfg.model.n_heads != 1 or cfg.init is not None:
                continue  # not a Table 1 configuration
            if cfg.x_cov is not None:  # d = 10, n = 20 like a Table 1 run, so say why it is not in the table
                log(f"skipping {run}: trained on x ~ N(0, {describe_covariance(cfg.x_cov)}); Table 1 has x ~ N(0, I)")
                continue
            if not cfg.model.is_lsa:  # d = 10, n = 20 and param full, but another model: never a FULL cell
                log(
                    f"skipping {run}: a {cfg.model.family_label} model, not the paper's (Table 1's FULL, DIAG and "
                    "GD++ only; experiments/family.py tabulates the linear-attention family)"
                )
                continue
            if cfg.quad:
                log(f"skipping {run}: trained on the quadratic task (--quad {cfg.quad:g}); Table 1's task is linear")
                continue
            ckpts = run.checkpoints()
            r = dict(
                run=str(run),
                arch=cfg.model.param,
                layers=cfg.model.n_layers,
                noise=as_prior(cfg.noise).spec,
                seed=cfg.seed,
                complete=done,
                step=ckpts[-1][0] if ckpts else 0,
            )
            if done:
                step, path = ckpts[-1]
                try:
                    model, meta, digest = load_with_digest(path)
                except CheckpointError as err:
                    log(f"skipping {run}: {err}")
                    continue
                why = disagreement(cfg, model, meta, step)
                if why:
                    log(f"skipping {run}: {path} records {why}; not tabulated")
                    continue
                try:
                    where = machines(run)
                except CheckpointError as err:  # the model is sound; only the note of its machine is not
                    log(f"{run}: {err}; tabulated without its machine")
                    where = []
                r.update(checkpoint=str(path), digest=digest, trained_on=where)
            runs.append(r)
    key = lambda r: (r["arch"], r["layers"], r["noise"], r["seed"])  # noqa: E731
    first_done: dict = {}
    for r in runs:
        if r["complete"]:
            first_done.setdefault(key(r), r["run"])
    # one complete run per (cell, seed); an unfinished copy of a finished seed is irrelevant
    return [
        r for r in runs if first_done.get(key(r), r["run"]) == r["run"] and (r["complete"] or key(r) not in first_done)
    ]


def machines(run: Run) -> list[str]:
    """The distinct paths and CPUs that trained `run` ("kernel avx2 on AMD EPYC (AVX2)"), in the order first used;
    [] for a run trained before interp recorded them. Two entries: a run resumed on another machine or path, whose
    weights no single machine reproduces bit for bit."""
    seen = []
    for seg in run.trained_on():
        where = seg.get("gpu") or f"{seg.get('cpu', '?')} ({seg.get('cpu_capability', '?')})"
        text = f"{seg.get('path', '?')} on {where}"
        if text not in seen:
            seen.append(text)
    return seen


def render_machines(runs: list[dict]) -> str:
    """How many complete runs each training path and CPU made (a run on two counts under both, named)."""
    done = [r for r in runs if r["complete"]]
    counts: dict[str, int] = {}
    for r in done:
        for m in r.get("trained_on") or ["no record (trained before interp recorded the machine)"]:
            counts[m] = counts.get(m, 0) + 1
    mixed = [r["run"] for r in done if len(r.get("trained_on") or []) > 1]
    lines = [f"- {m}: {k} run{'s' if k != 1 else ''}" for m, k in counts.items()] or ["- none"]
    if mixed:
        lines.append(f"- resumed on another machine or path (not reproducible bit for bit): {', '.join(mixed)}")
    return "\n".join(lines) + "\n"


def _where(run: str) -> str:
    """A run's path relative to the working directory when under it (a cache entry's description)."""
    path = Path(run).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def model_set(noise: str, n_seq: int, eval_seed: int) -> EvalSet:
    """The sequences of a Table 1 column: its models' and its baselines'."""
    return EvalSet(noise, d=D, n=20, n_seq=n_seq, seed=eval_seed)


def _run_losses(rs: list[dict], data: EvalSet, cache: EvalCache, log: Callable[[str], None]) -> list[dict]:
    """LossEstimate.to_dict() of each complete run's final checkpoint on `data`, in order: from the cache (keyed by
    checkpoint content) where it is there; the others loaded (each checked against its digest) and evaluated together
    on one draw of the sequences, whose drawing and oracle cost more than a Table 1 model's forward pass."""
    out = {r["run"]: cached_loss(r["digest"], data, cache, None)[0] for r in rs}
    missing = [r for r in rs if out[r["run"]] is None]
    if missing:
        t0 = time.perf_counter()
        models = {}
        for r in missing:
            model, _, digest = load_with_digest(r["checkpoint"])
            if digest != r["digest"]:
                raise CheckpointError(f"{r['checkpoint']}: changed since it was checked against its config; rerun")
            models[r["run"]] = model
        about = {r["run"]: {"run": _where(r["run"]), "step": r["step"]} for r in missing}
        ests, _ = cached_losses({r["run"]: r["digest"] for r in missing}, models, data, cache, about)
        for r in missing:
            est = out[r["run"]] = ests[r["run"]]
            log(f"{r['run']}: {loss_text(est.mean, est.stderr, est.n_seq)}")
        log(f"({len(missing)} runs on {data.n_seq} sequences of {data.noise.spec}: {time.perf_counter() - t0:.1f}s)")
    return [out[r["run"]].to_dict() for r in rs]


def _losses_by_prior(runs: list[dict], n_seq: int, eval_seed: int, cache: EvalCache, log: Callable[[str], None]):
    """(run, LossEstimate.to_dict()) of complete runs on `n_seq` sequences of seed `eval_seed` of each one's prior,
    one draw per prior (`_run_losses`)."""
    by_prior: dict[str, list[dict]] = {}
    for r in runs:
        by_prior.setdefault(r["noise"], []).append(r)
    for noise, rs in by_prior.items():
        yield from zip(rs, _run_losses(rs, model_set(noise, n_seq, eval_seed), cache, log))


def evaluate_runs(
    runs: list[dict], n_seq: int, eval_seed: int, cache: EvalCache, log: Callable[[str], None] = _log
) -> None:
    """Add mean, stderr, n_seq, median and worst of every complete run's final checkpoint to its dict."""
    for r, est in _losses_by_prior([r for r in runs if r["complete"]], n_seq, eval_seed, cache, log):
        r.update(est)


def confirm_cells(cells: dict, n_seq: int, eval_seed: int, cache: EvalCache, log: Callable[[str], None] = _log) -> dict:
    """`cells` (best_of_seeds) with each best seed reported on `n_seq` other sequences, of seed `eval_seed`.

    The minimum of several seeds' noisy means is biased low on the sequences it was chosen on; on sequences the
    choice never saw it is not. Each best run dict gets "confirm" (its estimate there); in the cells returned, "best"
    is a copy whose mean, stderr, n_seq, median and worst are the confirmation's, with the choice's in "selection".
    """
    for r, est in _losses_by_prior([c["best"] for c in cells.values()], n_seq, eval_seed, cache, log):
        r["confirm"] = est
    out = {}
    for key, c in cells.items():
        b = c["best"]
        chosen = {f: b[f] for f in b["confirm"]}  # the same fields (LossEstimate.to_dict), on the choice's sequences
        out[key] = {**c, "best": {**b, **b["confirm"], "selection": chosen}}
    return out


def evaluate_baselines(
    priors: list[str], n_seq: int, eval_seed: int, cache: EvalCache, log: Callable[[str], None] = _log
) -> dict:
    """{prior: {name: LossEstimate.to_dict()}} of the baseline rows on the sequences of the prior's models."""
    out = {}
    for noise in priors:
        t0 = time.perf_counter()
        rec = tuned(noise)
        preds = baselines(noise, names=list(BASE_NAMES))
        subjects = {nm: baseline_subject(nm, parameters(nm, rec)) for nm in preds}
        about = {nm: {"run": f"{nm} on {noise}", "params": parameters(nm, rec)} for nm in preds}
        ests, fresh = cached_losses(subjects, preds, model_set(noise, n_seq, eval_seed), cache, about)
        out[noise] = {nm: e.to_dict() for nm, e in ests.items()}
        if fresh:
            log(
                f"baselines on {noise} ({n_seq} sequences): "
                + ", ".join(f"{nm} {loss_text(ests[nm].mean, ests[nm].stderr)}" for nm in fresh)
                + f"  [{time.perf_counter() - t0:.0f}s]"
            )
    return out


def _order(mean: float) -> float:
    """A mean as a sort key: a non-finite one (nan, a blown-up inf) ranks last."""
    return mean if math.isfinite(mean) else math.inf


def best_of_seeds(runs: list[dict]) -> dict:
    """{(arch, layers, prior): {"best": the run dict with the lowest mean, "seeds": the complete seeds, sorted,
    "runs": their run dicts by seed}} of the complete runs (a nan or inf mean ranks last)."""
    cells: dict = {}
    for r in runs:
        if r["complete"]:
            cells.setdefault((r["arch"], r["layers"], r["noise"]), []).append(r)
    return {
        k: dict(
            best=min(v, key=lambda r: _order(r["mean"])),
            seeds=sorted(r["seed"] for r in v),
            runs=sorted(v, key=lambda r: r["seed"]),
        )
        for k, v in cells.items()
    }


def _fmt(v: float) -> str:
    """Three significant digits (the paper's precision for most cells), plain zeros; exponent form below 1e-3 (the
    paper's σ_max = 0 column, 1e-7 to 1e-12) and from 10 up (a blown-up mean or worst sequence)."""
    if v == 0:
        return "0"
    if abs(v) < 1e-3:
        return f"{v:.2e}"
    return f"{v:.3g}" if abs(v) < 0.1 or not abs(v) < 10 else f"{v:.3f}"


def reaches(ours: float, paper: float, rel: float = 0.1) -> bool:
    """Whether a model's loss reaches the paper's (Vladymyrov et al. 2024, Table 1): at or below it, or within
    rel·paper of it (aim (a), and the grid's ✓). A nan loss reaches nothing."""
    return ours <= paper or abs(ours - paper) <= rel * paper


def blown_up(r: dict) -> bool:
    """Whether a run's worst sequence exceeds BLOWUP (100·d): a blown-up prediction (aim (c)); a run without a worst
    sequence (nan) is not."""
    worst = r.get("worst")
    return worst is not None and worst > BLOWUP


def _median(values: list[float]) -> float:
    """The median of values sorted by `_order` (the mean of the middle two for an even count)."""
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def seed_spread(runs: list[dict]) -> dict:
    """{"best", "median", "worst"}: the best, median and worst mean of a cell's complete seeds."""
    means = sorted((r["mean"] for r in runs), key=_order)
    return dict(best=means[0], median=_median(means), worst=means[-1])


def _key(arch: str, layers: int, noise: str) -> str:
    """A cell's key in the JSON: "{arch}{L}|{prior}"."""
    return f"{arch}{layers}|{noise}"


def _label(arch: str, layers: int, noise: str) -> str:
    """A cell in words, e.g. "FULL L=7 uniform:6"."""
    return f"{of(arch).label} L={layers} {noise}"


def paper_cells(archs: list[str] | None = None, layers: list[int] | None = None, priors: list[str] | None = None):
    """[(arch, layers, prior)] of Vladymyrov et al. 2024, Table 1 (all 210 model cells, or those of the given
    architectures, depths and priors)."""
    models = paper_table()["models"]
    return [
        (a.name, int(L), p)
        for a in PAPER_ORDER
        if a.name in models and (not archs or a.name in archs)
        for L, row in models[a.name].items()
        if not layers or int(L) in layers
        for p in row
        if not priors or p in priors
    ]


def paper_order(cell: tuple) -> tuple:
    """Sort key of a cell in the paper's order: prior (Table 1's columns, then others), depth, architecture."""
    arch, L, p = cell
    names = [a.name for a in PAPER_ORDER]
    col = TABLE1_COLUMNS.index(p) if p in TABLE1_COLUMNS else len(TABLE1_COLUMNS)
    return (col, p, L, names.index(arch) if arch in names else len(names), arch)


def every_cell(cells: dict, runs: list[dict], universe: list[tuple]) -> list[dict]:
    """One row per cell, in the paper's order: the cells of `universe` (the paper's, whether run or not) and every
    cell with a run. A row has the cell (arch, layers, noise, key), the paper's value, the seeds still training and,
    unless pending (no complete run), the best seed's run, seed, mean, stderr, n_seq, median, worst, ratio to the
    paper (None without a paper value), whether it blew up, and the spread of the complete seeds (with
    confirm_cells' cells: the best seed's numbers on the confirmation sequences, the choice's in "selection")."""
    training: dict = {}
    for r in runs:
        if not r["complete"]:
            training.setdefault((r["arch"], r["layers"], r["noise"]), []).append(r["seed"])
    rows = []
    for cell in sorted(set(universe) | set(cells) | set(training), key=paper_order):
        arch, L, p = cell
        paper = paper_value(arch, p, L)
        row = dict(key=_key(*cell), arch=arch, layers=L, noise=p, paper=paper, training=sorted(training.get(cell, [])))
        c = cells.get(cell)
        row["pending"] = c is None
        row["n_complete"] = len(c["runs"]) if c else 0
        if c:
            b = c["best"]
            row.update(
                run=b["run"],
                seed=b["seed"],
                **{f: b[f] for f in ("mean", "stderr", "n_seq", "median", "worst")},
                ratio=b["mean"] / paper if paper else None,
                blowup=blown_up(b),
                dominated=_dominated(b),
                seed_means=[[r["seed"], r["mean"]] for r in c["runs"]],
                spread=seed_spread(c["runs"]),
                **({"selection": b["selection"]} if "selection" in b else {}),
            )
        rows.append(row)
    return rows


def _entry(row: dict) -> dict:
    """A cell in an aim's list: its key and words, and (when run) its mean and ratio to the paper."""
    out = dict(key=row["key"], cell=_label(row["arch"], row["layers"], row["noise"]))
    if not row["pending"]:
        out.update(mean=row["mean"], ratio=row["ratio"], worst=row["worst"])
    return out


def aims(rows: list[dict]) -> dict:
    """The three aims of reproducing Vladymyrov et al. 2024, Table 1, from `every_cell`'s rows with a paper value:
    (a) "within_10pct": cells that reach the paper (`reaches`: within 10% of it or at or below it); (b) "full7": every
    7-layer FULL cell at or below the paper; (c) "blowups": best seeds whose worst sequence exceeds BLOWUP. Each has
    its counts and its lists ("not_met", "pending", "cells"); a pending cell (no complete run) is never met."""
    paper = [r for r in rows if r["paper"] is not None]
    done = [r for r in paper if not r["pending"]]
    full7 = [r for r in paper if r["arch"] == FULL.name and r["layers"] == 7]
    full7_not = [r for r in full7 if not r["pending"] and not r["mean"] <= r["paper"]]
    blown = [r for r in rows if not r["pending"] and r["blowup"]]
    not_met = [r for r in done if not reaches(r["mean"], r["paper"])]
    return dict(
        within_10pct=dict(
            n_cells=len(paper),
            n_complete=len(done),
            n_met=len(done) - len(not_met),
            n_pending=len(paper) - len(done),
            not_met=[_entry(r) for r in not_met],
        ),
        full7=dict(
            n_cells=len(full7),
            n_at_or_below=sum(not r["pending"] and r["mean"] <= r["paper"] for r in full7),
            met=bool(full7) and not full7_not and all(not r["pending"] for r in full7),
            not_met=[_entry(r) for r in full7_not],
            pending=[_entry(r) for r in full7 if r["pending"]],
        ),
        blowups=dict(
            level=BLOWUP, n_complete=sum(not r["pending"] for r in rows), n=len(blown), cells=[_entry(r) for r in blown]
        ),
    )


def _listed(entries: list[dict], ratio: bool = True) -> str:
    """Cells of an aim, comma separated, each with its ratio to the paper (`ratio`) or its worst sequence."""
    if not entries:
        return "none"

    def one(e: dict) -> str:
        if "mean" not in e:
            return e["cell"]
        value = number(e["ratio"], 3) + "×" if ratio else f"worst {number(e['worst'], 3)}"
        return f"{e['cell']} ({value})"

    return ", ".join(map(one, entries))


def render_aims(aim: dict) -> str:
    """The aims of the reproduction in markdown, every count and list computed from the data (`aims`)."""
    a, b, c = aim["within_10pct"], aim["full7"], aim["blowups"]
    if b["n_cells"] == 0:
        full7 = "no 7-layer FULL cell in this selection."
    else:
        verdict = "met" if b["met"] else "not met"
        full7 = (
            f"**{verdict}**: {b['n_at_or_below']} of {b['n_cells']} at or below the paper; above it: "
            f"{_listed(b['not_met'])}; pending: {_listed(b['pending'])}."
        )
    return (
        "### Aims\n\n"
        f"Over the {a['n_cells']} cells of Vladymyrov et al. 2024, Table 1 in this selection: {a['n_complete']} with a "
        f"complete run, {a['n_pending']} pending (no complete run: never counted as met). Each judged by its best "
        "seed's mean.\n\n"
        f"- (a) within 10% of the paper or at or below it: **{a['n_met']} of {a['n_complete']}** complete cells "
        f"({a['n_pending']} pending). Not (ours/paper): {_listed(a['not_met'])}.\n"
        f"- (b) every 7-layer FULL cell at or below the paper: {full7}\n"
        f"- (c) best seeds with a blow-up (worst sequence above 100·d = {number(c['level'])}): **{c['n']} of "
        f"{c['n_complete']}**: {_listed(c['cells'], ratio=False)}.\n"
    )


def _seeds_text(row: dict) -> str:
    """How many seeds are complete, and which are still training: "3 (+2 training)"."""
    more = f" (+{len(row['training'])} training)" if row["training"] else ""
    return f"{row['n_complete']}{more}"


def render_every_cell(rows: list[dict]) -> str:
    """The long table: one row per cell (`every_cell`), in the paper's order."""
    header = [
        "prior",
        "L",
        "Method",
        "ours (best seed)",
        "paper",
        "ours/paper",
        "seeds done",
        "seed means: best / median / worst",
        "best seed's sequences",
        "flags",
        "best run",
    ]
    lines = []
    for r in rows:
        paper = _fmt(r["paper"]) if r["paper"] is not None else DASH
        start = [r["noise"], str(r["layers"]), of(r["arch"]).label]
        if r["pending"]:
            lines.append([*start, "pending", paper, DASH, _seeds_text(r), DASH, DASH, "", DASH])
            continue
        s = r["spread"]
        flags = ["blow-up" if r["blowup"] else "", "⚠" if r["dominated"] else ""]
        lines.append(
            [
                *start,
                loss_text(r["mean"], r["stderr"], fmt=_fmt),
                paper,
                ratio_text(r["mean"], r["stderr"], r["paper"], precise(r["mean"], r["stderr"])),
                _seeds_text(r),
                " / ".join(_fmt(s[k]) for k in ("best", "median", "worst")),
                f"median {number(r['median'], 3)}, worst {number(r['worst'], 3)}",
                " ".join(f for f in flags if f),
                f"{r['run']} (seed {r['seed']})",
            ]
        )
    note = (
        "ours: the best seed's mean ± standard error; ours/paper: ± its standard error, ○ where the standard error is "
        f"above 10% of the value; seeds done: complete seeds (+ those still training); best seed's sequences: the "
        f"median and the worst per-sequence loss of the best seed; blow-up: its worst sequence above 100·d = "
        f"{number(BLOWUP)}; ⚠: one sequence carries more than half of its mean."
    )
    if any("selection" in r for r in rows):
        note += (
            " The best seed's numbers are on the confirmation sequences, the seed means (its own included) on those "
            "it was chosen on."
        )
    return "### Every cell\n\n" + markdown(header, lines) + f"\n\n{note}\n"


def _cell(
    ours: float | None,
    paper: float | None,
    rel: float = 0.1,
    atol: float = 0.0,
    below: bool = True,
    stderr: float | None = None,
) -> str:
    """ "ours ± s.e. (paper) ✓" when ours is within rel·paper (or atol) of the paper's value, or (`below`, the models'
    rows) at or below it (`reaches`, aim (a)): Table 1's aim is to reach the paper's loss, and a lower one reaches it.
    With a standard error above 10% of ours, "○" instead of a mark: the noise could flip it."""
    if ours is None:
        return "pending" if paper is not None else DASH
    text = loss_text(ours, stderr, fmt=_fmt)  # at the paper's precision; the count is in the table's heading
    if paper is None:
        return text
    if stderr is not None and not precise(ours, stderr):
        return f"{text} ({_fmt(paper)}) ○"
    close = abs(ours - paper) <= rel * paper or abs(ours - paper) <= atol
    mark = "✓" if close or (below and reaches(ours, paper, rel)) else "✗"
    return f"{text} ({_fmt(paper)}) {mark}"


def _dominated(r: dict) -> bool:
    """One sequence carries the mean (interp.evaluate.dominated)."""
    return dominated(r["mean"], r.get("worst"), r["n_seq"])


def _baseline_rows(base: dict, priors: list[str], suffix: str = "") -> list[list[str]]:
    rows = []
    for nm, title in BASE_NAMES.items():
        row = [
            _cell(
                base[p][nm]["mean"], paper_value(nm, p), rel=0.05, atol=0.003, below=False, stderr=base[p][nm]["stderr"]
            )
            if p in base
            else DASH
            for p in priors
        ]
        rows.append([DASH, f"{title}{suffix}", *row])
    return rows


def render(
    cells: dict,
    base: dict,
    runs: list[dict],
    priors: list[str],
    layers: list[int] | None = None,
    archs: list[str] | None = None,
    baselines_only: bool = False,
    other: dict | None = None,
    other_seq: int | None = None,
    every: list[dict] | None = None,
) -> str:
    """The aims (from `every`, the rows of `every_cell`; default: the cells run), the table (model rows, best of seeds;
    the baseline rows on the models' sequences, then (`other`) the baseline rows on `other_seq` sequences, labelled
    so), then the long table of every cell and the runs still training."""
    layers = sorted({k[1] for k in cells} | set(layers or []))
    archs = [a.name for a in PAPER_ORDER if any(k[0] == a.name for k in cells) or a.name in (archs or [])]
    rows = []
    for L in [] if baselines_only else layers:
        for a in archs:
            row = []
            for p in priors:
                c = cells.get((a, L, p))
                best = c["best"] if c else None
                text = _cell(best["mean"] if c else None, paper_value(a, p, L), stderr=best["stderr"] if c else None)
                row.append(text + (" ⚠" if c and _dominated(best) else ""))
            rows.append([str(L), of(a).label, *row])
    rows += _baseline_rows(base, priors)
    if other:
        rows += _baseline_rows(other, priors, f" ({other_seq} seq.)")
    table = markdown(["L", "Method", *priors], rows)
    noise_note = "○: standard error above 10% of the value, too noisy to mark against the paper"
    if baselines_only:
        return (
            table
            + f"\n\nCells: ours ± standard error (paper) ✓ within 5% or 0.003 of the paper, ✗ not; {noise_note}.\n"
        )
    every = every_cell(cells, runs, []) if every is None else every
    pending = "\n".join(f"- {r['run']} (step {r['step']})" for r in runs if not r["complete"]) or "- none"
    return (
        render_aims(aims(every))
        + "\n### Best of seeds beside the paper\n\n"
        + table
        + "\n\nCells: ours ± standard error (paper) ✓ at or below the paper, or within 10% of it (baseline rows: "
        f"within 5% or 0.003), ✗ not; {noise_note}; 'pending': no complete "
        "run yet; '–': no paper value or not run; ⚠: one sequence carries more than half of the mean (a "
        "blown-up prediction of a deep model on an atypical context).\n\n"
        + render_every_cell(every)
        + "\n### Runs still training (not evaluated)\n\n"
        + pending
        + "\n\n### Where the runs were trained\n\n"
        + render_machines(runs)
    )


def render_floor(base: dict, priors: list[str], n_seq: int | None = None) -> str:
    """The Bayes floor beside the paper's best entry of each column."""
    table = paper_table()
    count = f", {n_seq} sequences" if n_seq else ""
    lines = [
        f"| prior | Bayes floor (ours{count}) | paper's best entry | paper's best method | paper TunedRR |",
        "|---|---|---|---|---|",
    ]
    for p in priors:
        if p not in base:
            continue
        entries = [
            (v[p], f"{of(a).label} L={L}") for a, rows in table["models"].items() for L, v in rows.items() if p in v
        ]
        entries += [(v[p], BASE_NAMES[nm]) for nm, v in table["baselines"].items() if p in v and v[p] > 0]
        best = min(entries) if entries else (None, "–")
        b = base[p]["bayes"]
        tuned_rr = table["baselines"]["tunedrr"]
        lines.append(
            f"| {p} | {loss_text(b['mean'], b['stderr'], fmt=_fmt)} | "
            f"{_fmt(best[0]) if best[0] is not None else '–'} | {best[1]} | "
            f"{_fmt(tuned_rr[p]) if p in tuned_rr else '–'} |"
        )
    return "\n".join(lines) + "\n"


def baseline_parameters(priors: list[str]) -> dict:
    """{prior: {name: tuned parameters}} of the baseline rows (interp.tuning.parameters: what interp eval prints)."""
    return {p: {nm: parameters(nm, tuned(p)) for nm in ("constrr", "tunedrr")} for p in priors}


def render_parameters(params: dict) -> str:
    lines = [
        f"Tuned per prior on {TUNE_SEQ} sequences of seed {TUNE_SEED}, disjoint from evaluation (interp.tuning; the "
        "values interp eval prints). AdaRR and the Bayes floor have none.\n",
        "| prior | ConstRR λ | TunedRR multiplier | TunedRR clip |",
        "|---|---|---|---|",
    ]
    for p, rec in params.items():
        c, t = rec["constrr"], rec["tunedrr"]
        lines.append(f"| {p} | {format_param(c['lam'])} | {format_param(t['mult'])} | {format_param(t['clip'])} |")
    return "\n".join(lines) + "\n"


def user_cache_dir() -> Path:
    """Where interp caches for a user: $XDG_CACHE_HOME/interp, else ~/.cache/interp."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "interp"


def _unwritable(cache: Path) -> bool:
    """Whether the default cache file cannot be written where it is (a read-only root, or a read-only file)."""
    parent = cache.parent
    if not parent.is_dir() or cache.is_dir():
        return False  # refused by _check_writable, naming the problem
    return not os.access(parent, os.W_OK | os.X_OK) or (cache.exists() and not os.access(cache, os.W_OK))


def _user_cache(cache: Path, log: Callable[[str], None]) -> Path:
    """The evaluation cache of a read-only root, in the user's cache directory (one file per root, named by its
    absolute path), seeded with the root's own cache when it has one (its entries are keyed by checkpoint content)."""
    root = cache.parent.resolve()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    mine = user_cache_dir() / f"{cache.stem}-{root.name}-{digest}{cache.suffix}"
    try:
        mine.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidArgument(
            f"{cache.parent} is not writable and the user cache directory {mine.parent} cannot be made "
            f"({err.strerror}); name a writable cache file (interp table --cache)"
        ) from None
    if not mine.exists() and cache.exists():
        try:
            atomic_write_bytes(mine, read_regular_file(cache, MAX_TEXT_BYTES, "evaluation cache"))
        except (OSError, ValueError) as err:  # an unreadable root cache: start afresh (EvalCache warns on bad ones)
            log(f"note: {cache} not copied ({err})")
    log(f"note: {root} is not writable; evaluations are cached in {mine}")
    return mine


def _check_writable(cache: Path | None) -> None:
    """InvalidArgument naming the evaluation cache file when it cannot be written: its directory missing or not
    writable, or the file a directory or read-only."""
    if cache is None:
        return
    parent = cache.parent
    why = None
    if cache.is_dir():
        why = "is a directory"
    elif not parent.is_dir():
        why = f"its directory {parent} does not exist"
    elif not os.access(parent, os.W_OK | os.X_OK):
        why = f"its directory {parent} is not writable"
    elif cache.exists() and not os.access(cache, os.W_OK):
        why = "is not writable"
    if why:
        raise InvalidArgument(
            f"{cache}: the evaluation cache {why}; name a writable cache file (interp table --cache, table1(cache=))"
        )


def table1(
    roots: list[str | Path],
    arch: list[str] | None = None,
    layers: list[int] | None = None,
    noise: list[str] | None = None,
    seeds: list[int] | None = None,
    n_seq: int | None = None,
    baseline_seq: int | None = None,
    eval_seed: int = 0,
    cache: str | Path | None = None,
    baselines_only: bool = False,
    log: Callable[[str], None] = _log,
    quick: bool = False,
    command: str | None = None,
    confirm_seq: int | None = None,
    confirm_seed: int | None = None,
) -> tuple[str, dict]:
    """(markdown, data) of Table 1 from the runs under `roots`, restricted to the given subsets.

    `n_seq`: sequences per model and per baseline (default N_SEQ, QUICK_SEQ with `quick`, which marks the output as a
    preview). `baseline_seq`: also the baseline rows on that many sequences (seed `eval_seed`), labelled with the
    count. `cache`: the evaluation cache file (default ROOT/table1_evals.json of the first root; none for roots=[]).
    `command`: the command line that made it, shown under the title. `confirm_seq`: choose each cell's best seed on
    the `n_seq` sequences, then report it, the baseline rows, the Bayes floor and the aims on `confirm_seq` sequences
    of seed `confirm_seed` (default eval_seed + 1; it must differ from eval_seed), which the choice never saw
    (`confirm_cells`); the seeds' means and their spread stay those of the choice. The aims and the long table cover
    every cell of Vladymyrov et al. 2024, Table 1 in the selection (`arch`, `layers`, `noise`), run or pending.
    `data` has every run ("runs"), the baselines per prior (on the sequences the cells are reported on; with
    `confirm_seq`, also "baselines_selection" and "confirm": its n_seq and eval_seed), their tuned parameters, the
    best-of-seeds cells keyed "{arch}{L}|{prior}" (each with its best run, seed, mean, stderr, median, worst, ratio to
    the paper, blow-up flag, n_complete, seed_means [[seed, mean]], the spread of the seeds' means and, with
    `confirm_seq`, the choice's numbers in "selection"), the keys of the pending cells and the aims.
    """
    n_seq = n_seq or (QUICK_SEQ if quick else N_SEQ)
    if confirm_seq is not None:
        confirm_seed = eval_seed + 1 if confirm_seed is None else confirm_seed
        if confirm_seed == eval_seed:
            raise InvalidArgument(
                f"confirm_seed {confirm_seed} is the evaluation seed: the best seed must be reported on sequences "
                "it was not chosen on (interp table --confirm-seed)"
            )
    if isinstance(roots, (str, bytes, os.PathLike)) or not isinstance(roots, (list, tuple)):
        raise InvalidType(f"roots must be a list of directories, got {roots!r:.80}")
    roots = [as_path(r, "root") for r in roots]
    for root in roots:
        if not root.is_dir():
            raise InvalidArgument(f"{root}: not a directory (a root holds run directories)")
    cache_path = as_path(cache, "cache") if cache else (roots[0] / CACHE_FILE if roots else None)
    if not cache and cache_path is not None and _unwritable(cache_path):  # a read-only root: the user's cache directory
        cache_path = _user_cache(cache_path, log)
    _check_writable(cache_path)  # before any evaluation, not when the first result is stored
    store = EvalCache(cache_path, log=lambda text: log(f"warning: {text}"))
    noise = [as_prior(p).spec for p in noise] if noise else None
    want = lambda r: (
        (not arch or r["arch"] in arch)
        and (not layers or r["layers"] in layers)  # noqa: E731
        and (not noise or r["noise"] in noise)
        and (not seeds or r["seed"] in seeds)
    )
    runs = [] if baselines_only else [r for r in discover(roots, log) if want(r)]
    evaluate_runs(runs, n_seq, eval_seed, store, log)
    found = {r["noise"] for r in runs} | set(noise or [])
    priors = [p for p in TABLE1_COLUMNS if p in found] + sorted(found - set(TABLE1_COLUMNS))
    base = evaluate_baselines(priors, n_seq, eval_seed, store, log)
    other = None
    if baseline_seq and baseline_seq != n_seq:
        other = evaluate_baselines(priors, baseline_seq, eval_seed, store, log)
    params = baseline_parameters(priors)
    cells = best_of_seeds(runs)
    shown, shown_base, shown_seq = cells, base, n_seq
    if confirm_seq is not None:
        shown = confirm_cells(cells, confirm_seq, confirm_seed, store, log)
        shown_base, shown_seq = evaluate_baselines(priors, confirm_seq, confirm_seed, store, log), confirm_seq
    universe = [] if baselines_only else paper_cells(arch, layers, noise)
    every = every_cell(shown, runs, universe)
    made = f"Made by `{command}`.\n\n" if command else ""
    preview = (
        f"**preview (--quick): {n_seq} sequences.** Noisy numbers for a first look, not a reproduction; a cell is "
        "marked against the paper only where its standard error is within 10% of its value.\n\n"
        if quick
        else ""
    )
    extra = f"; the rows marked ({baseline_seq} seq.): the baselines on {baseline_seq} sequences" if other else ""
    if confirm_seq is None:
        sets = (
            f"{n_seq} sequences of evaluation seed {eval_seed} per model and per baseline: the baselines of a column "
            f"on its models' own sequences{extra}."
        )
    else:
        sets = (
            f"The best seed of each cell is chosen on {n_seq} sequences of evaluation seed {eval_seed} per model, "
            f"then reported, with the baseline rows, the Bayes floor and the aims, on {confirm_seq} other sequences "
            f"(evaluation seed {confirm_seed}), which the choice never saw, so the minimum over seeds does not "
            f"flatter it; the seeds' means and their spread are on the choice's sequences{extra}."
        )
    text = (
        f"## Table 1: adjusted evaluation loss, best of seeds\n\n{made}{preview}{sets}\n\n"
        + render(shown, shown_base, runs, priors, layers, arch, baselines_only, other, baseline_seq, every)
        + "\n### Tuned baseline parameters\n\n"
        + render_parameters(params)
        + "\n### The Bayes floor beside the paper's best entries\n\n"
        + render_floor(shown_base, priors, shown_seq)
    )
    data = dict(
        preview=quick,
        n_seq=n_seq,
        eval_seed=eval_seed,
        runs=runs,
        baselines=shown_base,
        **(
            {"confirm": dict(n_seq=confirm_seq, eval_seed=confirm_seed), "baselines_selection": base}
            if confirm_seq
            else {}
        ),
        baseline_params=params,
        **({"baselines_other": {"n_seq": baseline_seq, "baselines": other}} if other else {}),
        cells={r["key"]: _cell_data(r, cells) for r in every if not r["pending"]},
        pending=[r["key"] for r in every if r["pending"]],
        **({} if baselines_only else {"aims": aims(every)}),
    )
    return text, data


def _cell_data(row: dict, cells: dict) -> dict:
    """A complete cell in the JSON: the best seed's numbers and run, the paper's value, the ratio, and the seeds."""
    fields = ("run", "mean", "stderr", "n_seq", "median", "worst", "paper", "ratio", "blowup", "n_complete")
    return dict(
        best_seed=row["seed"],
        **{f: row[f] for f in fields},
        seeds=cells[(row["arch"], row["layers"], row["noise"])]["seeds"],
        seed_means=row["seed_means"],
        spread=row["spread"],
        training=row["training"],
        **({"selection": row["selection"]} if "selection" in row else {}),
    )
