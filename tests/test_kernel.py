"""interp.kernel: every installed build the CPU runs against the torch backend on the same batch, the checks at the
C boundary, which build loads and why, and the measured choice between the kernel and the torch backend.

(The default build's exactness against the per-token path is tested in tests/test_moments.py.)
"""

from __future__ import annotations

import json

import pytest
import torch

from interp import kernel, moments
from interp.tasks import draw_tasks

BUILDS = [b for b in kernel.runnable() if b in kernel.info()["built"]]
needs_kernel = pytest.mark.skipif(not BUILDS, reason="kernel not built (tests/test_moments.py says why)")


def _maps(L: int, D: int, dtype, full: bool, seed: int = 0, scale: float = 0.1):
    g = torch.Generator().manual_seed(seed)
    if full:
        P = (scale * torch.randn(L, 2, D, D, generator=g, dtype=dtype)).requires_grad_()
        Q = (scale * torch.randn(L, 2, D, D, generator=g, dtype=dtype)).requires_grad_()
        return "full", P, Q
    return "diag", (0.1 * torch.randn(L, 4, generator=g, dtype=dtype)).requires_grad_(), None


def _on(kind, W1, W2, S0, q0, width):
    """(ŷ, ∂Σŷ²/∂W1, ∂/∂W2) on the kernel (width None) or the torch backend."""
    y = moments.MomentRecursion.apply(S0, q0, W1, W2, kind, width, True)
    grads = torch.autograd.grad(y.square().sum(), [W1] + ([W2] if W2 is not None else []))
    return (y.detach(), *grads)


@needs_kernel
@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("d", [3, 10, 20])
def test_every_build_matches_the_torch_backend(build, full, d):
    """Forward and gradients of each build equal the torch backend's on the same float64 batch to 1e-12 relative
    (d = 3, 10, 20: rows of 8, 16 and 32 lanes; d = 10 is the unrolled path)."""
    L, n, B = 3, 12, 70
    kind, W1, W2 = _maps(L, d + 1, torch.float64, full)
    tokens = draw_tasks(B, d, n, "uniform:2", torch.Generator().manual_seed(1), dtype=torch.float64).batch().tokens
    S0, q0 = tokens[:, :-1].mT @ tokens[:, :-1], tokens[:, -1]
    ref = _on(kind, W1, W2, S0, q0, moments.padded_width(d + 2))
    with kernel.use(build):
        assert kernel.info()["isa"] == build
        got = _on(kind, W1, W2, S0, q0, None)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12 * float(b.abs().max()))


@needs_kernel
@pytest.mark.parametrize("build", BUILDS)
def test_every_build_fused_pass_matches_the_models_loss(build):
    """The fused training pass of each build: the half squared errors and their gradients as the torch backend's
    forward on the draw's tokens gives them (float32, to float32 rounding)."""
    L, d, n, B = 4, 10, 20, 300
    kind, W1, W2 = _maps(L, d + 1, torch.float32, True, seed=2, scale=0.01)  # no blow-up in float32
    draw = draw_tasks(B, d, n, "uniform:5", torch.Generator().manual_seed(3))
    batch = draw.batch()
    S0, q0 = batch.tokens[:, :-1].mT @ batch.tokens[:, :-1], batch.tokens[:, -1]
    y = moments.MomentRecursion.apply(S0, q0, W1, W2, kind, moments.padded_width(d + 2), True)
    ref_l = 0.5 * (y - batch.target) ** 2
    ref_g = torch.autograd.grad(ref_l.mean(), [W1, W2])
    with kernel.use(build):
        c, per_seq = moments.FusedHalfSE.apply(
            W1, W2, draw.x, draw.x_query, draw.w, draw.sigma, draw.xi, None, kind, None
        )
        got_g = torch.autograd.grad(c.mean(), [W1, W2])
    torch.testing.assert_close(per_seq, ref_l.detach(), rtol=2e-4, atol=1e-5)
    for a, b in zip(got_g, ref_g):
        torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-4 * float(b.abs().max()))


def _forward_args(B=5, D=11, L=2, dtype=torch.float32):
    ld = kernel.row_length(D + 1)
    t = {
        "S0": torch.zeros(B, D, D, dtype=dtype),
        "q0": torch.zeros(B, D, dtype=dtype),
        "P": torch.zeros(L, 4, dtype=dtype),
        "y": torch.empty(B, dtype=dtype),
    }
    return ld, L, t


@needs_kernel
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.update(S0=torch.zeros(5, 11, 10)), "'S0' must have shape (5, 11, 11)"),
        (lambda t: t.update(P=torch.zeros(2, 4, dtype=torch.float64)), "'P' must be torch.float32"),
        (lambda t: t.update(y=torch.empty(10)[::2]), "'y' must be a contiguous CPU tensor"),
        (lambda t: t.pop("y"), "mode forward needs 'y'"),
        (lambda t: t.update(q0=torch.zeros(5, 11, dtype=torch.int32)), "float32 or float64"),
        (lambda t: t.update(P=[0.0] * 8), "'P' must be a tensor"),
    ],
)
def test_the_c_boundary_checks_every_pointer(edit, message):
    """A tensor of the wrong shape, dtype or layout raises a one-line KernelError (a ValueError) naming it, before
    the C code reads it."""
    ld, L, t = _forward_args()
    edit(t)
    with pytest.raises(kernel.KernelError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        kernel.call("forward", False, ld, L, 1, t)
    assert "\n" not in str(err.value) and isinstance(err.value, ValueError)


@needs_kernel
def test_the_c_boundary_accepts_what_moments_hands_it():
    ld, L, t = _forward_args()
    t["q0"][:, -1] = 1.0
    kernel.call("forward", False, ld, L, 1, t)
    assert torch.equal(t["y"], -torch.ones(5))  # ω = 0: ŷ = −(e_q)_y


@needs_kernel
def test_info_names_the_build_the_cpu_and_why():
    info = kernel.info()
    assert info["available"] and info["isa"] == BUILDS[0]  # the widest installed build the CPU runs
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["vector_bytes"] == {"avx512": 64, "avx2": 32, "portable": 16}[info["isa"]]
    assert info["why"] and info["cpu"]


def test_a_build_the_cpu_cannot_run_is_refused(monkeypatch):
    """On a CPU that torch reports as AVX2, the AVX-512 build is never loaded, asked for or not."""
    monkeypatch.setattr(kernel, "cpu_capability", lambda: "AVX2")
    assert kernel.runnable() == ["avx2", "portable"]
    with pytest.raises(kernel.KernelError, match="does not run the avx512 build"):
        with kernel.use("avx512"):
            pass
    monkeypatch.setenv("INTERP_KERNEL_ISA", "avx512")
    builds, why = kernel._wanted(None)
    assert builds == ["avx2", "portable"] and "ignored" in why


@needs_kernel
def test_interp_kernel_isa_narrows_the_build(monkeypatch):
    monkeypatch.setenv("INTERP_KERNEL_ISA", BUILDS[-1])
    assert kernel.info()["isa"] == BUILDS[-1] and "INTERP_KERNEL_ISA" in kernel.info()["why"]
    monkeypatch.setenv("INTERP_KERNEL", "0")
    assert not kernel.available() and "INTERP_KERNEL=0" in kernel.info()["why"]


@needs_kernel
def test_the_kernel_is_taken_only_where_it_measured_faster(monkeypatch, tmp_path):
    """A cached measurement in which the torch backend was faster sends the trainer and the forward to torch; one in
    which the kernel was faster sends them to the kernel; INTERP_KERNEL=1 takes the kernel without measuring."""
    from interp.config import ModelConfig
    from interp.model import LinearTransformer

    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("INTERP_KERNEL", raising=False)
    info = kernel.info()
    key = f"v{moments.CHOICE_VERSION}|{info['cpu']}|{info['isa']}|{info['torch']}|{kernel.ABI}"
    model = LinearTransformer(ModelConfig(d=4, n_layers=2, param="full"))
    draw = draw_tasks(8, 4, 6, "uniform:1", torch.Generator().manual_seed(0))
    calls = []
    monkeypatch.setattr(kernel, "call", lambda *a, _call=kernel.call, **k: calls.append(a[0]) or _call(*a, **k))
    for speedup, on_kernel in ((0.5, False), (1.7, True)):
        (tmp_path / "kernel_choice.json").write_text(
            json.dumps({key: {"train_speedup": speedup, "forward_speedup": speedup}})
        )
        moments._measured_choice.cache_clear()
        choice = moments.kernel_choice()
        assert (choice.train, choice.forward) == (on_kernel, on_kernel)
        assert moments.fused_supported(model, draw.x) == on_kernel
        calls.clear()
        model(draw.batch().tokens)
        assert bool(calls) == on_kernel
        assert ("kernel" if on_kernel else "torch backend") in choice.describe()
    (tmp_path / "kernel_choice.json").write_text(json.dumps({key: {"train_speedup": 0.5, "forward_speedup": 0.5}}))
    moments._measured_choice.cache_clear()
    monkeypatch.setenv("INTERP_KERNEL", "1")
    assert moments.kernel_choice().train and moments.fused_supported(model, draw.x)
    moments._measured_choice.cache_clear()


@needs_kernel
def test_a_missing_cache_is_measured_and_written(monkeypatch, tmp_path):
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "new"))
    monkeypatch.delenv("INTERP_KERNEL", raising=False)
    moments._measured_choice.cache_clear()
    choice = moments.kernel_choice()
    moments._measured_choice.cache_clear()
    stored = json.loads((tmp_path / "new" / "kernel_choice.json").read_text())
    (entry,) = stored.values()
    assert entry["train_speedup"] == pytest.approx(choice.train_speedup) and choice.train_speedup > 0
    assert choice.train == (choice.train_speedup > 1)


@needs_kernel
def test_the_first_choice_can_be_made_under_no_grad(monkeypatch, tmp_path):
    """On a new machine the first model call may be an evaluation (the sweep evaluating a committed run, `interp
    report`): the measurement times a backward pass, and must not fail inside the caller's no_grad."""
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("INTERP_KERNEL", raising=False)
    moments._measured_choice.cache_clear()
    with torch.no_grad():
        choice = moments.kernel_choice()
    moments._measured_choice.cache_clear()
    assert choice.train_speedup > 0 and choice.forward_speedup > 0
    assert (tmp_path / "kernel_choice.json").is_file()
