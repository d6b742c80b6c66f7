"""Golden values of the shipped zoo: recovered ω's, fit R², implied-λ slope, adjusted loss, and the 7-layer models'
layer schedule (§5.3 labels, interp.probes.schedule).

    OMP_NUM_THREADS=1 python -m tests.golden --write     # regenerate tests/data/golden.json on purpose

tests/test_golden.py recomputes them and fails when any moves beyond its tolerance, so a change to
the model, the probes or the zoo has to update this file deliberately.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.probes import block_ablation, fit_layer_maps, implicit_model, schedule_labels
from interp.run import Run, load
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
}
SCHEDULE_SEQ = 5_000  # the layer schedule's single-block ablation: 5 000 sequences, seed 0 (labels only: fast)
SCHEDULE_DEPTH = 7  # pinned for the zoo's 7-layer models


def zoo_runs() -> list[str]:
    return sorted(p.name for p in ZOO.iterdir() if Run.is_run(p) and Run(p).is_complete())


def golden_schedule(name: str) -> list[str]:
    """The layer labels of a zoo run's §5.3 schedule ("x-from-y", "y-step", "both", "neither" per layer), from the
    single-block ablation on SCHEDULE_SEQ sequences of its prior (seed 0)."""
    run = ZOO / name
    cfg = Run(run).config()
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=SCHEDULE_SEQ, seed=0)
    abl = block_ablation(load(run), data)
    inc = [[e.mean for e in row] for row in abl.increase]
    se = [[e.stderr for e in row] for row in abl.increase]
    return schedule_labels(inc, se, abl.base.mean, abl.blowups)


def golden_values(name: str) -> dict:
    """The pinned numbers of one zoo run (float64 probes on 2 000 sequences, loss on 10 000)."""
    run = ZOO / name
    cfg = Run(run).config()
    model = load(run)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=0)
    out: dict = {"adjusted_loss": adjusted_loss(model, data).mean}
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
    args = ap.parse_args()
    torch.set_num_threads(1)
    values = {name: golden_values(name) for name in zoo_runs()}
    text = json.dumps({"tolerances": TOLERANCES, "runs": values}, indent=1) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
