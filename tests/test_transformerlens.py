"""The model as a TransformerLens user drives it: cache decompositions, every kind of hook, the pattern hook."""

from contextlib import contextmanager

import pytest
import torch
from transformer_lens.utilities import Slice

import interp
from interp import model as model_module
from interp.model import LinearAttention, LinearTransformer, hook_detection
from tests.helpers import random_diag, random_full, small_batch

FIELDS = {"d", "n_layers", "n_heads", "param", "dtype", "init_scale"}


def cached(model, tokens, **kw):
    with torch.no_grad():
        return model.run_with_cache(tokens, **kw)


def test_decompositions_sum_exactly_to_the_final_residual_stream():
    model = random_full(d=3, n_layers=3, n_heads=2, scale=0.15)
    tokens = small_batch(batch=4, d=3, n=5).tokens
    _, cache = cached(model, tokens)
    final = cache["resid_post", -1]
    stack, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "0_attn_out", "1_attn_out", "2_attn_out"]
    torch.testing.assert_close(stack.sum(0), final, rtol=1e-12, atol=1e-12)
    attn, attn_labels = cache.decompose_resid(mode="attn", return_labels=True)
    assert attn_labels == labels  # no MLP terms; the input tokens are the "embed" term
    full, full_labels = cache.get_full_resid_decomposition(return_labels=True)
    assert full_labels == ["L0H0", "L0H1", "L1H0", "L1H1", "L2H0", "L2H1", "embed", "bias"]
    torch.testing.assert_close(full.sum(0), final, rtol=1e-12, atol=1e-12)
    assert torch.all(full[-1] == 0)  # accumulated_bias: the model has no biases
    heads = cache.stack_head_results()
    torch.testing.assert_close(heads.sum(0) + cache["hook_embed"], final, rtol=1e-12, atol=1e-12)
    assert cache.stack_head_results(layer=0).shape == (0, 4, 6, 4)
    torch.testing.assert_close(
        cache.stack_head_results(layer=2).sum(0) + tokens, cache["resid_pre", 2], rtol=1e-12, atol=1e-12
    )
    acc = cache.accumulated_resid(apply_ln=True)  # no LayerNorm: apply_ln changes nothing
    torch.testing.assert_close(acc, torch.stack([cache["resid_pre", l] for l in range(3)] + [final]))
    assert torch.equal(cache.apply_ln_to_stack(stack), stack)


def test_tl_cfg_fields_without_changing_what_is_stored(tmp_path):
    model = random_diag(d=3, n_layers=2, n_heads=2)
    cfg = model.cfg
    assert (cfg.attn_only, cfg.normalization_type, cfg.d_head, cfg.d_mlp, cfg.device) == (True, None, 4, None, "cpu")
    assert set(cfg.to_dict()) == FIELDS
    interp.checkpoints.save_checkpoint(tmp_path / "m.safetensors", model, step=3)
    _, meta = interp.checkpoints.read_tensors(tmp_path / "m.safetensors")
    assert set(meta["model_config"]) == FIELDS
    moved = LinearTransformer(cfg, init=False).to("meta")
    assert moved.cfg.device == "meta" and moved.cfg == cfg and cfg.device == "cpu"  # a copy; the shared cfg is kept


def test_constructors_return_eval_mode_models():
    P = torch.randn(2, 1, 3, 3, dtype=torch.float64)
    built = [
        LinearTransformer.from_matrices(P, P),
        LinearTransformer.from_omegas(torch.ones(2, 4), d=2),
        random_diag(d=2, n_layers=1).to_full(),
    ]
    for model in built:
        assert not any(m.training for m in model.modules())


def per_token(model, tokens):
    """ŷ token by token, whatever hook detection says: residual_stream calls every submodule, so their hooks and
    the global ones run (a hook on the model itself does not: the model is not called)."""
    return -model.residual_stream(tokens)[-1, :, -1, -1]


def value_and_grads(model, fn, tokens):
    """fn(tokens) and the gradients of its sum in the tokens and every parameter (backward hooks run here)."""
    tokens = tokens.clone().requires_grad_(True)
    y = fn(tokens)
    return y.detach(), *torch.autograd.grad(y.sum(), [tokens, *model.parameters()])


def tl_hook(fired, factor):
    return lambda act, hook: fired.append(hook.name) or act * factor


def observe(fired, name):
    return lambda *args: fired.append(name)


@contextmanager
def registered(*handles):
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


# Every way of hooking the model: name → (register(model, fired) → context giving (call, reference), edits ŷ or ∂ŷ).
# Inside the context `call(tokens)` is what a user runs, `reference(tokens)` the per-token path under the same hooks.
# A hook that detection did not see would be bypassed by the hook-free path: `call` would then differ from
# `reference` (the editing hooks) or the hook would not fire.
G = torch.nn.modules.module


@contextmanager
def tl_run_with_hooks(model, fired):
    hooks = [("blocks.0.hook_attn_out", tl_hook(fired, 0.5))]

    def reference(t):
        with model.hooks(fwd_hooks=hooks):
            return per_token(model, t)

    yield (lambda t: model.run_with_hooks(t, fwd_hooks=hooks)), reference


@contextmanager
def tl_add_hook(model, fired, dir="fwd"):
    if dir == "fwd":
        model.add_hook("blocks.1.attn.hook_stats", tl_hook(fired, 2.0))
    else:
        model.add_hook("blocks.0.hook_resid_post", lambda grad, hook: fired.append(hook.name), dir="bwd")
    try:
        yield model, lambda t: per_token(model, t)
    finally:
        model.reset_hooks()


@contextmanager
def torch_hook(model, fired, register):
    with registered(register(model, fired)):
        yield model, lambda t: per_token(model, t)


@contextmanager
def on_the_model(model, fired, kind):
    if kind == "forward":
        handle, ref = model.register_forward_hook(lambda m, i, o: fired.append(kind) or 2 * o), lambda t: 2 * t
    elif kind == "pre":
        handle, ref = model.register_forward_pre_hook(lambda m, a: fired.append(kind) or (1.5 * a[0],)), None
    else:
        handle, ref = model.register_full_backward_hook(observe(fired, kind)), lambda t: t
    with registered(handle):
        if ref is None:  # the pre-hook scales the input
            yield model, lambda t: per_token(model, 1.5 * t)
        else:
            yield model, lambda t: ref(per_token(model, t))


HOOKINGS = {
    "TransformerLens run_with_hooks": (tl_run_with_hooks, True),
    "TransformerLens add_hook": (tl_add_hook, True),
    "TransformerLens add_hook, backward": (lambda m, f: tl_add_hook(m, f, dir="bwd"), False),
    "global forward hook": (
        lambda m, f: torch_hook(
            m,
            f,
            lambda m, f: G.register_module_forward_hook(
                lambda mod, i, o: f.append("global") or 0.5 * o if mod is m.blocks[0].hook_attn_out else None
            ),
        ),
        True,
    ),
    "global forward pre-hook": (
        lambda m, f: torch_hook(
            m,
            f,
            lambda m, f: G.register_module_forward_pre_hook(
                lambda mod, a: f.append("global pre") or (2 * a[0],) if mod is m.blocks[1].hook_resid_pre else None
            ),
        ),
        True,
    ),
    "global full backward hook": (
        lambda m, f: torch_hook(m, f, lambda m, f: G.register_module_full_backward_hook(observe(f, "global bwd"))),
        False,
    ),
    "forward hook on a submodule": (
        lambda m, f: torch_hook(
            m, f, lambda m, f: m.blocks[0].attn.register_forward_hook(lambda mod, i, o: f.append("fwd") or 0.5 * o)
        ),
        True,
    ),
    "forward pre-hook on a submodule": (
        lambda m, f: torch_hook(
            m,
            f,
            lambda m, f: m.blocks[1].attn.register_forward_pre_hook(lambda mod, a: f.append("pre") or (0.5 * a[0],)),
        ),
        True,
    ),
    "full backward hook on a submodule": (
        lambda m, f: torch_hook(
            m, f, lambda m, f: m.blocks[0].hook_resid_post.register_full_backward_hook(observe(f, "bwd"))
        ),
        False,
    ),
    "forward hook on the model": (lambda m, f: on_the_model(m, f, "forward"), True),
    "forward pre-hook on the model": (lambda m, f: on_the_model(m, f, "pre"), True),
    "full backward hook on the model": (lambda m, f: on_the_model(m, f, "backward"), False),
}


@pytest.mark.parametrize("how", HOOKINGS)
def test_every_way_of_hooking_runs_the_hooks_as_the_per_token_path(how):
    """A hook however attached runs, and ŷ and its gradients are the per-token path's under it (to 1e-12): hook
    detection saw it, or (on the model itself) the hook-free path gives it the same input and ŷ. This fails if
    a torch release hides a hook from interp.model.hook_detection()."""
    model = random_full(d=3, n_layers=2, n_heads=2, scale=0.3)
    tokens = small_batch(batch=3, d=3, n=5).tokens
    register, edits = HOOKINGS[how]
    plain = value_and_grads(model, model, tokens)
    assert not model._hooks_active()
    fired = []
    with register(model, fired) as (call, reference):
        if call is model and "on the model" not in how:  # registered for the whole block: detection must see it
            assert model._hooks_active(), f"interp.model.hook_detection() does not see a {how}"
        got = value_and_grads(model, call, tokens)
        assert fired, f"the {how} did not run"
        fired.clear()
        ref = value_and_grads(model, reference, tokens)
        assert fired or "on the model" in how  # there the reference applies the hook by hand
    assert not model._hooks_active()
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12 * float(b.abs().max()))
    if edits:  # a real test: bypassing the hook would change ŷ
        assert not torch.allclose(got[0], plain[0], rtol=1e-6)


def test_hook_detection_reads_this_torch():
    """interp.model.hook_detection() sees hooks on this torch without falling back to running every forward token
    by token: if this fails, a torch release moved its hooks and the detection needs updating (see its docstring)."""
    detection = hook_detection()
    assert detection.ok, detection.how
    assert not detection.any_global()


@pytest.mark.parametrize("breakage", ["no global reader", "a global reader blind to hooks", "has_hooks blind"])
def test_a_torch_whose_hooks_interp_cannot_see_takes_the_token_path(monkeypatch, breakage):
    """If the detection's self-check misses a hook (a torch release moved them), the model never bypasses a hook:
    it runs token by token, warns once, and gives the same prediction; hooks it could not see still run."""
    model = random_full(d=3, n_layers=2, n_heads=1, scale=0.3)
    tokens = small_batch(batch=3, d=3, n=5).tokens
    with torch.no_grad():
        fast = model(tokens)
    if breakage == "no global reader":
        monkeypatch.setattr(model_module, "_global_reader", lambda: (None, "gone"))
    elif breakage == "a global reader blind to hooks":
        monkeypatch.setattr(model_module, "_global_reader", lambda: ((lambda: False), "stale"))
    else:
        monkeypatch.setattr(model_module, "has_hooks", lambda module: False)
    hook_detection.cache_clear()
    try:
        with pytest.warns(UserWarning, match="token by token"):
            assert model._hooks_active()
        assert not hook_detection().ok
        hooks = [("blocks.1.attn.hook_pattern", lambda a, hook: 0 * a), ("blocks.1.hook_attn_out", tl_hook([], 0.5))]
        with torch.no_grad():
            torch.testing.assert_close(model(tokens), fast, rtol=1e-10, atol=1e-12)
            edited = model.run_with_hooks(tokens, fwd_hooks=hooks)
            with model.hooks(fwd_hooks=hooks):
                torch.testing.assert_close(edited, per_token(model, tokens), rtol=1e-12, atol=1e-12)
    finally:
        hook_detection.cache_clear()


@pytest.mark.parametrize("name", ["hook_tokens", "hook_embed", "blocks.0.hook_resid_pre"])
def test_in_place_hooks_never_change_the_callers_tokens(name):
    model = random_full(d=3, n_layers=2, n_heads=1, scale=0.3)
    tokens = small_batch(batch=2, d=3, n=4).tokens
    before = tokens.clone()
    with torch.no_grad():
        out = model.run_with_hooks(tokens, fwd_hooks=[(name, lambda a, hook: a.mul_(2.0))])
        scaled = model(2 * tokens)
    assert torch.equal(tokens, before)
    torch.testing.assert_close(out, scaled, rtol=1e-12, atol=0)
    _, cache = cached(model, tokens)
    tokens.add_(1.0)  # the cache holds its own copy
    assert torch.equal(cache["hook_tokens"], before) and torch.equal(cache["hook_embed"], before)


def test_pos_slice_slices_positions_and_keeps_stats_whole():
    model = random_full(d=3, n_layers=2, n_heads=2, scale=0.3)
    tokens = small_batch(batch=3, d=3, n=5).tokens
    _, full = cached(model, tokens)
    for pos_slice in (-1, [0, 5], (1, 4)):
        _, part = cached(model, tokens, pos_slice=pos_slice)
        s = Slice.unwrap(pos_slice)  # as in TransformerLens: an int keeps the position axis
        for l in range(2):
            assert torch.equal(part["stats", l, "attn"], full["stats", l, "attn"])
            assert torch.equal(part["resid_pre", l], s.apply(full["resid_pre", l], dim=-2))
            assert torch.equal(part["result", l], s.apply(full["result", l], dim=-3))
            assert torch.equal(part["pattern", l], s.apply(full["pattern", l], dim=-2))


def test_backward_cache_on_a_batch_with_a_metric():
    model = random_full(d=3, n_layers=2, n_heads=2, scale=0.3)
    batch = small_batch(batch=5, d=3, n=5)
    loss = lambda y_hat: 0.5 * ((y_hat - batch.target) ** 2).mean()
    y_hat, cache = model.run_with_cache(batch.tokens, incl_bwd=True, metric=loss)
    model.zero_grad()
    tokens = batch.tokens.clone().requires_grad_(True)  # the hook-free path, differentiated by autograd
    (grad,) = torch.autograd.grad(loss(model(tokens)), tokens)
    torch.testing.assert_close(cache["hook_embed_grad"], grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(cache["hook_tokens_grad"], grad, rtol=1e-10, atol=1e-12)
    last = cache["blocks.1.hook_resid_post_grad"]
    expected = torch.zeros_like(last)
    expected[:, -1, -1] = -(y_hat.detach() - batch.target) / 5  # ŷ = −y of the query after the last layer
    torch.testing.assert_close(last, expected, rtol=1e-12, atol=1e-14)
    assert not batch.tokens.requires_grad
    with pytest.raises(ValueError, match="metric="):
        model.run_with_cache(batch.tokens, incl_bwd=True)
    _, one = model.run_with_cache(batch.tokens[:1], incl_bwd=True)  # one sequence: ŷ itself, as in TransformerLens
    expected = torch.zeros_like(one["blocks.1.hook_resid_post_grad"])
    expected[:, -1, -1] = -1.0
    assert torch.equal(one["blocks.1.hook_resid_post_grad"], expected)


def test_pattern_hook_holds_the_linear_scores_and_drives_the_update():
    model = random_full(d=3, n_layers=2, n_heads=2, scale=0.3)
    tokens = small_batch(batch=2, d=3, n=4).tokens
    _, cache = cached(model, tokens)
    P, Q = model.P.detach(), model.Q.detach()
    for l in range(2):
        e = cache["resid_pre", l]
        pattern = cache["pattern", l]
        assert pattern.shape == (2, 2, 5, 5)
        for b, k, i, j in [(0, 0, 4, 1), (1, 1, 2, 3), (1, 0, 0, 0)]:
            torch.testing.assert_close(pattern[b, k, i, j], e[b, j] @ Q[l, k] @ e[b, i], rtol=1e-12, atol=1e-14)
        assert torch.all(pattern[..., -1] == 0)  # the query is masked as a key
        update = torch.einsum("kac,bkij,bjc->bika", P[l], pattern, e)  # Σ_j P_k e_j pattern[k, i, j]
        torch.testing.assert_close(update, cache["result", l], rtol=1e-10, atol=1e-12)

    def zero_pattern(act, hook):  # in place, returning None: the edit must still count
        act[:, 1] = 0

    def zero_result(act, hook):
        act[:, :, 1] = 0

    with torch.no_grad():  # zeroing head 1's pattern silences head 1, like zeroing its result
        via_pattern = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", zero_pattern)])
        via_result = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_result", zero_result)])
    torch.testing.assert_close(via_pattern, via_result, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(via_pattern, model(tokens).detach())


def test_pattern_is_built_only_when_hooked(monkeypatch):
    calls = []
    original = LinearAttention.pattern_edit
    monkeypatch.setattr(LinearAttention, "pattern_edit", lambda self, r: calls.append(1) or original(self, r))
    model = random_full(d=3, n_layers=3, n_heads=1)
    tokens = small_batch(batch=2, d=3, n=4).tokens
    with torch.no_grad():
        model(tokens)
        cached(model, tokens, names_filter=lambda name: not name.endswith("hook_pattern"))
        assert calls == []
        cached(model, tokens, names_filter="blocks.1.attn.hook_pattern")
    assert calls == [1]


def test_pattern_renders_with_circuitsvis():
    cv = pytest.importorskip("circuitsvis")
    model = random_full(d=3, n_layers=1, n_heads=2)
    _, cache = cached(model, small_batch(batch=1, d=3, n=4).tokens)
    html = cv.attention.attention_patterns(tokens=[f"e{i}" for i in range(5)], attention=cache["pattern", 0][0])
    assert "e4" in str(html)
