"""Golden values of the shipped zoo: recovered ω's, fit R², implied-λ slope, adjusted loss.

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
from interp.probes import fit_layer_maps, implicit_model
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
}


def zoo_runs() -> list[str]:
    return sorted(p.name for p in ZOO.iterdir() if Run.is_run(p) and Run(p).is_complete())


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
