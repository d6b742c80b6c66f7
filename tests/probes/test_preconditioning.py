"""GD++'s preconditioning step (Theorem 5.1): measured from the hooks, against the map s ↦ s (1 − γ s)²."""

from __future__ import annotations

import pytest
import torch

from interp.probes.preconditioning import context_spectra, preconditioning
from tests.helpers import random_diag, small_batch


def _gdpp(gammas: list[float], eta: float = 0.02, d: int = 4):
    """A GD++ model whose layer l has ω_xx = −gammas[l] (p_x = 1, q_x = −γ) and a GD step ω_yx = −η."""
    model = random_diag(d=d, n_layers=len(gammas), param="gdpp")
    with torch.no_grad():
        for b, g in zip(model.blocks, gammas):
            b.attn.p_x.fill_(1.0)
            b.attn.q_x.fill_(-g)
            b.attn.p_y.fill_(eta)
    return model


def test_the_measured_spectra_follow_the_map_to_rounding():
    model = random_diag(d=4, n_layers=3, param="gdpp", scale=0.1)
    pre = preconditioning(model, small_batch(batch=64, d=4, n=8).tokens)
    assert pre.map_error.shape == (3,) and pre.kappa.shape == (4,)
    assert pre.map_error.max() < 1e-12
    assert torch.allclose(pre.gamma, -model.omegas().omega_xx.detach().double())


def test_gamma_smax_one_third_shrinks_kappa_layer_by_layer():
    """With γ_l s_max^l = 1/3 each layer maps s_max to (4/9) s_max and leaves small eigenvalues nearly alone."""
    tokens = small_batch(batch=1, d=4, n=12, seed=3).tokens
    s0 = context_spectra(_gdpp([0.0]), tokens)[0, 0]  # the raw context's eigenvalues (a zero layer moves nothing)
    gammas, s = [], s0.clone()
    for _ in range(3):  # the γ that puts γ s_max = 1/3 at every layer, along the map itself
        g = 1 / (3 * s[-1].item())
        gammas.append(g)
        s = (s * (1 - g * s) ** 2).sort().values
    pre = preconditioning(_gdpp(gammas), tokens)
    assert torch.allclose(pre.gamma_smax, torch.full((3,), 1 / 3, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(pre.smax[1:] / pre.smax[:-1], torch.full((3,), 4 / 9, dtype=torch.float64), atol=1e-10)
    assert (pre.kappa[1:] < pre.kappa[:-1]).all() and pre.map_error.max() < 1e-12


def test_other_architectures_are_refused():
    with pytest.raises(ValueError, match="GD\\+\\+"):
        preconditioning(random_diag(d=4, n_layers=2, param="diag"), small_batch(batch=4, d=4, n=8).tokens)
