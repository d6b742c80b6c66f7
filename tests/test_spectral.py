"""interp.spectral: one context for the baselines and the probes, checked against direct solves and against itself."""

from __future__ import annotations

import torch

from interp.evalset import EvalSet
from interp.probes import implicit_model, probe_model
from interp.spectral import SpectralContext
from tests.helpers import gd_construction, random_full

torch.set_num_threads(1)


def test_batch_and_stats_views_agree_with_direct_solves():
    """From the raw tokens (the baselines) and from a model's S⁰ (the probes): the same ridge, OLS, GD and ρ."""
    batch = EvalSet("uniform:2", d=5, n=12, n_seq=64, seed=3).draw()
    a = SpectralContext.of(batch)
    b = implicit_model(gd_construction(5, 1, 0.01), batch.tokens).context()
    x, y, xt = batch.x, batch.y, batch.x_query
    Sigma, alpha = x.transpose(1, 2) @ x, (x * y[..., None]).sum(1)
    lam = torch.linspace(0.1, 5.0, 64, dtype=torch.float64)
    w_ridge = torch.linalg.solve(Sigma + lam[:, None, None] * torch.eye(5, dtype=torch.float64), alpha)
    w = torch.zeros_like(alpha)
    for _ in range(3):  # three GD steps from 0 with η = 0.02
        w = w + 0.02 * (alpha - (Sigma @ w[..., None])[..., 0])
    for ctx in (a, b):
        torch.testing.assert_close(ctx.ridge_weights(lam), w_ridge, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(ctx.ridge(lam), (w_ridge * xt).sum(-1), rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(ctx.gd_weights(3, 0.02), w, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(ctx.gd(3, 0.02), (w * xt).sum(-1), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(ctx.predict(ctx.ols_weights()), ctx.ols(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a.rss, b.rss, rtol=1e-7, atol=1e-9)  # explicit residuals vs λ − αᵀΣ⁻¹α
    assert (a.n, a.d) == (b.n, b.d) == (12, 5)
    torch.testing.assert_close(a.sigma2_hat(), a.rss / 7)


def test_gd_at_one_step_grid_and_implied_lambda_round_trip():
    """gd takes (steps, eta) with η a grid [G, 1] (probe tuning); a planted ridge solution gives back its λ."""
    batch = EvalSet("fixed:1", d=4, n=10, n_seq=30, seed=5).draw()
    ctx = SpectralContext.of(batch)
    etas = torch.tensor([[0.01], [0.03]], dtype=torch.float64)
    grid = ctx.gd(2, etas)
    assert grid.shape == (2, 30)
    torch.testing.assert_close(grid[1], ctx.gd(2, 0.03))
    lam0 = torch.logspace(-1, 2, 30, dtype=torch.float64)
    w = torch.stack([torch.zeros(30, 4, dtype=torch.float64), ctx.ridge_weights(lam0)])
    lam, err = ctx.implied_lambda(w)
    torch.testing.assert_close(lam[1], lam0, rtol=1e-5, atol=0)
    assert lam[0].isinf().all() and err[1].max() < 1e-6


def test_probe_numbers_do_not_depend_on_the_chunk():
    """The probe sequences come from the EvalSet: the same numbers in chunks of 64 or all at once."""
    model = random_full(d=4, n_layers=2, n_heads=1, scale=0.05, seed=1)
    data = EvalSet("uniform:1", d=4, n=10, n_seq=192, seed=2)
    one = probe_model(model, data, fit_seq=128, ablation_seq=0).to_json()
    chunked = probe_model(model, data.replace(chunk=64), fit_seq=128, ablation_seq=0).to_json()
    assert one.keys() == chunked.keys() and one["n_seq"] == 192
    vec = lambda v: torch.tensor([float("nan") if x is None else x for x in v], dtype=torch.float64)  # noqa: E731
    for section, key in (
        ("solvers", "cos_ols"),
        ("solvers", "relerr_gd"),
        ("implied_lambda", "median"),
        ("momentum", "u_norm"),
        ("const_ridge", "relative_mismatch"),
        ("implicit", "prediction_error"),
    ):
        torch.testing.assert_close(
            vec(one[section][key]),
            vec(chunked[section][key]),
            rtol=1e-10,
            atol=1e-14,
            equal_nan=True,
            msg=f"{section}.{key}",
        )
