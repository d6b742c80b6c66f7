"""Theorem 5.1 (interp.probes.theorem51) against closed forms: a hand-built GD++ model on a context of known spectrum
gives the map s ↦ s(1 − γs)² to rounding and the exact loss of interp.noise_free.gdpp_noise_free_loss, and errors
ε_K = ε_0^{2^K} have order 2."""

from __future__ import annotations

import math

import pytest
import torch

from interp import EvalSet, LinearTransformer
from interp.evaluate import ScoredSet
from interp.files import InvalidArgument
from interp.noise_free import gdpp_noise_free_loss
from interp.probes import (
    Theorem51,
    convergence_order,
    is_gdpp,
    order_fit,
    probe_model,
    theorem51,
    theorem51_depths,
)
from interp.tasks import TaskBatch
from tests.helpers import random_diag

D, N = 3, 8
SPECTRUM = torch.tensor([2.0, 5.0, 9.0], dtype=torch.float64)  # eigenvalues of the context's Σ = XᵀX


def known_context(s: torch.Tensor = SPECTRUM, n: int = N) -> ScoredSet:
    """d² noise-free sequences sharing one context X (n × d) with XᵀX = diag(s): w = √d e_a and x_t = √d e_b for
    every pair (a, b), so E[wwᵀ] = E[x_t x_tᵀ] = I exactly and the mean ½(ŷ − y_t)² is the expectation over
    w ~ N(0, I), x_t ~ N(0, I) that gdpp_noise_free_loss computes."""
    d = len(s)
    q, _ = torch.linalg.qr(torch.randn(n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    x = q * s.sqrt()  # [n, d], XᵀX = diag(s)
    eye = math.sqrt(d) * torch.eye(d, dtype=torch.float64)
    w = eye.repeat_interleave(d, dim=0)  # [d², d]: a = i // d
    xt = eye.repeat(d, 1)  # b = i % d
    tokens = torch.zeros(d * d, n + 1, d + 1, dtype=torch.float64)
    tokens[:, :n, :d] = x
    tokens[:, :n, d] = w @ x.T
    tokens[:, n, :d] = xt
    target = (w * xt).sum(-1)
    batch = TaskBatch(tokens, target, torch.zeros(d * d, dtype=torch.float64), w)
    return ScoredSet.of_batches([batch])


def gdpp(omega_xx: list[float], omega_yx: list[float], d: int = D) -> LinearTransformer:
    """A GD++ model by hand (LinearTransformer.from_omegas, ω_xy = ω_yy = 0)."""
    om = torch.zeros(len(omega_xx), 4, dtype=torch.float64)
    om[:, 0], om[:, 2] = torch.tensor(omega_xx, dtype=torch.float64), torch.tensor(omega_yx, dtype=torch.float64)
    return LinearTransformer.from_omegas(om, d)


GAMMA = 1 / (3 * SPECTRUM.max().item())  # Theorem 5.1's γ·s_max = 1/3 on the raw context
OMEGA_XX = [-GAMMA, -0.05, -0.08]
OMEGA_YX = [-0.1, -0.15, -0.2]


def test_a_hand_built_gdpp_follows_the_map_and_the_exact_loss():
    model = gdpp(OMEGA_XX, OMEGA_YX)
    assert is_gdpp(model) and model.cfg.param == "diag"
    rec = theorem51(model, known_context())
    pre = rec.preconditioning
    assert pre.map_error.max() < 1e-12
    assert torch.allclose(pre.gamma, -torch.tensor(OMEGA_XX, dtype=torch.float64), rtol=0, atol=1e-15)
    assert pre.gamma_smax[0] == pytest.approx(1 / 3, abs=1e-12)  # every sequence shares the context
    om_xx, om_yx = torch.tensor(OMEGA_XX, dtype=torch.float64), torch.tensor(OMEGA_YX, dtype=torch.float64)
    for K in range(4):  # the loss after K layers: the first K layers of the closed form
        exact = gdpp_noise_free_loss(om_xx[:K], om_yx[:K], SPECTRUM[None])[0].item()
        assert rec.loss[K] == pytest.approx(exact, rel=1e-10, abs=1e-14)
    assert rec.loss[0] == pytest.approx(D / 2, rel=1e-12)  # ŷ = 0: ½ E[y_t²] = d / 2
    assert rec.order_median == convergence_order(rec.loss_median)
    # [L, sample, d], paired by eigenvector
    before, after = (torch.tensor(v, dtype=torch.float64) for v in (rec.before, rec.after))
    assert before.shape == (3, D * D, D) and rec.probe_seq == D * D
    gamma = -om_xx[:, None, None]
    assert torch.allclose(after, before * (1 - gamma * before) ** 2, rtol=1e-12, atol=1e-12)
    assert torch.allclose(before[0, 0], SPECTRUM, rtol=1e-12)


def test_gamma_smax_one_third_maps_smax_to_four_ninths():
    """Past γ s_max = 1/3 the map is no longer monotone; at it, s_max ↦ (4/9) s_max is still the top eigenvalue."""
    rec = theorem51(gdpp([-GAMMA], [0.0]), known_context())
    assert rec.preconditioning.smax[1] / rec.preconditioning.smax[0] == pytest.approx(4 / 9, rel=1e-12)
    assert rec.preconditioning.kappa[1] < rec.preconditioning.kappa[0]


def test_the_order_of_a_second_order_sequence_is_two():
    eps = [0.5 ** (2**K) for K in range(6)]  # ε_K = ε_0^{2^K}
    assert convergence_order(eps) == pytest.approx([2.0] * 5, rel=1e-12)
    fit = order_fit(range(6), eps)
    assert fit.start == 0 and fit.slope == pytest.approx(math.log(2), rel=1e-12) and fit.order == pytest.approx(2)
    linear = [0.5 * 0.1**K for K in range(40)]  # first order: the ratio tends to 1
    assert 1 < convergence_order(linear)[-1] < 1.03


def test_order_is_undefined_above_one_and_the_fit_takes_the_final_falling_run():
    eps = [5.0, 0.8, 3.0, 0.1, 0.01, 1e-4]  # a loss above 1 in between: the fit starts after it
    assert convergence_order(eps)[:3] == [None, None, None]
    assert convergence_order(eps)[3] == pytest.approx(2.0)
    fit = order_fit(range(6), eps)
    assert fit.start == 3
    assert order_fit(range(2), [2.0, 0.5]).start is None  # one step below 1: nothing to fit


def test_across_depths():
    models = [gdpp(OMEGA_XX[:L], OMEGA_YX[:L]) for L in (1, 2, 3)]
    recs = [theorem51(m, known_context()) for m in reversed(models)]
    dep = theorem51_depths(recs)
    assert dep.depth == [1, 2, 3]
    assert dep.loss == pytest.approx([r.loss[-1] for r in reversed(recs)])
    assert dep.order == pytest.approx(convergence_order(dep.loss))
    assert dep.loss_median == [r.loss_median[-1] for r in reversed(recs)]
    assert dep.order_median == pytest.approx(convergence_order(dep.loss_median))
    kappa0 = (SPECTRUM.max() / SPECTRUM.min()).item()
    assert dep.kappa_last[0] == pytest.approx(kappa0)  # GD++-1's only layer reads the raw context
    with pytest.raises(InvalidArgument, match="one per depth"):
        theorem51_depths([recs[0], recs[0]])


def test_record_round_trips_through_json():
    rec = theorem51(gdpp(OMEGA_XX, OMEGA_YX), known_context(), sample=2)
    back = Theorem51.from_json(rec.to_json())
    assert back.to_json() == rec.to_json() and len(back.before[0]) == 2 and back.fit.start == rec.fit.start


def test_refuses_what_the_theorem_is_not_about():
    with pytest.raises(InvalidArgument, match="DIAG model with ω_xy or ω_yy ≠ 0.*GD\\+\\+"):
        theorem51(random_diag(d=D, n_layers=2, param="diag"), known_context())
    with pytest.raises(InvalidArgument, match="noise-free.*uniform:1"):
        theorem51(gdpp(OMEGA_XX, OMEGA_YX), EvalSet("uniform:1", d=D, n=N, n_seq=8))
    with pytest.raises(InvalidArgument, match="no ω's"):
        theorem51(gdpp(OMEGA_XX, OMEGA_YX).to_full(), known_context())


def test_probe_model_adds_theorem51_for_gdpp_on_noise_free_sequences_only():
    model = random_diag(d=D, n_layers=2, param="gdpp", scale=0.1)
    data = EvalSet("uniform:0", d=D, n=N, n_seq=64, seed=0)
    rec = probe_model(model, data, fit_seq=32, ablation_seq=0)
    assert rec.theorem51 is not None and rec.theorem51.n_seq == rec.theorem51.probe_seq == 64
    assert rec.theorem51.loss == pytest.approx(theorem51(model, data).loss, rel=1e-12)
    assert "theorem51" in rec.to_json()
    noisy = probe_model(model, data.replace(noise="uniform:1"), fit_seq=32, ablation_seq=0)
    assert noisy.theorem51 is None and "theorem51" not in noisy.to_json()
