"""interp.variants: the linear-attention family, each parallel form against its token-by-token loop, the reductions
between them (γ = 1, a gate of 1, β = 0, qkv merged into FULL), DeltaNet as LMS, the legacy files, and the one
trainer's runs of them (exact resume included). float64 and tiny sizes throughout."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

import interp
from interp import train as train_mod
from interp import variants
from interp.checkpoints import read_tensors
from interp.config import ATTENTIONS, ModelConfig, TrainConfig
from interp.model import LinearTransformer
from interp.run import Run, load
from interp.train import train
from interp.variants import VariantTransformer, build, reference_stream
from tests.helpers import random_variant, small_batch

D_SMALL = 4  # d of the closed-form tests; tokens of width 5, n = 8
ROOT = Path(__file__).resolve().parent.parent
FAMILY = [a for a in ATTENTIONS if a != "lsa"]
WIDTHS = (D_SMALL + 1, 8, 13)  # the hook-free path's stream: unpadded, padded to 8 lanes, and wider (stream_width)


def variant(scale=0.3, seed=0, layers=2, heads=2, **fields) -> VariantTransformer:
    return random_variant(D_SMALL, layers, heads, scale, seed, **fields)


def rel_err(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize(
    "attention, mlp",
    # lsa without an FFN is the paper's model, checked against its loop in tests/test_model.py
    [(a, m) for a in ATTENTIONS for m in ("none", "linear", "relu", "quadratic") if (a, m) != ("lsa", "none")],
)
def test_every_forward_equals_its_token_by_token_loop(attention, mlp):
    """The parallel forms (masked matrix, per-channel decay, UT transform) against the recurrences written out."""
    model, tokens = variant(attention=attention, mlp=mlp), small_batch(d=D_SMALL).tokens
    with torch.no_grad():
        fast, slow = model.residual_stream(tokens), reference_stream(model, tokens)
    assert rel_err(fast, slow) <= 1e-12
    assert (fast[-1] - fast[0]).abs().max() > 1e-2  # the layers do something at this scale
    torch.testing.assert_close(model(tokens), -slow[-1, :, -1, -1], rtol=1e-12, atol=1e-14)
    for width in WIDTHS:
        fast = model._forward_fast(tokens, width)
        torch.testing.assert_close(fast, -slow[-1, :, -1, -1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("attention", FAMILY + ["lsa"])
def test_the_hook_free_path_has_the_hooked_forwards_gradients(attention, width):
    """Training takes `_forward_fast` (no hook anywhere), its stream padded or not; its gradients are the
    layer-by-layer forward's."""
    model = variant(attention=attention, mlp="quadratic" if attention == "lsa" else "none")
    tokens = small_batch(d=D_SMALL).tokens

    def grads(predict):
        model.zero_grad()
        (predict(tokens) ** 2).sum().backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    fast = grads(lambda t: model._forward_fast(t, width))
    hooked = grads(lambda t: -model.residual_stream(t)[-1, :, -1, -1])
    assert rel_err(fast, hooked) <= 1e-12


def test_the_stream_is_padded_to_eight_lanes_where_that_measured_faster(monkeypatch):
    """stream_width: D rounded up to a multiple of 8 where padding measured faster on this CPU, D where it did not and
    on a GPU; INTERP_STREAM_WIDTH overrides it (0: unpadded), a bad value is a one-line error naming it."""
    monkeypatch.delenv(variants.STREAM_WIDTH_ENV, raising=False)
    for speedup, widths in ((1.4, [8, 8, 16, 16, 24]), (0.8, [2, 8, 11, 16, 17])):
        monkeypatch.setattr(variants, "padding_speedup", lambda D, s=speedup: s)
        assert [variants.stream_width(D) for D in (2, 8, 11, 16, 17)] == widths
    monkeypatch.setattr(variants, "padding_speedup", lambda D: 1.4)
    assert variants.stream_width(11, "cuda") == 11
    for value, width in (("0", 11), ("20", 20), ("5", 11)):
        monkeypatch.setenv(variants.STREAM_WIDTH_ENV, value)
        assert variants.stream_width(11) == width
    monkeypatch.setenv(variants.STREAM_WIDTH_ENV, "wide")
    with pytest.raises(interp.InvalidArgument, match="INTERP_STREAM_WIDTH must be an integer width, got 'wide'"):
        variants.stream_width(11)
    model, tokens = variant(attention="causal"), small_batch(d=D_SMALL).tokens
    with pytest.raises(interp.InvalidArgument, match="width must be at least the stream's 5, got 4"):
        model._forward_fast(tokens, 4)


def test_the_padding_is_measured_once_a_machine_and_cached(monkeypatch, tmp_path):
    """padding_speedup times the two widths on this CPU once and keeps the answer in the choice cache beside the
    kernel's (interp.moments.measured_once); a cached answer is read, not measured again."""
    monkeypatch.delenv(variants.STREAM_WIDTH_ENV, raising=False)
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path))
    variants.padding_speedup.cache_clear()
    try:
        measured = variants.padding_speedup(5)
        assert measured > 0
        path = tmp_path / "kernel_choice.json"
        (key,) = [k for k in json.loads(path.read_text()) if k.startswith("stream v")]
        assert key.endswith("|D=5") and json.loads(path.read_text())[key]["padding_speedup"] == measured
        for cached, width in ((0.5, 5), (2.0, 8)):
            path.write_text(json.dumps({key: {"padding_speedup": cached}}))
            variants.padding_speedup.cache_clear()
            assert variants.padding_speedup(5) == cached and variants.stream_width(5) == width
    finally:
        variants.padding_speedup.cache_clear()


def test_a_bad_stream_width_fails_before_a_run_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv(variants.STREAM_WIDTH_ENV, "wide")
    with pytest.raises(interp.InvalidArgument, match="INTERP_STREAM_WIDTH"):
        train(tiny("causal", "none"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def _with(model, name: str, value: float):
    """The model's predictions with every layer's hook `name` replaced by a constant."""
    hooks = [(f"blocks.{l}.attn.{name}", lambda t, hook: torch.full_like(t, value)) for l in range(len(model.blocks))]
    with torch.no_grad():
        return model.run_with_hooks(small_batch(d=D_SMALL).tokens, fwd_hooks=hooks)


def _as_causal(model):
    """The causal model with the same W_Q, W_K, W_V, W_O (the gate / decay weights dropped)."""
    out = build(dataclasses.replace(model.cfg, attention="causal"), init=False)
    out.load_state_dict({k: v for k, v in model.state_dict().items() if k in out.state_dict()})
    return out.eval()


@pytest.mark.parametrize("attention, hook", [("retnet", "hook_decay"), ("gated", "hook_gate"), ("gla", "hook_gate")])
def test_a_decay_or_gate_of_one_is_causal_linear_attention(attention, hook):
    model = variant(attention=attention)
    causal = _as_causal(model)
    with torch.no_grad():
        want = causal(small_batch(d=D_SMALL).tokens)
        assert rel_err(model(small_batch(d=D_SMALL).tokens), want) > 1e-3  # the learned decay / gate matters
    assert rel_err(_with(model, hook, 1.0), want) <= 1e-13


def test_beta_zero_is_the_identity_layer():
    model = variant(attention="delta")
    tokens = small_batch(d=D_SMALL).tokens
    hooks = [(f"blocks.{l}.attn.hook_beta", lambda t, hook: torch.zeros_like(t)) for l in range(2)]
    with torch.no_grad():
        assert torch.equal(
            model.run_with_hooks(tokens, fwd_hooks=hooks), torch.zeros(tokens.shape[0], dtype=torch.float64)
        )
        assert model(tokens).abs().max() > 1e-2


def test_causal_query_reads_every_context_token():
    """The last context token and the query read the same S_n: with the query's own q equal to the last token's,
    their updates agree; context token 0 reads v_0 k_0ᵀ only."""
    model = variant(attention="causal", layers=1)
    tokens = small_batch(d=D_SMALL).tokens.clone()
    tokens[:, -1] = tokens[:, -2]  # the query carries the last context token (its own key stays masked)
    _, cache = model.run_with_cache(tokens)
    z = cache["blocks.0.attn.hook_z"]
    torch.testing.assert_close(z[:, -1], z[:, -2], rtol=1e-12, atol=1e-14)
    q, k, v = (cache[f"blocks.0.attn.hook_{h}"] for h in "qkv")
    torch.testing.assert_close(z[:, 0], v[:, 0] * (k[:, 0] * q[:, 0]).sum(-1, keepdim=True), rtol=1e-12, atol=1e-14)


def test_qkv_merged_is_full_exactly():
    """P_k = W_O W_V and Q_k = W_Kᵀ W_Q give interp.LinearTransformer.from_matrices' FULL model the same predictions."""
    model = variant(attention="qkv", layers=3)
    P = torch.stack([torch.stack([b.attn.W_O[k] @ b.attn.W_V[k] for k in range(2)]) for b in model.blocks]).detach()
    Q = torch.stack([torch.stack([b.attn.W_K[k].T @ b.attn.W_Q[k] for k in range(2)]) for b in model.blocks]).detach()
    full, tokens = LinearTransformer.from_matrices(P, Q), small_batch(d=D_SMALL).tokens
    with torch.no_grad():
        assert rel_err(model.residual_stream(tokens), full.residual_stream(tokens)) <= 1e-13
        assert rel_err(model(tokens), full(tokens)) <= 1e-12


def test_delta_rule_with_k_x_and_v_y_is_lms():
    """One DeltaNet head with k_j = 0.4 x_j, v_j = y_j: its state after the context is n LMS steps on (k_j, y_j),
    w_j = w_{j−1} + β_j (y_j − ⟨w_{j−1}, k_j⟩) k_j from 0, and with q = x_t the query reads ŷ = ⟨w_n, x_t⟩."""
    d = D_SMALL
    model = build(ModelConfig(d=d, n_layers=1, attention="delta", head_width=d, dtype="float64"), init=False)
    a = model.blocks[0].attn
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a.W_K[0, :, :d] = torch.eye(d, dtype=torch.float64) * 0.4  # k = 0.4 x: β |k|² < 2 keeps the steps stable
        a.W_V[0, 0, d] = 1.0  # v = (y, 0, ...)
        a.W_Q[0, :, :d] = torch.eye(d)
        a.W_O[0, d, 0] = -1.0  # y ← y − o[0]
        a.w_beta[0, 0] = 0.7  # β_j depends on the token
    batch = small_batch(d=d)
    _, cache = model.run_with_cache(batch.tokens)
    x, y = batch.tokens[:, :-1, :d], batch.tokens[:, :-1, d]
    beta = torch.sigmoid(0.7 * x[..., 0])
    w = torch.zeros(x.shape[0], d, dtype=torch.float64)
    for j in range(x.shape[1]):
        k = 0.4 * x[:, j]
        w = w + beta[:, j, None] * (y[:, j] - (w * k).sum(-1))[:, None] * k  # LMS on (k_j, y_j)
    torch.testing.assert_close(cache["blocks.0.attn.hook_state"][:, 0, 0], w, rtol=1e-12, atol=1e-14)
    pred = (w * batch.tokens[:, -1, :d]).sum(-1)  # q = x_t: ŷ = o[0] = ⟨w_n, x_t⟩
    torch.testing.assert_close(model(batch.tokens), pred, rtol=1e-12, atol=1e-14)


def test_softmax_and_normalised_kernel_patterns_are_distributions_over_the_context():
    for attention in ("softmax", "kernel_norm"):
        _, cache = variant(attention=attention).run_with_cache(small_batch(d=D_SMALL).tokens)
        pattern = cache["blocks.1.attn.hook_pattern"]
        torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern.sum(-1)), rtol=0, atol=1e-12)
        assert bool((pattern[..., -1] == 0).all()) and bool((pattern[..., :-1] > 0).all())


def test_softmax_temperature_is_one_over_root_h():
    model = variant(attention="softmax", layers=1, heads=1)
    _, cache = model.run_with_cache(small_batch(d=D_SMALL).tokens)
    q, k = cache["blocks.0.attn.hook_q"][:, :, 0], cache["blocks.0.attn.hook_k"][:, :-1, 0]
    want = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(3), dim=-1)
    torch.testing.assert_close(cache["blocks.0.attn.hook_pattern"][:, 0, :, :-1], want, rtol=1e-12, atol=1e-14)


HOOKS = {
    "qkv": ["hook_state"],
    "causal": ["hook_state", "hook_pattern"],
    "retnet": ["hook_state", "hook_pattern", "hook_decay"],
    "gated": ["hook_state", "hook_pattern", "hook_gate"],
    "gla": ["hook_state", "hook_pattern", "hook_gate"],
    "delta": ["hook_state", "hook_pattern", "hook_beta", "hook_u"],
    "softmax": ["hook_pattern"],
    "kernel": ["hook_pattern"],
    "kernel_norm": ["hook_pattern"],
}


@pytest.mark.parametrize("attention", FAMILY)
def test_every_new_tensor_has_a_hook_in_the_cache(attention):
    model, tokens = variant(attention=attention, mlp="quadratic"), small_batch(d=D_SMALL).tokens
    y, cache = model.run_with_cache(tokens)
    attn = ["hook_q", "hook_k", "hook_v", "hook_z", "hook_result"] + HOOKS[attention]
    block = ["hook_resid_pre", "hook_attn_out", "hook_resid_mid", "mlp.hook_pre", "mlp.hook_pre_b", "mlp.hook_post"]
    want = {f"blocks.{l}.attn.{h}" for l in range(2) for h in attn} | {
        f"blocks.{l}.{h}" for l in range(2) for h in block
    }
    assert want <= set(cache.keys())
    torch.testing.assert_close(y, -cache["blocks.1.hook_resid_post"][:, -1, -1])
    pre, pre_b, post = (cache[f"blocks.0.mlp.hook_{h}"] for h in ("pre", "pre_b", "post"))
    torch.testing.assert_close(post, pre * pre_b, rtol=0, atol=0)  # (W_a e) ⊙ (W_b e)


@pytest.mark.parametrize("attention", ["gated", "delta"])
def test_a_state_edit_reaches_the_query_only(attention):
    """hook_state is the S_n the query reads: zeroing it zeroes the query's o and leaves the context's."""
    model, tokens = variant(attention=attention, layers=1), small_batch(d=D_SMALL).tokens
    _, base = model.run_with_cache(tokens)
    hooks = [("blocks.0.attn.hook_state", lambda t, hook: torch.zeros_like(t))]
    with model.hooks(fwd_hooks=hooks):
        _, cache = model.run_with_cache(tokens)
    assert bool((cache["blocks.0.attn.hook_z"][:, -1] == 0).all())
    torch.testing.assert_close(cache["blocks.0.attn.hook_z"][:, :-1], base["blocks.0.attn.hook_z"][:, :-1])


def test_the_papers_configs_write_no_family_keys():
    cfg = ModelConfig(d=3, n_layers=2)
    assert cfg.to_dict() == dict(d=3, n_layers=2, n_heads=1, param="full", dtype="float32", init_scale=2e-3)
    assert type(build(cfg)) is LinearTransformer and cfg.is_lsa
    fam = ModelConfig(d=3, attention="retnet", mlp="quadratic")
    assert ModelConfig.from_dict(fam.to_dict()) == fam and fam.to_dict()["attention"] == "retnet"
    assert type(build(fam)) is VariantTransformer and fam.family_label == "retnet+quadratic FFN"
    assert fam.n_params == sum(p.numel() for p in build(fam).parameters())


@pytest.mark.parametrize(
    "fields, name",
    [
        (dict(attention="flash"), "attention"),
        (dict(mlp="gelu"), "mlp"),
        (dict(mlp_width=0), "mlp_width"),
        (dict(feature_map="exp"), "feature_map"),
        (dict(attention="softmax", param="diag"), "param"),
        (dict(head_width=3), "head_width"),
        (dict(attention="qkv", head_width=0), "head_width"),
        (dict(qk_scale=-1.0), "qk_scale"),
    ],
)
def test_bad_configs_name_the_field(fields, name):
    with pytest.raises(interp.InvalidArgument, match=name) as err:
        ModelConfig(**fields)
    assert "\n" not in str(err.value)


def test_bad_inputs_raise_one_line_errors():
    with pytest.raises(interp.InvalidArgument, match="tokens"):
        variant(attention="gla")(torch.zeros(2, 5, 7, dtype=torch.float64))
    with pytest.raises(interp.InvalidType, match="tokens"):
        variant(attention="gla")(torch.zeros(2, 5, 5, dtype=torch.int64))
    with pytest.raises(interp.InvalidArgument, match="LinearTransformer"):
        VariantTransformer(ModelConfig(d=3))
    with pytest.raises(interp.InvalidType, match="ModelConfig"):
        build({"d": 3})
    with pytest.raises(interp.InvalidArgument, match="start_as"):
        TrainConfig(model=ModelConfig(attention="delta"), start_as="gdpp")


# ---------------------------------------------------------------------------- the former second trainer's files
LEGACY = sorted((ROOT / "experiments" / "zoo" / "variants").glob("*.safetensors"))


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: p.stem)
def test_legacy_variant_files_load_as_the_same_function(path):
    """Each file the former train_variant wrote loads through interp.load, and computes what its stored weights did:
    linear attention e + Σ P S Q e (+ FFN), softmax e + P Σ_j softmax_j(e_jᵀ Q e_i) e_j, kernel
    e + P Σ_j e_j φ(K e_j)ᵀ φ(Q e_i) (the former formulas, written out here on the raw tensors)."""
    tensors, meta = read_tensors(path)
    old = meta["variant_config"]
    model = load(path)
    tokens = small_batch(d=old["d"], n=20, batch=8).tokens.float()
    e = tokens
    phi = lambda z: torch.nn.functional.elu(z) + 1  # noqa: E731
    mask = torch.arange(e.shape[1]) == e.shape[1] - 1
    for l in range(old["n_layers"]):
        t = lambda name: tensors[f"blocks.{l}.{name}"]  # noqa: E731, B023
        if old["attention"] == "linear":
            S = e[:, :-1].transpose(1, 2) @ e[:, :-1]
            e = e + e @ (t("attn.P")[0] @ S @ t("attn.Q")[0]).transpose(1, 2)
        else:
            Q, P = t("attn.Q")[0], t("attn.P")[0]
            if old["attention"] == "softmax":
                pattern = torch.softmax((e @ Q.T @ e.transpose(1, 2)).masked_fill(mask, -math.inf), dim=-1)
            else:
                pattern = (phi(e @ Q.T) @ phi(e @ t("attn.K")[0].T).transpose(1, 2)).masked_fill(mask, 0.0)
            e = e + pattern @ e @ P.T
        if old["mlp"] != "none":
            pre = e @ t("mlp.W_in").T
            e = e + (pre.clamp_min(0) if old["mlp"] == "relu" else pre) @ t("mlp.W_out").T
    with torch.no_grad():
        assert rel_err(model(tokens), -e[:, -1, -1]) <= 1e-4  # float32 files; softmax's √D·Q rounds once


# ---------------------------------------------------------------------------- the one trainer
def tiny(attention="gla", mlp="quadratic", **over) -> TrainConfig:
    model = ModelConfig(d=3, n_layers=2, attention=attention, mlp=mlp, mlp_width=4, head_width=3)
    return TrainConfig(model=model, noise="uniform:1", n=6, batch=64, steps=over.pop("steps", 30), resume_every=10,
                       n_checkpoints=5, seed=2, **over)  # fmt: skip


@pytest.mark.parametrize("attention, mlp", [("retnet", "quadratic"), ("delta", "quadratic"), ("softmax", "quadratic"),
                                           ("qkv", "none")])  # fmt: skip
def test_a_family_run_trains_and_loads_like_any_model(tmp_path, attention, mlp):
    """qkv without an FFN trains on FULL's fused kernel pass where the kernel trains (its run records the path)."""
    from interp import moments

    cfg = tiny(attention, mlp, steps=200, lr=3e-2, log_every=20)
    result = train(cfg, tmp_path / "run", progress=False)
    rows = Run(tmp_path / "run").read_metrics()
    assert rows[-1]["loss"] < 0.7 * rows[0]["loss"], (rows[0], rows[-1])  # measured 0.33-0.64
    model = load(tmp_path / "run")
    assert type(model) is VariantTransformer and model.cfg == cfg.model
    assert Run(tmp_path / "run").config().model == cfg.model
    batch = small_batch(d=3, n=6)
    with torch.no_grad():
        assert torch.equal(model(batch.tokens.float()), result.model(batch.tokens.float()))
    assert interp.adjusted_loss(model, interp.EvalSet("uniform:1", d=3, n=6, n_seq=256)).mean < 2.0
    on_kernel = cfg.model.merges_to_full and moments.kernel_choice().train
    segment = Run(tmp_path / "run").trained_on()[-1]
    assert segment["path"].startswith("kernel") == on_kernel
    assert segment.get("stream_width") == (None if on_kernel else variants.stream_width(4))  # the hook-free path's


class _Killed(Exception):
    pass


def test_a_killed_family_run_resumes_bit_for_bit(tmp_path, monkeypatch):
    cfg = tiny()
    train(cfg, tmp_path / "whole", progress=False)
    real, calls = train_mod._loss, {"n": 0}

    def dying(*args):
        calls["n"] += 1
        if calls["n"] == 24:  # after the resume state of step 20, before step 24's update
            raise _Killed
        return real(*args)

    monkeypatch.setattr(train_mod, "_loss", dying)
    with pytest.raises(_Killed):
        train(cfg, tmp_path / "killed", progress=False)
    monkeypatch.setattr(train_mod, "_loss", real)
    assert read_tensors(tmp_path / "killed" / Run.RESUME_FILE)[1]["step"] == 20
    train(cfg, tmp_path / "killed", resume=True, progress=False)
    a, b = load(tmp_path / "whole").state_dict(), load(tmp_path / "killed").state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.endswith("attn.W_gate") for k in a)  # the gate was trained and resumed too


@pytest.mark.parametrize("attention", ["gla", "gated"])
def test_a_strong_decay_takes_the_exact_unfactored_forms(attention):
    """Past GLA_FACTOR_LIMIT of total log decay, gla (and gated on the hook-free path) leave the factored pattern: the
    scan (no hook), the unfactored weights (gated's hook-free path) and the decay tensor (hook_pattern cached) all
    equal the loop."""
    model, tokens = variant(attention=attention), small_batch(d=D_SMALL).tokens
    with torch.no_grad():
        for block in model.blocks:
            block.attn.b_gate.fill_(-10.0)  # α ≈ 5e-5: Σ log α ≈ −80 over 8 tokens
        slow = reference_stream(model, tokens)
        assert rel_err(model.residual_stream(tokens), slow) <= 1e-12  # the scan
        assert not model.blocks[0].attn._factors(model.blocks[0].attn._log_decay(tokens[:, :-1]))
        for width in WIDTHS:  # gla's scan at the stream's own width, then padded
            fast = model._forward_fast(tokens, width)
            torch.testing.assert_close(fast, -slow[-1, :, -1, -1], rtol=1e-12, atol=1e-14)
    _, cache = model.run_with_cache(tokens)  # the decay tensor
    assert rel_err(cache["blocks.1.hook_resid_post"], slow[-1]) <= 1e-12
    assert float(cache["blocks.0.attn.hook_pattern"].abs().max()) > 0


@pytest.mark.parametrize("attention", ["gla", "gated"])
def test_a_few_contexts_past_the_factor_limit_stay_on_the_hook_free_path(attention, monkeypatch):
    """A batch in which a few contexts' decay is too strong to factor (in training: a rare sequence that blew up) keeps
    the hook-free path (gla: those contexts take their decay tensor, the rest the factored form; gated: its unfactored
    weights). It equals the loop, its gradients equal the hooked forward's, and no hooked forward runs (the whole
    batch once went through it, and gla-7 trained at half speed). In layer 2 some gates underflow to 0: the decay
    tensors are running products and the log decays come from the logits, so both forwards stay finite and exact (the
    hooked one with hook_pattern cached too)."""
    model, tokens = variant(attention=attention), small_batch(d=D_SMALL).tokens.clone()
    tokens[:3] *= 30.0  # gate logits of ±20 in three contexts: Σ log α far below −GLA_FACTOR_LIMIT
    attn = model.blocks[0].attn
    strong = ~attn._factors_each(attn._log_decay(tokens[:, :-1]))  # [batch · head]
    assert 0 < int(strong.sum()) < strong.numel() and not attn._factors(attn._log_decay(tokens[:, :-1]))
    reference = reference_stream(model, tokens)
    slow = -reference[-1, :, -1, -1]
    _, cache = model.run_with_cache(tokens)  # the decay tensor (gla) and the weights (gated), hooked
    assert int((cache["blocks.1.attn.hook_gate"] == 0).sum()) > 0  # gates that underflowed to 0
    assert rel_err(cache["blocks.1.hook_resid_post"], reference[-1]) <= 1e-12
    scale = 1.0 / slow.abs().clamp_min(1.0)  # every sequence's ŷ of order 1 in the loss below

    def grads(y_hat: torch.Tensor) -> list[torch.Tensor]:
        return torch.autograd.grad((y_hat * scale).square().sum(), list(model.parameters()))

    hooked = grads(model.residual_stream(tokens)[-1, :, -1, -1].neg())
    for block in model.blocks:
        monkeypatch.setattr(block.attn, "forward", lambda *a, **k: pytest.fail("the hook-free path ran the hooked one"))
    for width in WIDTHS:
        fast = model._forward_fast(tokens, width)
        torch.testing.assert_close(fast, slow, rtol=1e-11, atol=1e-12)
        for g_fast, g_hooked in zip(grads(fast), hooked):
            torch.testing.assert_close(g_fast, g_hooked, rtol=1e-9, atol=1e-11)


def test_qkv_trains_on_fulls_fused_pass():
    """qkv is FULL in other weights: the trainer takes the kernel's fused pass for it (through the merged P = W_O W_V,
    Q = W_Kᵀ W_Q), with the loss terms and gradients of its forward and autograd; a hook, or any other attention,
    keeps autograd."""
    from interp import moments
    from interp.tasks import draw_tasks
    from interp.train import autograd_half_squared_errors, kernel_takes

    model = variant(attention="qkv", layers=3)
    draw = draw_tasks(64, D_SMALL, 8, "uniform:1", torch.Generator().manual_seed(1), dtype=torch.float64)
    if not moments.kernel_choice().train:
        pytest.skip(f"the kernel does not train here: {moments.kernel_choice().why}")
    assert moments.fused_supported(model, draw.x) and kernel_takes(TrainConfig(model=model.cfg))
    fused, _ = moments.half_squared_errors(model, draw)
    plain, _ = autograd_half_squared_errors(model, draw.batch(), None, None)
    grads = [torch.autograd.grad(t.sum(), list(model.parameters())) for t in (fused, plain)]
    assert rel_err(fused.detach(), plain.detach()) <= 1e-12
    assert all(rel_err(a, b) <= 1e-12 for a, b in zip(*grads))
    with model.hooks(fwd_hooks=[("hook_embed", lambda t, hook: t)]):
        assert not moments.fused_supported(model, draw.x)
    causal = variant(attention="causal")
    assert not moments.fused_supported(causal, draw.x) and not kernel_takes(TrainConfig(model=causal.cfg))
    with pytest.raises(interp.InvalidArgument, match="causal attention is no FULL layer"):
        causal.blocks[0].attn.matrices()
