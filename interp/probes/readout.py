"""One readout for every model: w^l = ∂ŷ^l/∂x_t, the Jacobian of the prediction after l layers with respect to the
query's input, and what it says about the linear-attention family (interp.variants).

With the query masked as a key and no gate or normaliser of the query's own, ŷ^l is linear in x_t for a fixed
context, so w^l is exact and ŷ^l = ⟨w^l, x_t⟩; on FULL and DIAG it is Theorem 4.1's w^l (Vladymyrov et al. 2024;
tests/probes/test_readout.py holds it to interp.probes.implicit). Softmax, the kernels' normaliser, a ReLU or quadratic
FFN make ŷ^l nonlinear in x_t: there w^l is a local readout and `gap` = |ŷ^l − ⟨w^l, x_t⟩| says how far it holds
(interp.probes.linearity measures the whole token map). A bias-free ReLU FFN is the exception the gap cannot see: ŷ^l
is then positively homogeneous in x_t, so ŷ^l = ⟨w^l, x_t⟩ by Euler's theorem although it is not linear.

Token weights ("Gating is Weighting", Li, Tarzanagh, Rawat, Fazel, Oymak 2025, arXiv 2504.04308): one layer of gated
linear attention computes weighted preconditioned GD, w = Γ Σ_j ω_j y_j x_j. `token_weights` fits each layer to that
form through the label influences J_j = ∂w^l/∂y_j (= ω_j Γ x_j under the form, exactly where the gates do not read
y_j): Γ shared by all contexts, ω_j per context and position, by alternating least squares, normalised to mean 1.
`delta_vs_online` sets DeltaNet's w^l beside LMS and recursive-least-squares passes over the same context.

Everything is float64, with the layer (l = 0..L) first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.files import InvalidArgument, InvalidType
from interp.probes.linearity import layer_linearity
from interp.probes.summary import ImpliedLambda
from interp.spectral import SpectralContext
from interp.tasks import sigma_groups
from interp.variants import DECAYS, as_float64


def _tokens(tokens) -> Tensor:
    if not isinstance(tokens, Tensor) or not tokens.is_floating_point() or tokens.ndim != 3:
        raise InvalidType("tokens must be a floating-point torch.Tensor [batch, n+1, d+1]")
    return tokens.detach().double()


def _sigma(sigma, batch: int) -> Tensor:
    """Each sequence's noise std as float64 [batch] (InvalidArgument unless there is one per sequence)."""
    sigma = torch.as_tensor(sigma, dtype=torch.float64).reshape(-1)
    if sigma.shape[0] != batch:
        raise InvalidArgument(f"sigma must give one noise std per sequence ({batch}), got {sigma.shape[0]}")
    return sigma


@dataclass
class Readout:
    """Per layer l = 0..L and sequence: w^l = ∂ŷ^l/∂x_t, ŷ^l, and gap = |ŷ^l − ⟨w^l, x_t⟩| (0 where ŷ^l is linear in
    x_t)."""

    w: Float[Tensor, "L1 batch d"]
    pred: Float[Tensor, "L1 batch"]
    gap: Float[Tensor, "L1 batch"]


def jacobian_readout(model, tokens: Float[Tensor, "batch pos D"]) -> Readout:
    """w^l = ∂ŷ^l/∂x_t of any model (interp.variants.build) on `tokens`, by autograd in float64 (the sequences are
    independent, so the gradient of Σ_b ŷ^l_b gives every sequence's)."""
    model = as_float64(model)
    x = _tokens(tokens).clone().requires_grad_(True)
    preds = model.predict_per_layer(x)  # [L+1, batch]
    ws = []
    for l in range(preds.shape[0]):
        if not preds[l].requires_grad:  # layer 0: ŷ⁰ = 0
            ws.append(torch.zeros_like(x[:, -1, :-1]))
            continue
        (g,) = torch.autograd.grad(preds[l].sum(), x, retain_graph=True)
        ws.append(g[:, -1, :-1])  # ∂ŷ^l/∂x_t
    w = torch.stack(ws).detach()
    pred = preds.detach()
    gap = (pred - (w * x.detach()[None, :, -1, :-1]).sum(-1)).abs()
    return Readout(w, pred, gap)


def label_influence(model, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch n d"]:
    """J_j = ∂w^l/∂y_j = ∂²ŷ^l/∂x_t ∂y_j for every layer, sequence and context position (double backward)."""
    model = as_float64(model)
    x = _tokens(tokens).clone().requires_grad_(True)
    preds = model.predict_per_layer(x)
    B, T, D = x.shape
    out = torch.zeros(preds.shape[0], B, T - 1, D - 1, dtype=torch.float64)
    for l in range(1, preds.shape[0]):
        (g,) = torch.autograd.grad(preds[l].sum(), x, create_graph=True)
        for c in range(D - 1):
            (h,) = torch.autograd.grad(g[:, -1, c].sum(), x, retain_graph=True, allow_unused=False)
            out[l, :, :, c] = h[:, :-1, -1].detach()
    return out


@dataclass
class TokenWeights:
    """The weighted preconditioned-GD fit w^l ≈ Γ^l Σ_j ω_j y_j x_j of every layer l = 1..L (index 0: layer 1)."""

    gamma: Float[Tensor, "L d d"]  # Γ^l
    omega: Float[Tensor, "L batch n"]  # ω_j per sequence and position, mean 1 over all of them
    residual: Float[Tensor, "L"]  # ‖J − ω Γ x‖_F / ‖J‖_F over every sequence and position: how well the form holds
    by_position: Float[Tensor, "L n"]  # mean ω_j over the sequences, per position j
    sigma: Float[Tensor, "batch"]  # each sequence's noise std (given), for ω against σ

    def by_sigma(self, bins: int = 5) -> tuple[Tensor, Tensor]:
        """(group centres, mean ω over positions and the sequences of each σ group [L, groups]): interp.tasks'
        sigma_groups, one group per σ where the sequences hold at most `bins` distinct σ's (a categorical prior)."""
        per_seq = self.omega.mean(-1)  # [L, batch]
        centres, masks = sigma_groups(self.sigma, bins)
        return centres, torch.stack([per_seq[:, m].mean(-1) for m in masks], dim=-1)


def token_weights(model, tokens: Float[Tensor, "batch pos D"], sigma: Tensor, iters: int = 50) -> TokenWeights:
    """Fit every layer's label influences J_j = ∂w^l/∂y_j to ω_j Γ^l x_j (module docstring): alternating least
    squares, Γ given ω in closed form, then ω_j = ⟨J_j, Γ x_j⟩ / ‖Γ x_j‖²; ω scaled to mean 1 (Γ takes the scale)."""
    J = label_influence(model, tokens)[1:]  # [L, B, n, d]
    x = _tokens(tokens)[:, :-1, :-1]  # [B, n, d]
    L, B, n, d = J.shape
    gammas, omegas, residuals = [], [], []
    X = x.reshape(B * n, d)
    for l in range(L):
        Jl = J[l].reshape(B * n, d)
        omega = torch.ones(B * n, dtype=torch.float64)
        for _ in range(iters):
            A = omega[:, None] * X  # J ≈ A Γᵀ
            gamma = torch.linalg.lstsq(A, Jl).solution.T
            GX = X @ gamma.T
            omega = (Jl * GX).sum(-1) / (GX * GX).sum(-1).clamp_min(1e-300)
        scale = omega.mean()
        if scale.abs() > 0:
            omega, gamma = omega / scale, gamma * scale
        fit = omega[:, None] * (X @ gamma.T)
        residuals.append((Jl - fit).norm() / Jl.norm().clamp_min(1e-300))
        gammas.append(gamma)
        omegas.append(omega.reshape(B, n))
    omega = torch.stack(omegas)
    sigma = _sigma(sigma, B)
    return TokenWeights(torch.stack(gammas), omega, torch.stack(residuals), omega.mean(1), sigma)


def implied_ridge(
    readout: Readout, tokens: Float[Tensor, "batch pos D"], sigma: Tensor, sigma_bins: int = 4
) -> ImpliedLambda:
    """Per layer, the λ whose ridge solution (Σ + λI)⁻¹α on the raw context is nearest to w^l
    (SpectralContext.implied_lambda), summarised against σ: its medians by σ group beside the Bayes ridge's λ = σ²,
    and its rank correlation with σ. A model whose implied λ rises with σ toward σ² shrinks as the posterior mean
    does, that is, adapts its step to the noise (Vladymyrov et al. 2024, Lemma 4.4)."""
    x = _tokens(tokens)
    sigma = _sigma(sigma, x.shape[0])
    ctx = x[:, :-1]
    stats = SpectralContext.from_stats(ctx.transpose(1, 2) @ ctx, x[:, -1, :-1], ctx.shape[1])  # S⁰ = Σ_i e_i e_iᵀ
    lam, relerr = stats.implied_lambda(readout.w)
    return ImpliedLambda.of(lam, relerr, sigma, sigma_bins)


@dataclass
class FFNFit:
    """Each FFN's update fitted, on the tokens it sees, by one linear map of its input (resid_mid), per layer l = 1..L:
    least squares over the query tokens and, apart, over the context tokens. A ReLU FFN whose units pair up as
    ReLU(z) − ReLU(−z) = z, or a quadratic one that stays idle, is a linear map in disguise: its residual is small."""

    query_residual: Float[Tensor, "L"]  # ‖mlp_out − resid_mid M‖ / ‖mlp_out‖ at the query (0: exactly linear there)
    context_residual: Float[Tensor, "L"]  # the same over the context tokens
    query_scale: Float[Tensor, "L"]  # M's y → y entry at the query: the FFN adds query_scale · y to the query's y slot
    query_norm: Float[Tensor, "L"]  # median ‖mlp_out‖ at the query over median ‖resid_mid‖: how much the FFN writes
    query_map: Float[Tensor, "L D D"]  # M at the query: mlp_out ≈ resid_mid @ M
    context_map: Float[Tensor, "L D D"]  # M over the context tokens


def ffn_fit(model, tokens: Float[Tensor, "batch pos D"]) -> FFNFit:
    """`FFNFit` of a model with an FFN after each attention layer (interp.variants; InvalidArgument without one), from
    the hooks blocks.{l}.hook_resid_mid and blocks.{l}.hook_mlp_out, in float64."""
    if model.cfg.mlp == "none":
        raise InvalidArgument("ffn_fit reads a model with an FFN after each layer (--mlp linear, relu or quadratic)")
    model = as_float64(model)
    L = model.cfg.n_layers
    names = [f"blocks.{l}.hook_{h}" for l in range(L) for h in ("resid_mid", "mlp_out")]
    with torch.no_grad():
        _, cache = model.run_with_cache(_tokens(tokens), names_filter=names)

    def fit(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:  # (M, ‖y − xM‖ / ‖y‖)
        M = torch.linalg.lstsq(x, y).solution
        return M, (y - x @ M).norm() / y.norm().clamp_min(1e-300)

    per_layer = []  # (query residual, context residual, y → y, writes, query map, context map) of each layer
    for l in range(L):
        mid, out = cache[f"blocks.{l}.hook_resid_mid"], cache[f"blocks.{l}.hook_mlp_out"]
        M, r = fit(mid[:, -1], out[:, -1])
        Mc, rc = fit(mid[:, :-1].flatten(0, 1), out[:, :-1].flatten(0, 1))
        writes = out[:, -1].norm(dim=-1).median() / mid[:, -1].norm(dim=-1).median().clamp_min(1e-300)
        per_layer.append((r, rc, M[-1, -1], writes, M, Mc))
    return FFNFit(*(torch.stack(v) for v in zip(*per_layer)))


def theorem42_cosine(model, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch"]:
    """|cos| between the context's y slots after l layers, (y_i^l)_{i≤n}, and the quadratic feature (x_i(1)²)_{i≤n} of
    the raw context, per layer and sequence (Theorem 4.2: at most 0.1 for linear layers when n ≫ d, with high
    probability; a quadratic FFN can write it)."""
    model = as_float64(model)
    x = _tokens(tokens)
    with torch.no_grad():
        y = model.residual_stream(x)[:, :, :-1, -1]  # [L+1, B, n]
    feat = x[:, :-1, 0] ** 2  # [B, n]
    cos = (y * feat).sum(-1) / (y.norm(dim=-1) * feat.norm(dim=-1)).clamp_min(1e-300)
    return cos.abs()


def lms(tokens: Float[Tensor, "batch pos D"], eta: float) -> Float[Tensor, "batch d"]:
    """One pass of LMS over the context from 0: w ← w + η (y_j − ⟨w, x_j⟩) x_j (the delta rule with k = x, v = y)."""
    x = _tokens(tokens)
    w = torch.zeros(x.shape[0], x.shape[2] - 1, dtype=torch.float64)
    for j in range(x.shape[1] - 1):
        xj, yj = x[:, j, :-1], x[:, j, -1]
        w = w + eta * (yj - (w * xj).sum(-1))[:, None] * xj
    return w


def rls(tokens: Float[Tensor, "batch pos D"], lam: float) -> Float[Tensor, "batch d"]:
    """Recursive least squares over the context from w = 0, P = I/λ (Sherman–Morrison per token): after the n tokens
    it is ridge, (Σ + λI)⁻¹ α."""
    x = _tokens(tokens)
    B, d = x.shape[0], x.shape[2] - 1
    w = torch.zeros(B, d, dtype=torch.float64)
    P = torch.eye(d, dtype=torch.float64).expand(B, d, d) / lam
    for j in range(x.shape[1] - 1):
        xj, yj = x[:, j, :-1], x[:, j, -1]
        Px = (P @ xj[..., None])[..., 0]
        k = Px / (1 + (xj * Px).sum(-1, keepdim=True))
        w = w + k * (yj - (w * xj).sum(-1))[:, None]
        P = P - k[..., None] * Px[:, None, :]
    return w


def delta_vs_online(
    readout: Readout, tokens: Float[Tensor, "batch pos D"], etas=None, lams=None
) -> dict[str, list[float]]:
    """Per layer l = 1..L: the best LMS step η and RLS λ (grids) for w^l, and the relative error ‖w^l − w‖ / ‖w^l‖
    (median over sequences) of each, beside that of OLS; DeltaNet's w^l is an LMS-like pass when its error is small."""
    etas = torch.logspace(-3, 0, 25).tolist() if etas is None else etas
    lams = torch.logspace(-2, 3, 26).tolist() if lams is None else lams
    err = lambda w, ref: float(((w - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-300)).median())  # noqa: E731
    cand_lms = {eta: lms(tokens, eta) for eta in etas}
    cand_rls = {lam: rls(tokens, lam) for lam in lams}
    out = {"eta": [], "lms_error": [], "lam": [], "rls_error": [], "ols_error": []}
    ols = rls(tokens, 1e-9)
    for w in readout.w[1:]:
        eta = min(cand_lms, key=lambda e: err(cand_lms[e], w))
        lam = min(cand_rls, key=lambda v: err(cand_rls[v], w))
        out["eta"].append(eta)
        out["lms_error"].append(err(cand_lms[eta], w))
        out["lam"].append(lam)
        out["rls_error"].append(err(cand_rls[lam], w))
        out["ols_error"].append(err(ols, w))
    return out


# Each weighted kind's hook (interp.variants.FamilyAttention) and the name of what it holds
GATE_HOOKS = {
    "retnet": ("hook_decay", "gamma"),
    "gated": ("hook_gate", "a"),
    "gla": ("hook_gate", "alpha"),
    "delta": ("hook_beta", "beta"),
}


def gate_values(model, tokens: Float[Tensor, "batch pos D"], sigma: Float[Tensor, "batch"], bins: int = 4) -> dict:
    """What each layer's decay, gates or delta-rule step take on the sequences `tokens`, as JSON, [L] (attention layers
    l = 1..L) first: retnet's γ_k, the gated model's a_j, GLA's α_j (per key channel), DeltaNet's β_j, from the hooks
    hook_decay, hook_gate, hook_beta. `mean` over sequences, heads, positions (and channels), `by_head`, `by_sigma`
    the mean over each σ group's sequences (interp.tasks.sigma_groups; flat for retnet's data-independent γ). For the
    decays, `first_token_weight`: the median over sequences, heads (and channels) of ∏_{m=2..n} a_m, the first context
    token's weight in the state S_n the query reads, against the last token's 1 (the products of "Gating is
    Weighting"; 1 for a gate left open)."""
    kind = model.cfg.attention
    if kind not in DECAYS:
        raise InvalidArgument(f"gate_values reads retnet, gated, gla or delta attention, not {kind!r}")
    model, x = as_float64(model), _tokens(tokens)
    sigma = _sigma(sigma, x.shape[0])
    hook, gate = GATE_HOOKS[kind]
    names = [f"blocks.{l}.attn.{hook}" for l in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(x, names_filter=names)
    B, n = x.shape[0], x.shape[1] - 1
    centres, masks = sigma_groups(sigma, bins)
    out = {"gate": gate, "sigma": centres.tolist()}
    rows = {"mean": [], "by_head": [], "by_sigma": []} | ({} if kind == "delta" else {"first_token_weight": []})
    for name in names:
        g = cache[name]  # as [batch, head, n, channel]
        if kind == "retnet":  # γ [head]
            g = g[None, :, None, None].expand(B, -1, n, 1)
        elif kind == "gla":  # α [batch, n, head, h]
            g = g.permute(0, 2, 1, 3)
        else:  # a, β [batch, head, n]
            g = g[..., None]
        per_seq = g.mean((1, 2, 3))
        rows["mean"].append(float(g.mean()))
        rows["by_head"].append(g.mean((0, 2, 3)).tolist())
        rows["by_sigma"].append([float(per_seq[m].mean()) for m in masks])
        if "first_token_weight" in rows:
            rows["first_token_weight"].append(float(g[:, :, 1:].prod(2).median()))
    return out | rows


# What readout_summary measures, for caches of its records (interp.report's family records): 2 added the implied ridge
# λ by σ and, with an FFN, ffn_fit; 3 the gate values (gate_values)
READOUT_VERSION = 3
WEIGHT_SEQ = 128  # sequences of the token-weight fit (double backward per input coordinate: the costly probe)


def readout_summary(
    model, tokens: Float[Tensor, "batch pos D"], sigma: Float[Tensor, "batch"], weight_seq: int = WEIGHT_SEQ
) -> dict:
    """What interp reads out of any model of the family (interp.variants), as JSON: per layer l = 0..L the linearity
    of the layer's token map (interp.probes.linearity), the median readout gap |ŷ^l − ⟨w^l, x_t⟩|, Theorem 4.2's
    median cosine and the implied ridge λ against σ (`implied_ridge`, 4 σ groups); for a decay or gate without an FFN,
    the token weights ω_j of the first `weight_seq` sequences against position and σ (4 bins) with each layer's fit
    residual; the values a decay, gate or delta-rule step takes (`gate_values`); with an FFN, how far each FFN is from
    a linear map of its input (`ffn_fit`); for DeltaNet, w^l against LMS and RLS."""
    readout = jacobian_readout(model, tokens)
    out = {
        "linearity": layer_linearity(model, tokens).summary().to_json(),
        "readout_gap_median": readout.gap.median(-1).values.tolist(),
        "theorem42_cosine_median": theorem42_cosine(model, tokens).median(-1).values.tolist(),
        "implied_lambda": implied_ridge(readout, tokens, sigma).to_json(),
    }
    cfg = model.cfg
    if cfg.attention in DECAYS and cfg.mlp == "none":
        tw = token_weights(model, tokens[:weight_seq], sigma[:weight_seq])
        centres, by_sigma = tw.by_sigma(bins=4)
        out["token_weights"] = {
            "residual": tw.residual.tolist(),
            "by_position": tw.by_position.tolist(),
            "sigma": centres.tolist(),
            "by_sigma": by_sigma.tolist(),
        }
    if cfg.mlp != "none":
        fit = ffn_fit(model, tokens)
        keys = ("query_residual", "context_residual", "query_scale", "query_norm")  # the maps stay out of the JSON
        out["ffn_fit"] = {k: getattr(fit, k).tolist() for k in keys}
    if cfg.attention in DECAYS:
        out["gates"] = gate_values(model, tokens, sigma)
    if cfg.attention == "delta" and cfg.mlp == "none":
        out["delta_vs_online"] = delta_vs_online(readout, tokens)
    return out
