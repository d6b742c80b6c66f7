"""interp.noise_free: GD++'s per-eigenvalue loss in the log domain, its log-compression, and the multi-scale
proposal's importance weights (closed forms of the Wishart moments)."""

from __future__ import annotations

import math

import pytest
import torch

from interp.files import InvalidArgument
from interp.noise_free import (
    EigenSample,
    gdpp_log_residual,
    gdpp_noise_free_loss,
    robust_half_square,
    spectral_proposal,
)

OMEGAS = torch.tensor([[-0.02, -0.03], [-0.08, -0.15], [-0.3, -0.6], [0.0, -1.5]], dtype=torch.float64)


def test_log_residual_is_log_f_where_f_is_finite_and_stays_finite_beyond():
    s = torch.linspace(0.01, 120.0, 2001, dtype=torch.float64)
    wxx, wyx = OMEGAS[:, 0], OMEGAS[:, 1]
    plain = 2 * gdpp_noise_free_loss(wxx, wyx, s[:, None])  # f(s)², one eigenvalue a "context"
    log_f = gdpp_log_residual(wxx, wyx, s)
    ok = plain > 1e-280
    assert torch.allclose((2 * log_f[ok]).exp(), plain[ok], rtol=1e-9)
    far = gdpp_log_residual(wxx * 10, wyx * 10, torch.tensor([1e6, 1e30, 1e200], dtype=torch.float64))
    assert torch.isfinite(far).all() and (far > 355).all()  # f² overflows float64 there; log|f| does not


def test_robust_half_square_is_half_f2_below_the_cap_and_log_compressed_above():
    log_f = torch.tensor([-20.0, 0.0, 1.0, 50.0, 400.0], dtype=torch.float64)
    out = robust_half_square(log_f, cap=5.0)
    half = 0.5 * (2 * log_f).exp()
    assert torch.allclose(out[:3], half[:3])
    assert torch.allclose(out[3:], 5.0 * (1 + 2 * log_f[3:] + math.log(0.5 / 5.0)))  # ½f² itself overflows at 400
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("scales", [(1.0,), (0.6, 0.8, 1.0, 1.2, 1.45)])
def test_proposal_weights_estimate_the_wishart_moments(scales):
    """E tr XᵀX = nd and E tr (XᵀX)² = nd(n + d + 1) for X [n, d] of N(0, 1) entries: the weighted sums over the
    multi-scale sample estimate both (the scales are 2-4 times further out than p, so a bias in p/q would show)."""
    d, n = 4, 9
    sample = spectral_proposal(40_000, d, n, scales, torch.Generator().manual_seed(0))
    assert sample.s.shape == sample.weight.shape == (40_000 * len(scales) * d,)
    assert sample.mean(torch.ones_like(sample.s)).item() == pytest.approx(d, rel=1e-2)
    assert sample.mean(sample.s).item() == pytest.approx(n * d, rel=1e-2)
    assert sample.mean(sample.s**2).item() == pytest.approx(n * d * (n + d + 1), rel=3e-2)


def test_wide_scales_reach_further_out_than_plain_draws():
    d, n, gen = 4, 9, torch.Generator().manual_seed(1)
    plain = spectral_proposal(20_000, d, n, (1.0,), gen)
    wide = spectral_proposal(20_000, d, n, (0.6, 1.0, 1.45), gen)
    assert wide.s.max() > 1.5 * plain.s.max() and wide.s.min() < plain.s.min()


def test_binning_keeps_the_weight_and_the_first_moment():
    sample = spectral_proposal(5_000, 3, 7, (0.8, 1.0, 1.25), torch.Generator().manual_seed(2))
    coarse = sample.binned(500)
    assert len(coarse.s) <= 500
    assert coarse.weight.sum().item() == pytest.approx(sample.weight.sum().item(), rel=1e-12)
    assert coarse.mean(coarse.s).item() == pytest.approx(sample.mean(sample.s).item(), rel=1e-12)
    # a smooth function moves by the bins' relative width (log range / bins) at most
    width = math.log(sample.s.max() / sample.s.min()) / 500
    assert coarse.mean(coarse.s.sqrt()).item() == pytest.approx(sample.mean(sample.s.sqrt()).item(), rel=width)


def test_bad_arguments_name_themselves():
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(InvalidArgument, match="scales"):
        spectral_proposal(10, 3, 7, (), gen)
    with pytest.raises(InvalidArgument, match="scales"):
        spectral_proposal(10, 3, 7, (0.0, 1.0), gen)
    with pytest.raises(InvalidArgument, match="bins"):
        EigenSample(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)).binned(1)
