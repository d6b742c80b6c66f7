"""Drift study (issues 5, 12): do FULL L-layer matrices move toward the DIAG structure during training?

Runs `interp.probes.drift` over every complete L-layer FULL run it finds (experiments/zoo/full<L>_*,
experiments/zoo/studies/short_recipe/seeds/full<L>_*,
experiments/zoo/studies/short_recipe/drift/full<L>_*; L = --layers, default 4), caches each trajectory's
metrics in experiments/results/drift/<run>.json (recomputed when the run's last step or the settings change),
compares the final FULL models with the DIAG references (experiments/zoo/diag<L>_*) in distribution and per σ (FULL,
its DIAG projection, DIAG), and writes experiments/results/drift.json (drift<L>.json for L ≠ 4) plus markdown tables
on stdout. Re-runnable: incomplete runs are listed and skipped.

    OMP_NUM_THREADS=1 python experiments/drift_study.py              # 4 layers, ~80 s per new run, one thread
    OMP_NUM_THREADS=1 python experiments/drift_study.py --layers 7   # 7 layers, ~4 min per new run

Runs outside the zoo (e.g. the Table 1 grid's, whose DIAG references are standalone files) are passed explicitly;
the DIAG reference of each prior is then a file or run directory whose training prior it is read from:

    OMP_NUM_THREADS=1 python experiments/drift_study.py --layers 7 \
        --run-dirs experiments/table1_grid/full7_uniform7_s0 \
        --diag-refs experiments/zoo/best/uniform7/diag7.safetensors --out experiments/results/drift7_priors.json

Such a run's cache is experiments/results/drift/<parent>-<run>.json (its parent directory's name first, so that a
grid run never overwrites the cache of a zoo run of the same name).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses, sigma_profile
from interp.model import LinearTransformer
from interp.probes.drift import EVAL_SEED, DriftData, drift_record, drift_trajectory, register_directions
from interp.probes.forms import diag_projection
from interp.records import jsonable, rounded
from interp.run import Run, load, resolve_model

ROOT = Path(__file__).resolve().parent
ZOO = ROOT / "zoo"
OUT = ROOT / "results"
CACHE = OUT / "drift"
PRIORS = {"uniform:5": "uniform5", "categorical:1,3": "cat13"}
MILESTONES = [0, 100, 300, 1000, 2000, 4000, 8000]  # steps reported in the tables (nearest checkpoint at or below)


def discover(layers: int = 4) -> tuple[list[Path], list[Path]]:
    """(complete, incomplete) `layers`-layer FULL run directories."""
    found = [p for sub in ("", "seeds", "drift") for p in sorted((ZOO / sub).glob(f"full{layers}_*"))]
    found = [p for p in found if Run.is_run(p)]
    done = [p for p in found if Run(p).is_complete()]
    return done, [p for p in found if p not in done]


def run_name(run: Path) -> str:
    """The zoo's runs by their directory name (as before); any other run by its parent's name and its own."""
    run = run.resolve()
    return run.name if run.is_relative_to(ZOO.resolve()) else f"{run.parent.name}-{run.name}"


def explicit_runs(dirs: list[str], layers: int) -> tuple[list[Path], list[Path]]:
    """(complete, incomplete) run directories given on the command line; ValueError for anything else."""
    runs = []
    for d in dirs:
        p = Path(d).resolve()
        if not Run.is_run(p):
            raise ValueError(f"{d}: not a run directory (no config.json)")
        cfg = Run(p).config()
        if cfg.model.param != "full" or cfg.model.n_layers != layers:
            raise ValueError(f"{d}: a {cfg.model.param.upper()}-{cfg.model.n_layers} run, not FULL-{layers}")
        if not p.is_relative_to(ROOT.parent):
            raise ValueError(f"{d}: outside the repository")
        runs.append(p)
    done = [p for p in runs if Run(p).is_complete()]
    return done, [p for p in runs if p not in done]


def sigma_grids(prior: str) -> tuple[list[float], list[float]]:
    """(per-σ profile grid, σ's of the register's effect) for a prior: the old grids for uniform:5 and {1,3} (0–6 and
    0–5 in steps of 0.5; 0–5), else 0 to one above the largest trained σ (two for a categorical prior, as {1,3}'s 5)."""
    if prior in PRIORS:
        top = 5.0 if prior.startswith("categorical") else 6.0
        return [i * 0.5 for i in range(int(top / 0.5) + 1)], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    kind, _, vals = prior.partition(":")
    top = max(float(v) for v in vals.split(",")) + (2.0 if kind == "categorical" else 1.0)
    return [i * 0.5 for i in range(int(top / 0.5) + 1)], [float(i) for i in range(int(top))]


def settings(args) -> dict:
    out = {"eval_seq": args.eval_seq, "fit_seq": args.fit_seq}
    if args.max_checkpoints:  # only when thinned, so the 4-layer caches stay valid
        out |= {"max_checkpoints": args.max_checkpoints, "per_layer_gap": "last checkpoint"}
    return out


def thinned(traj: list, n_max: int) -> list:
    """Step 0 and at most n_max − 1 checkpoints from step 50 on, evenly spread over the (geometric) list, the last
    one included; the first checkpoints (steps 1–50) barely differ from the init."""
    late = [c for c in traj if c[0] >= 50]
    keep = [late[round(i * (len(late) - 1) / (n_max - 2))] for i in range(n_max - 1)] if len(late) > n_max - 1 else late
    return [c for c in traj if c[0] == 0][:1] + keep


def trajectory_metrics(run: Path, args) -> dict:
    """The drift JSON of one run, from the cache when its last step and settings match."""
    cfg = Run(run).config()
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{run_name(run)}.json"
    if path.exists():
        doc = json.loads(path.read_text())
        same_run = (doc.get("run_dir"), doc.get("seed"), doc.get("stress", 0.0)) == (
            str(run.relative_to(ROOT.parent)),
            cfg.seed,
            cfg.stress,
        )  # a cache is named by the run's directory name, which a different run may reuse
        if same_run and doc.get("settings") == settings(args) and doc["checkpoints"][-1]["step"] == cfg.steps:
            return doc
    t0 = time.time()
    traj = Run(run).trajectory()
    if args.max_checkpoints:
        traj = thinned(traj, args.max_checkpoints)
    data = DriftData.default(
        cfg.noise, d=traj[0][1].cfg.d, n=cfg.n, eval_seq=args.eval_seq, fit_seq=args.fit_seq, x_cov=cfg.x_cov
    )
    doc = {
        "run_dir": str(run.relative_to(ROOT.parent)),
        "init": cfg.init,
        "init_noise": cfg.init_noise,
        "seed": cfg.seed,
        "stress": cfg.stress,
        "settings": settings(args),
        **drift_trajectory(traj, data, per_layer_gap=not args.max_checkpoints),
    }
    if args.max_checkpoints:  # the per-layer gap (L + 3 models per checkpoint otherwise) at the last checkpoint only
        doc["checkpoints"][-1] = drift_record(traj[-1][0], traj[-1][1], data, per_layer_gap=True).to_json()
    doc["seconds"] = round(time.time() - t0, 1)
    path.write_text(json.dumps(rounded(doc, 6), allow_nan=False, separators=(",", ":")) + "\n")
    print(f"[drift] {run_name(run)}: {len(traj)} checkpoints in {doc['seconds']} s")
    return doc


def at_step(doc: dict, step: int) -> dict:
    """The last checkpoint at or before `step`."""
    return [r for r in doc["checkpoints"] if r["step"] <= step][-1]


def first_below(
    doc: dict, layer: int, key: str = "share_outside", level: float = 0.1, above: bool = False
) -> int | None:
    """First step from which `key` of `layer` stays below (above) `level` to the end (None if it never does)."""
    recs = doc["checkpoints"]
    for i, r in enumerate(recs):
        if all((x[key][layer] > level) if above else (x[key][layer] < level) for x in recs[i:]):
            return r["step"]
    return None


def final_losses(full: LinearTransformer, diag_ref: LinearTransformer | None, noise: str, n: int, n_seq: int) -> dict:
    """Adjusted loss of the final FULL model, its DIAG projection and the DIAG reference, on shared sequences."""
    proj = LinearTransformer.from_omegas(diag_projection(full.P.detach(), full.Q.detach()).omega, full.cfg.d)
    preds = {
        "full": full,
        "full_diag_projection": proj,
        "full_no_register": without_register(full),
        "full_no_writes": without_register(full, every_layer=True),
    }
    if diag_ref is not None:
        preds["diag"] = diag_ref
    data = EvalSet(noise, d=full.cfg.d, n=n, n_seq=n_seq, seed=EVAL_SEED)
    loss = adjusted_losses({k: _f64(m) for k, m in preds.items()}, data)
    out = {k: {"mean": v.mean().item(), "stderr": v.std().item() / len(v) ** 0.5} for k, v in loss.items()}
    if diag_ref is not None:
        diff = loss["full"] - loss["diag"]
        out["full_minus_diag"] = {"mean": diff.mean().item(), "stderr": diff.std().item() / len(diff) ** 0.5}
    return out


def without_register(model: LinearTransformer, every_layer: bool = False) -> LinearTransformer:
    """The FULL model with the y → x column P_k[:d, d] of its strongest writer layer zeroed (the register's write);
    of every layer with `every_layer` (deeper models spread the write over several layers)."""
    P, Q = model.P.detach().double().clone(), model.Q.detach().double()
    l = slice(None) if every_layer else int(register_directions(P, Q)["write_share"].argmax())
    P[l, :, :-1, -1] = 0
    return LinearTransformer.from_matrices(P, Q)


def register_effect(
    model: LinearTransformer, noise_sigmas: list[float], n: int, n_seq: int = 5_000, every_layer: bool = False
) -> dict:
    """Per fixed σ: slope of the register's contribution Δŷ = ŷ − ŷ_no_register on ŷ_no_register (a rescaling of the
    prediction when R² is high), the slope the oracle would need ((ŷ_oracle − ŷ_no_register) on ŷ_no_register), and
    the adjusted loss with and without the register (every layer's write removed with `every_layer`)."""
    from interp.baselines import oracle_predict

    full, bare = _f64(model), without_register(model, every_layer)
    out = {"sigma": noise_sigmas, "slope": [], "r2": [], "oracle_slope": [], "loss": [], "loss_no_register": []}
    for s in noise_sigmas:
        data = EvalSet("fixed:0", d=model.cfg.d, n=n, n_seq=n_seq, seed=1, sigma=s)
        b = data.draw()
        with torch.no_grad():
            y, y0, yo = full(b.tokens), bare(b.tokens), oracle_predict(b)
        dy = y - y0
        slope = ((dy * y0).sum() / (y0 * y0).sum()).item()
        out["slope"].append(slope)
        out["r2"].append(1 - (((dy - slope * y0) ** 2).sum() / ((dy - dy.mean()) ** 2).sum()).item())
        out["oracle_slope"].append((((yo - y0) * y0).sum() / (y0 * y0).sum()).item())
        loss = adjusted_losses({"full": full, "bare": bare}, data)
        out["loss"].append(loss["full"].mean().item())
        out["loss_no_register"].append(loss["bare"].mean().item())
    return out


def _f64(model: LinearTransformer) -> LinearTransformer:
    from interp.probes.implicit import as_float64

    return as_float64(model)


def profiles(models: dict[str, LinearTransformer], sigmas: list[float], n: int, n_seq: int) -> dict:
    """Adjusted loss per fixed σ (common random numbers across σ and models)."""
    d = next(iter(models.values())).cfg.d
    data = EvalSet("fixed:0", d=d, n=n, n_seq=n_seq, seed=7)
    prof = sigma_profile({k: _f64(m) for k, m in models.items()}, sigmas, data)
    return {k: [e.mean for e in v] for k, v in prof.items()} | {
        "sigma": sigmas,
        "stderr": {k: [e.stderr for e in v] for k, v in prof.items()},
    }


def fmt(x, spec=".3g") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def print_tables(study: dict) -> None:
    runs = study["runs"]
    L = study["layers"]
    last = max(doc["checkpoints"][-1]["step"] for doc in runs.values())
    milestones = MILESTONES + ([last] if last > MILESTONES[-1] else [])
    ls = f"l1..l{L}"
    print("\n## Final checkpoints, per layer\n")
    print(
        "| run | layer | off-DIAG share | DIAG R² | equiv R² | x-dev P | x-dev Q | rem. eff. rank | rem. top-1 share | "
        "top block | write share | Δloss, layer → DIAG |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, doc in runs.items():
        r = doc["checkpoints"][-1]
        for l in range(doc["n_layers"]):
            blocks = {k: v[l] for k, v in r["remainder_block_share"].items()}
            top = max(blocks, key=blocks.get)
            print(
                f"| {name} | {l + 1} | {fmt(r['share_outside'][l], '.3f')} | {fmt(r['r2_diag'][l], '.3f')} | "
                f"{fmt(r['r2_equivariant'][l], '.3f')} | {fmt(r['x_block_dev_P'][l], '.2f')} | "
                f"{fmt(r['x_block_dev_Q'][l], '.2f')} | "
                f"{fmt(r['remainder_effective_rank'][l], '.1f')} | {fmt(r['remainder_top1_share'][l], '.2f')} | "
                f"{top} {blocks[top]:.2f} | {fmt(r['write_share'][l], '.2f')} | {fmt(r['gap_per_layer'][l], '+.3f')} |"
            )
    print("\n## Register: layer-l write direction against later layers' read directions (|cos|), final checkpoints\n")
    print(f"| run | write share {ls} | strongest writer → reader, abs(cos) |")
    print("|---|---|---|")
    for name, doc in runs.items():
        r = doc["checkpoints"][-1]
        src = max(range(doc["n_layers"]), key=lambda l: r["write_share"][l])
        dst = max(range(doc["n_layers"]), key=lambda m: r["register_cos"][src][m])
        link = (
            f"{src + 1} → {dst + 1}: {fmt(r['register_cos'][src][dst], '.3f')}"
            if r["write_share"][src] >= 0.05
            else "none (every write share < 0.05)"
        )
        writers = [l for l in range(doc["n_layers"]) if r["write_share"][l] >= 0.05]
        if len(writers) > 1:  # several writers: do they write along one direction?
            m = load(ROOT.parent / doc["run_dir"])
            w = register_directions(m.P.detach().double(), m.Q.detach().double())["write"]
            link += "; writers' abs(cos): " + ", ".join(
                f"{a + 1}–{b + 1} {abs(float(w[a] @ w[b])):.2f}"
                for i, a in enumerate(writers)
                for b in writers[i + 1 :]
            )
        print(f"| {name} | {' '.join(fmt(x, '.2f') for x in r['write_share'])} | {link} |")
    print("\n## Off-DIAG share per layer along training (nearest checkpoint at or below the step)\n")
    print(
        "| run | " + " | ".join(f"step {s}" for s in milestones) + f" | first step < 0.1 for good, {ls} | "
        "final strongest writer: its write share > 0.2 for good from |"
    )
    print("|---|" + "---|" * (len(milestones) + 2))
    for name, doc in runs.items():
        cells = [" / ".join(fmt(x, ".2f") for x in at_step(doc, s)["share_outside"]) for s in milestones]
        below = " / ".join(fmt(first_below(doc, l), "d") for l in range(doc["n_layers"]))
        ws = doc["checkpoints"][-1]["write_share"]
        w = max(range(doc["n_layers"]), key=lambda l: ws[l])
        reg = f"layer {w + 1}: {fmt(first_below(doc, w, 'write_share', 0.2, above=True), 'd')}" if ws[w] > 0.2 else "–"
        print(f"| {name} | " + " | ".join(cells) + f" | {below} | {reg} |")
    print("\n## Adjusted loss and functional gap along training\n")
    print("| run | " + " | ".join(f"step {s}" for s in milestones) + " |")
    print("|---|" + "---|" * len(milestones))
    for name, doc in runs.items():
        cells = [f"{at_step(doc, s)['loss']:.3f} / {at_step(doc, s)['loss_diag_projection']:.3f}" for s in milestones]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n## Final adjusted loss (in distribution), shared sequences\n")
    print(
        "| run | FULL | FULL's DIAG projection | FULL without the register write | FULL without any y → x write | "
        "DIAG reference | FULL − DIAG |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, fl in study["final_losses"].items():
        d = fl.get("diag", {})
        fd = fl.get("full_minus_diag", {})
        print(
            f"| {name} | {fl['full']['mean']:.4f} ± {fl['full']['stderr']:.4f} | "
            f"{fl['full_diag_projection']['mean']:.4f} | {fl['full_no_register']['mean']:.4f} | "
            f"{fl['full_no_writes']['mean']:.4f} | "
            f"{fmt(d.get('mean'), '.4f')} | {fmt(fd.get('mean'), '+.4f')} ± {fmt(fd.get('stderr'), '.4f')} |"
        )
    print("\n## The register's effect per σ: slope of Δŷ = ŷ − ŷ_no_register on ŷ_no_register (R²), the oracle's slope")
    print(f"(no_register: {study['register_effect_removes']} zeroed)\n")
    print("| run | " + " | ".join(f"σ={s:g}" for s in next(iter(study["register_effect"].values()))["sigma"]) + " |")
    print("|---|" + "---|" * len(next(iter(study["register_effect"].values()))["sigma"]))
    for name, e in study["register_effect"].items():
        print(
            f"| {name} | "
            + " | ".join(
                f"{fmt(a, '+.3f')} ({fmt(r, '.2f')}) vs {fmt(o, '+.3f')}"
                for a, r, o in zip(e["slope"], e["r2"], e["oracle_slope"])
            )
            + " |"
        )
    for prior, prof in study["profiles"].items():
        print(f"\n## Per-σ adjusted loss, models trained on {prior}\n")
        names = [k for k in prof if k not in ("sigma", "stderr")]
        print("| σ | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for i, s in enumerate(prof["sigma"]):
            print(f"| {s:g} | " + " | ".join(f"{prof[k][i]:.4f}" for k in names) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval-seq", type=int, default=20_000)
    ap.add_argument("--fit-seq", type=int, default=2_048)
    ap.add_argument("--final-seq", type=int, default=100_000, help="sequences for the final in-distribution losses")
    ap.add_argument("--profile-seq", type=int, default=10_000, help="sequences per σ of the profiles")
    ap.add_argument(
        "--layers", type=int, default=4, help="depth of the runs to study: zoo/full<L>_*, DIAG refs diag<L>_*"
    )
    ap.add_argument(
        "--max-checkpoints",
        type=int,
        default=0,
        help="measure step 0 and at most N − 1 later checkpoints, the per-layer gap at the last one only "
        "(0: every checkpoint, gaps everywhere; cheaper for deep models)",
    )
    ap.add_argument(
        "--cache-only",
        nargs="+",
        metavar="RUN",
        default=None,
        help="only fill the per-run caches of these run names (e.g. to spread runs over processes), then exit",
    )
    ap.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN",
        default=None,
        help="study only these run names (default: every complete run found)",
    )
    ap.add_argument(
        "--run-dirs",
        nargs="+",
        metavar="DIR",
        default=None,
        help="study these FULL run directories instead of discovering the zoo's "
        "(their caches: drift/<parent>-<run>.json)",
    )
    ap.add_argument(
        "--diag-refs",
        nargs="+",
        metavar="PATH",
        default=None,
        help="DIAG references (checkpoint files or run directories), one per prior, the prior read from each "
        "(default: experiments/zoo/diag<L>_uniform5 and diag<L>_cat13)",
    )
    ap.add_argument("--out", default=None, help="study JSON to write (default: results/drift.json, drift<L>.json)")
    args = ap.parse_args()
    if args.layers < 1:
        ap.error(f"--layers must be a positive integer, got {args.layers}")
    torch.set_num_threads(1)
    if args.run_dirs is not None:
        try:
            done, pending = explicit_runs(args.run_dirs, args.layers)
        except (ValueError, OSError) as err:
            ap.error(f"--run-dirs: {err}")
        if not done:
            ap.error(f"--run-dirs: none of the runs is complete: {' '.join(args.run_dirs)}")
    else:
        done, pending = discover(args.layers)
    if not done:
        pattern = f"full{args.layers}_*"
        ap.error(f"no complete {args.layers}-layer FULL run under {ZOO} ({pattern}, seeds/{pattern}, drift/{pattern})")
    if args.runs is not None:
        unknown = set(args.runs) - {run_name(r) for r in done}
        if unknown:
            ap.error(f"--runs: no complete {args.layers}-layer FULL run named {', '.join(sorted(unknown))}")
        done = [r for r in done if run_name(r) in args.runs]
        pending = []
    for p in pending:
        print(f"[drift] skipping incomplete run {p}")
    if args.cache_only is not None:
        unknown = set(args.cache_only) - {run_name(r) for r in done}
        if unknown:
            ap.error(f"--cache-only: no complete {args.layers}-layer FULL run named {', '.join(sorted(unknown))}")
        for run in done:
            if run_name(run) in args.cache_only:
                trajectory_metrics(run, args)
        return
    study = {
        "layers": args.layers,
        "settings": settings(args) | {"final_seq": args.final_seq, "profile_seq": args.profile_seq},
        "pending": [str(p.relative_to(ROOT.parent)) for p in pending],
        "runs": {},
        "final_losses": {},
        "profiles": {},
    }
    for run in done:
        study["runs"][run_name(run)] = trajectory_metrics(run, args)
    if args.diag_refs is not None:
        refs = {}
        for path in args.diag_refs:
            r = resolve_model(path)
            if r.noise is None or r.model.cfg.n_layers != args.layers:
                ap.error(f"--diag-refs: {path} records no training prior or is not {args.layers}-layer")
            refs[r.noise] = r.model
        study["diag_refs"] = {resolve_model(p).noise: str(p) for p in args.diag_refs}
    else:
        refs = {prior: ZOO / f"diag{args.layers}_{slug}" for prior, slug in PRIORS.items()}
        refs = {prior: load(p) for prior, p in refs.items() if p.exists() and Run(p).is_complete()}
    for run in done:
        cfg = Run(run).config()
        study["final_losses"][run_name(run)] = final_losses(
            load(run), refs.get(cfg.noise), cfg.noise, cfg.n, args.final_seq
        )
    every = args.layers > 4  # deeper models write from several layers (drift.md, "At 7 layers")
    study["register_effect_removes"] = "every layer's y → x column" if every else "the strongest writer's y → x column"
    study["register_effect"] = {
        run_name(r): register_effect(
            load(r), sigma_grids(Run(r).config().noise)[1], Run(r).config().n, every_layer=every
        )
        for r in done
    }
    priors = list(PRIORS) + sorted({Run(r).config().noise for r in done} - set(PRIORS))
    for prior in priors:
        runs = [r for r in done if Run(r).config().noise == prior and not Run(r).config().init]
        if not runs:
            continue
        sigmas = sigma_grids(prior)[0]
        models = {}
        for r in runs:
            m = load(r)
            models[f"FULL {run_name(r)}"] = m
            models[f"proj {run_name(r)}"] = LinearTransformer.from_omegas(
                diag_projection(m.P.detach(), m.Q.detach()).omega, m.cfg.d
            )
        if prior in refs:
            models["DIAG"] = refs[prior]
        study["profiles"][prior] = profiles(models, sigmas, Run(runs[0]).config().n, args.profile_seq)
    compact = {k: v for k, v in study.items() if k != "runs"}
    compact["runs"] = {
        name: {
            "run_dir": doc["run_dir"],
            "init": doc["init"],
            "seed": doc["seed"],
            "noise": doc["noise"],
            "cache": str((CACHE / f"{name}.json").relative_to(ROOT.parent)),
            "steps": [r["step"] for r in doc["checkpoints"]],
            **{
                key: [r.get(key) for r in doc["checkpoints"]]
                for key in (
                    "share_outside",
                    "share_outside_read",
                    "r2_diag",
                    "r2_equivariant",
                    "x_block_dev_P",
                    "x_block_dev_Q",
                    "write_share",
                    "loss",
                    "loss_diag_projection",
                    "gap_diag_projection",
                    "gap_per_layer",
                )
            },
            "final": doc["checkpoints"][-1],
        }
        for name, doc in study["runs"].items()
    }
    out = Path(args.out) if args.out else OUT / ("drift.json" if args.layers == 4 else f"drift{args.layers}.json")
    out.write_text(json.dumps(jsonable(compact), indent=1, allow_nan=False) + "\n")
    print_tables(study)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
