"""The hook-free forward pass: a linear transformer's prediction from second moments, with its own backward.

Every context token is mapped by I + A^l with A^l = Σ_k P_k S^l Q_k (Vladymyrov et al. 2024, Theorem 4.1), so
    S^{l+1} = (I + A^l) S^l (I + A^l)ᵀ,    e_q^{l+1} = (I + A^l) e_q^l,    ŷ = −(e_q^L)_y,
and only S [batch, D, D] (symmetric) and the query token [batch, D] are carried. For DIAG / GD++ the head sum is
elementwise: Σ_k P_k S Q_k = S ⊙ Ω, Ω = [[ω_xx, ω_xy], [ω_yx, ω_yy]] in blocks (d, 1) × (d, 1).

The recursion runs on Aᵀ and N = (I + A)ᵀ, so that every product with the batch-shared P, Q is one large GEMM over
the folded batch and every per-sequence product is one batched GEMM; `MomentRecursion` supplies the backward by
hand (5 batched products per layer instead of autograd's 6 plus its copies). Tensors may be padded with zero rows
and columns to a width the CPU kernels like (`padded_width`): the padding stays exactly zero through the recursion,
so the prediction and the gradients of the true entries are unchanged. Parameters keep their true shapes; the
padding lives only inside this module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

# Width → padded width, measured on one CPU thread for batched products at batch 2048
# (experiments/results/bench_train.md): below 8 × 8 torch's batched product falls back to a naive loop
# (D = 4..7 cost more than D = 8), and the 7-layer step runs fastest at D = 11 → 12.
_PAD = {4: 8, 5: 8, 6: 8, 7: 8, 11: 12}


def padded_width(D: int) -> int:
    """The width the recursion runs at for tokens of width D = d + 1."""
    return _PAD.get(D, D)


def context_moments(tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch D D"]:
    """S^0 = Σ_{j≤n} e_j e_jᵀ over the n context tokens (the query is not a key)."""
    ctx = tokens[:, :-1]
    return ctx.transpose(1, 2) @ ctx


def _full_At(S: Tensor, Pt: Tensor, Qc: Tensor) -> tuple[Tensor, Tensor]:
    """Aᵀ = Σ_k Q_kᵀ S P_kᵀ [B, D, D] and SQT [B, D(n), H, D(j)] = (S Q_k)[j, n], via two folded GEMMs.

    Qc [D(m), H·D(n)] holds Q_k[m, n]; Pt [H·D(j), D(i)] holds P_k[i, j].
    """
    B, D, _ = S.shape
    SQ = (S.reshape(B * D, D) @ Qc).view(B, D, -1, D)  # (S Q_k)[j, n] at [b, j, k, n]
    SQT = SQ.permute(0, 3, 2, 1).contiguous()  # [b, n, k, j]
    return (SQT.view(B * D, -1) @ Pt).view(B, D, D), SQT


class MomentRecursion(torch.autograd.Function):
    """ŷ [B] from S^0 [B, D, D], the query [B, D] and the layer maps, with a hand-written backward.

    kind "full": W1 = P, W2 = Q, both [L, H, D, D]. kind "diag": W1 = Ω [L, D, D], W2 unused (an empty tensor).
    y_index is the row of y (the true d; D may be padded beyond it).
    """

    @staticmethod
    def forward(ctx, S, q, W1, W2, kind: str, y_index: int):
        B, D, _ = S.shape
        L = W1.shape[0]
        eye = torch.eye(D, dtype=S.dtype, device=S.device)
        if kind == "full":
            H = W1.shape[1]
            Qc = W2.permute(0, 2, 1, 3).reshape(L, D, H * D)  # [l, m, (k n)] = Q_k[m, n]
            Pt = W1.permute(0, 1, 3, 2).reshape(L, H * D, D)  # [l, (k j), i] = P_k[i, j]
        saved = []
        for l in range(L):
            if kind == "full":
                At, SQT = _full_At(S, Pt[l], Qc[l])
            else:
                At, SQT = S * W1[l].T, None  # (S ⊙ Ω)ᵀ = S ⊙ Ωᵀ as S is symmetric
            N = At + eye  # N = (I + A)ᵀ
            if l == L - 1:  # only the query's y entry is read out
                y = -(N[:, :, y_index] * q).sum(-1)
                saved.append((S, N, None, q, SQT))
                break
            T = torch.bmm(S, N)  # S (I + A)ᵀ
            saved.append((S, N, T, q, SQT))
            q = (N * q[:, :, None]).sum(1)  # e_q ← (I + A) e_q
            S = torch.bmm(N.transpose(1, 2), T)  # S ← (I + A) S (I + A)ᵀ
        ctx.kind, ctx.y_index = kind, y_index
        ctx.layers = saved
        if kind == "full":
            ctx.save_for_backward(W1, W2)
        else:
            ctx.save_for_backward(W1)
        return y

    @staticmethod
    def backward(ctx, gy):
        kind, d = ctx.kind, ctx.y_index
        W = ctx.saved_tensors
        layers = ctx.layers
        L = len(layers)
        S0 = layers[0][0]
        B, D, _ = S0.shape
        if kind == "full":
            P, Q = W
            H = P.shape[1]
            Pc = P.permute(0, 2, 1, 3).reshape(L, D, H * D)  # [l, i, (k j)] = P_k[i, j]
            Qt = Q.permute(0, 1, 3, 2).reshape(L, H * D, D)  # [l, (k n), m] = Q_k[m, n]
            dW1 = torch.empty_like(P)
            dW2 = torch.empty_like(Q)
        else:
            (Om,) = W
            dW1 = torch.empty_like(Om)
        G = g = None
        for l in range(L - 1, -1, -1):
            S, N, T, q, SQT = layers[l]
            if l == L - 1:  # ŷ = −(N[:, y] · q)
                dN = torch.zeros_like(N)
                dN[:, :, d] = -gy[:, None] * q
                gq = -gy[:, None] * N[:, :, d]
            else:  # S' = Nᵀ S N, q' = Nᵀ q; G is the symmetric gradient of S'
                dN = torch.baddbmm(q[:, :, None] * g[:, None, :], T, G, alpha=2.0)  # 2 S N G + q gᵀ
                U = torch.bmm(N, G)
                gq = (N * g[:, None, :]).sum(-1)  # N g
            # through Aᵀ (dN = d Aᵀ)
            if kind == "full":
                Wk = (dN.reshape(B * D, D) @ Pc[l]).view(B, D, H, D)  # (dAᵀ P_k)[n, j] at [b, n, k, j]
                Wp = Wk.permute(0, 3, 2, 1).contiguous()  # [b, j, k, n]
                R = (Wp.view(B * D, H * D) @ Qt[l]).view(B, D, D)  # (Σ_k Q_k dAᵀ P_k)ᵀ
                dW2[l] = (Wp.view(B * D, H * D).T @ S.reshape(B * D, D)).view(H, D, D).transpose(1, 2)
                dW1[l] = (dN.reshape(B * D, D).T @ SQT.view(B * D, H * D)).view(D, H, D).transpose(0, 1)
            else:
                Om_t = W[0][l].T
                R = dN * Om_t
                dW1[l] = (dN * S).sum(0).T
            if l > 0 or ctx.needs_input_grad[0]:
                dS = 0.5 * (R + R.transpose(1, 2))
                if l < L - 1:
                    dS = torch.baddbmm(dS, U, N.transpose(1, 2))  # + N G Nᵀ
                G = dS
            g = gq
        dW2_out = dW2 if kind == "full" else None
        return (G if ctx.needs_input_grad[0] else None, g if ctx.needs_input_grad[1] else None,
                dW1, dW2_out, None, None)


def omega_matrix(omegas: Float[Tensor, "L 4"], d: int, width: int) -> Float[Tensor, "L width width"]:
    """Ω^l with Σ_k P_k S Q_k = S ⊙ Ω^l for DIAG / GD++ (ω_xx, ω_xy, ω_yx, ω_yy blocks, zero padding)."""
    L = omegas.shape[0]
    z = omegas.new_zeros(L, width, width)
    z[:, :d, :d] = omegas[:, 0, None, None]
    z[:, :d, d] = omegas[:, 1, None]
    z[:, d, :d] = omegas[:, 2, None]
    z[:, d, d] = omegas[:, 3]
    return z


def predict(model, tokens: Float[Tensor, "batch pos D"], width: int | None = None) -> Float[Tensor, "batch"]:
    """ŷ of a LinearTransformer without hooks; `width` overrides the padded width (≥ D)."""
    cfg = model.cfg
    D = cfg.d_model
    Dp = padded_width(D) if width is None else width
    if Dp < D:
        raise ValueError(f"width must be >= d + 1 = {D}, got {Dp}")
    pad = Dp - D
    S = context_moments(tokens)
    q = tokens[:, -1]
    if pad:
        S, q = F.pad(S, (0, pad, 0, pad)), F.pad(q, (0, pad))
    if cfg.param == "full":
        P = torch.stack([b.attn.P for b in model.blocks])
        Q = torch.stack([b.attn.Q for b in model.blocks])
        if pad:
            P, Q = F.pad(P, (0, pad, 0, pad)), F.pad(Q, (0, pad, 0, pad))
        return MomentRecursion.apply(S, q, P, Q, "full", cfg.d)
    Om = omega_matrix(model.omegas().stack(), cfg.d, Dp)
    return MomentRecursion.apply(S, q, Om, Om.new_empty(0), "diag", cfg.d)
