"""Reproduce Table 1 (PAPER.md §8): discover trained runs, optionally train missing cells, evaluate, render.

    # what exists on this machine (CPU), best of the seeds found:
    OMP_NUM_THREADS=1 python experiments/table1.py --roots experiments/zoo runs/table1 \
        --out experiments/results/table1_cpu.md

    # the full grid in one command on a GPU machine (trains what is missing, resumably):
    python experiments/table1.py --roots runs/table1 --train runs/table1 --arch full diag gdpp \
        --layers 1 2 3 4 5 6 7 --noise uniform:0 uniform:1 uniform:2 uniform:3 uniform:4 uniform:5 \
        uniform:6 uniform:7 categorical:1,3 categorical:1,3,5 --seeds 0 1 2 3 4 --extra "--device cuda" \
        --out experiments/results/table1_gpu.md

A run is any directory under a root holding config.json (a TrainConfig) and checkpoints/; its cell is
(arch, layers, prior) and its seed comes from the config. Only complete runs are evaluated (their final
checkpoint, adjusted loss on --n-seq sequences of evaluation seed --eval-seed); a cell reports the best of
its seeds, as the paper does. Baseline rows (ConstRR, AdaRR, TunedRR) and the Bayes floor are evaluated on
--baseline-seq sequences. Evaluations are cached in --cache, so re-running only evaluates what is new.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from interp.checkpoints import CheckpointError, list_checkpoints, load
from interp.evalset import EvalSet
from interp.evaluate import TABLE1_COLUMNS, evaluate, paper_table, paper_value
from interp.tasks import as_prior
from interp.train import is_complete, load_run_config
from interp.tuning import baselines

ARCH_NAMES = {"gdpp": "GD++", "diag": "DIAG", "full": "FULL"}
BASE_NAMES = {"constrr": "ConstRR", "adarr": "AdaRR", "tunedrr": "TunedRR", "bayes": "Bayes floor"}
HERE = Path(__file__).resolve().parent


def discover(roots: list[Path]) -> list[dict]:
    """Every run directory under the roots (one level deep), with its cell, seed and completeness."""
    runs = []
    for root in roots:
        if not root.is_dir():
            continue
        for run in sorted(p for p in root.iterdir() if (p / "config.json").exists()):
            try:
                cfg = load_run_config(run)
                done = is_complete(run)
            except (CheckpointError, ValueError) as err:
                print(f"skipping {run}: {err}", file=sys.stderr)
                continue
            if cfg.model.d != 10 or cfg.n != 20 or cfg.model.n_heads != 1 or cfg.init is not None:
                continue  # not a Table 1 configuration
            ckpts = list_checkpoints(run)
            runs.append(dict(run=str(run), arch=cfg.model.param, layers=cfg.model.n_layers,
                             noise=as_prior(cfg.noise).spec, seed=cfg.seed, complete=done,
                             step=ckpts[-1][0] if ckpts else 0,
                             stamp=int(ckpts[-1][1].stat().st_mtime) if ckpts else 0,
                             command=(run / "COMMAND").read_text().strip() if (run / "COMMAND").exists() else None))
    key = lambda r: (r["arch"], r["layers"], r["noise"], r["seed"])  # noqa: E731
    first_done: dict = {}
    for r in runs:
        if r["complete"]:
            first_done.setdefault(key(r), r["run"])
    # one complete run per (cell, seed); an unfinished copy of a finished seed is irrelevant
    return [r for r in runs if first_done.get(key(r), r["run"]) == r["run"] and (r["complete"] or key(r) not in first_done)]


def wanted(r: dict, args) -> bool:
    return ((not args.arch or r["arch"] in args.arch) and (not args.layers or r["layers"] in args.layers)
            and (not args.noise or r["noise"] in args.noise) and (not args.seeds or r["seed"] in args.seeds))


def train_missing(args, runs: list[dict]) -> None:
    sys.path.insert(0, str(HERE))
    from train_grid import train_one

    have = {(r["arch"], r["layers"], r["noise"], r["seed"]) for r in runs if r["complete"]}
    for seed in args.seeds or [0]:
        for noise in args.noise:
            for L in args.layers:
                for arch in args.arch:
                    if (arch, L, noise, seed) not in have:
                        train_one(Path(args.train), arch, L, noise, seed, shlex.split(args.extra))


def load_cache(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_cache(path: Path, cache: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def _where(run: str) -> str:
    """A run's path relative to the working directory when under it (portable cache keys)."""
    path = Path(run).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def evaluate_runs(runs: list[dict], args, cache: dict) -> None:
    for r in runs:
        if not r["complete"]:
            continue
        # the final checkpoint's mtime is in the key: a retrained run is evaluated afresh
        key = f"model|{_where(r['run'])}|{r['step']}|{r['stamp']}|{args.n_seq}|{args.eval_seed}"
        if "worst" not in cache.get(key, {}):
            t0 = time.perf_counter()
            est = evaluate({"m": load(r["run"])}, EvalSet(r["noise"], n_seq=args.n_seq, seed=args.eval_seed))["m"]
            cache[key] = est.to_dict()
            print(f"{r['run']}: {est.mean:.4g} ± {est.stderr:.2g}  [{time.perf_counter() - t0:.1f}s]", flush=True)
            save_cache(args.cache, cache)
        r.update(cache[key])


def evaluate_baselines(priors: list[str], args, cache: dict) -> dict:
    out = {}
    for noise in priors:
        key = f"baselines|{noise}|{args.baseline_seq}|{args.eval_seed}"
        if key not in cache:
            t0 = time.perf_counter()
            preds = baselines(noise, names=list(BASE_NAMES))
            data = EvalSet(noise, n_seq=args.baseline_seq, seed=args.eval_seed)
            cache[key] = {nm: e.to_dict() for nm, e in evaluate(preds, data).items()}
            print(f"baselines on {noise}: " + ", ".join(f"{nm} {v['mean']:.4g}" for nm, v in cache[key].items())
                  + f"  [{time.perf_counter() - t0:.0f}s]", flush=True)
            save_cache(args.cache, cache)
        out[noise] = cache[key]
    return out


def best_of_seeds(runs: list[dict]) -> dict:
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


def _cell(ours: float | None, paper: float | None, rel: float = 0.1, atol: float = 1e-4) -> str:
    """"ours (paper) ✓" when |ours − paper| ≤ rel·paper or ≤ atol."""
    if ours is None:
        return "pending" if paper is not None else "–"
    text = _fmt(ours)
    if paper is None:
        return text
    mark = "✓" if abs(ours - paper) <= rel * paper or abs(ours - paper) <= atol else "✗"
    return f"{text} ({_fmt(paper)}) {mark}"


def _dominated(r: dict) -> bool:
    """The single worst sequence carries more than half of the mean (a blown-up prediction)."""
    return r.get("worst", 0.0) / r["n_seq"] > 0.5 * abs(r["mean"])


def render(cells: dict, base: dict, runs: list[dict], priors: list[str], args) -> str:
    layers = sorted({k[1] for k in cells} | set(args.layers or []))
    archs = [a for a in ("gdpp", "diag", "full") if any(k[0] == a for k in cells) or a in (args.arch or [])]
    head = "| L | Method | " + " | ".join(priors) + " |\n|---|---|" + "---|" * len(priors) + "\n"
    lines = []
    for L in [] if args.baselines_only else layers:
        for a in archs:
            row = []
            for p in priors:
                c = cells.get((a, L, p))
                text = _cell(c["best"]["mean"] if c else None, paper_value(a, p, L))
                row.append(text + (" ⚠" if c and _dominated(c["best"]) else ""))
            lines.append(f"| {L} | {ARCH_NAMES[a]} | " + " | ".join(row) + " |")
    for nm, title in BASE_NAMES.items():
        row = [_cell(base[p][nm]["mean"], paper_value(nm, p), rel=0.05, atol=0.003) if p in base else "–" for p in priors]
        lines.append(f"| – | {title} | " + " | ".join(row) + " |")
    seeds = "\n".join(
        f"- {ARCH_NAMES[a]} L={L} {p}: seeds {c['seeds']}, best seed {c['best']['seed']} "
        f"({c['best']['mean']:.4g} ± {c['best']['stderr']:.2g}, median {c['best']['median']:.3g}, "
        f"worst sequence {c['best']['worst']:.3g}; {c['best']['run']})"
        for (a, L, p), c in sorted(cells.items()))
    pending = "\n".join(f"- {r['run']} (step {r['step']})" for r in runs if not r["complete"]) or "- none"
    if args.baselines_only:
        return head + "\n".join(lines) + "\n\nCells: ours (paper) ✓ within 5% or 0.003 of the paper, ✗ not.\n"
    return (head + "\n".join(lines) + "\n\nCells: ours (paper) ✓ within 10% of the paper (baseline rows: 5% or "
            "0.003), ✗ not; 'pending': no complete "
            "run yet; '–': no paper value or not run; ⚠: one sequence carries more than half of the mean (a "
            "blown-up prediction of a deep model on an atypical context).\n\n### Seeds per cell\n\n" + seeds
            + "\n\n### Runs still training (not evaluated)\n\n" + pending + "\n")


def render_floor(base: dict, priors: list[str]) -> str:
    """The Bayes floor beside the paper's best entry of each column (PAPER.md §5, item 5 of issue 3)."""
    table = paper_table()
    lines = ["| prior | Bayes floor (ours) | paper's best entry | paper's best method | paper TunedRR |", "|---|---|---|---|---|"]
    for p in priors:
        if p not in base:
            continue
        entries = [(v[p], f"{ARCH_NAMES[a]} L={L}") for a, rows in table["models"].items() for L, v in rows.items() if p in v]
        entries += [(v[p], BASE_NAMES[nm]) for nm, v in table["baselines"].items() if p in v and v[p] > 0]
        best = min(entries) if entries else (None, "–")
        b = base[p]["bayes"]
        lines.append(f"| {p} | {_fmt(b['mean'])} ± {b['stderr']:.1g} | {_fmt(best[0]) if best[0] is not None else '–'} | "
                     f"{best[1]} | {_fmt(table['baselines']['tunedrr'][p]) if p in table['baselines']['tunedrr'] else '–'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", nargs="+", type=Path, default=[Path("experiments/zoo"), Path("runs/table1")])
    ap.add_argument("--arch", nargs="+", choices=list(ARCH_NAMES), help="subset of the grid (default all found)")
    ap.add_argument("--layers", nargs="+", type=int)
    ap.add_argument("--noise", nargs="+", help="priors, e.g. uniform:5 categorical:1,3 (default all found)")
    ap.add_argument("--seeds", nargs="+", type=int)
    ap.add_argument("--train", metavar="ROOT", help="train missing cells of --arch x --layers x --noise x --seeds into ROOT")
    ap.add_argument("--extra", default="", help="more `interp train` arguments for --train, quoted (e.g. '--device cuda')")
    ap.add_argument("--n-seq", type=int, default=100_000, help="evaluation sequences per model (default 100000)")
    ap.add_argument("--baseline-seq", type=int, default=1_000_000, help="sequences for baselines (default 1000000)")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=HERE / "results" / "table1_evals.json")
    ap.add_argument("--baselines-only", action="store_true", help="only the baseline rows and the Bayes floor")
    ap.add_argument("--out", type=Path, help="markdown file for the table (default: print)")
    ap.add_argument("--json", type=Path, help="all per-seed results as JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.noise:
        args.noise = [as_prior(p).spec for p in args.noise]
    if args.train:
        if not (args.arch and args.layers and args.noise):
            ap.error("--train needs --arch, --layers and --noise (and --seeds, default 0)")
        args.roots = list(dict.fromkeys([*args.roots, Path(args.train)]))
        train_missing(args, [r for r in discover(args.roots) if wanted(r, args)])
    runs = [] if args.baselines_only else [r for r in discover(args.roots) if wanted(r, args)]
    cache = load_cache(args.cache)
    evaluate_runs(runs, args, cache)
    found = {r["noise"] for r in runs} | set(args.noise or [])
    priors = [p for p in TABLE1_COLUMNS if p in found] + sorted(found - set(TABLE1_COLUMNS))
    base = evaluate_baselines(priors, args, cache)
    cells = best_of_seeds(runs)
    text = (f"## Table 1: adjusted evaluation loss, best of seeds ({args.n_seq} sequences per model, "
            f"{args.baseline_seq} per baseline, eval seed {args.eval_seed})\n\n" + render(cells, base, runs, priors, args)
            + "\n### The Bayes floor beside the paper's best entries\n\n" + render_floor(base, priors))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(dict(runs=runs, baselines=base, cells={
            f"{a}{L}|{p}": dict(best_seed=c["best"]["seed"], mean=c["best"]["mean"], stderr=c["best"]["stderr"],
                                seeds=c["seeds"], paper=paper_value(a, p, L)) for (a, L, p), c in cells.items()}), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
