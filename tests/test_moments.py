"""The hook-free path (interp.moments, both backends) against the per-token forward, values and gradients, float64."""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from interp import checkpoints as ck
from interp import kernel, moments
from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.run import load
from interp.tasks import TaskDraw, draw_tasks, sample_tasks

N_CTX = 6
# every depth 1-7, every head count 1-3 and every d in {1, 5, 10, 15} (widths padded or not) for each param
CASES = [(L, H, d) for d, H, L in itertools.product((1, 5, 10, 15), (1, 2, 3), (1, 3, 7))]
CASES += [(L, 2, 5) for L in (2, 4, 5, 6)]


def _tokens(d: int, batch: int = 5, seed: int = 1) -> torch.Tensor:
    return sample_tasks(batch, d, N_CTX, "uniform:1", torch.Generator().manual_seed(seed), dtype=torch.float64).tokens


def _model(param: str, L: int, H: int, d: int, tokens: torch.Tensor, seed: int = 0) -> LinearTransformer:
    """Random float64 weights sized so that every layer's A = Σ_k P_k S Q_k has norm about 0.1 on `tokens`:
    every term matters (A² is a percent of A) and seven layers do not blow up."""
    model = LinearTransformer(ModelConfig(d=d, n_layers=L, n_heads=H, param=param, dtype="float64"), init=False)
    ctx = tokens[:, :-1]
    s_norm = torch.linalg.matrix_norm(ctx.mT @ ctx, ord=2).max().item()
    D = d + 1 if param == "full" else 1  # a random D × D matrix of std s has norm about 2 √D s
    scale = (0.1 / (4 * H * D * s_norm)) ** 0.5
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model


def _value_and_grads(fn, model, tokens, weights):
    tokens = tokens.clone().requires_grad_(True)
    y = fn(tokens)
    grads = torch.autograd.grad((y * weights).sum(), [tokens, *model.parameters()])
    return y.detach(), grads


def _reference(model):
    return lambda tokens: model.predict_per_layer(tokens)[-1]  # the per-token path, layer by layer


BACKENDS = ["torch", "kernel"]  # batched torch products; the fused CPU kernel (interp.kernel)


def test_kernel_is_built():
    """`pip install` compiles the kernel (setup.py); without a C++17 compiler every kernel test below fails."""
    assert kernel.available() or os.environ.get("INTERP_KERNEL") == "0", (
        "interp/_moments_cpu was not built: install a C++17 compiler (g++ or clang++) and rerun pip install -e ."
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("param", ["full", "diag", "gdpp"])
@pytest.mark.parametrize("L,H,d", CASES)
def test_fast_path_matches_per_token_values_and_gradients(param, L, H, d, backend):
    tokens = _tokens(d)
    model = _model(param, L, H, d, tokens)
    weights = torch.linspace(-1.0, 2.0, tokens.shape[0], dtype=torch.float64)  # a loss that weighs sequences apart
    y_ref, g_ref = _value_and_grads(_reference(model), model, tokens, weights)
    assert not model._hooks_active()
    y, g = _value_and_grads(lambda t: moments.predict(model, t, backend=backend), model, tokens, weights)
    scale = y_ref.abs().max()
    with torch.no_grad():  # a non-trivial test: the last layer moves the prediction by more than 1e-3 of it
        per_layer = model.predict_per_layer(tokens)
    assert (per_layer[-1] - per_layer[-2]).abs().max() > 1e-3 * scale > 0
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12 * scale)
    names = ["tokens", *(n for n, _ in model.named_parameters())]
    for name, a, b in zip(names, g, g_ref):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * b.abs().max(), msg=name)
    assert any(b.abs().max() > 0 for b in g_ref[1:])


def _draw(d: int, batch: int, seed: int = 1) -> TaskDraw:
    return draw_tasks(batch, d, N_CTX, "uniform:1", torch.Generator().manual_seed(seed), dtype=torch.float64)


def _half_se_reference(model, draw, weight, cap):
    """(c, ℓ) of the trainer's loss from the per-token path on draw.batch(): ℓ = ½·v·(ŷ − target)², c = ℓ or
    robust_half_se(ℓ) with the non-finite ℓ left out (0)."""
    from interp.train import robust_half_se

    batch = draw.batch()
    per = 0.5 * (_reference(model)(batch.tokens) - batch.target) ** 2 * weight
    if cap is None:
        return per, per
    finite = torch.isfinite(per)
    return torch.where(finite, robust_half_se(torch.where(finite, per, 0.0), cap), 0.0), per


@pytest.mark.parametrize("param", ["full", "diag", "gdpp"])
@pytest.mark.parametrize("L,H,d", CASES)
def test_fused_training_loss_matches_per_token_values_and_gradients(param, L, H, d):
    """The kernel's fused training pass (tokens formed from the draw, forward, loss, backward per sequence, nothing
    recomputed) against the per-token path on draw.batch(): plain and with the robust guard (cap at the median ℓ,
    so both branches run), weighted."""
    draw = _draw(d, 8)
    model = _model(param, L, H, d, draw.batch().tokens)
    weight = torch.linspace(0.5, 2.0, 8, dtype=torch.float64)
    params = list(model.parameters())
    with torch.no_grad():
        cap = _half_se_reference(model, draw, weight, None)[1].median().item()
    for c_cap in (None, cap):
        c_ref, l_ref = _half_se_reference(model, draw, weight, c_cap)
        g_ref = torch.autograd.grad(c_ref.sum() / 8, params)
        c, ell = moments.half_squared_errors(model, draw, weight, c_cap)
        g = torch.autograd.grad(c.sum() / 8, params)
        if c_cap is not None:
            assert 0 < int((l_ref > c_cap).sum()) < 8  # both branches of the guard
        torch.testing.assert_close(ell, l_ref.detach(), rtol=1e-12, atol=1e-12 * l_ref.abs().max().item())
        torch.testing.assert_close(c, c_ref.detach(), rtol=1e-12, atol=1e-12 * c_ref.abs().max().item())
        for (name, _), a, b in zip(model.named_parameters(), g, g_ref):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * b.abs().max(), msg=name)
        assert any(b.abs().max() > 0 for b in g_ref)


@pytest.mark.parametrize("param", ["full", "diag"])
def test_fused_training_loss_leaves_out_non_finite_sequences(param):
    """With the guard a sequence whose ℓ is inf or nan adds 0 and no gradient; the others are untouched."""
    draw = _draw(5, 6)
    model = _model(param, 3, 2, 5, draw.batch().tokens)
    draw.sigma[1] = float("inf")  # its labels, hence S, overflow
    draw.x_query[3, 0] = float("nan")
    weight = torch.ones(6, dtype=torch.float64)
    c, ell = moments.half_squared_errors(model, draw, weight, cap=1.0)
    assert not torch.isfinite(ell[1]) and torch.isnan(ell[3]) and c[1] == 0 and c[3] == 0
    keep = torch.tensor([0, 2, 4, 5])
    kept = TaskDraw(*(t[keep] for t in (draw.x, draw.x_query, draw.w, draw.sigma, draw.xi)))
    c_ref, _ = _half_se_reference(model, kept, weight[keep], 1.0)
    torch.testing.assert_close(c[keep], c_ref.detach(), rtol=1e-12, atol=1e-14)
    g = torch.autograd.grad(c.sum(), list(model.parameters()))
    g_ref = torch.autograd.grad(c_ref.sum(), list(model.parameters()))
    for a, b in zip(g, g_ref):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * b.abs().max())


def test_fused_training_loss_threads_and_limits(monkeypatch):
    """1 and 3 threads agree; only sums of the loss terms are differentiable; unsupported inputs are refused."""
    draw = _draw(10, 200)
    model = _model("full", 4, 2, 10, draw.batch().tokens)
    before, out = torch.get_num_threads(), {}
    for n in (1, 3):
        torch.set_num_threads(n)
        try:
            c, _ = moments.half_squared_errors(model, draw, cap=1e-3)
            out[n] = (c.detach(), torch.autograd.grad(c.mean(), list(model.parameters())))
        finally:
            torch.set_num_threads(before)
    torch.testing.assert_close(out[3][0], out[1][0], rtol=0, atol=0)  # every sequence is computed alone
    for a, b in zip(out[3][1], out[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13 * b.abs().max())
    c, _ = moments.half_squared_errors(model, draw)
    with pytest.raises(RuntimeError, match="only a sum or mean"):
        (c * torch.linspace(0, 1, 200, dtype=torch.float64)).sum().backward()
    assert moments.fused_supported(model, draw.x)
    monkeypatch.setenv("INTERP_FUSED", "0")
    assert not moments.fused_supported(model, draw.x)
    monkeypatch.delenv("INTERP_FUSED")
    assert not moments.fused_supported(model, draw.x.float())  # the model is float64
    assert not moments.fused_supported(model, draw.x.clone().requires_grad_(True))
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: x)]):
        assert not moments.fused_supported(model, draw.x)
        with pytest.raises(ValueError, match="fused training loss needs the compiled kernel"):
            moments.half_squared_errors(model, draw)


@pytest.mark.parametrize("param", ["full", "diag", "gdpp"])
def test_padding_is_exact_at_any_width(param):
    """The recursion at its own width, padded by 1 or by 6 zero rows and columns: same values, same gradients."""
    tokens = _tokens(5)
    model = _model(param, 4, 2, 5, tokens)
    weights = torch.ones(tokens.shape[0], dtype=torch.float64)
    base = _value_and_grads(lambda t: moments.predict(model, t, width=7), model, tokens, weights)
    for width in (8, 13):
        y, g = _value_and_grads(lambda t: moments.predict(model, t, width=width), model, tokens, weights)
        torch.testing.assert_close(y, base[0], rtol=1e-13, atol=1e-13)
        for a, b in zip(g, base[1]):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12 * b.abs().max())
    with pytest.raises(ValueError, match="width must be >= d \\+ 2"):
        moments.predict(model, tokens, width=6)


@pytest.mark.parametrize("param", ["full", "diag"])
def test_model_call_takes_the_kernel_on_cpu_and_torch_elsewhere(param, monkeypatch):
    """model(tokens) without hooks is moments.predict(backend="auto"): the kernel for CPU float tensors."""
    tokens = _tokens(5)
    model = _model(param, 3, 2, 5, tokens)
    calls = []
    monkeypatch.setattr(kernel, "call", lambda *a, _call=kernel.call: calls.append(1) or _call(*a))
    y = model(tokens)
    assert calls == [1]
    torch.testing.assert_close(y, moments.predict(model, tokens, backend="torch"), rtol=1e-12, atol=1e-12)
    assert kernel.supports(tokens, 7) and not kernel.supports(tokens.to("meta"), 7)
    assert not kernel.supports(tokens.to(torch.bfloat16), 7) and not kernel.supports(tokens, 65)


def test_kernel_splits_the_batch_over_threads_exactly():
    """With 3 threads each takes a slice of the batch and sums its own gradients: the same values and gradients."""
    tokens = _tokens(10, batch=200)
    weights = torch.linspace(-1.0, 2.0, 200, dtype=torch.float64)
    before = torch.get_num_threads()
    results = {}
    for param in ("full", "diag"):
        model = _model(param, 5, 2, 10, tokens)
        for n in (1, 3):
            torch.set_num_threads(n)
            try:
                assert kernel.threads(200) == n
                fwd = lambda t: moments.predict(model, t, backend="kernel")  # noqa: B023
                results[param, n] = _value_and_grads(fwd, model, tokens, weights)
            finally:
                torch.set_num_threads(before)
        (y1, g1), (y3, g3) = results[param, 1], results[param, 3]
        torch.testing.assert_close(y3, y1, rtol=0, atol=0)  # every sequence is computed alone
        for a, b in zip(g3, g1):
            torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13 * b.abs().max())


def test_backend_choices_are_checked():
    tokens = _tokens(5)
    model = _model("full", 2, 1, 5, tokens)
    with pytest.raises(ValueError, match="backend must be auto, kernel or torch"):
        moments.predict(model, tokens, backend="cuda")
    with pytest.raises(ValueError, match="backend='kernel' needs"):
        moments.predict(model, tokens, width=8, backend="kernel")
    with pytest.raises(ValueError, match="of the model's dtype"):
        moments.predict(model, tokens.float(), backend="kernel")
    with pytest.raises(RuntimeError, match="expected"):  # auto: torch's own dtype error, never a silent misread
        moments.predict(model, tokens.float())
    with pytest.raises(ValueError, match="backend='kernel' needs"):
        moments.predict(model.to("meta"), tokens.to("meta"), backend="kernel")  # .to moves the model: last


@pytest.mark.parametrize("param", ["full", "diag"])
def test_kernel_at_its_widest_rows(param):
    """d = 40: Ŝ of width 42 runs in rows of 64 lanes (interp.kernel.ROW_LENGTHS), values and gradients exact."""
    tokens = _tokens(40, batch=3)
    model = _model(param, 3, 2, 40, tokens)
    assert kernel.row_length(42) == 64
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    y_ref, g_ref = _value_and_grads(_reference(model), model, tokens, weights)
    y, g = _value_and_grads(lambda t: moments.predict(model, t, backend="kernel"), model, tokens, weights)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12 * y_ref.abs().max())
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * b.abs().max())


def test_widths_beyond_the_kernel_run_on_torch():
    """d = 63: Ŝ of width 65 is wider than the widest compiled row (64), so "auto" takes the torch path."""
    tokens = _tokens(63, batch=3)
    model = _model("diag", 2, 1, 63, tokens)
    assert kernel.row_length(65) is None
    torch.testing.assert_close(model(tokens), _reference(model)(tokens), rtol=1e-12, atol=1e-12)


def test_padded_widths_by_measurement():
    assert moments.padded_width(12) == 12  # d = 10: the query column already makes it 12
    assert [moments.padded_width(w) for w in range(3, 9)] == [3, 8, 8, 8, 8, 8]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("param", ["full", "diag"])
def test_float32_agrees_with_float64_and_no_grad_agrees_with_grad(param, backend):
    tokens = _tokens(10, batch=64)
    model64 = _model(param, 7, 1, 10, tokens)
    model32 = LinearTransformer(ModelConfig(d=10, n_layers=7, param=param), init=False)
    model32.load_state_dict({k: v.float() for k, v in model64.state_dict().items()})
    with torch.no_grad():
        y64 = moments.predict(model64, tokens, backend=backend)
        y32 = moments.predict(model32, tokens.float(), backend=backend)
    torch.testing.assert_close(y32.double(), y64, rtol=1e-4, atol=1e-4 * y64.abs().max())
    torch.testing.assert_close(moments.predict(model64, tokens, backend=backend).detach(), y64, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_graphs_alive_at_once_keep_their_own_buffers(backend):
    """Workspaces are reused between steps; two forwards before their backwards must not share them."""
    t1, t2 = _tokens(4, seed=1), _tokens(4, seed=2)
    model = _model("full", 3, 1, 4, t1)

    def fwd(t):
        return moments.predict(model, t, backend=backend)

    expect = [torch.autograd.grad(fwd(t).sum(), list(model.parameters())) for t in (t1, t2)]
    y1, y2 = fwd(t1), fwd(t2)
    g2 = torch.autograd.grad(y2.sum(), list(model.parameters()))
    g1 = torch.autograd.grad(y1.sum(), list(model.parameters()))
    for got, want in zip((g1, g2), expect):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    y = fwd(t1)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward per forward"):
        y.sum().backward()


def test_padded_model_checkpoints_keep_true_shapes(tmp_path):
    """d = 5 runs at width 8 inside interp.moments; parameters, state dict, P, Q and files stay at d + 1 = 6."""
    tokens = _tokens(5)
    model = _model("full", 2, 2, 5, tokens)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        model(tokens).pow(2).mean().backward()
        opt.step()
    assert moments.padded_width(model.cfg.d_model + 1) == 8
    assert model.P.shape == model.Q.shape == (2, 2, 6, 6)
    assert all(p.grad.shape == p.shape for p in model.parameters())
    ck.save_checkpoint(tmp_path / "m.safetensors", model, 2)
    tensors, _ = ck.read_tensors(tmp_path / "m.safetensors")
    assert {tuple(t.shape) for t in tensors.values()} == {(2, 6, 6)}
    loaded = load(tmp_path / "m.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model(tokens), rtol=0, atol=0)
    _, cache = loaded.run_with_cache(tokens)  # hooks see the true width
    assert cache["blocks.0.attn.hook_stats"].shape == (tokens.shape[0], 6, 6)


@pytest.mark.parametrize("param", ["full", "diag", "gdpp"])
def test_runs_on_the_meta_device(param):
    """Forward and backward on the meta device: every tensor follows the input's device, and a host sync
    (.item(), a Python bool of a tensor) would raise here; the `--device cuda` path runs the same code."""
    model = LinearTransformer(ModelConfig(d=5, n_layers=3, n_heads=2, param=param)).to("meta")
    tokens = torch.empty(8, N_CTX + 1, 6, device="meta")
    y = model(tokens)
    y.sum().backward()
    assert y.shape == (8,) and y.device.type == "meta"
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
