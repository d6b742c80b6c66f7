"""Small models and tasks shared by the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.tasks import sample_tasks
from interp.variants import VariantTransformer, build


def random_full(d=4, n_layers=3, n_heads=2, scale=0.1, seed=0) -> LinearTransformer:
    """A FULL float64 model with O(scale) random P, Q (large enough that every term matters)."""
    g = torch.Generator().manual_seed(seed)
    D = d + 1
    P = scale * torch.randn(n_layers, n_heads, D, D, generator=g, dtype=torch.float64)
    Q = scale * torch.randn(n_layers, n_heads, D, D, generator=g, dtype=torch.float64)
    return LinearTransformer.from_matrices(P, Q)


def random_diag(d=4, n_layers=3, n_heads=1, param="diag", scale=0.1, seed=0) -> LinearTransformer:
    g = torch.Generator().manual_seed(seed)
    model = LinearTransformer(
        ModelConfig(d=d, n_layers=n_layers, n_heads=n_heads, param=param, dtype="float64"), init=False
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model


def random_variant(d=4, n_layers=2, n_heads=2, scale=0.3, seed=0, **fields) -> VariantTransformer:
    """A float64 model of the linear-attention family (interp.variants) with O(scale) random weights (large enough
    that every term matters): heads of width 3 (narrower than the token: q, k, v are projections), FFNs of width 6."""
    if fields.get("attention", "lsa") != "lsa":
        fields.setdefault("head_width", 3)
    cfg = ModelConfig(d=d, n_layers=n_layers, n_heads=n_heads, dtype="float64", mlp_width=6, **fields)
    model = build(cfg, init=False)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model.eval()


def small_batch(batch=16, d=4, n=8, noise="uniform:1", seed=0):
    return sample_tasks(batch, d, n, noise, torch.Generator().manual_seed(seed), dtype=torch.float64)


def gd_construction(d: int, n_layers: int, eta: float) -> LinearTransformer:
    """von Oswald et al. 2023: Q = [[I,0],[0,0]], P = η [[0,0],[0,-1]]: each layer is one GD step."""
    D = d + 1
    Q = torch.zeros(n_layers, 1, D, D, dtype=torch.float64)
    Q[:, 0, :d, :d] = torch.eye(d, dtype=torch.float64)
    P = torch.zeros(n_layers, 1, D, D, dtype=torch.float64)
    P[:, 0, d, d] = -eta
    return LinearTransformer.from_matrices(P, Q)


def trained(
    run_dir,
    param: str,
    noise: str,
    steps: int,
    d: int = 10,
    n: int = 20,
    n_layers: int = 1,
    lr: float = 1e-2,
    batch: int = 2048,
    seed: int = 0,
    x_cov=None,
) -> LinearTransformer:
    """A model trained by interp.train.train (Adam, one-cycle lr, fresh batches of the noise prior with
    x ~ N(0, x_cov)), two checkpoints."""
    from interp.config import TrainConfig
    from interp.train import train

    cfg = TrainConfig(
        model=ModelConfig(d=d, n_layers=n_layers, param=param),
        noise=noise,
        n=n,
        seed=seed,
        steps=steps,
        batch=batch,
        lr=lr,
        schedule="onecycle",
        x_cov=x_cov,
        n_checkpoints=2,
        resume_every=steps,
        log_every=steps,
    )
    return train(cfg, run_dir, progress=False).model


def implicit_w1(model: LinearTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """w^1 of a one-layer model: ŷ = ⟨w^1, x_t⟩ with w^1 = −(Σ_k P_k S Q_k)[d, :d] (Theorem 4.1)."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_stats")
        S = cache["blocks.0.attn.hook_stats"]
        A = torch.einsum("hij,bjk,hkl->bil", model.P[0], S, model.Q[0])
    d = model.cfg.d
    return -A[:, d, :d]


def run_cli(capsys, *argv):
    """(exit status, stdout, stderr) of `interp ARGV...` run in-process; argparse exits are caught."""
    from interp.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def experiment_script(name: str) -> ModuleType:
    """The script experiments/NAME.py loaded as a module (the scripts are not a package); NAME may name a subfolder,
    as "studies/tail_check" does (experiments/studies/: the one-off investigations)."""
    spec = importlib.util.spec_from_file_location(f"experiments_{name.replace('/', '_')}", EXPERIMENTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
