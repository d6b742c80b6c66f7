"""The model as a TransformerLens user drives it: cache decompositions, every kind of hook, the pattern hook."""

import pytest
import torch
from transformer_lens.utilities import Slice

import interp
from interp.model import LinearAttention, LinearTransformer
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


def test_every_kind_of_module_hook_turns_off_the_fast_path():
    model = random_full(d=3, n_layers=2, n_heads=2, scale=0.3)
    tokens = small_batch(batch=3, d=3, n=5).tokens
    with torch.no_grad():
        ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_attn_out", lambda a, hook: 0 * a)])
    attn = model.blocks[1].attn
    fired = []
    registrations = [
        lambda: attn.register_forward_hook(lambda m, i, o: torch.zeros_like(o)),
        lambda: attn.register_forward_pre_hook(lambda m, i: fired.append("pre")),
        lambda: model.blocks[0].hook_resid_post.register_full_backward_hook(lambda m, gi, go: fired.append("bwd")),
        lambda: torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: fired.append("global")),
        lambda: torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: fired.append("global pre")),
        lambda: torch.nn.modules.module.register_module_full_backward_hook(lambda m, gi, go: None),
    ]
    for register in registrations:
        assert not model._hooks_active()
        handle = register()
        try:
            assert model._hooks_active()
            out = model(tokens.clone().requires_grad_(True))
            out.sum().backward()
        finally:
            handle.remove()
        if register is registrations[0]:  # zeroing the attention module's output = zeroing hook_attn_out
            torch.testing.assert_close(out.detach(), ablated, rtol=1e-12, atol=1e-12)
    assert {"pre", "bwd", "global", "global pre"} <= set(fired)
    assert not model._hooks_active()


def test_a_torch_without_the_global_hook_dicts_takes_the_token_path(monkeypatch):
    """If torch renames its global hook dicts, the model never bypasses a hook: it runs token by token, warns once,
    and gives the same prediction."""
    from interp import model as model_module

    model = random_full(d=3, n_layers=2, n_heads=1, scale=0.3)
    tokens = small_batch(batch=3, d=3, n=5).tokens
    with torch.no_grad():
        fast = model(tokens)
    monkeypatch.setattr(model_module, "_GLOBAL_HOOK_DICTS", (*model_module._GLOBAL_HOOK_DICTS, "_renamed_hooks"))
    monkeypatch.setattr(model_module, "_MISSING_WARNED", [False])
    with pytest.warns(UserWarning, match="token by token"):
        assert model._hooks_active()
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), fast, rtol=1e-10, atol=1e-12)


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
