"""Golden values of the shipped zoo: recovered ω's, fit R², implied-λ slope, adjusted loss, and the 7-layer models'
layer schedule (§5.3 labels, interp.probes.schedule).

    OMP_NUM_THREADS=1 python -m tests.golden --write     # regenerate tests/data/golden.json on purpose
    OMP_NUM_THREADS=1 python -m tests.golden --write --only table1/uniform7/full7   # one entry (its file changed)

tests/test_golden.py recomputes them and fails when any moves beyond its tolerance, so a change to
the model, the probes or the zoo has to update this file deliberately.

Besides the zoo's run directories it pins the Table 1 zoo's 7-layer DIAG and FULL files of uniform:7 and {1,3,5}
(TABLE1_CELLS, whichever exist; entries named "table1/<prior>/<arch>7"). Those files are rewritten when a better
seed of the still-training grid finishes, so each entry records the file and its SHA-256, and the test says "the
zoo file changed; regenerate" when the digest no longer matches instead of reporting moved numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.probes import block_ablation, fit_layer_maps, implicit_model, schedule_labels
from interp.run import Run, load, resolve_model
from interp.tasks import sample_tasks

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "experiments" / "zoo"
GOLDEN = Path(__file__).resolve().parent / "data" / "golden.json"
TOLERANCES = {  # absolute, except "rel" entries
    "adjusted_loss": {"rel": 1e-3},  # 10 000 sequences, seed 0: same seed, same numbers
    "omegas": {"abs": 1e-6},
    "diag_r2": {"abs": 1e-4},
    "equivariant_r2": {"abs": 1e-4},
    "implied_lambda_slope": {"rel": 1e-3},
    "schedule_labels": {"exact": True},  # strings: equal or not
    "file": {"exact": True},  # Table 1 files: where the pinned model is,
    "sha256": {"exact": True},  # and its bytes' digest (checked before any number)
}
SCHEDULE_SEQ = 5_000  # the layer schedule's single-block ablation: 5 000 sequences, seed 0 (labels only: fast)
SCHEDULE_DEPTH = 7  # pinned for the zoo's 7-layer models
TABLE1 = ZOO / "table1"
TABLE1_CELLS = [f"{prior}/{arch}7" for prior in ("uniform7", "cat135") for arch in ("diag", "full")]
REGENERATE = "OMP_NUM_THREADS=1 python -m tests.golden --write"  # + " --only NAME ..." to recompute just those


def zoo_runs() -> list[str]:
    """The pinned names: the zoo's complete run directories, then the Table 1 cells of TABLE1_CELLS that exist."""
    runs = sorted(p.name for p in ZOO.iterdir() if Run.is_run(p) and Run(p).is_complete())
    return runs + [f"table1/{c}" for c in TABLE1_CELLS if (TABLE1 / f"{c}.safetensors").is_file()]


def model_path(name: str) -> Path:
    """The file or run directory a pinned name stands for."""
    return ZOO / f"{name}.safetensors" if name.startswith("table1/") else ZOO / name


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train_config(name: str):
    """The training config of a pinned model (a run's config.json, or the one a standalone file embeds)."""
    path = model_path(name)
    return resolve_model(path).config if path.is_file() else Run(path).config()


def golden_schedule(name: str) -> list[str]:
    """The layer labels of a zoo run's §5.3 schedule ("x-from-y", "y-step", "both", "neither" per layer), from the
    single-block ablation on SCHEDULE_SEQ sequences of its prior (seed 0)."""
    run = model_path(name)
    cfg = train_config(name)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=SCHEDULE_SEQ, seed=0)
    abl = block_ablation(load(run), data)
    inc = [[e.mean for e in row] for row in abl.increase]
    se = [[e.stderr for e in row] for row in abl.increase]
    return schedule_labels(inc, se, abl.base.mean, abl.blowups)


def golden_values(name: str) -> dict:
    """The pinned numbers of one zoo run (float64 probes on 2 000 sequences, loss on 10 000); a Table 1 file's entry
    also names the file and its SHA-256 (not compared as numbers: test_golden.py checks the digest first)."""
    run = model_path(name)
    cfg = train_config(name)
    model = load(run)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=0)
    out: dict = {}
    if run.is_file():
        out |= {"file": str(run.relative_to(ROOT)), "sha256": file_sha256(run)}
    out["adjusted_loss"] = adjusted_loss(model, data).mean
    batch = sample_tasks(2000, cfg.model.d, cfg.n, cfg.noise, torch.Generator().manual_seed(1), dtype=torch.float64)
    imp = implicit_model(model, batch.tokens)
    if cfg.model.param == "full":
        fits = fit_layer_maps(model, imp.S)
        out["diag_r2"] = fits.diag_r2.tolist()
        out["equivariant_r2"] = fits.equivariant_r2.tolist()
    else:
        out["omegas"] = model.omegas().stack().detach().double().tolist()
    lam, _ = imp.context().implied_lambda(imp.w)
    final = lam[-1]
    ok = torch.isfinite(final)
    s2 = batch.sigma[ok] ** 2
    # least-squares slope of the final layer's implied ridge λ on the sequence's true σ²
    out["implied_lambda_slope"] = (
        ((s2 - s2.mean()) * (final[ok] - final[ok].mean())).sum() / ((s2 - s2.mean()) ** 2).sum()
    ).item()
    if cfg.model.n_layers == SCHEDULE_DEPTH:
        out["schedule_labels"] = golden_schedule(name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write tests/data/golden.json")
    ap.add_argument(
        "--only",
        nargs="*",
        metavar="NAME",
        default=None,
        help="recompute only these entries (e.g. table1/uniform7/full7 after its file changed; none: only add the "
        "models not pinned yet and drop the gone ones); keep every other entry as stored (a full recompute moves "
        "them by rounding, up to ~1e-6 relative)",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = zoo_runs()
    stored = json.loads(GOLDEN.read_text())["runs"] if args.only is not None and GOLDEN.exists() else {}
    unknown = set(args.only or ()) - set(names)
    if unknown:
        ap.error(f"--only: not a pinnable model: {', '.join(sorted(unknown))} (pinnable: {', '.join(names)})")
    values = {
        name: golden_values(name) if args.only is None or name in args.only or name not in stored else stored[name]
        for name in names
    }
    text = json.dumps({"tolerances": TOLERANCES, "runs": values}, indent=1) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
