"""Golden values of the shipped zoo: recovered ω's, fit R², implied-λ slope, adjusted loss, and the 7-layer models'
layer schedule (§5.3 labels, interp.probes.schedule).

    OMP_NUM_THREADS=1 python -m tests.golden --write     # regenerate tests/data/golden.json on purpose
    OMP_NUM_THREADS=1 python -m tests.golden --write --only best/uniform7/full7   # one entry (its file changed)
    OMP_NUM_THREADS=1 python -m tests.golden --write --only 'best/uniform0/gdpp*'  # Theorem 5.1's (a pattern)

tests/test_golden.py recomputes them and fails when any moves beyond its tolerance, so a change to
the model, the probes or the zoo has to update this file deliberately.

It pins the zoo's best model of every cell the report probes (PROBED: every depth on uniform:5 and {1,3}, 4 and 7
layers on the other priors; entries "best/<prior>/<arch><L>"). Those files are rewritten when a better seed is
exported over them, so each entry records the file and its SHA-256, and the test says "the zoo file changed;
regenerate" when the digest no longer matches instead of reporting moved numbers.

The zoo's GD++-1..7 on uniform:0 (THEOREM51_CELLS, entries "best/uniform0/gdpp<L>") pin Theorem 5.1 instead
(interp.probes.theorem51, `golden_theorem51`): per layer γ, γ·s_max, κ and the map error, the loss after K layers,
its order and fitted order; pinned by digest the same way.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.probes import block_ablation, fit_layer_maps, implicit_model, schedule_labels, theorem51
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
    # Theorem 5.1 on the uniform:0 GD++ (golden_theorem51): 10 000 sequences of seed 0, spectra on 2 000 of seed 0
    "theorem51_loss": {"rel": 1e-5},  # [L+1] after K layers: same seed, same numbers (rounding moves ~1e-9)
    "theorem51_order": {"rel": 1e-5},  # [L] log ε_{K+1} / log ε_K (null where a loss is >= 1)
    "theorem51_fit_order": {"rel": 1e-5},  # e^slope of log(−log ε_K) on K (null: nothing to fit)
    "theorem51_gamma": {"rel": 1e-9},  # [L] −ω_xx, read from the weights
    "theorem51_gamma_smax": {"rel": 1e-6},  # [L] medians over the sequences
    "theorem51_kappa": {"rel": 1e-6},  # [L+1] median κ(Σ^l)
    "theorem51_map_error": {"below": 1e-13},  # [L] rounding: any value below passes (the stored one is ~3e-15)
    "file": {"exact": True},  # Table 1 files: where the pinned model is,
    "sha256": {"exact": True},  # and its bytes' digest (checked before any number)
}
SCHEDULE_SEQ = 5_000  # the layer schedule's single-block ablation: 5 000 sequences, seed 0 (labels only: fast)
SCHEDULE_DEPTH = 7  # pinned for the zoo's 7-layer models
BEST = ZOO / "best"  # the best seed of every Table 1 cell, one file each (experiments/zoo/best/<prior>/<arch><L>)
# The cells the report probes (interp.report.data.is_probed_cell): every depth on uniform:5 and {1,3}, 4 and 7 layers
# on every other prior (uniform:0 at 4 and 7 layers: GD++ pinned by Theorem 5.1 below, DIAG and FULL here).
PROBED = [
    f"{prior}/{arch}{L}"
    for prior in ("uniform0", "uniform1", "uniform2", "uniform3", "uniform4", "uniform5", "uniform6", "uniform7")
    + ("cat13", "cat135")
    for arch in ("gdpp", "diag", "full")
    for L in (range(1, 8) if prior in ("uniform5", "cat13") else (4, 7))
]
THEOREM51_CELLS = [f"uniform0/gdpp{L}" for L in range(1, 8)]  # Theorem 5.1's pins (golden_theorem51)
THEOREM51_SEQ, THEOREM51_PROBE_SEQ = 10_000, 2_000
REGENERATE = "OMP_NUM_THREADS=1 python -m tests.golden --write"  # + " --only NAME ..." to recompute just those


def zoo_runs() -> list[str]:
    """The pinned names ("best/<prior>/<arch><L>"): the PROBED cells and THEOREM51_CELLS whose files exist."""
    cells = dict.fromkeys([*PROBED, *THEOREM51_CELLS])
    return [f"best/{c}" for c in cells if (BEST / f"{c}.safetensors").is_file()]


def is_theorem51(name: str) -> bool:
    """Whether a pinned name is one of THEOREM51_CELLS (pinned by golden_theorem51)."""
    return name.removeprefix("best/") in THEOREM51_CELLS


def model_path(name: str) -> Path:
    """The file a pinned name stands for."""
    return ZOO / f"{name}.safetensors"


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


def golden_theorem51(name: str) -> dict:
    """Theorem 5.1's pinned numbers of a noise-free GD++ file (interp.probes.theorem51: loss after K layers on
    THEOREM51_SEQ sequences of seed 0, the spectra on THEOREM51_PROBE_SEQ of them)."""
    cfg = train_config(name)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=THEOREM51_SEQ, seed=0)
    rec = theorem51(load(model_path(name)), data, probe_seq=THEOREM51_PROBE_SEQ, sample=0)
    pre = rec.preconditioning
    return {
        "theorem51_loss": rec.loss,
        "theorem51_order": rec.order,
        "theorem51_fit_order": rec.fit.order,
        "theorem51_gamma": pre.gamma.tolist(),
        "theorem51_gamma_smax": pre.gamma_smax.tolist(),
        "theorem51_kappa": pre.kappa.tolist(),
        "theorem51_map_error": pre.map_error.tolist(),
    }


def golden_values(name: str) -> dict:
    """The pinned numbers of one zoo run (float64 probes on 2 000 sequences, loss on 10 000), or of a THEOREM51_CELLS
    file Theorem 5.1's (`golden_theorem51`); a Table 1 file's entry also names the file and its SHA-256 (not compared
    as numbers: test_golden.py checks the digest first)."""
    run = model_path(name)
    out: dict = {}
    if run.is_file():
        out |= {"file": str(run.relative_to(ROOT)), "sha256": file_sha256(run)}
    if is_theorem51(name):
        return out | golden_theorem51(name)
    cfg = train_config(name)
    model = load(run)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=0)
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
    # least-squares slope of the final layer's implied ridge λ on the sequence's true σ² (none at σ = 0: no spread)
    if float(((s2 - s2.mean()) ** 2).sum()) > 0:
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
        help="recompute only these entries (e.g. best/uniform7/full7 after its file changed, or a pattern: "
        "'best/uniform0/gdpp*'; none: only add the models not pinned yet and drop the gone ones); keep every other "
        "entry as stored (a full recompute moves them by rounding, up to ~1e-6 relative)",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = zoo_runs()
    stored = json.loads(GOLDEN.read_text())["runs"] if args.only is not None and GOLDEN.exists() else {}
    unknown = [pat for pat in args.only or () if not fnmatch.filter(names, pat)]
    if unknown:
        ap.error(f"--only: not a pinnable model: {', '.join(sorted(unknown))} (pinnable: {', '.join(names)})")
    only = None if args.only is None else {n for pat in args.only for n in fnmatch.filter(names, pat)}
    values = {
        name: golden_values(name) if only is None or name in only or name not in stored else stored[name]
        for name in names
    }
    text = json.dumps({"tolerances": TOLERANCES, "runs": values}, indent=1) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
