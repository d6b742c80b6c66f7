"""Baselines of Vladymyrov et al. 2024, Table 1 baselines against direct numpy solves, exactness, and the Bayes
floor."""

import math

import numpy as np
import pytest
import torch

from interp.baselines import (
    AdaRR,
    Bayes,
    ConstRR,
    GDk,
    TunedRR,
    ols_predict,
    oracle_predict,
    ridge_predict,
    sigma_nodes,
)
from interp.evalset import EvalSet
from interp.evaluate import evaluate
from interp.spectral import SpectralContext
from interp.tasks import sample_tasks
from interp.tuning import baselines, tuned

torch.set_num_threads(1)


def tasks(batch=200, noise="uniform:5", seed=0, d=10, n=20):
    return sample_tasks(batch, d, n, noise, torch.Generator().manual_seed(seed), dtype=torch.float64)


def numpy_ridge(batch, lam):
    x, y, xt = batch.x.numpy(), batch.y.numpy(), batch.x_query.numpy()
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), (len(x),))
    return np.array(
        [xt[i] @ np.linalg.solve(x[i].T @ x[i] + lam[i] * np.eye(x.shape[2]), x[i].T @ y[i]) for i in range(len(x))]
    )


def test_oracle_ridge_matches_numpy_solve():
    b = tasks()
    ref = numpy_ridge(b, b.sigma.numpy() ** 2)
    np.testing.assert_allclose(oracle_predict(b).numpy(), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(SpectralContext.of(b).ridge(b.sigma**2).numpy(), ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ConstRR(2.5)(b).numpy(), numpy_ridge(b, 2.5), rtol=1e-9, atol=1e-9)


def test_ols_matches_lstsq_and_min_norm_when_n_below_d():
    b = tasks(noise="fixed:1")
    ref = [b.x_query[i].numpy() @ np.linalg.lstsq(b.x[i].numpy(), b.y[i].numpy(), rcond=None)[0] for i in range(len(b))]
    np.testing.assert_allclose(ols_predict(b).numpy(), ref, rtol=1e-8, atol=1e-8)
    small = tasks(noise="fixed:1", n=6)  # n < d: minimum-norm interpolant
    ref = [
        small.x_query[i].numpy() @ np.linalg.pinv(small.x[i].numpy()) @ small.y[i].numpy() for i in range(len(small))
    ]
    np.testing.assert_allclose(ols_predict(small).numpy(), ref, rtol=1e-7, atol=1e-7)


def test_adarr_sigma_hat_is_unbiased_residual_variance():
    b = tasks(noise="fixed:2")
    sp = SpectralContext.of(b)
    x, y = b.x.numpy(), b.y.numpy()
    rss = [np.sum((y[i] - x[i] @ np.linalg.lstsq(x[i], y[i], rcond=None)[0]) ** 2) for i in range(len(b))]
    np.testing.assert_allclose(sp.sigma2_hat().numpy(), np.array(rss) / 10, rtol=1e-8)
    assert abs(sp.sigma2_hat().mean().item() - 4.0) < 0.4  # E σ̂² = σ² = 4 (200 sequences, s.e. ≈ 0.13)
    np.testing.assert_allclose(AdaRR()(b).numpy(), numpy_ridge(b, np.array(rss) / 10), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(
        TunedRR(1.3, 2.0)(b).numpy(), numpy_ridge(b, 1.3 * np.minimum(np.array(rss) / 10, 2.0)), rtol=1e-8, atol=1e-8
    )


def test_adarr_and_tunedrr_are_exact_on_noiseless_data():
    est = evaluate(
        {"adarr": AdaRR(), "tunedrr": TunedRR(1.5, 3.0), "bayes": Bayes("categorical:0,1")},
        EvalSet("fixed:0", n_seq=3000, seed=4),
    )
    for name, e in est.items():
        assert abs(e.mean) < 1e-12, (name, e)


def test_gd_k_matches_explicit_iteration():
    b = tasks(50)
    x, y = b.x, b.y
    sigma, alpha = x.transpose(1, 2) @ x, (x * y[..., None]).sum(1)
    w = torch.zeros_like(alpha)
    for _ in range(3):
        w = w + 0.02 * (alpha - (sigma @ w[..., None])[..., 0])
    torch.testing.assert_close(GDk(3, 0.02)(b), (w * b.x_query).sum(-1), rtol=1e-10, atol=1e-10)


def test_log_marginal_matches_dense_gaussian():
    b = tasks(20, noise="fixed:1")
    sp = SpectralContext.of(b)
    for s2 in (0.01, 1.0, 9.0):
        K = b.x @ b.x.transpose(1, 2) + s2 * torch.eye(20, dtype=torch.float64)
        dense = -0.5 * (torch.logdet(K) + (b.y[:, None, :] @ torch.linalg.solve(K, b.y[..., None]))[:, 0, 0])
        torch.testing.assert_close(sp.log_marginal(s2), dense, rtol=1e-9, atol=1e-8)


def test_bayes_with_one_sigma_is_oracle_ridge():
    b = tasks(noise="fixed:1.5")
    torch.testing.assert_close(Bayes("fixed:1.5")(b), oracle_predict(b), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(Bayes("categorical:1.5")(b), ridge_predict(b, 1.5**2), rtol=1e-10, atol=1e-10)


def test_bayes_quadrature_converges():
    b = tasks(2000, noise="uniform:5", seed=1)
    ref = Bayes("uniform:5", nodes=64)(b)
    err = {k: (Bayes("uniform:5", nodes=k)(b) - ref).abs().max().item() for k in (8, 16, 32)}
    # measured: 2.4e-3, 6.3e-6, 5.7e-8 (4 panels); the default is 16 per panel, ≪ the s.e. of any loss
    assert err[8] < 1e-2 and err[16] < 5e-5 and err[32] < 1e-6 and err[32] < err[16] < err[8]
    s, w = sigma_nodes("uniform:5")
    assert abs(w.sum() - 1) < 1e-12 and abs((w * s**2).sum() - 25 / 3) < 1e-10  # E σ² of U(0, 5)


@pytest.mark.parametrize("noise", ["uniform:5", "categorical:1,3"])
def test_bayes_is_never_worse_than_ridge_family(noise):
    preds = baselines(noise, names=["constrr", "adarr", "tunedrr", "bayes"])
    b = tasks(20_000, noise=noise, seed=7)
    bayes_err = 0.5 * (preds["bayes"](b) - b.target) ** 2
    for name in ("constrr", "adarr", "tunedrr"):
        diff = bayes_err - 0.5 * (preds[name](b) - b.target) ** 2  # paired per sequence
        se = diff.std().item() / len(diff) ** 0.5
        assert diff.mean().item() < 3 * se, (name, diff.mean().item(), se)


def test_tuning_is_recorded_and_disjoint_from_evaluation():
    rec = tuned("uniform:5")
    assert rec["seed"] != 0 and rec["n_seq"] >= 20_000
    assert rec["constrr"]["grid"]["lam_coarse"] and rec["tunedrr"]["grid"]["mult_fine"]
    # GD-1's tuned step is the one-layer optimum η = 1/(n + d + 1 + E σ²) (von Oswald et al. 2023)
    assert rec["gd"]["1"]["eta"] == pytest.approx(1 / (31 + 25 / 3), rel=0.03)
    assert 1.0 < rec["tunedrr"]["mult"] < 2.0 and math.isfinite(float(rec["tunedrr"]["clip"]))


def test_noise_free_and_under_determined_is_the_minimum_norm_solution():
    """σ = 0 with n < d: Σ is singular; the oracle, OLS and the Bayes predictor give the minimum-norm solution
    ŵ = X⁺y, checked against a direct pseudo-inverse (they raised, or gave 10⁶-sized losses, before)."""
    from interp.baselines import Bayes, ols_predict, oracle_predict
    from interp.tasks import sample_tasks

    batch = sample_tasks(
        200, d=10, n=5, noise="fixed:0", generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    x, y = batch.x.double(), batch.y.double()
    direct = (torch.linalg.pinv(x) @ y[..., None]).squeeze(-1)  # X⁺ y, [batch, d]
    expect = (direct * batch.x_query.double()).sum(-1)
    for predict in (oracle_predict, ols_predict, Bayes("fixed:0")):
        torch.testing.assert_close(predict(batch), expect, rtol=1e-9, atol=1e-9)
