"""interp.spectral: one context for the baselines and the probes, checked against direct solves and against itself."""

from __future__ import annotations

import torch

from interp.config import ModelConfig
from interp.evalset import EvalSet
from interp.model import LinearTransformer
from interp.noise_free import gdpp_noise_free_loss
from interp.probes import implicit_model, probe_model
from interp.spectral import SpectralContext, context_spectrum
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


def _error_matrix(model, X: torch.Tensor) -> torch.Tensor:
    """M [batch, d, d] of a model on noise-free contexts X [batch, n, d]: its query error y_t − ŷ is wᵀ M x_t for
    every w and x_t (the model is linear in the labels and in the query), read off with w = e_a, x_t = e_b."""
    B, n, d = X.shape
    eye = torch.eye(d, dtype=torch.float64)
    tokens = torch.zeros(B, d, d, n + 1, d + 1, dtype=torch.float64)
    tokens[..., :n, :d] = X[:, None, None]
    tokens[..., :n, d] = torch.einsum("bni,ai->ban", X, eye)[:, :, None, :]  # y_i = ⟨e_a, x_i⟩
    tokens[..., n, :d] = eye  # x_t = e_b
    return eye - model(tokens.reshape(-1, n + 1, d + 1)).reshape(B, d, d)


def test_gdpp_noise_free_loss_is_the_models_expected_error():
    """½ E_{w, x_t}(wᵀ M x_t)² = ½ tr(M Λ Mᵀ) from the model, against the closed form on the spectrum alone, for a
    2-head GD++ far from its init, with x ~ N(0, I) and with a full Λ."""
    d, n = 4, 7
    g = torch.Generator().manual_seed(0)
    model = LinearTransformer(ModelConfig(d=d, n_layers=3, n_heads=2, param="gdpp", dtype="float64"), init=False)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.2 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    X = torch.randn(6, n, d, generator=g, dtype=torch.float64)
    lam = torch.tensor([[2, 0.3, 0, 0], [0.3, 1, 0, 0], [0, 0, 0.5, 0.1], [0, 0, 0.1, 1.5]], dtype=torch.float64)
    om = model.omegas()
    M = _error_matrix(model, X).detach()
    for cov in (None, lam):
        s, u = context_spectrum(X, cov)
        C = torch.eye(d, dtype=torch.float64) if cov is None else cov
        torch.testing.assert_close(u.sum(-1), torch.full((6,), float(C.trace()), dtype=torch.float64))
        direct = 0.5 * torch.einsum("kab,bc,kac->k", M, C, M)
        assert float(direct.min()) > 1  # far from converged: every layer matters
        closed = gdpp_noise_free_loss(om.omega_xx, om.omega_yx, s, u).detach()
        torch.testing.assert_close(closed, direct, rtol=1e-12, atol=0)
