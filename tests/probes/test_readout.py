"""interp.probes.readout: the Jacobian readout against Theorem 4.1, token weights against a known decay, Theorem 4.2's
cosine on linear and quadratic models, LMS / RLS against the delta rule and ridge. float64, tiny sizes."""

from __future__ import annotations

import math

import pytest
import torch

import interp
from interp.config import ModelConfig
from interp.probes.implicit import implicit_model
from interp.probes.readout import (
    Readout,
    TokenWeights,
    delta_vs_online,
    ffn_fit,
    gate_values,
    implied_ridge,
    jacobian_readout,
    rls,
    theorem42_cosine,
    token_weights,
)
from interp.variants import build
from tests.helpers import gd_construction, random_diag, random_full, small_batch


@pytest.mark.parametrize("make", [random_full, random_diag, lambda: random_diag(param="gdpp")])
def test_the_jacobian_is_theorem_41s_w_on_full_and_diag(make):
    model, tokens = make(), small_batch(d=4).tokens
    got, want = jacobian_readout(model, tokens), implicit_model(model, tokens)
    torch.testing.assert_close(got.w, want.w, rtol=1e-10, atol=1e-12)
    assert float(got.gap.max()) <= 1e-12 * (1 + float(got.pred.abs().max()))
    assert float(want.w[-1].abs().max()) > 1e-2  # not trivially zero


def test_implied_ridge_reads_sigma_squared_off_the_bayes_ridge():
    """A readout whose w is the posterior mean (Σ + σ²I)⁻¹α of each sequence: its implied λ is σ² exactly, per group
    and per sequence (rank correlation 1 with σ)."""
    batch = small_batch(batch=64, noise="categorical:0.5,1,2")
    x, y = batch.x, batch.y
    sigma2 = batch.sigma.double() ** 2
    w = torch.linalg.solve(x.mT @ x + sigma2[:, None, None] * torch.eye(4, dtype=torch.float64), (x.mT @ y[..., None]))
    w = w[..., 0]
    readout = Readout(torch.stack([torch.zeros_like(w), w]), torch.zeros(2, 64), torch.zeros(2, 64))
    got = implied_ridge(readout, batch.tokens, batch.sigma, sigma_bins=3)
    torch.testing.assert_close(got.sigma, torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(got.median_by_sigma[1], got.oracle_by_sigma, rtol=1e-6, atol=0)
    assert float(got.median_relerr[1]) < 1e-6
    assert float(got.spearman_sigma[1]) > 0.85  # ties: three σ's among 64 sequences, λ equal within each
    assert math.isinf(float(got.median[0]))  # w⁰ = 0 is nobody's ridge solution


def near_gd(param: str, scale: float = 0.01, seed: int = 0):
    """One GD step per layer (q_x = 1, p_y = −0.05, von Oswald et al. 2023) plus O(scale) random weights in every
    entry: w^l stays near a ridge solution, so its implied λ is a well-determined minimum (on random weights w^l is
    nobody's ridge solution, the distance to the ridge path is flat in λ, and rounding in w moves its argmin)."""
    g = torch.Generator().manual_seed(seed)
    model = gd_construction(4, 3, 0.05) if param == "full" else random_diag(param=param, scale=0.0)
    with torch.no_grad():
        if param != "full":
            for block in model.blocks:
                block.attn.q_x.fill_(1.0), block.attn.p_y.fill_(-0.05)
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.mark.parametrize("param", ["full", "diag"])
def test_implied_ridge_of_the_jacobian_is_the_probes_of_theorem_41s_w(param):
    """Two routes to the same λ: the Jacobian readout on the raw tokens, and Theorem 4.1's w^l on the context its
    recursion reads (interp.probes.implicit, as `interp probe` computes it)."""
    model, batch = near_gd(param), small_batch(batch=32, d=4)
    got = implied_ridge(jacobian_readout(model, batch.tokens), batch.tokens, batch.sigma)
    imp = implicit_model(model, batch.tokens)
    lam, relerr = imp.context().implied_lambda(imp.w)
    assert float(relerr[1:].nanmedian()) < 0.3  # near the ridge path: λ is a sharp minimum
    torch.testing.assert_close(got.median[1:], lam[1:].nanmedian(-1).values, rtol=1e-6, atol=0)
    assert 1.0 < float(got.median[1:].min()) and float(got.median[1:].max()) < 100.0  # inside [1e-6, 1e6], not on it


def test_ffn_fit_sees_a_linear_map_in_paired_relu_units_and_not_in_random_ones():
    """A linear FFN, and a ReLU FFN whose units pair up (W_in = [A; −A], W_out = [B, −B]: ReLU(z) − ReLU(−z) = z), are
    the map e ↦ B A e on every token: residual at rounding, the map and its y → y entry recovered; random ReLU units
    are not; a model without an FFN is refused."""
    tokens = small_batch(batch=64, d=4).tokens
    g = torch.Generator().manual_seed(3)
    A, B = (
        0.4 * torch.randn(3, 5, generator=g, dtype=torch.float64),
        0.4 * torch.randn(5, 3, generator=g, dtype=torch.float64),
    )
    for mlp in ("linear", "relu"):
        model = _random("lsa", mlp)
        with torch.no_grad():
            for block in model.blocks:
                m = block.mlp.W_in.shape[0]
                block.mlp.W_in.zero_(), block.mlp.W_out.zero_()
                block.mlp.W_in[:3], block.mlp.W_out[:, :3] = A, B
                if mlp == "relu":
                    block.mlp.W_in[3:6], block.mlp.W_out[:, 3:6] = -A, -B
                assert m >= 6
        fit = ffn_fit(model, tokens)
        assert float(fit.query_residual.max()) < 1e-10 and float(fit.context_residual.max()) < 1e-10, mlp
        torch.testing.assert_close(fit.query_map, (B @ A).T.expand(2, 5, 5), rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(fit.query_scale, (B @ A)[-1, -1].expand(2), rtol=1e-8, atol=1e-10)
    fit = ffn_fit(_random("lsa", "relu", scale=1.0), tokens)
    assert float(fit.query_residual.min()) > 0.05 and float(fit.query_norm.min()) > 0.05
    with pytest.raises(interp.InvalidArgument, match="with an FFN"):
        ffn_fit(_random("retnet"), tokens)


def _random(attention, mlp="none", scale=0.3):
    width = None if attention == "lsa" else 3
    model = build(
        ModelConfig(d=4, n_layers=2, n_heads=2, attention=attention, mlp=mlp, head_width=width, dtype="float64")
    )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model


@pytest.mark.parametrize("attention", ["qkv", "causal", "retnet", "gated", "gla", "delta"])
def test_the_linear_family_is_linear_in_the_query(attention):
    r = jacobian_readout(_random(attention), small_batch(d=4).tokens)
    assert float(r.gap.max()) <= 1e-12 * float(r.pred.abs().max()) and float(r.w[-1].abs().max()) > 1e-3


@pytest.mark.parametrize("attention, mlp", [("softmax", "none"), ("kernel_norm", "none"), ("causal", "quadratic")])
def test_softmax_normalisers_and_quadratic_ffns_are_not(attention, mlp):
    r = jacobian_readout(_random(attention, mlp, scale=0.5), small_batch(d=4).tokens)
    assert float(r.gap[-1].median()) > 1e-4


def _retnet_regressor(d: int, gamma: float):
    """One RetNet head with k = q = x, v = y, W_O writing −o into y, decay γ: ŷ = Σ_j γ^{n−j} y_j ⟨x_j, x_t⟩."""
    model = build(ModelConfig(d=d, n_layers=1, attention="retnet", head_width=d + 1, dtype="float64"), init=False)
    a = model.blocks[0].attn
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a.W_K[0, :d, :d] = torch.eye(d, dtype=torch.float64)
        a.W_Q[0, :d, :d] = torch.eye(d, dtype=torch.float64)
        a.W_V[0, 0, d] = 1.0
        a.W_O[0, d, 0] = -0.1
        a.decay_logit.fill_(math.log(gamma / (1 - gamma)))
    return model


def test_token_weights_recover_a_known_decay():
    """w = 0.1 Σ_j γ^{n−j} y_j x_j: Γ = c I and ω_j ∝ γ^{n−j} (mean 1), with residual at rounding."""
    d, n, gamma = 3, 8, 0.8
    batch = small_batch(d=d, n=n)
    tw = token_weights(_retnet_regressor(d, gamma), batch.tokens, batch.sigma)
    want = gamma ** torch.arange(n - 1, -1, -1, dtype=torch.float64)
    want = want / want.mean()
    torch.testing.assert_close(tw.by_position[0], want, rtol=1e-8, atol=1e-10)
    assert float(tw.residual[0]) < 1e-10
    torch.testing.assert_close(tw.gamma[0], tw.gamma[0][0, 0] * torch.eye(d, dtype=torch.float64), atol=1e-9, rtol=0)
    centres, by_sigma = tw.by_sigma(bins=2)
    torch.testing.assert_close(by_sigma[0], torch.ones(2, dtype=torch.float64), rtol=1e-8, atol=1e-8)  # σ-blind
    assert centres.shape == (2,)
    cat = TokenWeights(
        tw.gamma, tw.omega, tw.residual, tw.by_position, torch.tensor([1.0, 3.0]).repeat(8)[: len(tw.sigma)]
    )
    values, means = cat.by_sigma(bins=4)  # two σ's (a categorical prior): one group each, no empty bin
    assert values.tolist() == [1.0, 3.0] and not means.isnan().any()
    torch.testing.assert_close(means[0, 0], cat.omega[0][cat.sigma == 1.0].mean(), rtol=1e-12, atol=0)


def test_theorem_42_linear_layers_miss_x1_squared_and_a_quadratic_ffn_writes_it():
    d, n = 3, 400
    tokens = interp.sample_tasks(32, d, n, "fixed:0", torch.Generator().manual_seed(0), dtype=torch.float64).tokens
    linear = random_full(d=d, n_layers=2, scale=0.05)
    cos = theorem42_cosine(linear, tokens)
    assert float(cos[-1].median()) <= 0.1  # Theorem 4.2 (n ≫ d)
    quad = build(ModelConfig(d=d, n_layers=1, mlp="quadratic", mlp_width=1, dtype="float64"), init=False)
    with torch.no_grad():
        for p in quad.parameters():
            p.zero_()
        m = quad.blocks[0].mlp
        m.W_in[0, 0] = m.W_b[0, 0] = 1.0  # (x(1)) ⊙ (x(1))
        m.W_out[d, 0] = 100.0  # into y
    assert float(theorem42_cosine(quad, tokens)[-1].min()) > 0.99


def test_the_delta_rule_with_k_x_is_lms_and_rls_ends_at_ridge():
    d, n, eta = 3, 8, 0.05
    model = build(ModelConfig(d=d, n_layers=1, attention="delta", head_width=d, dtype="float64"), init=False)
    a = model.blocks[0].attn
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a.W_K[0, :, :d] = a.W_Q[0, :, :d] = torch.eye(d, dtype=torch.float64)
        a.W_V[0, 0, d] = 1.0
        a.W_O[0, d, 0] = -1.0
        a.b_beta.fill_(math.log(eta / (1 - eta)))  # β = η for every token
    batch = small_batch(d=d, n=n)
    out = delta_vs_online(jacobian_readout(model, batch.tokens), batch.tokens, etas=[0.01, eta, 0.2], lams=[1.0])
    assert out["eta"] == [eta] and out["lms_error"][0] < 1e-12
    x, y, lam = batch.tokens[:, :-1, :-1], batch.tokens[:, :-1, -1], 0.7
    ridge = torch.linalg.solve(x.mT @ x + lam * torch.eye(d, dtype=torch.float64), (x.mT @ y[..., None]))[..., 0]
    torch.testing.assert_close(rls(batch.tokens, lam), ridge, rtol=1e-10, atol=1e-12)


def test_gate_values_of_fixed_gates_are_their_closed_forms():
    """A gate whose weights are 0 is sigmoid(b) at every token: its mean, every σ group's mean and head's mean are
    sigmoid(b), and the first context token's weight in S_n is sigmoid(b)^(n−1); retnet's γ the same way."""
    d, n, gamma = 3, 8, 0.8
    batch = small_batch(d=d, n=n)
    gated = build(ModelConfig(d=d, n_layers=2, n_heads=2, attention="gated", head_width=3, dtype="float64"))
    with torch.no_grad():
        for l, block in enumerate(gated.blocks):
            block.attn.w_gate.zero_()
            block.attn.b_gate.fill_(math.log(gamma / (1 - gamma)) + l)  # a = sigmoid(logit(γ) + l)
    for attention, model in (("gated", gated), ("retnet", _retnet_regressor(d, gamma))):
        g = gate_values(model, batch.tokens, batch.sigma, bins=2)
        want = [gamma] if attention == "retnet" else [gamma, 1 / (1 + (1 - gamma) / gamma * math.exp(-1))]
        assert g["gate"] == {"gated": "a", "retnet": "gamma"}[attention] and len(g["sigma"]) == 2
        for l, a in enumerate(want):
            assert g["mean"][l] == pytest.approx(a, rel=1e-12)
            assert g["by_sigma"][l] == pytest.approx([a, a], rel=1e-12)
            assert g["by_head"][l] == pytest.approx([a] * len(g["by_head"][l]), rel=1e-12)
            assert g["first_token_weight"][l] == pytest.approx(a ** (n - 1), rel=1e-12)


@pytest.mark.parametrize("attention", ["gla", "delta"])
def test_gate_values_are_the_gates_written_from_each_layers_input(attention):
    """Random weights, a categorical prior (two σ groups): every number against gates computed from each layer's
    input stream (hook_resid_pre) by the gate's own formula, sigmoid(W e_j + b), and grouped by hand."""
    model = _random(attention, scale=0.5)
    batch = small_batch(d=4, n=8, noise="categorical:1,3", batch=32)
    g = gate_values(model, batch.tokens, batch.sigma)
    _, cache = model.run_with_cache(batch.tokens)
    assert g["sigma"] == [1.0, 3.0] and ("first_token_weight" in g) == (attention == "gla")
    for l, block in enumerate(model.blocks):
        ctx = cache[f"blocks.{l}.hook_resid_pre"][:, :-1]  # [batch, n, D]
        a = block.attn
        with torch.no_grad():
            if attention == "gla":  # α [batch, head, n, h]
                gates = torch.sigmoid(torch.einsum("hcD,bjD->bhjc", a.W_gate, ctx) + a.b_gate[None, :, None, :])
            else:  # β [batch, head, n, 1]
                gates = torch.sigmoid(torch.einsum("hD,bjD->bhj", a.w_beta, ctx) + a.b_beta[None, :, None])[..., None]
        assert g["mean"][l] == pytest.approx(float(gates.mean()), rel=1e-12)
        assert g["by_head"][l] == pytest.approx(gates.mean((0, 2, 3)).tolist(), rel=1e-12)
        per_seq = gates.mean((1, 2, 3))
        want = [float(per_seq[batch.sigma == s].mean()) for s in (1.0, 3.0)]
        assert g["by_sigma"][l] == pytest.approx(want, rel=1e-12) and abs(want[0] - want[1]) > 1e-4
        if attention == "gla":
            weight = gates[:, :, 1:].prod(2)  # ∏_{m=2..n} α_m per sequence, head, channel
            assert g["first_token_weight"][l] == pytest.approx(float(weight.median()), rel=1e-12)
    with pytest.raises(interp.InvalidArgument, match="gate_values"):
        gate_values(_random("causal"), batch.tokens, batch.sigma)
