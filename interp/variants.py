"""The linear-attention family around the linear transformer of Vladymyrov et al. 2024, as TransformerLens models that
the one trainer (interp.train), run directory and sweep take like the paper's model: `build(cfg)` makes the model of
any interp.ModelConfig (cfg.attention, cfg.mlp; the paper's model when both are at their defaults).

Conventions (README, Conventions): tokens [batch, n+1, d+1] with y in the last column and the query (x_t, 0) last;
residual, no 1/n, no LayerNorm or embedding; ŷ = −y of the query after the last layer. Only the n context tokens
write (keys, values, states); the query reads and never writes, and no gate, decay or β of the query's own enters:
it reads the state S_n the last context token left. Per head k (columns; q_i = W_Q e_i, k_j = W_K e_j, v_j = W_V e_j,
each `head_width` h wide; the layer adds Σ_k W_O o_i to e_i):

    qkv      o_i = Σ_{j≤n} v_j k_jᵀ q_i                       (FULL merged: P = W_O W_V, Q = W_Kᵀ W_Q)
    causal   o_i = S_i q_i,  S_j = S_{j−1} + v_j k_jᵀ           (context i reads j ≤ i; the query reads S_n)
    retnet   S_j = γ S_{j−1} + v_j k_jᵀ, γ = sigmoid(θ_k)      (weight γ^{i−j}; Sun et al. 2023)
    gated    S_j = a_j S_{j−1} + v_j k_jᵀ, a_j = sigmoid(w_gᵀ e_j + b_g)   (weight ∏_{m=j+1..i} a_m; Mamba-2 / SSD)
    gla      S_j = S_{j−1} diag(α_j) + v_j k_jᵀ, α_j = sigmoid(W_α e_j + b_α) ∈ (0, 1)^h   (Yang et al. 2024)
    delta    S_j = S_{j−1} + β_j (v_j − S_{j−1} k_j) k_jᵀ, β_j = sigmoid(w_βᵀ e_j + b_β)  (DeltaNet; Schlag et al. 2021)
    softmax  o_i = Σ_{j≤n} softmax_j(k_jᵀ q_i / √h) v_j
    kernel   o_i = Σ_{j≤n} φ(k_j)ᵀ φ(q_i) v_j, φ = elu + 1;  kernel_norm divides by Σ_{j≤n} φ(k_j)ᵀ φ(q_i)
    lsa      the paper's layer, e_i ← e_i + Σ_k P_k S Q_k e_i (interp.model.LinearAttention: FULL, DIAG, GD++)

FFN after each attention layer (cfg.mlp): e ← e + W_out φ(W_in e) with φ linear or ReLU, or the quadratic
e ← e + W_out ((W_a e) ⊙ (W_b e)) (Theorem 4.2's counterpoint: it can write x(1)² into y).

The forward runs the parallel forms (the masked-matrix form for causal, retnet and gated; gla's with its per-channel
decay; delta through the UT transform, (I + diag(β) tril(K Kᵀ, −1)) U = diag(β) V, S_i = Σ_{j≤i} u_j k_jᵀ, Yang et al.
2024). With no hook registered (training, evaluation) it takes the hook-free path, `VariantTransformer._forward_fast`:
the same function in fewer, larger products (the query as the masked matrix's last row, gated's decay factored as
gla's, causal, retnet, gated and softmax through the merged W_Qᵀ W_K and W_O W_V, the last layer's query row alone, the
stream zero-padded to 8 lanes where that measured faster: `stream_width`), 1.2-2.4x faster a training step, and
1.2-1.7x more from the padding on an AMD EPYC (experiments/results/bench_train.md).
`reference_stream` writes every recurrence out token by token, and the tests hold both paths, and the hook-free path's
gradients, to it. qkv, FULL in other weights, trains on the kernel's fused pass for FULL through its merged maps
(`FamilyAttention.matrices`, read by interp.params.FULL.layer_maps).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import statistics
import time

import torch
from einops import einsum
from jaxtyping import Bool, Float
from torch import Tensor, nn
from torch.nn import functional as F

try:  # TransformerLens >= 4 exports it at the top level
    from transformer_lens import HookedRootModule
except ImportError:  # pragma: no cover - older releases
    from transformer_lens.hook_points import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp import moments, params
from interp.config import FEATURE_MAPS, ModelConfig  # noqa: F401 - FEATURE_MAPS: where it lived
from interp.files import InvalidArgument, InvalidType
from interp.kernel import cpu_capability, cpu_model
from interp.model import LinearAttention, LinearTransformer, check_generator, has_hooks, hook_detection, hooks_active

LINEAR_FAMILY = ("qkv", "causal", "retnet", "gated", "gla", "delta")  # a state S read by the query: ŷ linear in x_t
DECAYS = ("retnet", "gated", "gla", "delta")  # the ones that weight context tokens unequally
# Their scores need q_iᵀ k_j only: the hook-free path (FamilyAttention.fast_update) takes them through the merged
# W_Qᵀ W_K; the others need q and k themselves (φ, gla's per-channel decay, delta's K Kᵀ, qkv's h × h state). Every
# output but qkv's is W_O v_j = P e_j summed with weights (delta's pseudo-values too: U = U' W_Vᵀ, U' solved from the
# tokens), so all of those run on P = W_O W_V.
MERGED = ("causal", "retnet", "gated", "softmax")
# Initial values of the decay and gate biases: γ = a = α = sigmoid(4) ≈ 0.982 (close to the plain sum the task wants,
# still learnable), β = sigmoid(0) = 1/2.
GATE_BIAS_INIT = 4.0
BETA_BIAS_INIT = 0.0
# gla's parallel form (and gated's on the hook-free path) factors exp(b_i − b_j) = exp(b_i) exp(−b_j) (b = Σ log α ≤ 0)
# while a context's total log decay is above −GLA_FACTOR_LIMIT, so exp(−b_j) ≤ e^30 (exact to rounding in float32);
# beyond, the exact unfactored forms take over: on the hook-free path for those sequences alone (gla's decay tensor,
# gated's weights), in the hooked forward for the batch (the scan, or the decay tensor when hook_pattern is wanted).
GLA_FACTOR_LIMIT = 30.0
CONSTANT_INIT = {"decay_logit": GATE_BIAS_INIT, "b_gate": GATE_BIAS_INIT, "b_beta": BETA_BIAS_INIT}
# The hook-free path carries the stream zero-padded to a multiple of STREAM_ALIGN lanes where that measured faster on
# this CPU (`padding_speedup`): on an AMD EPYC (AVX2) torch's MKL ran products with 11 output columns 3-5x slower than
# with 16, and the padded training step was 1.2-1.7x faster (experiments/results/bench_train.md, session 34).
STREAM_ALIGN = 8
STREAM_WIDTH_ENV = "INTERP_STREAM_WIDTH"  # an int overrides stream_width (the benchmarks' A/B); 0: unpadded
STREAM_CHOICE_VERSION = 1  # bump when _measure_padding changes: cached answers are then measured again


def stream_width(D: int, device: torch.device | str = "cpu") -> int:
    """The width `VariantTransformer._forward_fast` carries a stream of width D at: D rounded up to a multiple of
    STREAM_ALIGN where that measured faster on this CPU (`padding_speedup`), else D (and on a GPU);
    INTERP_STREAM_WIDTH=w forces max(w, D) on any device (0: D)."""
    forced = os.environ.get(STREAM_WIDTH_ENV)
    if forced is not None:
        try:
            return max(int(forced), D)
        except ValueError:
            raise InvalidArgument(f"{STREAM_WIDTH_ENV} must be an integer width, got {forced!r}") from None
    if torch.device(device).type != "cpu" or _aligned(D) == D:
        return D
    return _aligned(D) if padding_speedup(D) > 1.0 else D


@functools.cache
def padding_speedup(D: int) -> float:
    """The hook-free training step's time with a stream of width D over its time padded to a multiple of STREAM_ALIGN,
    on this CPU: measured once (`_measure_padding`, under a second) and cached per CPU, ISA and torch version beside
    the kernel's choice (interp.moments.measured_once)."""
    key = f"stream v{STREAM_CHOICE_VERSION}|{cpu_model()}|{cpu_capability()}|{torch.__version__}|D={D}"
    value, _ = moments.measured_once(key, ("padding_speedup",), lambda: {"padding_speedup": _measure_padding(D)})
    return value["padding_speedup"]


def _measure_padding(D: int, B: int = 512, n: int = 20, rounds: int = 9) -> float:
    """Median forward + backward time of a 2-layer causal model with a ReLU FFN (the attention's and the FFN's
    products) on B random sequences, at width D over padded, the two timed in turn in this process."""
    cfg = ModelConfig(d=D - 1, n_layers=2, attention="causal", mlp="relu")
    model = VariantTransformer(cfg, generator=torch.Generator().manual_seed(0))
    tokens = torch.randn(B, n + 1, D, generator=torch.Generator().manual_seed(1), dtype=cfg.torch_dtype)
    times: dict[int, list[float]] = {D: [], _aligned(D): []}
    for r in range(rounds + 2):
        for width, spent in times.items():
            t0 = time.perf_counter()
            model._forward_fast(tokens, width).square().mean().backward()
            if r > 1:  # the first two rounds warm up
                spent.append(time.perf_counter() - t0)
    return statistics.median(times[D]) / statistics.median(times[_aligned(D)])


def _aligned(width: int) -> int:
    """`width` rounded up to a multiple of STREAM_ALIGN."""
    return -(-width // STREAM_ALIGN) * STREAM_ALIGN


def _fit(W: Tensor, width: int, dim: int = -1) -> Tensor:
    """W with dimension `dim` (a stream dimension) zero-padded to `width`; W itself when it already has that width.
    Zero rows and columns keep a padded stream's extra lanes at 0 (and take no gradient back to W)."""
    pad = width - W.shape[dim]
    if pad == 0:
        return W
    return F.pad(W, [0, 0] * (W.ndim - 1 - dim % W.ndim) + [0, pad])


def decay_products(a: Float[Tensor, "... n"]) -> Float[Tensor, "... n n"]:
    """M[..., i, j] = ∏_{m=j+1..i} a_m for j ≤ i (1 on the diagonal), 0 above: row by row, M_i = a_i M_{i−1} + e_i. No
    log: exact where a gate is 0 in floating point, where exp(c_i − c_j) of its cumulative log is NaN."""
    n = a.shape[-1]
    eye = torch.eye(n, dtype=a.dtype, device=a.device)
    rows = [eye[0].expand_as(a)]
    for i in range(1, n):
        rows.append(rows[-1] * a[..., i, None] + eye[i])
    return torch.stack(rows, dim=-2)


class FamilyAttention(nn.Module):
    """One attention layer of the family (module docstring), H heads of width h: returns every head's W_O o_i,
    [batch, pos, head, D].

    Hooks: hook_q, hook_k, hook_v [batch, pos, head, h] (the query's k and v too, unused: it never writes);
    hook_pattern [batch, head, query pos, key pos] (the weight of v_j in o_i: the context rows of causal, retnet,
    gated, gla and delta, every row of softmax and the kernels; 0 at the query's key); hook_state [batch, head, h, h]
    (S_n, the state the query reads; every row of qkv); hook_decay [head] (retnet's γ), hook_gate [batch, head, n]
    (gated's a_j) or [batch, n, head, h] (gla's α_j), hook_beta [batch, head, n] and hook_u [batch, head, n, h]
    (delta's β_j and pseudo-values u_j); hook_z [batch, pos, head, h] (o_i); hook_result [batch, pos, head, D]."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind, H, D, h = cfg.attention, cfg.n_heads, cfg.d_model, cfg.d_head
        self.feature_map = cfg.feature_map
        dt = cfg.torch_dtype
        self.W_Q = nn.Parameter(torch.zeros(H, h, D, dtype=dt))
        self.W_K = nn.Parameter(torch.zeros(H, h, D, dtype=dt))
        self.W_V = nn.Parameter(torch.zeros(H, h, D, dtype=dt))
        self.W_O = nn.Parameter(torch.zeros(H, D, h, dtype=dt))
        if self.kind == "retnet":
            self.decay_logit = nn.Parameter(torch.zeros(H, dtype=dt))  # γ_k = sigmoid(θ_k)
        elif self.kind == "gated":
            self.w_gate = nn.Parameter(torch.zeros(H, D, dtype=dt))
            self.b_gate = nn.Parameter(torch.zeros(H, dtype=dt))
        elif self.kind == "gla":
            self.W_gate = nn.Parameter(torch.zeros(H, h, D, dtype=dt))
            self.b_gate = nn.Parameter(torch.zeros(H, h, dtype=dt))
        elif self.kind == "delta":
            self.w_beta = nn.Parameter(torch.zeros(H, D, dtype=dt))
            self.b_beta = nn.Parameter(torch.zeros(H, dtype=dt))
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_pattern = HookPoint()
        if self.kind in LINEAR_FAMILY:
            self.hook_state = HookPoint()
        if self.kind == "retnet":
            self.hook_decay = HookPoint()
        if self.kind in ("gated", "gla"):
            self.hook_gate = HookPoint()
        if self.kind == "delta":
            self.hook_beta, self.hook_u = HookPoint(), HookPoint()
        self.hook_z = HookPoint()
        self.hook_result = HookPoint()

    def matrices(self) -> tuple[Float[Tensor, "H D D"], Float[Tensor, "H D D"]]:
        """qkv's merged (P, Q) of every head, P = W_O W_V and Q = W_Kᵀ W_Q: FULL's layer of the same function
        (differentiable in the weights; InvalidArgument for the other attentions, whose function is no FULL layer)."""
        if self.kind != "qkv":
            raise InvalidArgument(f"{self.kind} attention is no FULL layer; only qkv merges into (P, Q)")
        return self.W_O @ self.W_V, self.W_K.transpose(1, 2) @ self.W_Q

    def phi(self, z: Tensor) -> Tensor:
        return F.elu(z) + 1 if self.feature_map == "elu1" else z

    # ---- the gates, decays and β of the context tokens (each one's own hook)
    def decay(self) -> Float[Tensor, "H"]:
        return self.hook_decay(torch.sigmoid(self.decay_logit))

    def gates(self, ctx: Float[Tensor, "batch n D"], log: bool = False) -> Tensor:
        """gated: a_j [batch, head, n]; gla: α_j [batch, n, head, h]. With `log`, their logs as logsigmoid of the
        logits, finite where a gate underflows to 0 (the hook-free path's; hook_gate does not see them)."""
        if self.kind == "gated":  # sigmoid(w_gᵀ e_j + b_g)
            gate = F.linear(ctx, _fit(self.w_gate, ctx.shape[-1]), self.b_gate)
            return F.logsigmoid(gate).transpose(1, 2) if log else self.hook_gate(torch.sigmoid(gate).transpose(1, 2))
        H, h, _ = self.W_gate.shape  # gla: sigmoid(W_α e_j + b_α), one product for every head
        gate = F.linear(ctx, _fit(self.W_gate, ctx.shape[-1]).reshape(H * h, -1), self.b_gate.reshape(H * h))
        gate = gate.view(*ctx.shape[:2], H, h)
        return F.logsigmoid(gate) if log else self.hook_gate(torch.sigmoid(gate))

    def betas(self, ctx: Float[Tensor, "batch n D"]) -> Float[Tensor, "batch H n"]:
        return self.hook_beta(
            torch.sigmoid(F.linear(ctx, _fit(self.w_beta, ctx.shape[-1]), self.b_beta)).transpose(1, 2)
        )

    def weights(self, ctx: Float[Tensor, "batch n D"]) -> Float[Tensor, "batch H n n"]:
        """M[i, j]: the weight of v_j k_jᵀ in S_i for context tokens i, j (causal, retnet, gated): 1, γ^{i−j} or
        ∏_{m=j+1..i} a_m on j ≤ i, 0 above the diagonal."""
        B, n, _ = ctx.shape
        i = torch.arange(n, device=ctx.device)
        return self._row_weights(ctx, i, i[:, None] >= i).expand(B, self.W_Q.shape[0], n, n)

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos H D"]:
        q = self.hook_q(einsum(resid, self.W_Q, "b t c, h k c -> b t h k"))
        k = self.hook_k(einsum(resid, self.W_K, "b t c, h k c -> b t h k"))
        v = self.hook_v(einsum(resid, self.W_V, "b t c, h k c -> b t h k"))
        ctx, n = resid[:, :-1], resid.shape[1] - 1
        if self.kind == "qkv":  # every token reads S_n = Σ_j v_j k_jᵀ
            S = self.hook_state(einsum(v[:, :-1], k[:, :-1], "b j h a, b j h c -> b h a c"))
            z = einsum(S, q, "b h a c, b t h c -> b t h a")
        elif self.kind in ("causal", "retnet", "gated", "gla", "delta"):
            z = self._causal(ctx, q, k, v, n)
        else:
            z = self._dense(q, k, v)
        z = self.hook_z(z)
        return self.hook_result(einsum(z, self.W_O, "b t h k, h c k -> b t h c"))

    def _causal(self, ctx: Tensor, q: Tensor, k: Tensor, v: Tensor, n: int) -> Tensor:
        """o_i for the context (the masked-matrix form, rows i < n) and the query (S_n q_t)."""
        qc, kc, vc = q[:, :-1], k[:, :-1], v[:, :-1]
        if self.kind == "gla":  # per-channel decay: weight Σ_c q_i[c] k_j[c] exp(b_i[c] − b_j[c]), b = cumsum log α
            alpha = self.gates(ctx)
            b = torch.log(alpha).cumsum(1)  # [B, n, H, h]
            lower = torch.ones(n, n, dtype=torch.bool, device=ctx.device).tril()
            if self._factors(b):  # exp(−b_j) ≤ e^30: factor it, (q_i e^{b_i})ᵀ(k_j e^{−b_j})
                pattern = einsum(qc * b.exp(), kc * (-b).exp(), "b i h c, b j h c -> b h i j") * lower
                last_row = (b[:, -1:] - b).exp()  # ∏_{m=j+1..n} α_m, S_n's weights
            elif hook_detection().ok and not has_hooks(self.hook_pattern):  # strong decay, no pattern wanted
                return self._gla_scan(alpha, q, k, v)
            else:  # strong decay: the [batch, n, n, head, h] decay tensor
                decay = decay_products(alpha.movedim(1, -1)).permute(0, 3, 4, 1, 2)
                pattern = einsum(qc, kc, decay, "b i h c, b j h c, b i j h c -> b h i j")
                last_row = decay[:, -1]
            S = einsum(vc, kc * last_row, "b j h a, b j h c -> b h a c")  # S_n
        else:
            if self.kind == "delta":  # UT transform: (I + diag(β) tril(K Kᵀ, −1)) U = diag(β) V
                beta = self.betas(ctx)  # [B, H, n]
                kk = einsum(kc, kc, "b i h c, b j h c -> b h i j").tril(-1)
                A = torch.eye(n, dtype=ctx.dtype, device=ctx.device) + beta[..., None] * kk
                vc = self.hook_u(
                    torch.linalg.solve_triangular(A, beta[..., None] * vc.transpose(1, 2), upper=False)
                ).transpose(1, 2)  # u_j: S_i = Σ_{j≤i} u_j k_jᵀ
                M = torch.ones(n, n, dtype=ctx.dtype, device=ctx.device).tril()
            else:
                M = self.weights(ctx)
            pattern = einsum(qc, kc, "b i h c, b j h c -> b h i j") * M
            last = M[..., -1, :] if M.ndim == 4 else M[-1].expand(ctx.shape[0], q.shape[2], n)
            S = einsum(vc * last.transpose(1, 2)[..., None], kc, "b j h a, b j h c -> b h a c")  # S_n
        pattern = self.hook_pattern(pattern)
        S = self.hook_state(S)
        z_ctx = einsum(pattern, vc, "b h i j, b j h a -> b i h a")
        z_query = einsum(S, q[:, -1], "b h a c, b h c -> b h a")
        return torch.cat([z_ctx, z_query[:, None]], dim=1)

    def _gla_scan(self, alpha: Tensor, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """gla without hook_pattern: S_j = S_{j−1} diag(α_j) + v_j k_jᵀ and o_j = S_j q_j over the n context tokens
        (n small products of [batch, head, h, h] instead of the [batch, n, n, head, h] decay tensor), o_t = S_n q_t."""
        S = v.new_zeros(v.shape[0], v.shape[2], v.shape[3], k.shape[3])
        z = []
        for j in range(alpha.shape[1]):
            S = S * alpha[:, j, :, None, :] + v[:, j, :, :, None] * k[:, j, :, None, :]  # S_{j−1} diag(α_j) + v_j k_jᵀ
            z.append(einsum(S, q[:, j], "b h a c, b h c -> b h a"))
        S = self.hook_state(S)
        z.append(einsum(S, q[:, -1], "b h a c, b h c -> b h a"))
        return torch.stack(z, dim=1)

    def _dense(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """softmax, kernel and kernel_norm: every token attends to the n context tokens (the query's key masked)."""
        T = q.shape[1]
        is_query_key = torch.arange(T, device=q.device) == T - 1
        if self.kind == "softmax":
            scores = einsum(q, k, "b i h c, b j h c -> b h i j") / math.sqrt(q.shape[-1])
            pattern = torch.softmax(scores.masked_fill(is_query_key, -math.inf), dim=-1)
        else:
            pattern = einsum(self.phi(q), self.phi(k), "b i h c, b j h c -> b h i j").masked_fill(is_query_key, 0.0)
            if self.kind == "kernel_norm":
                pattern = pattern / pattern.sum(-1, keepdim=True)
        pattern = self.hook_pattern(pattern)
        return einsum(pattern, v, "b h i j, b j h a -> b i h a")

    # ---- the hook-free training path (VariantTransformer._forward_fast): the same function, fewer and larger products
    def fast_update(self, resid: Float[Tensor, "batch pos D"], query_only: bool = False) -> Tensor:
        """Σ_k W_O o_i without hooks, [batch, pos, D] (the heads summed; with `query_only`, [batch, 1, D]: the query's
        row alone, all the last layer's readout needs). The causal family's query row joins the masked matrix as row
        n, reading S_n with the last context token's weights (no S_n is formed); the heads' outputs are summed by one
        product with W_O (or with P = W_O W_V, where the tokens themselves were mixed). gla's contexts whose decay is
        too strong to factor take their decay tensor (GLA_FACTOR_LIMIT), the rest of the batch the factored form."""
        B, T, D = resid.shape  # D: the stream's width, zero-padded (stream_width) or not
        H, h, n = self.W_Q.shape[0], self.W_Q.shape[1], T - 1
        ctx = resid[:, :-1]
        W_Q, W_K, W_V, W_O = _fit(self.W_Q, D), _fit(self.W_K, D), _fit(self.W_V, D), _fit(self.W_O, D, 1)
        if self.kind == "delta" and D > self.W_Q.shape[-1]:  # a padded stream: delta's q, k padded alike (zero
            # channels add nothing to q_iᵀ k_j or K Kᵀ; φ(0) = 1 and gla's gates rule the same out for the others)
            W_Q, W_K = _fit(W_Q, _aligned(h), 1), _fit(W_K, _aligned(h), 1)

        def heads(x: Tensor, W: Tensor) -> Tensor:  # x W_kᵀ per head, [(batch head), pos, width] (a view for one head)
            width = W.shape[1]
            return F.linear(x, W.reshape(H * width, D)).view(B, -1, H, width).transpose(1, 2).reshape(B * H, -1, width)

        def scores(q: Tensor, k: Tensor) -> Tensor:  # q_iᵀ k_j, [(batch head), row, n]
            return (k * q).sum(-1, keepdim=True).transpose(1, 2) if query_only else q @ k.transpose(1, 2)

        def mix(pattern: Tensor, v: Tensor) -> Tensor:  # Σ_j pattern[i, j] v_j, [(batch head), row, h]
            return (pattern.transpose(1, 2) * v).sum(1, keepdim=True) if query_only else pattern @ v

        # (one row: broadcast products; a batch of one-row matrix products is several times slower on the CPU)
        rows = resid[:, -1:] if query_only else resid
        if self.kind == "qkv":  # its h × h state needs k and v themselves
            q, k, v, out_map = heads(rows, W_Q), heads(ctx, W_K), heads(ctx, W_V), W_O
        else:  # W_O v_j = (W_O W_V) e_j: mix the context tokens themselves, then P = W_O W_V
            v, out_map = ctx[:, None].expand(B, H, n, D).reshape(B * H, n, D), W_O @ W_V
            if self.kind in MERGED:  # and q_iᵀ k_j = e_iᵀ (W_Qᵀ W_K) e_j: two products of the stream, not four
                q, k = heads(rows, W_K.transpose(1, 2) @ W_Q), v  # e_iᵀ W_Qᵀ W_K per head, [BH, row, D]
            else:
                q, k = heads(rows, W_Q), heads(ctx, W_K)

        def at_rows(b: Tensor) -> Tensor:  # b at each row's last position, [BH, row, c]
            return b[:, -1:] if query_only else torch.cat([b, b[:, -1:]], dim=1)

        log_a = self._log_gates(ctx) if self.kind in ("gla", "gated") else None  # log α_j, [BH, n, c]
        b = log_a.cumsum(1) if log_a is not None else None  # b_j = Σ_{m≤j} log α_m
        # each row's last context position: i for a context token, n − 1 for the query (it reads S_n)
        last = torch.arange(T - q.shape[1], T, device=resid.device).clamp_max(n - 1)
        lower = last[:, None] >= torch.arange(n, device=resid.device)  # [row, n]: j ≤ the row's position
        if self.kind == "softmax":
            pattern = torch.softmax(scores(q, k) / math.sqrt(h), dim=-1)
        elif self.kind in ("kernel", "kernel_norm"):
            pattern = scores(self.phi(q), self.phi(k))
            if self.kind == "kernel_norm":
                pattern = pattern / pattern.sum(-1, keepdim=True)
        elif self.kind == "qkv":  # o_iᵀ = q_iᵀ Σ_j k_j v_jᵀ = (S_n q_i)ᵀ: the state form, h × h
            kv = k.transpose(1, 2) @ v
            o = (q.transpose(1, 2) * kv).sum(1, keepdim=True) if query_only else q @ kv
            return self._out(o, out_map)
        elif b is not None and (self.kind == "gla" or self._factors(b)):  # gla; gated while its decay factors
            strong = ~self._factors_each(b)  # [BH]: a context past GLA_FACTOR_LIMIT (gla's; gated's go the else way)
            any_strong = bool(strong.any())
            b_safe = b.masked_fill(strong[:, None, None], 0.0) if any_strong else b  # finite; replaced below
            pattern = scores(q * at_rows(b_safe).exp(), k * (-b_safe).exp()) * lower  # Σ_c q_i k_j e^{b_i − b_j} [c]
            if any_strong:  # those contexts through their [row, n, h] decay tensor, ∏_{m=j+1..i} α_m
                s = strong.nonzero().squeeze(1)
                decay = decay_products(log_a[s].exp().transpose(1, 2))[:, :, last].permute(0, 2, 3, 1)
                pattern = pattern.index_put((s,), einsum(q[s], k[s], decay, "s i c, s j c, s i j c -> s i j"))
        else:
            if self.kind == "delta":  # the UT transform: (I + diag(β) tril(K Kᵀ, −1)) U' = diag(β) E, U = U' W_Vᵀ
                beta = self.betas(ctx).reshape(B * H, n, 1)
                # a unit lower-triangular solve reads only the strictly lower part: no tril, no I (nor their backward)
                v = torch.linalg.solve_triangular(
                    beta * (k @ k.transpose(1, 2)), beta * v, upper=False, unitriangular=True
                )
            c = b.view(B, H, n) if self.kind == "gated" else None  # gated past the limit: its log decay, unfactored
            weights = self._row_weights(ctx, last, lower, c)
            pattern = (scores(q, k).view(B, H, -1, n) * weights).view(B * H, -1, n)
        return self._out(mix(pattern, v), out_map)

    @staticmethod
    def _out(o: Float[Tensor, "BH row w"], out_map: Float[Tensor, "H D w"]) -> Float[Tensor, "B row D"]:
        """Σ_k M_k o_i,k (M = W_O, or P = W_O W_V where o mixes the tokens themselves): the heads' outputs mapped and
        summed in one product."""
        H, D, w = out_map.shape
        o = o.view(-1, H, o.shape[1], w).transpose(1, 2).reshape(o.shape[0] // H, -1, H * w)
        return F.linear(o, out_map.transpose(0, 1).reshape(D, H * w))

    def _log_gates(self, ctx: Float[Tensor, "batch n D"]) -> Float[Tensor, "BH n c"]:
        """log α_j per (batch, head): gla's per channel (c = h), gated's a_j (c = 1), from the logits (finite where α_j
        is 0 in floating point)."""
        n = ctx.shape[1]
        if self.kind == "gated":
            return self.gates(ctx, log=True).reshape(-1, n, 1)
        return self.gates(ctx, log=True).transpose(1, 2).reshape(-1, n, self.W_Q.shape[1])

    def _log_decay(self, ctx: Float[Tensor, "batch n D"]) -> Float[Tensor, "BH n c"]:
        """b_j = Σ_{m≤j} log α_m per (batch, head). While b_n > −GLA_FACTOR_LIMIT the decay factors, exp(b_i − b_j) =
        exp(b_i) exp(−b_j) (exact to rounding)."""
        return self._log_gates(ctx).cumsum(1)

    @staticmethod
    def _factors(b: Tensor) -> bool:
        """Whether every context's total log decay b_n is above −GLA_FACTOR_LIMIT (the factored form is exact)."""
        return bool(FamilyAttention._factors_each(b).all())

    @staticmethod
    def _factors_each(b: Float[Tensor, "BH n c"]) -> Bool[Tensor, "BH"]:
        """Per context (and head): whether its total log decay b_n is above −GLA_FACTOR_LIMIT in every channel (False
        where it is not finite: a sequence that blew up goes the exact way, and its loss is the guard's to drop)."""
        return (b[:, -1] > -GLA_FACTOR_LIMIT).all(-1)

    def _row_weights(self, ctx: Tensor, last: Tensor, lower: Tensor, c: Tensor | None = None) -> Tensor:
        """The weight of v_j k_jᵀ in the state row i reads, broadcast to [batch, head, row, n]: 1 (causal, delta),
        γ^{last_i − j} (retnet) or ∏_{m=j+1..last_i} a_m (gated: as exp(c_{last_i} − c_j) where c = cumsum log a
        [B, H, n] is given, else as running products); 0 for j > last_i."""
        if self.kind in ("causal", "delta"):
            return lower.to(ctx.dtype)
        if self.kind == "retnet":
            steps = (last[:, None] - torch.arange(ctx.shape[1], device=ctx.device)).clamp_min(0).to(ctx.dtype)
            return self.decay()[:, None, None] ** steps * lower  # [head, row, n]
        if c is None:  # the hooked forward: the running products of its (hooked) gates
            return decay_products(self.gates(ctx))[..., last, :]
        return (c[..., last, None] - c[..., None, :]).masked_fill(~lower, -math.inf).exp()


class FFN(nn.Module):
    """e ← e + W_out φ(W_in e) per token (φ linear or ReLU), or e ← e + W_out ((W_a e) ⊙ (W_b e)) (quadratic, W_a is
    W_in); no bias. Returns the update. Hooks: hook_pre (W_in e), hook_pre_b (W_b e, quadratic), hook_post."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.mlp
        m, D, dt = cfg.mlp_width, cfg.d_model, cfg.torch_dtype
        self.W_in = nn.Parameter(torch.zeros(m, D, dtype=dt))
        if self.kind == "quadratic":
            self.W_b = nn.Parameter(torch.zeros(m, D, dtype=dt))
            self.hook_pre_b = HookPoint()
        self.W_out = nn.Parameter(torch.zeros(D, m, dtype=dt))
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        return self.update(resid, self.hook_pre, self.hook_pre_b if self.kind == "quadratic" else None, self.hook_post)

    def update(self, resid: Float[Tensor, "batch pos D"], pre_hook=None, pre_b_hook=None, post_hook=None) -> Tensor:
        """The FFN's update, through the given hook points (none: the hook-free training path)."""
        keep, D = (lambda t: t), resid.shape[-1]  # noqa: E731 - D: the stream's width, padded or not (stream_width)
        pre = (pre_hook or keep)(F.linear(resid, _fit(self.W_in, D)))
        if self.kind == "quadratic":
            post = pre * (pre_b_hook or keep)(F.linear(resid, _fit(self.W_b, D)))  # (W_a e) ⊙ (W_b e)
        else:
            post = torch.relu(pre) if self.kind == "relu" else pre
        return F.linear((post_hook or keep)(post), _fit(self.W_out, D, 0))

    def matrix(self) -> Float[Tensor, "D D"]:
        """I + W_out W_in: the token map of a linear FFN (InvalidArgument for the others)."""
        if self.kind != "linear":
            raise InvalidArgument(f"a {self.kind} FFN is no matrix; only a linear FFN is I + W_out W_in")
        return torch.eye(self.W_in.shape[1], dtype=self.W_in.dtype, device=self.W_in.device) + self.W_out @ self.W_in


class FamilyBlock(nn.Module):
    """resid_mid = resid_pre + attn_out, resid_post = resid_mid + mlp_out (without an FFN there is no resid_mid)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = LinearAttention(cfg) if cfg.attention == "lsa" else FamilyAttention(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        if cfg.mlp != "none":
            self.mlp = FFN(cfg)
            self.hook_resid_mid = HookPoint()
            self.hook_mlp_out = HookPoint()
        else:
            self.mlp = None
        self.hook_resid_post = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        resid = self.hook_resid_pre(resid)
        resid = resid + self.hook_attn_out(self.attn(resid).sum(dim=2))  # Σ_k of the heads' updates
        if self.mlp is not None:
            resid = self.hook_resid_mid(resid)
            resid = resid + self.hook_mlp_out(self.mlp(resid))
        return self.hook_resid_post(resid)


class VariantTransformer(HookedRootModule):
    """L blocks of the family (module docstring) reading out ŷ = −y_query; any ModelConfig but the paper's own model
    (`build` gives interp.model.LinearTransformer for that).

    Hook points (TransformerLens names): `hook_tokens`, `hook_embed`, and per layer l `blocks.{l}.hook_resid_pre`,
    `blocks.{l}.attn.hook_*` (FamilyAttention; lsa: interp.model.LinearAttention's), `blocks.{l}.hook_attn_out`,
    `blocks.{l}.hook_resid_mid`, `blocks.{l}.mlp.hook_pre` / `hook_pre_b` / `hook_post`, `blocks.{l}.hook_mlp_out`
    (with an FFN), `blocks.{l}.hook_resid_post`.
    """

    def __init__(self, cfg: ModelConfig, init: bool = True, generator: torch.Generator | None = None):
        if not isinstance(cfg, ModelConfig):
            raise InvalidType(f"cfg must be an interp.ModelConfig, got {type(cfg).__name__}")
        if cfg.is_lsa:
            raise InvalidArgument("the paper's model (lsa attention, no FFN) is interp.LinearTransformer: use build()")
        check_generator(generator)
        super().__init__()
        self.cfg = cfg
        # qkv is FULL in other weights: the kernel's fused pass for FULL trains it (interp.moments.layer_maps reads
        # the merged maps through FULL's parameterization); None for the others, which train through autograd
        self.arch = params.FULL if cfg.merges_to_full else None
        self.hook_tokens = HookPoint()
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList([FamilyBlock(cfg) for _ in range(cfg.n_layers)])
        self.setup()
        if init:
            self.init_weights(generator)

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Small Gaussian init, std = init_scale / n_layers, every weight (as interp.model.LinearTransformer), in the
        order of named_parameters; then the decay and gate biases set to CONSTANT_INIT, and kernel attention's W_Q, W_K
        drawn at std qk_scale where it is set."""
        small, qk = self.cfg.init_scale / self.cfg.n_layers, self.cfg.qk_scale
        with torch.no_grad():
            for name, p in self.named_parameters():
                std = qk if qk is not None and name.endswith(("attn.W_K", "attn.W_Q")) else small
                p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype) * std)
                last = name.rsplit(".", 1)[-1]
                if last in CONSTANT_INIT:
                    p.fill_(CONSTANT_INIT[last])

    def _check_tokens(self, tokens: Tensor) -> Tensor:
        """Floating tokens [batch, n+1, d+1] cast to the model's dtype; InvalidType / InvalidArgument naming them."""
        if not isinstance(tokens, Tensor) or not tokens.is_floating_point():
            raise InvalidType(f"tokens must be a floating-point torch.Tensor, got {type(tokens).__name__}")
        if tokens.ndim != 3 or tokens.shape[-1] != self.cfg.d_model or tokens.shape[1] < 2 or tokens.shape[0] == 0:
            raise InvalidArgument(
                f"tokens must be [batch, n+1, d+1] with d+1 = {self.cfg.d_model}, n >= 1 and batch >= 1, "
                f"got {list(tokens.shape)}"
            )
        return tokens.to(self.cfg.torch_dtype)

    def residual_stream(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch pos D"]:
        """Tokens before the first block and after every block."""
        resid = self.hook_embed(self.hook_tokens(self._check_tokens(tokens).clone()))
        out = [resid]
        for block in self.blocks:
            resid = block(resid)
            out.append(resid)
        return torch.stack(out)

    def forward(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch"]:
        """ŷ = −y_{n+1} after the last block: through the blocks and their hooks where a hook can see one
        (interp.model.hooks_active), else on the hook-free path, the same function in fewer, larger products
        (`_forward_fast`; both held to `reference_stream` by the tests)."""
        if not self._hooks_active():
            return self._forward_fast(self._check_tokens(tokens))
        resid = self.hook_embed(self.hook_tokens(self._check_tokens(tokens).clone()))
        for block in self.blocks:
            resid = block(resid)
        return -resid[:, -1, -1]

    def _hooks_active(self) -> bool:
        """Whether any hook can see a submodule (interp.model.hooks_active): only then does forward run layer by layer
        (and the trainer leave the kernel's fused pass, for qkv)."""
        return hooks_active(self)

    def _forward_fast(self, resid: Float[Tensor, "batch pos D"], width: int | None = None) -> Float[Tensor, "batch"]:
        """ŷ without hooks: every layer's update from FamilyAttention.fast_update (lsa: Σ_k A_k e_i) and FFN.update,
        and in the last layer the query's row alone (the context's last rows reach no output). The stream runs
        zero-padded to `width` lanes (default stream_width: where that is faster), every weight padded with zeros to
        match, so the extra lanes stay 0: the same function, to rounding."""
        D = resid.shape[-1]
        width = stream_width(D, resid.device) if width is None else width
        if width < D:
            raise InvalidArgument(f"width must be at least the stream's {D}, got {width}")
        resid, last = _fit(resid, width), len(self.blocks) - 1
        for l, block in enumerate(self.blocks):
            attn, query_only = block.attn, l == last
            if isinstance(attn, LinearAttention):
                ctx = resid[:, :-1]
                P, Q = (_fit(_fit(M, width, 1), width, 2) for M in attn.matrices())
                A = attn.head_maps(ctx.transpose(1, 2) @ ctx, (P, Q)).sum(1)  # Σ_k P_k S Q_k (Lemma 4.3)
                upd = (resid[:, -1:] if query_only else resid) @ A.transpose(1, 2)
            else:
                upd = attn.fast_update(resid, query_only)
            resid = (resid[:, -1:] if query_only else resid) + upd
            if block.mlp is not None:
                resid = resid + block.mlp.update(resid)
        return -resid[:, -1, D - 1]

    def predict_per_layer(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch"]:
        """ŷ after 0, 1, ..., L blocks (row 0 is the zero prediction of the raw query)."""
        return -self.residual_stream(tokens)[:, :, -1, -1]

    def accumulated_bias(self, layer: int | None = None, mlp_input: bool = False, include_mlp_biases: bool = True):
        """Zeros: no biases reach the residual stream (TransformerLens's get_full_resid_decomposition adds this)."""
        param = next(self.parameters())
        return torch.zeros(self.cfg.d_model, dtype=param.dtype, device=param.device)


MODELS = (LinearTransformer, VariantTransformer)  # what `build` makes: every model the trainer, eval and probes take


def cell_name(cfg: ModelConfig, quad: float = 0.0) -> str:
    """A family study's name of a model and its task: the attention (retnet, delta, ...), _<ffn> with an FFN
    (lsa_quadratic), and _quad<c> on the quadratic task (lsa_quad1): what experiments/family.py and the report's family
    views call a cell."""
    name = cfg.attention if cfg.mlp == "none" else f"{cfg.attention}_{cfg.mlp}"
    return name + (f"_quad{quad:g}" if quad else "")


def build(cfg: ModelConfig, init: bool = True, generator: torch.Generator | None = None):
    """The model of `cfg`: interp.LinearTransformer for the paper's (lsa attention, no FFN), else VariantTransformer."""
    if not isinstance(cfg, ModelConfig):
        raise InvalidType(f"cfg must be an interp.ModelConfig, got {type(cfg).__name__}")
    return (LinearTransformer if cfg.is_lsa else VariantTransformer)(cfg, init=init, generator=generator)


def check_model(model, name: str = "model") -> None:
    """InvalidType unless `model` is one `build` makes."""
    if not isinstance(model, MODELS):
        raise InvalidType(
            f"{name} must be an interp.LinearTransformer or VariantTransformer, got {type(model).__name__}"
        )


def as_float64(model):
    """A float64 copy of any model (the same weights), or the model itself when it is float64 already."""
    check_model(model)
    if model.cfg.dtype == "float64":
        return model
    out = build(dataclasses.replace(model.cfg, dtype="float64"), init=False)
    out.load_state_dict({k: v.detach().double().cpu() for k, v in model.state_dict().items()})
    return out.eval()


def predictor(model):
    """The model as an interp.evaluate predictor: TaskBatch -> ŷ [batch], without gradients."""
    check_model(model)

    def predict(batch) -> Tensor:
        with torch.no_grad():
            return model(batch.tokens)

    return predict


# ---------------------------------------------------------------------------- the written-out references
def _reference_attention(attn: FamilyAttention, e: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
    """Σ_k W_O o_i of one FamilyAttention, token by token and head by head, each recurrence as the module docstring
    writes it (no masked matrix, no UT transform, no hooks)."""
    B, T, D = e.shape
    n = T - 1
    out = torch.zeros_like(e)
    for hd in range(attn.W_Q.shape[0]):
        WQ, WK, WV, WO = attn.W_Q[hd], attn.W_K[hd], attn.W_V[hd], attn.W_O[hd]
        q, k, v = e @ WQ.T, e @ WK.T, e @ WV.T  # [B, T, h]
        z = torch.zeros_like(q)
        if attn.kind in LINEAR_FAMILY:
            S = torch.zeros(B, v.shape[-1], k.shape[-1], dtype=e.dtype)
            for j in range(n):  # context token j writes, then reads S_j
                vk = v[:, j, :, None] * k[:, j, None, :]  # v_j k_jᵀ
                if attn.kind in ("qkv", "causal"):
                    S = S + vk
                elif attn.kind == "retnet":
                    S = torch.sigmoid(attn.decay_logit[hd]) * S + vk
                elif attn.kind == "gated":
                    a = torch.sigmoid(e[:, j] @ attn.w_gate[hd] + attn.b_gate[hd])
                    S = a[:, None, None] * S + vk
                elif attn.kind == "gla":
                    alpha = torch.sigmoid(e[:, j] @ attn.W_gate[hd].T + attn.b_gate[hd])
                    S = S * alpha[:, None, :] + vk  # S_{j−1} diag(α_j)
                else:  # delta
                    beta = torch.sigmoid(e[:, j] @ attn.w_beta[hd] + attn.b_beta[hd])
                    err = v[:, j] - (S @ k[:, j, :, None])[..., 0]  # v_j − S_{j−1} k_j
                    S = S + beta[:, None, None] * err[:, :, None] * k[:, j, None, :]
                if attn.kind != "qkv":
                    z[:, j] = (S @ q[:, j, :, None])[..., 0]
            for i in range(n + 1) if attn.kind == "qkv" else (n,):  # the query (qkv: every token) reads S_n
                z[:, i] = (S @ q[:, i, :, None])[..., 0]
        else:
            for i in range(T):
                if attn.kind == "softmax":
                    s = torch.stack([(k[:, j] * q[:, i]).sum(-1) for j in range(n)], -1) / math.sqrt(q.shape[-1])
                    w = torch.softmax(s, dim=-1)
                else:
                    w = torch.stack([(attn.phi(k[:, j]) * attn.phi(q[:, i])).sum(-1) for j in range(n)], -1)
                    if attn.kind == "kernel_norm":
                        w = w / w.sum(-1, keepdim=True)
                z[:, i] = sum(w[:, j, None] * v[:, j] for j in range(n))
        out = out + z @ WO.T
    return out


def reference_stream(model, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch pos D"]:
    """The residual stream of any model (`build`), every layer written out token by token from its weights: the
    reference every parallel form is tested against. lsa attention: e_i + Σ_k P_k (Σ_{j≤n} e_j e_jᵀ) Q_k e_i."""
    check_model(model)
    e = tokens.to(model.cfg.torch_dtype)
    out = [e]
    with torch.no_grad():
        for block in model.blocks:
            if isinstance(block.attn, LinearAttention):
                P, Q = block.attn.matrices()
                S = sum(e[:, j, :, None] * e[:, j, None, :] for j in range(e.shape[1] - 1))  # Σ_{j≤n} e_j e_jᵀ
                upd = [
                    sum((P[k] @ S @ Q[k] @ e[:, i, :, None])[..., 0] for k in range(P.shape[0]))
                    for i in range(e.shape[1])
                ]
                e = e + torch.stack(upd, dim=1)
            else:
                e = e + _reference_attention(block.attn, e)
            mlp = getattr(block, "mlp", None)
            if mlp is not None:
                pre = e @ mlp.W_in.T
                post = (
                    pre * (e @ mlp.W_b.T) if mlp.kind == "quadratic" else torch.relu(pre) if mlp.kind == "relu" else pre
                )
                e = e + post @ mlp.W_out.T
            out.append(e)
    return torch.stack(out)


# ---------------------------------------------------------------------------- files of the former second trainer
LEGACY_FORMAT = "interp-variant"  # meta["format"] of a file the former interp.variants.train_variant wrote


def from_legacy(tensors: dict[str, Tensor], meta: dict) -> tuple[dict[str, Tensor], dict]:
    """(tensors, meta) of an interp checkpoint for a file the former second trainer (`train_variant`) wrote: its
    VariantConfig becomes a ModelConfig, its training config the TrainConfig it was (steps, batch, lr, schedule; no
    preset stress), and its weights those of the same function: linear attention keeps P, Q (or DIAG's scalars);
    softmax's score e_jᵀ Q e_i and value P e_j become W_Q = √D·Q, W_K = I, W_V = I, W_O = P (head width D, the 1/√h
    temperature undone by the √D), kernel's φ(K e_j)ᵀ φ(Q e_i) and P e_j become W_K = K, W_Q = Q, W_V = I, W_O = P.
    KeyError / TypeError / ValueError for a file that is not one."""
    old = dict(meta["variant_config"])
    attention = {"linear": "lsa", "softmax": "softmax", "kernel": "kernel"}[old.pop("attention")]
    d_mlp = old.pop("d_mlp")
    cfg = ModelConfig(attention=attention, mlp_width=d_mlp, **old)
    out = {}
    for key, t in tensors.items():
        block, _, rest = key.partition(".attn.")
        if attention == "lsa" or not rest:
            out[key] = t
            continue
        eye = torch.eye(cfg.d_model, dtype=t.dtype).expand_as(t).clone()
        if rest == "P":
            out[f"{block}.attn.W_O"] = t
            out[f"{block}.attn.W_V"] = eye
        elif rest == "Q":
            out[f"{block}.attn.W_Q"] = t * math.sqrt(cfg.d_model) if attention == "softmax" else t
            if attention == "softmax":
                out[f"{block}.attn.W_K"] = eye
        else:  # kernel's K
            out[f"{block}.attn.W_K"] = t
    train = meta.get("train_config") or {}
    new_meta = {
        "model_config": cfg.to_dict(),
        "step": int(meta["step"]),
        "noise": train.get("noise"),
        "seed": train.get("seed"),
        "n": train.get("n"),
        "legacy": {k: meta[k] for k in ("train_config", "loss", "wall_s", "rollbacks", "machine") if k in meta},
    }
    return out, new_meta
