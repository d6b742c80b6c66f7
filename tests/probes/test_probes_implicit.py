"""Theorem 4.1 readouts (interp.probes.implicit): least squares vs the Lemma 4.3 recursion, GD and ridge references."""

from __future__ import annotations

import pytest
import torch

from interp.model import LinearTransformer
from interp.probes import implicit_model, tune_gd_steps
from interp.probes.implicit import compare_solvers, gd_iterates
from interp.tasks import sample_tasks


def random_full(d, L, H, scale, seed):
    g = torch.Generator().manual_seed(seed)
    P, Q = (scale * torch.randn(L, H, d + 1, d + 1, generator=g, dtype=torch.float64) for _ in range(2))
    return LinearTransformer.from_matrices(P, Q)


def tasks(batch, d, n, noise="uniform:2", seed=1):
    return sample_tasks(batch, d, n, noise, torch.Generator().manual_seed(seed), dtype=torch.float64)


def gd_model(d, L, eta):
    """von Oswald et al. 2023: Q = [[I, 0], [0, 0]], P = η [[0, 0], [0, −1]] is one GD step per layer."""
    P = torch.zeros(L, 1, d + 1, d + 1, dtype=torch.float64)
    Q = torch.zeros_like(P)
    Q[:, 0, :d, :d] = torch.eye(d)
    P[:, 0, d, d] = -eta
    return LinearTransformer.from_matrices(P, Q)


@pytest.mark.parametrize("d,n,L,H,seed", [(4, 9, 3, 3, 0), (10, 20, 4, 2, 1), (3, 3, 2, 4, 2)])
def test_lstsq_and_recursion_agree_on_random_full(d, n, L, H, seed):
    model = random_full(d, L, H, scale=0.3 / (d + 1), seed=seed)
    batch = tasks(64, d, n, seed=seed)
    imp = implicit_model(model, batch.tokens)
    assert imp.M.shape == (L + 1, 64, d, d) and imp.u.shape == (L + 1, 64, d)
    assert imp.a.shape == (L + 1, 64) and imp.w.shape == (L + 1, 64, d)
    assert imp.disagreement.max() < 1e-8
    assert imp.residual.max() < 1e-10
    assert imp.prediction_error.max() < 1e-10
    # the readout is the model's own prediction after every layer, and the layer-L one is model(tokens)
    torch.testing.assert_close(imp.pred, model.predict_per_layer(batch.tokens), rtol=1e-12, atol=1e-12)
    assert (imp.pred[1:].abs().mean(-1) > 1e-3).all()  # non-trivial model


def test_float32_model_is_probed_in_float64():
    model = random_full(4, 2, 2, scale=0.05, seed=3)
    m32 = LinearTransformer.from_matrices(model.P.detach().float(), model.Q.detach().float())
    batch = tasks(32, 4, 10)
    imp = implicit_model(m32, batch.tokens.float())
    assert imp.w.dtype == torch.float64 and imp.disagreement.max() < 1e-8


def test_gd_construction_gives_explicit_gd_iterates():
    d, n, L, eta = 5, 12, 4, 0.05
    batch = tasks(50, d, n)
    imp = implicit_model(gd_model(d, L, eta), batch.tokens)
    x, y = batch.x, batch.y
    Sigma, alpha = x.transpose(1, 2) @ x, (x * y[..., None]).sum(1)
    w = torch.zeros(50, d, dtype=torch.float64)
    for l in range(L + 1):
        torch.testing.assert_close(imp.w[l], w, rtol=1e-10, atol=1e-12)
        w = w + eta * (alpha - (Sigma @ w[..., None])[..., 0])  # w ← w + η (α − Σ w)
    # and through the eigen-coordinates used for the tuned GD reference
    ctx = imp.context()
    etas = torch.full((L + 1,), eta, dtype=torch.float64)
    torch.testing.assert_close(gd_iterates(ctx, etas)[1:], imp.w[1:], rtol=1e-9, atol=1e-12)
    # tuning the step against the model's own w^l recovers η, and the GD comparison is exact
    tuned = tune_gd_steps(ctx, L, reference=imp.w)
    torch.testing.assert_close(tuned[1:], etas[1:], rtol=1e-6, atol=0)
    cmp = compare_solvers(imp.w, ctx, batch.sigma, tuned)
    assert cmp["relerr_gd"][1:].max() < 1e-5 and (cmp["cos_gd"][1:] > 1 - 1e-9).all()


def test_implied_lambda_recovers_a_planted_ridge():
    d, n = 10, 20
    batch = tasks(40, d, n)
    ctx = implicit_model(gd_model(d, 1, 0.01), batch.tokens).context()
    lam0 = torch.logspace(-2, 3, 40, dtype=torch.float64)
    w = torch.stack([torch.zeros(40, d, dtype=torch.float64), ctx.ridge_weights(lam0)])  # [L+1, batch, d], w⁰ = 0
    lam, err = ctx.implied_lambda(w)
    assert lam.shape == (2, 40) and lam[0].isinf().all() and err[0].isnan().all()
    torch.testing.assert_close(lam[1], lam0, rtol=1e-5, atol=0)
    assert err[1].max() < 1e-6
    # OLS (λ = 0) and ridge against the reference solvers
    torch.testing.assert_close(
        ctx.ols_weights(), torch.linalg.solve(batch.x.transpose(1, 2) @ batch.x, (batch.x * batch.y[..., None]).sum(1))
    )


def test_lstsq_needs_enough_tokens():
    model = random_full(6, 1, 1, 0.1, 0)
    with pytest.raises(ValueError, match="n \\+ 1 >= d \\+ 1"):
        implicit_model(model, tasks(4, 6, 4).tokens)
