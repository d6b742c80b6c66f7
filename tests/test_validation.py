"""Validation suite: trained and hand-built models recover the closed forms of Vladymyrov et al. 2024 (Theorem 4.1,
Lemma 4.4, §5.2, §5.3), Zhang–Frei–Bartlett 2024 and von Oswald et al. 2023.

Each test states its tolerance. The trained ones are marked slow (they still run in .ci/run).
"""

import math

import pytest
import torch

from interp.model import LinearTransformer
from interp.tasks import sample_tasks
from tests.helpers import gd_construction, implicit_w1, small_batch, trained

D_, N_ = 10, 20


def one_layer_eta(noise_mean_sigma2: float, d: int = D_, n: int = N_) -> float:
    """One layer (derived from the model and task of README, Conventions): η = 1/(n + d + 1 + E[σ²])."""
    return 1.0 / (n + d + 1 + noise_mean_sigma2)


@pytest.mark.slow
@pytest.mark.parametrize("noise,mean_s2", [("fixed:0.5", 0.25), ("fixed:2", 4.0), ("uniform:3", 3.0)])
def test_one_layer_diag_recovers_omega_yx(noise, mean_s2, tmp_path):
    """1-layer DIAG trained by interp.train: ω_yx = −1/(n+d+1+E[σ²]) within 3% (E[σ²] = σ_max²/3 for uniform)."""
    model = trained(tmp_path / "run", "diag", noise, steps=600, d=D_, n=N_)
    omega_yx = model.omegas().omega_yx.item()
    assert omega_yx == pytest.approx(-one_layer_eta(mean_s2), rel=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("noise,mean_s2", [("fixed:0.5", 0.25), ("fixed:2", 4.0), ("uniform:3", 3.0)])
def test_one_layer_full_recovers_implicit_w(noise, mean_s2, tmp_path):
    """1-layer FULL trained by interp.train: implicit w^1 = α/(n+d+1+E[σ²]) within 3% (relative error over contexts)."""
    model = trained(tmp_path / "run", "full", noise, steps=1500, d=D_, n=N_)
    batch = sample_tasks(4000, D_, N_, noise, torch.Generator().manual_seed(9))
    w1 = implicit_w1(model, batch.tokens).double()
    alpha = (batch.x * batch.y[..., None]).sum(1).double()
    expected = one_layer_eta(mean_s2) * alpha
    rel = (w1 - expected).norm() / expected.norm()
    assert rel.item() < 0.03


def zfb_gamma(cov: torch.Tensor, n: int, sigma2: float) -> torch.Tensor:
    """Zhang–Frei–Bartlett: Γ = (1 + 1/n) Λ + ((tr Λ + σ²)/n) I (Zhang, Frei & Bartlett 2024; the σ² term derived
    here)."""
    d = cov.shape[0]
    return (1 + 1 / n) * cov + (torch.trace(cov) + sigma2) / n * torch.eye(d, dtype=cov.dtype)


ZD, ZN, ZSIG = 5, 20, 0.5
LAMBDA = torch.diag(torch.tensor([3.0, 1.5, 1.0, 0.6, 0.3], dtype=torch.float64))


@pytest.fixture(scope="module")
def zfb_model(tmp_path_factory):
    """1-layer FULL trained by interp.train on x ~ N(0, Λ) (init torch.Generator(1), data torch.Generator(2)).

    One-cycle lr, peak 1e-2: w^1 lands 1.1% from Γ^{-1} α / n; a constant 1e-2 leaves it 14% off (measured)."""
    run_dir = tmp_path_factory.mktemp("zfb") / "run"
    noise, cov = f"fixed:{ZSIG}", LAMBDA.tolist()
    return trained(run_dir, "full", noise, steps=2500, d=ZD, n=ZN, seed=1, x_cov=cov)


def zfb_predict(batch, cov):
    """ŷ = x_tᵀ Γ^{-1} α / n with Γ from the *training* covariance."""
    gamma = zfb_gamma(cov, ZN, ZSIG**2)
    alpha = (batch.x * batch.y[..., None]).sum(1).double()
    return (torch.linalg.solve(gamma, alpha.T).T / ZN * batch.x_query.double()).sum(-1)


def mse(pred, batch):
    return 0.5 * ((pred.double() - batch.target.double()) ** 2).mean().item()


@pytest.mark.slow
def test_zfb_one_layer_recovers_closed_form(zfb_model):
    """Trained 1-layer FULL on x ~ N(0, Λ): w^1 = Γ^{-1} α / n within 5%."""
    batch = sample_tasks(4000, ZD, ZN, f"fixed:{ZSIG}", torch.Generator().manual_seed(5), x_cov=LAMBDA)
    w1 = implicit_w1(zfb_model, batch.tokens).double()
    alpha = (batch.x * batch.y[..., None]).sum(1).double()
    expected = torch.linalg.solve(zfb_gamma(LAMBDA, ZN, ZSIG**2), alpha.T).T / ZN
    assert ((w1 - expected).norm() / expected.norm()).item() < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("shift", ["task", "query", "covariate"])
def test_zfb_shifted_error_matches_closed_form(zfb_model, shift):
    """Under task / query / covariate shift the trained layer's error is the closed form's, within 5%."""
    kw = dict(x_cov=LAMBDA)
    omega = torch.diag(torch.tensor([0.5, 2.0, 1.0, 1.5, 1.0], dtype=torch.float64))
    if shift == "task":
        kw["w_cov"] = 4.0 * torch.eye(ZD, dtype=torch.float64)
    elif shift == "query":
        kw["query_cov"] = omega
    else:
        kw = dict(x_cov=omega, query_cov=omega)
    batch = sample_tasks(20_000, ZD, ZN, f"fixed:{ZSIG}", torch.Generator().manual_seed(6), **kw)
    with torch.no_grad():
        model_err = mse(zfb_model(batch.tokens), batch)
    assert model_err == pytest.approx(mse(zfb_predict(batch, LAMBDA), batch), rel=0.05)


@pytest.mark.slow
def test_zfb_covariate_shift_brittleness_grows(zfb_model):
    """Excess error over OLS grows with the size of the context covariate shift (three sizes)."""
    from interp.baselines import ridge_predict

    excess = []
    for scale in (1.0, 2.0, 4.0):
        omega = LAMBDA * torch.tensor([scale, 1.0, 1.0, 1.0, 1 / scale], dtype=torch.float64)
        batch = sample_tasks(
            20_000, ZD, ZN, f"fixed:{ZSIG}", torch.Generator().manual_seed(7), x_cov=omega, query_cov=omega
        )
        with torch.no_grad():
            err = mse(zfb_model(batch.tokens), batch)
        excess.append(err - mse(ridge_predict(batch, 0.0), batch))
    assert excess[0] < excess[1] < excess[2]
    assert excess[2] > 2 * excess[0]


def test_gd_construction_float64_exact():
    """L hand-built layers = L GD steps on ½Σ(y − ⟨w, x⟩)² to 1e-10 (von Oswald et al. 2023)."""
    d, n, L, eta = 6, 30, 5, 0.02
    batch = small_batch(batch=32, d=d, n=n, noise="uniform:1", seed=4)
    w = torch.zeros(32, d, dtype=torch.float64)
    preds = []
    for _ in range(L):
        w = w + eta * torch.einsum("bn,bnd->bd", batch.y - torch.einsum("bnd,bd->bn", batch.x, w), batch.x)
        preds.append((w * batch.x_query).sum(-1))
    with torch.no_grad():
        got = gd_construction(d, L, eta).predict_per_layer(batch.tokens)[1:]
    assert (got - torch.stack(preds)).abs().max().item() < 1e-10


def gdpp_construction(x: torch.Tensor, L: int):
    """GD++ layers for one context (Theorem 5.1): ω_xx = −γ_l with γ_l s_max^l = 1/3, ω_yx = −1/s_max^l.

    s_max^l follows the map s → s(1 − γ s)², which keeps the largest eigenvalue the largest.
    """
    s = torch.linalg.eigvalsh(x.T @ x)
    omegas = []
    for _ in range(L):
        s_max = s.max()
        gamma = 1 / (3 * s_max)
        omegas.append([-gamma, 0.0, -1 / s_max, 0.0])
        s = s * (1 - gamma * s) ** 2
    return torch.tensor(omegas, dtype=torch.float64)


def test_gdpp_is_second_order():
    """Hand-built GD++ on noiseless data: the error falls super-linearly (fitted exponents grow)."""
    d, n, L = 5, 40, 8
    g = torch.Generator().manual_seed(2)
    base = sample_tasks(
        1,
        d,
        n,
        "fixed:0",
        g,
        dtype=torch.float64,
        x_cov=torch.diag(torch.tensor([4.0, 2.0, 1.0, 0.5, 0.25], dtype=torch.float64)),
    )
    model = LinearTransformer.from_omegas(gdpp_construction(base.x[0], L), d=d)
    queries = sample_tasks(200, d, n, "fixed:0", g, dtype=torch.float64)
    tokens = base.tokens.repeat(200, 1, 1)
    tokens[:, -1, :d] = queries.x_query  # one context (κ ≈ 18.5), many queries
    target = (queries.x_query * base.w).sum(-1)
    with torch.no_grad():
        per_layer = model.predict_per_layer(tokens)
    err = ((per_layer - target) ** 2).mean(-1).sqrt()  # [L+1]
    assert err[-1] < 1e-9 * err[0]
    log_err = torch.log(err / err[0])[1:]
    rates = (log_err[1:] - log_err[:-1]).tolist()  # per-layer log-contraction gets steeper every layer
    assert all(b < a for a, b in zip(rates, rates[1:]))
    exponents = (log_err[1:] / log_err[:-1]).tolist()  # log e_{l+1} ≈ p log e_l; p → 2 (second order)
    assert exponents[-1] == pytest.approx(2.0, abs=0.25)
    assert all(p > 1.0 for p in exponents)


def test_omega_yy_rescaling_is_ridge_like():
    """Vladymyrov et al. 2024, §5.2: a layer with only ω_yy < 0 scales every y by (1 + ω_yy λ); noisier → more
    shrinkage.

    Theorem 5.2's 2-layer model (ω_yx then ω_yy), with (1 + nσ²ω_yy) ω_yx = −1/(1+σ²) solved for two σ,
    approaches ridge as n grows with x ~ N(0, I/n)."""
    d, s1, s2 = 3, 0.5, 2.0
    # two linear equations in (ω_yx, ω_yx·ω_yy); here written with λ ≈ n(σ² + ‖w‖²/n·...) ≈ nσ² + ‖w‖²
    results = []
    for n in (200, 3200):
        cov = torch.eye(d, dtype=torch.float64) / n
        a = torch.tensor([[1.0, n * s1**2], [1.0, n * s2**2]], dtype=torch.float64)
        rhs = torch.tensor([-1 / (1 + s1**2), -1 / (1 + s2**2)], dtype=torch.float64)
        omega_yx, prod = torch.linalg.solve(a, rhs)
        omega_yy = prod / omega_yx
        model = LinearTransformer.from_omegas(
            torch.tensor([[0, 0, omega_yx, 0], [0, 0, 0, omega_yy]], dtype=torch.float64), d=d
        )
        errs = []
        for sigma in (s1, s2):
            batch = sample_tasks(
                2000,
                d,
                n,
                f"fixed:{sigma}",
                torch.Generator().manual_seed(3),
                x_cov=cov,
                dtype=torch.float64,
                w_cov=torch.eye(d, dtype=torch.float64) / n,
            )
            with torch.no_grad():
                pred = model(batch.tokens)
            # ridge with λ = σ² on Σ ≈ I: w_ridge = α / (1 + σ²)
            alpha = (batch.x * batch.y[..., None]).sum(1)
            ridge = (alpha * batch.x_query).sum(-1) / (1 + sigma**2)
            errs.append(((pred - ridge) ** 2).mean().sqrt().item() / ridge.pow(2).mean().sqrt().item())
        results.append(max(errs))
        # shrinkage grows with noise: the same context scaled by the rescaling factor (1 + ω_yy λ)
        lam_small, lam_big = n * s1**2, n * s2**2
        assert omega_yy < 0 and (1 + omega_yy * lam_big) < (1 + omega_yy * lam_small)
    assert results[1] < results[0] and results[1] < 0.1


def test_omega_xy_step_shrinks_with_noise():
    """Vladymyrov et al. 2024, §5.3: layer 1 only ω_xy, layer 2 only ω_yx acts as one GD step with effective step
    −ω_yx (1 + ω_xy Σ_i r_i²); with ω_xy, ω_yx < 0 the step shrinks as the noise grows."""
    d, n, omega_xy, omega_yx = 4, 30, -2e-3, -0.02
    model = LinearTransformer.from_omegas(
        torch.tensor([[0, omega_xy, 0, 0], [0, 0, omega_yx, 0]], dtype=torch.float64), d=d
    )
    steps = {}
    for sigma in (0.1, 1.0, 3.0):
        batch = sample_tasks(400, d, n, f"fixed:{sigma}", torch.Generator().manual_seed(8), dtype=torch.float64)
        x, y = batch.x, batch.y
        Sigma = x.transpose(1, 2) @ x
        alpha = (x * y[..., None]).sum(1)
        w_ols = torch.linalg.solve(Sigma, alpha)
        rho = ((y - (x @ w_ols[..., None])[..., 0]) ** 2).sum(1)
        lam = (y**2).sum(1)
        with torch.no_grad():
            pred = model(batch.tokens)
        # exact two-layer readout: x_i' = x_i + ω_xy y_i α, so α' = (1 + ω_xy λ) α and
        # ŷ = −ω_yx ⟨α', x_t⟩ = −ω_yx (1 + ω_xy λ) ⟨α, x_t⟩; λ = ρ + αᵀΣ^{-1}α splits into noise + signal
        eff = -omega_yx * (1 + omega_xy * lam)
        torch.testing.assert_close(pred, eff * (alpha * batch.x_query).sum(-1), rtol=1e-10, atol=1e-10)
        noise_part = -omega_yx * (1 + omega_xy * rho)  # the paper's effective step
        steps[sigma] = noise_part.mean().item()
        assert math.isfinite(steps[sigma])
    assert steps[0.1] > steps[1.0] > steps[3.0] > 0
