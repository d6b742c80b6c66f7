"""interp.variants: the FFN, softmax and kernel-attention variants of the linear transformer, against closed forms."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.checkpoints import save_checkpoint
from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.probes.linearity import implicit_maps
from interp.variants import (
    VariantConfig,
    VariantTrainConfig,
    VariantTransformer,
    load_variant,
    load_variant_with_meta,
    predictor,
    train_variant,
)
from tests.helpers import small_batch

D_SMALL = 4  # d of the closed-form tests; tokens of width 5, n = 8


def variant(scale=0.1, seed=0, **fields) -> VariantTransformer:
    """A float64 variant with O(scale) random weights (large enough that every term matters)."""
    cfg = VariantConfig(d=D_SMALL, n_layers=3, dtype="float64", **fields)
    model = VariantTransformer(cfg, init=False)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model.eval()


def as_linear(model: VariantTransformer) -> LinearTransformer:
    """The LinearTransformer with the variant's attention weights (the same state-dict names blocks.{l}.attn.*)."""
    cfg = model.cfg
    out = LinearTransformer(ModelConfig(d=cfg.d, n_layers=cfg.n_layers, param=cfg.param, dtype=cfg.dtype), init=False)
    out.load_state_dict({k: v for k, v in model.state_dict().items() if ".attn." in k})
    return out.eval()


@pytest.mark.parametrize("param", ["full", "diag"])
def test_zero_ffn_is_the_linear_transformer_bit_for_bit(param):
    model = variant(mlp="linear", param=param)
    with torch.no_grad():
        for block in model.blocks:
            block.mlp.W_in.zero_()
    linear, tokens = as_linear(model), small_batch(d=D_SMALL).tokens
    with torch.no_grad():
        assert torch.equal(model.residual_stream(tokens), linear.residual_stream(tokens))  # the same per-token path
        assert torch.allclose(model(tokens), linear(tokens), rtol=1e-12, atol=1e-12)  # linear's hook-free path


def test_linear_ffn_keeps_theorem_41_exact():
    """e_i^l = T^l e_i for every token, the query included, with T^{l+1} = (I + W_out W_in)(I + Σ_k P_k S^l Q_k) T^l,
    and ŷ^l = ⟨w^l, x_t⟩ with w^l = −T^l[d, :d]."""
    model, tokens = variant(mlp="linear", scale=0.2), small_batch(d=D_SMALL).tokens
    T = implicit_maps(model, tokens)
    with torch.no_grad():
        resid = model.residual_stream(tokens)
    mapped = torch.einsum("lbij,bpj->lbpi", T, tokens)
    assert (mapped - resid).abs().max() <= 1e-10 * resid.abs().max()
    w = -T[:, :, -1, :-1]
    readout = (w * tokens[None, :, -1, :-1]).sum(-1)
    torch.testing.assert_close(readout, model.predict_per_layer(tokens).detach(), rtol=1e-10, atol=1e-12)
    assert (T[2] - T[1]).abs().max() > 1e-2  # the FFN and attention terms matter at this scale


def test_relu_ffn_applies_relu_between_its_hooks():
    model, tokens = variant(mlp="relu"), small_batch(d=D_SMALL).tokens
    _, cache = model.run_with_cache(tokens)
    pre, post = cache["blocks.1.mlp.hook_pre"], cache["blocks.1.mlp.hook_post"]
    assert torch.equal(post, pre.clamp_min(0)) and bool((pre < 0).any()) and bool((pre > 0).any())
    W_out = model.blocks[1].mlp.W_out.detach()
    torch.testing.assert_close(cache["blocks.1.hook_mlp_out"], post @ W_out.T, rtol=0, atol=0)


def test_softmax_with_equal_scores_is_mean_attention():
    """Q = 0: softmax_j(0) = 1/n over the context, so every token gets P_k (1/n) Σ_{j≤n} e_j."""
    model, tokens = variant(attention="softmax"), small_batch(d=D_SMALL).tokens
    with torch.no_grad():
        for block in model.blocks:
            block.attn.Q.zero_()
        resid = tokens
        for block in model.blocks:
            mean = resid[:, :-1].mean(1)  # the n context tokens only: the query is masked as a key
            resid = resid + (mean @ block.attn.P.sum(0).T)[:, None, :]
        torch.testing.assert_close(model(tokens), -resid[:, -1, -1], rtol=1e-12, atol=1e-12)


def test_softmax_pattern_is_a_distribution_over_the_context():
    model, tokens = variant(attention="softmax", scale=0.5), small_batch(d=D_SMALL).tokens
    _, cache = model.run_with_cache(tokens)
    pattern = cache["blocks.1.attn.hook_pattern"]  # [batch, head, query pos, key pos]
    torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern.sum(-1)), rtol=0, atol=1e-12)
    assert bool((pattern[..., -1] == 0).all()) and bool((pattern[..., :-1] > 0).all())
    assert pattern.std(-1).max() > 1e-3  # scores that differ: not mean attention


def test_identity_kernel_is_linear_attention_with_q_equal_k_transpose_q():
    model, tokens = variant(attention="kernel", feature_map="identity"), small_batch(d=D_SMALL).tokens
    P = torch.stack([b.attn.P for b in model.blocks]).detach()
    Q = torch.stack([b.attn.K.mT @ b.attn.Q for b in model.blocks]).detach()  # e_jᵀ K_kᵀ Q_k e_i
    linear = LinearTransformer.from_matrices(P, Q)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), linear(tokens), rtol=1e-10, atol=1e-12)


def test_elu_kernel_pattern_is_positive_and_masks_the_query_key():
    model, tokens = variant(attention="kernel"), small_batch(d=D_SMALL).tokens
    _, cache = model.run_with_cache(tokens)
    q, k, pattern = (cache[f"blocks.0.attn.hook_{h}"] for h in ("q", "k", "pattern"))
    assert bool((q > 0).all()) and bool((k > 0).all())  # elu + 1 > 0
    torch.testing.assert_close(pattern[..., :-1], torch.einsum("bjha,biha->bhij", k, q)[..., :-1])
    assert bool((pattern[..., -1] == 0).all())


HOOKS = ["hook_resid_pre", "attn.hook_pattern", "attn.hook_result", "hook_attn_out", "hook_resid_post"]
FFN_HOOKS = ["hook_resid_mid", "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out"]


@pytest.mark.parametrize(
    "fields, extra",
    [
        (dict(mlp="linear"), FFN_HOOKS + ["attn.hook_stats"]),
        (dict(mlp="relu"), FFN_HOOKS),
        (dict(attention="softmax"), ["attn.hook_attn_scores"]),
        (dict(attention="kernel"), ["attn.hook_q", "attn.hook_k"]),
    ],
)
def test_every_hook_is_in_the_cache(fields, extra):
    model, tokens = variant(**fields), small_batch(d=D_SMALL).tokens
    y, cache = model.run_with_cache(tokens)
    want = {"hook_tokens", "hook_embed"} | {f"blocks.{l}.{h}" for l in range(3) for h in HOOKS + extra}
    assert want <= set(cache.keys())
    torch.testing.assert_close(y, -cache["blocks.2.hook_resid_post"][:, -1, -1])
    if "mlp.hook_pre" in extra:  # resid_post = resid_mid + mlp_out, resid_mid = resid_pre + attn_out
        torch.testing.assert_close(
            cache["blocks.1.hook_resid_post"], cache["blocks.1.hook_resid_mid"] + cache["blocks.1.hook_mlp_out"]
        )
        torch.testing.assert_close(
            cache["blocks.1.hook_resid_mid"], cache["blocks.1.hook_resid_pre"] + cache["blocks.1.hook_attn_out"]
        )


def test_zeroing_the_mlp_output_through_a_hook_removes_the_ffn():
    model, tokens = variant(mlp="relu"), small_batch(d=D_SMALL).tokens
    hooks = [(f"blocks.{l}.hook_mlp_out", lambda t, hook: torch.zeros_like(t)) for l in range(3)]
    patched = model.run_with_hooks(tokens, fwd_hooks=hooks)
    with torch.no_grad():
        torch.testing.assert_close(patched, as_linear(model)(tokens), rtol=1e-12, atol=1e-12)


def test_a_tiny_training_run_lowers_the_loss_and_round_trips(tmp_path):
    model = VariantConfig(d=3, n_layers=2, mlp="relu", d_mlp=8)
    cfg = VariantTrainConfig(model=model, noise="uniform:1", n=8, steps=150, batch=256, lr=1e-2, log_every=25)
    result = train_variant(cfg, tmp_path / "v.safetensors")
    first, last = result.history[0]["loss"], result.history[-1]["loss"]
    assert last < 0.7 * first, (first, last)
    loaded, meta = load_variant_with_meta(result.path)
    assert meta["train_config"] == cfg and loaded.cfg == model
    batch = small_batch(d=3)
    torch.testing.assert_close(predictor(loaded)(batch), predictor(result.model)(batch), rtol=0, atol=0)
    assert interp.adjusted_loss(predictor(loaded), interp.EvalSet("uniform:1", d=3, n=8, n_seq=500)).mean < 1.0


@pytest.mark.parametrize(
    "fields, name",
    [
        (dict(attention="flash"), "attention"),
        (dict(mlp="gelu"), "mlp"),
        (dict(d_mlp=0), "d_mlp"),
        (dict(feature_map="exp"), "feature_map"),
        (dict(attention="softmax", param="diag"), "param"),
        (dict(n_layers=0), "n_layers"),
        (dict(qk_scale=0.3), "qk_scale"),
        (dict(attention="kernel", qk_scale=-1.0), "qk_scale"),
    ],
)
def test_bad_configs_name_the_field(fields, name):
    with pytest.raises(interp.InvalidArgument, match=name) as err:
        VariantConfig(**fields)
    assert "\n" not in str(err.value)


def test_bad_inputs_raise_one_line_errors(tmp_path):
    with pytest.raises(interp.InvalidArgument, match="lr"):
        VariantTrainConfig(lr=-1.0)
    with pytest.raises(interp.InvalidArgument, match="tokens"):
        variant()(torch.zeros(2, 5, 7, dtype=torch.float64))
    with pytest.raises(interp.InvalidType, match="tokens"):
        variant()(torch.zeros(2, 5, 5, dtype=torch.int64))
    with pytest.raises(interp.InvalidArgument, match="linear FFN"):
        implicit_maps(variant(attention="softmax"), small_batch(d=D_SMALL).tokens)
    path = tmp_path / "linear.safetensors"
    save_checkpoint(path, LinearTransformer(ModelConfig(d=3, n_layers=1)), 0)
    with pytest.raises(interp.CheckpointError, match="not a variant checkpoint"):
        load_variant(path)
