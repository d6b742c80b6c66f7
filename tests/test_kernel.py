"""interp.kernel.randn against torch.randn: the same random numbers, the generator left in the same state.

(The moment recursion's kernel is tested against the per-token path in tests/test_moments.py.)
"""

from __future__ import annotations

import pytest
import torch

from interp import kernel
from interp.tasks import draw_tasks

needs_kernel = pytest.mark.skipif(not kernel.available(), reason="kernel not built (tests/test_moments.py says why)")


@needs_kernel
def test_randn_is_on_the_kernel():
    """The one-time check against torch passes with the pinned torch, so the task draws take the kernel."""
    assert kernel._randn_agrees()


@needs_kernel
@pytest.mark.parametrize("shape", [(16,), (17,), (31,), (100,), (623,), (624,), (625,), (12345,), (64, 20, 10)])
@pytest.mark.parametrize("skip", [0, 5, 623, 1000])
def test_randn_equals_torch_to_float_rounding(shape, skip):
    ours, theirs = torch.Generator().manual_seed(skip), torch.Generator().manual_seed(skip)
    for g in (ours, theirs):
        torch.rand(skip, generator=g)  # start anywhere in the twister's block of 624
    a = kernel.randn(*shape, generator=ours)
    b = torch.randn(*shape, generator=theirs)
    assert a.shape == b.shape and a.dtype == torch.float32
    assert torch.equal(ours.get_state(), theirs.get_state())  # the next draw is the same for both
    ulps = kernel._ulps(a, b)
    assert float(ulps.max()) <= kernel.RANDN_ULPS
    assert float((ulps == 0).float().mean()) > 0.6  # mostly bit for bit: the same numbers, not a similar stream
    torch.testing.assert_close(torch.rand(7, generator=ours), torch.rand(7, generator=theirs), rtol=0, atol=0)


@needs_kernel
def test_randn_over_many_numbers():
    """10^6 draws: every one within RANDN_ULPS of torch's (the docstring's 4 ulps came from 10^7)."""
    a = kernel.randn(1_000_003, generator=torch.Generator().manual_seed(1))
    b = torch.randn(1_000_003, generator=torch.Generator().manual_seed(1))
    assert float(kernel._ulps(a, b).max()) <= kernel.RANDN_ULPS
    assert abs(float(a.mean())) < 5e-3 and abs(float(a.std()) - 1) < 5e-3


@pytest.mark.parametrize(
    "shape,dtype", [((15,), torch.float32), ((3, 5), torch.float32), ((100,), torch.float64), ((0,), torch.float32)]
)
def test_randn_is_torch_where_the_kernel_does_not_draw(shape, dtype):
    """Fewer than 16 numbers (torch's other path) and float64 are torch.randn itself, bit for bit."""
    a = kernel.randn(*shape, generator=torch.Generator().manual_seed(3), dtype=dtype)
    b = torch.randn(*shape, generator=torch.Generator().manual_seed(3), dtype=dtype)
    assert a.dtype == dtype and torch.equal(a, b)


@needs_kernel
def test_task_draws_keep_torchs_stream():
    """draw_tasks draws w, x, x_t, σ, ξ in that order from the generator: the same numbers as torch.randn / rand."""
    batch, d, n = 300, 10, 20
    draw = draw_tasks(batch, d, n, "uniform:5", torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    w = torch.randn(batch, d, generator=g)
    x = torch.randn(batch, n, d, generator=g)
    x_t = torch.randn(batch, d, generator=g)
    sigma = torch.rand(batch, generator=g) * 5
    xi = torch.randn(batch, n, generator=g)
    for ours, theirs in zip((draw.w, draw.x, draw.x_query, draw.xi), (w, x, x_t, xi)):
        assert float(kernel._ulps(ours, theirs).max()) <= kernel.RANDN_ULPS
    assert torch.equal(draw.sigma, sigma)  # uniforms are torch's own, after the kernel's normals left the same state


def test_interp_randn_0_is_torch(monkeypatch):
    """INTERP_RANDN=0 draws with torch.randn itself (the task draws bit for bit as before interp.kernel.randn)."""
    monkeypatch.setenv("INTERP_RANDN", "0")
    a = kernel.randn(64, 20, 10, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, torch.randn(64, 20, 10, generator=torch.Generator().manual_seed(6)))
