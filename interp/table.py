"""Table 1 of Vladymyrov et al. 2024 from trained runs: discover, evaluate (cached), best of seeds, render.

A run is any directory one level under a root holding a run config and checkpoints (what `interp train`
and `interp sweep` write); its cell is (arch, layers, prior) and its seed comes from the config. Only
complete runs with the paper's setting (d = 10, n = 20, one head, no --init, x ~ N(0, I)) are evaluated: adjusted loss
of the final checkpoint on `n_seq` sequences of evaluation seed `eval_seed`. A cell reports the best of
its seeds, as the paper does, with that seed's median and worst per-sequence loss. Baseline rows
(ConstRR, AdaRR, TunedRR) and the Bayes floor use `baseline_seq` sequences. Evaluations are cached in a
JSON file, so a rerun only evaluates what is new.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable

from interp.config import describe_covariance
from interp.evalset import EvalSet
from interp.evaluate import TABLE1_COLUMNS, evaluate, paper_table, paper_value
from interp.files import CheckpointError, atomic_write_text
from interp.run import Run, resolve_model
from interp.tasks import as_prior
from interp.tuning import baselines

ARCH_NAMES = {"gdpp": "GD++", "diag": "DIAG", "full": "FULL"}
BASE_NAMES = {"constrr": "ConstRR", "adarr": "AdaRR", "tunedrr": "TunedRR", "bayes": "Bayes floor"}
CACHE_FILE = "table1_evals.json"  # default cache: in the first root


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def discover(roots: list[Path], log: Callable[[str], None] = _log) -> list[dict]:
    """Every Table 1 run directory under the roots (one level deep), with its cell, seed and completeness."""
    runs = []
    for root in map(Path, roots):
        if not root.is_dir():
            continue
        for run in Run.find(root):
            try:
                cfg = run.config()
                done = run.is_complete()
            except ValueError as err:  # CheckpointError is a ValueError
                log(f"skipping {run}: {err}")
                continue
            if cfg.model.d != 10 or cfg.n != 20 or cfg.model.n_heads != 1 or cfg.init is not None:
                continue  # not a Table 1 configuration
            if cfg.x_cov is not None:  # d = 10, n = 20 like a Table 1 run, so say why it is not in the table
                log(f"skipping {run}: trained on x ~ N(0, {describe_covariance(cfg.x_cov)}); Table 1 has x ~ N(0, I)")
                continue
            ckpts = run.checkpoints()
            runs.append(
                dict(
                    run=str(run),
                    arch=cfg.model.param,
                    layers=cfg.model.n_layers,
                    noise=as_prior(cfg.noise).spec,
                    seed=cfg.seed,
                    complete=done,
                    step=ckpts[-1][0] if ckpts else 0,
                    stamp=int(ckpts[-1][1].stat().st_mtime) if ckpts else 0,
                )
            )
    key = lambda r: (r["arch"], r["layers"], r["noise"], r["seed"])  # noqa: E731
    first_done: dict = {}
    for r in runs:
        if r["complete"]:
            first_done.setdefault(key(r), r["run"])
    # one complete run per (cell, seed); an unfinished copy of a finished seed is irrelevant
    return [
        r for r in runs if first_done.get(key(r), r["run"]) == r["run"] and (r["complete"] or key(r) not in first_done)
    ]


def load_cache(path: Path | None) -> dict:
    try:
        return json.loads(Path(path).read_text()) if path and Path(path).exists() else {}
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: unreadable evaluation cache ({err}); remove it") from None


def save_cache(path: Path | None, cache: dict) -> None:
    if path:
        atomic_write_text(path, json.dumps(cache, indent=1, sort_keys=True) + "\n")


def _where(run: str) -> str:
    """A run's path relative to the working directory when under it (portable cache keys)."""
    path = Path(run).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def evaluate_runs(
    runs: list[dict],
    n_seq: int,
    eval_seed: int,
    cache: dict,
    cache_path: Path | None,
    log: Callable[[str], None] = _log,
) -> None:
    """Add mean, stderr, median and worst of every complete run's final checkpoint to its dict."""
    for r in runs:
        if not r["complete"]:
            continue
        # the final checkpoint's mtime is in the key: a retrained run is evaluated afresh
        key = f"model|{_where(r['run'])}|{r['step']}|{r['stamp']}|{n_seq}|{eval_seed}"
        if "worst" not in cache.get(key, {}):
            t0 = time.perf_counter()
            m = resolve_model(r["run"])  # its last checkpoint, on the prior, d, n and Λ it was trained on
            data = EvalSet(m.noise, d=m.d, n=m.n, n_seq=n_seq, seed=eval_seed, x_cov=m.x_cov)
            est = evaluate({"m": m.model}, data)["m"]
            cache[key] = est.to_dict()
            log(f"{r['run']}: {est.mean:.4g} ± {est.stderr:.2g}  [{time.perf_counter() - t0:.1f}s]")
            save_cache(cache_path, cache)
        r.update(cache[key])


def evaluate_baselines(
    priors: list[str],
    baseline_seq: int,
    eval_seed: int,
    cache: dict,
    cache_path: Path | None,
    log: Callable[[str], None] = _log,
) -> dict:
    out = {}
    for noise in priors:
        key = f"baselines|{noise}|{baseline_seq}|{eval_seed}"
        if key not in cache:
            t0 = time.perf_counter()
            preds = baselines(noise, names=list(BASE_NAMES))
            data = EvalSet(noise, n_seq=baseline_seq, seed=eval_seed)
            cache[key] = {nm: e.to_dict() for nm, e in evaluate(preds, data).items()}
            log(
                f"baselines on {noise}: "
                + ", ".join(f"{nm} {v['mean']:.4g}" for nm, v in cache[key].items())
                + f"  [{time.perf_counter() - t0:.0f}s]"
            )
            save_cache(cache_path, cache)
        out[noise] = cache[key]
    return out


def best_of_seeds(runs: list[dict]) -> dict:
    """{(arch, layers, prior): {"best": the run dict with the lowest mean, "seeds": [...]}}."""
    cells: dict = {}
    for r in runs:
        if r["complete"]:
            cells.setdefault((r["arch"], r["layers"], r["noise"]), []).append(r)
    return {k: dict(best=min(v, key=lambda r: r["mean"]), seeds=sorted(r["seed"] for r in v)) for k, v in cells.items()}


def _fmt(v: float) -> str:
    """Three significant digits (the paper's precision for most cells), plain zeros."""
    if v == 0:
        return "0"
    return f"{v:.2e}" if abs(v) < 1e-3 else f"{v:.3g}" if abs(v) < 0.1 else f"{v:.3f}"


def _cell(ours: float | None, paper: float | None, rel: float = 0.1, atol: float = 1e-4, below: bool = True) -> str:
    """ "ours (paper) ✓" when ours is within rel·paper (or atol) of the paper's value, or (`below`, the models' rows)
    at or below it: Table 1's aim is to reach the paper's loss, and a lower one reaches it."""
    if ours is None:
        return "pending" if paper is not None else "–"
    text = _fmt(ours)
    if paper is None:
        return text
    close = abs(ours - paper) <= rel * paper or abs(ours - paper) <= atol
    mark = "✓" if close or (below and ours <= paper) else "✗"
    return f"{text} ({_fmt(paper)}) {mark}"


def _dominated(r: dict) -> bool:
    """The single worst sequence carries more than half of the mean (a blown-up prediction)."""
    return r.get("worst", 0.0) / r["n_seq"] > 0.5 * abs(r["mean"])


def render(
    cells: dict,
    base: dict,
    runs: list[dict],
    priors: list[str],
    layers: list[int] | None = None,
    archs: list[str] | None = None,
    baselines_only: bool = False,
) -> str:
    layers = sorted({k[1] for k in cells} | set(layers or []))
    archs = [a for a in ("gdpp", "diag", "full") if any(k[0] == a for k in cells) or a in (archs or [])]
    head = "| L | Method | " + " | ".join(priors) + " |\n|---|---|" + "---|" * len(priors) + "\n"
    lines = []
    for L in [] if baselines_only else layers:
        for a in archs:
            row = []
            for p in priors:
                c = cells.get((a, L, p))
                text = _cell(c["best"]["mean"] if c else None, paper_value(a, p, L))
                row.append(text + (" ⚠" if c and _dominated(c["best"]) else ""))
            lines.append(f"| {L} | {ARCH_NAMES[a]} | " + " | ".join(row) + " |")
    for nm, title in BASE_NAMES.items():
        row = [
            _cell(base[p][nm]["mean"], paper_value(nm, p), rel=0.05, atol=0.003, below=False) if p in base else "–"
            for p in priors
        ]
        lines.append(f"| – | {title} | " + " | ".join(row) + " |")
    seeds = "\n".join(
        f"- {ARCH_NAMES[a]} L={L} {p}: seeds {c['seeds']}, best seed {c['best']['seed']} "
        f"({c['best']['mean']:.4g} ± {c['best']['stderr']:.2g}, median {c['best']['median']:.3g}, "
        f"worst sequence {c['best']['worst']:.3g}; {c['best']['run']})"
        for (a, L, p), c in sorted(cells.items())
    )
    pending = "\n".join(f"- {r['run']} (step {r['step']})" for r in runs if not r["complete"]) or "- none"
    if baselines_only:
        return head + "\n".join(lines) + "\n\nCells: ours (paper) ✓ within 5% or 0.003 of the paper, ✗ not.\n"
    return (
        head
        + "\n".join(lines)
        + "\n\nCells: ours (paper) ✓ at or below the paper, or within 10% of it (baseline rows: "
        "within 5% or 0.003), ✗ not; 'pending': no complete "
        "run yet; '–': no paper value or not run; ⚠: one sequence carries more than half of the mean (a "
        "blown-up prediction of a deep model on an atypical context).\n\n### Seeds per cell\n\n"
        + seeds
        + "\n\n### Runs still training (not evaluated)\n\n"
        + pending
        + "\n"
    )


def render_floor(base: dict, priors: list[str]) -> str:
    """The Bayes floor beside the paper's best entry of each column."""
    table = paper_table()
    lines = [
        "| prior | Bayes floor (ours) | paper's best entry | paper's best method | paper TunedRR |",
        "|---|---|---|---|---|",
    ]
    for p in priors:
        if p not in base:
            continue
        entries = [
            (v[p], f"{ARCH_NAMES[a]} L={L}") for a, rows in table["models"].items() for L, v in rows.items() if p in v
        ]
        entries += [(v[p], BASE_NAMES[nm]) for nm, v in table["baselines"].items() if p in v and v[p] > 0]
        best = min(entries) if entries else (None, "–")
        b = base[p]["bayes"]
        tuned = table["baselines"]["tunedrr"]
        lines.append(
            f"| {p} | {_fmt(b['mean'])} ± {b['stderr']:.1g} | "
            f"{_fmt(best[0]) if best[0] is not None else '–'} | {best[1]} | "
            f"{_fmt(tuned[p]) if p in tuned else '–'} |"
        )
    return "\n".join(lines) + "\n"


def table1(
    roots: list[str | Path],
    arch: list[str] | None = None,
    layers: list[int] | None = None,
    noise: list[str] | None = None,
    seeds: list[int] | None = None,
    n_seq: int = 100_000,
    baseline_seq: int = 1_000_000,
    eval_seed: int = 0,
    cache: str | Path | None = None,
    baselines_only: bool = False,
    log: Callable[[str], None] = _log,
) -> tuple[str, dict]:
    """(markdown, data) of Table 1 from the runs under `roots`, restricted to the given subsets.

    `cache`: JSON file of evaluations (default ROOT/table1_evals.json of the first root; None for roots=[]).
    `data` has every run ("runs"), the baselines per prior and the best-of-seeds cells keyed "{arch}{L}|{prior}".
    """
    roots = [Path(r) for r in roots]
    cache_path = Path(cache) if cache else (roots[0] / CACHE_FILE if roots else None)
    noise = [as_prior(p).spec for p in noise] if noise else None
    want = lambda r: (
        (not arch or r["arch"] in arch)
        and (not layers or r["layers"] in layers)  # noqa: E731
        and (not noise or r["noise"] in noise)
        and (not seeds or r["seed"] in seeds)
    )
    runs = [] if baselines_only else [r for r in discover(roots, log) if want(r)]
    store = load_cache(cache_path)
    evaluate_runs(runs, n_seq, eval_seed, store, cache_path, log)
    found = {r["noise"] for r in runs} | set(noise or [])
    priors = [p for p in TABLE1_COLUMNS if p in found] + sorted(found - set(TABLE1_COLUMNS))
    base = evaluate_baselines(priors, baseline_seq, eval_seed, store, cache_path, log)
    cells = best_of_seeds(runs)
    text = (
        f"## Table 1: adjusted evaluation loss, best of seeds ({n_seq} sequences per model, "
        f"{baseline_seq} per baseline, eval seed {eval_seed})\n\n"
        + render(cells, base, runs, priors, layers, arch, baselines_only)
        + "\n### The Bayes floor beside the paper's best entries\n\n"
        + render_floor(base, priors)
    )
    data = dict(
        runs=runs,
        baselines=base,
        cells={
            f"{a}{L}|{p}": dict(
                best_seed=c["best"]["seed"],
                mean=c["best"]["mean"],
                stderr=c["best"]["stderr"],
                median=c["best"]["median"],
                worst=c["best"]["worst"],
                seeds=c["seeds"],
                paper=paper_value(a, p, L),
            )
            for (a, L, p), c in cells.items()
        },
    )
    return text, data
