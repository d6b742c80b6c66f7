"""The hook-free forward pass: a linear transformer's prediction from second moments, with a hand-written backward.

Every context token is mapped by I + A^l with A^l = Σ_k P_k S^l Q_k (Vladymyrov et al. 2024, Theorem 4.1), so
    S^{l+1} = (I + A^l) S^l (I + A^l)ᵀ,    e_q^{l+1} = (I + A^l) e_q^l,    ŷ = −(e_q^L)_y,
and only S (symmetric) and the query e_q are carried. They travel together as one symmetric matrix
    Ŝ = [[S, e_q], [e_qᵀ, 0]]   (width D + 1, then zero-padded to `padded_width`),
because Ŝ^{l+1} = N̂ᵀ Ŝ^l N̂ with N̂ = diag(I + A^l, 1)ᵀ (the padded rows and columns of P, Q are zero, so A^l only
reads S and leaves the extra rows and columns alone): the query update rides along in the two batched products
of the S update. For DIAG / GD++ the head sum is elementwise: Σ_k P_k S Q_k = S ⊙ Ω with
Ω = [[ω_xx, ω_xy], [ω_yx, ω_yy]] in blocks (d, 1) × (d, 1).

Two backends run this recursion (`predict(backend=...)`). The torch backend, below: every product with the
batch-shared P_k, Q_k is either one GEMM over the folded batch or one batched product, and
`MomentRecursion.backward` carries G = 2·sym(∂ŷ/∂Ŝ) down the layers by hand (three batched products per layer).
The kernel backend (`_kernel_forward` / `_kernel_backward`, the default on CPU): the same forward and backward in
interp/csrc/moments.cpp, one sequence at a time with its matrices in cache (interp.kernel). For training,
`half_squared_errors` (FusedHalfSE) runs each sequence's forward, loss and backward in one pass of the kernel.
Parameters keep their true shapes: padding exists only inside this module and the kernel.
"""

from __future__ import annotations

import json
import numbers
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from torch.autograd.function import once_differentiable

from interp import kernel, params
from interp.files import InvalidArgument, InvalidType, available_memory, read_regular_file
from interp.tasks import TaskDraw, draw_tasks


def padded_width(width: int) -> int:
    """The width the recursion runs at for Ŝ of `width` = d + 2 (extra rows and columns are zero).

    Chosen by measurement (`experiments/bench_train.py --widths`, one CPU thread, batch 2048): torch's batched
    product runs a naive loop when the product has fewer than 400 multiply-adds (widths up to 7), so widths 4-7
    are padded to 8 (d = 5: 2.9x faster at 8 than at 7); width 3 (d = 1) is fastest as is; 12 (d = 10) and
    17 (d = 15) are fastest as they are (16, 20 and 24 cost 1.5-2x more).
    """
    return 8 if 4 <= width < 8 else width


def _expand(M: Tensor, B: int) -> Tensor:
    return M.expand(B, *M.shape)


# Buffers reused from one step to the next: on CPU a fresh megabyte-sized tensor costs page faults comparable to
# the batched product that fills it. A forward checks a workspace out of the pool and its backward (or the
# forward itself, when no gradient is needed) returns it, so two graphs alive at once never share buffers.
_POOL: dict[tuple, dict[str, Tensor]] = {}
_POOL_KEYS, _POOL_BYTES = 4, 64 << 20


def _checkout(key: tuple) -> dict[str, Tensor]:
    return _POOL.pop(key, None) or {}


def _release(key: tuple, ws: dict[str, Tensor]) -> None:
    if sum(t.numel() * t.element_size() for t in ws.values()) > _POOL_BYTES:
        return
    _POOL.pop(key, None)
    _POOL[key] = ws
    while len(_POOL) > _POOL_KEYS:
        _POOL.pop(next(iter(_POOL)))


def _buf(ws: dict[str, Tensor], name: str, shape: tuple[int, ...], like: Tensor) -> Tensor:
    t = ws.get(name)
    if t is None or t.shape != shape:
        t = ws[name] = like.new_empty(shape)
    return t


class MomentRecursion(torch.autograd.Function):
    """ŷ [B] from S^0 [B, D, D], the query [B, D] and the layer maps.

    `kind` (interp.params.MAP_KINDS; an architecture's is its `.maps`): "full": W1, W2 = P, Q, each [L, H, D, D];
    "diag" (DIAG and GD++): W1 = ω [L, 4] (ω_xx, ω_xy, ω_yx, ω_yy), W2 None.
    `width`: the torch backend at this padded width of Ŝ, or None for the kernel backend (interp.kernel).
    `save`: keep what the backward needs (False under no_grad).
    """

    @staticmethod
    def forward(ctx, S0, q0, W1, W2, kind: str, width: int | None, save: bool):
        full = params.dense_maps(kind)
        ctx.on_kernel = width is None
        if ctx.on_kernel:
            return _kernel_forward(ctx, S0, q0, W1, W2, full, save)
        B, D, _ = S0.shape
        d, Dp = D - 1, width
        L = W1.shape[0]
        H = W1.shape[1] if full else 1
        key = (full, S0.dtype, S0.device, B, Dp, L, H, save)
        ws = _checkout(key)
        n_keep = L if save else 2
        Ss = _buf(ws, "S", (n_keep, B, Dp, Dp), S0)
        Ns = _buf(ws, "N", (max(n_keep - 1, 1), B, Dp, Dp), S0)
        T = _buf(ws, "T", (B, Dp, Dp), S0)
        S = Ss[0].zero_()  # Ŝ^0 = [[S, e_q], [e_qᵀ, 0]]
        S[:, :D, :D] = S0
        S[:, :D, D] = q0
        S[:, D, :D] = q0
        if full:
            P = W1.new_zeros(L, H, Dp, Dp)
            Q = torch.zeros_like(P)
            P[..., :D, :D], Q[..., :D, :D] = W1, W2
            Ys = _buf(ws, "Y", (max(n_keep - 1, 1), H, B, Dp, Dp), S0)
        else:
            Om = omega_matrix(W1, d, Dp)
            OmT = Om.mT.contiguous()  # elementwise kernels run several times faster on contiguous operands
        for l in range(L - 1):
            i = l if save else 0
            N = Ns[i]
            if full:  # N̂ = I + Σ_k Q_kᵀ Ŝ P_kᵀ
                for k in range(H):
                    torch.bmm(_expand(Q[l, k].T, B), S, out=Ys[i, k])  # Q_kᵀ Ŝ
                    Nf = N.view(B * Dp, Dp)
                    if k == 0:
                        torch.mm(Ys[i, k].view(B * Dp, Dp), P[l, k].T, out=Nf)
                    else:
                        Nf.addmm_(Ys[i, k].view(B * Dp, Dp), P[l, k].T)
                N.diagonal(dim1=1, dim2=2).add_(1.0)
            else:
                torch.mul(S, OmT[l], out=N)  # N̂ = I + Ŝ ⊙ Ωᵀ
                N.diagonal(dim1=1, dim2=2).add_(1.0)
            torch.bmm(S, N, out=T)
            S = torch.bmm(N.mT, T, out=Ss[l + 1 if save else (l + 1) % 2])  # Ŝ ← N̂ᵀ Ŝ N̂
        # last layer: only column y of Aᵀ is read, Aᵀ[:, y] = Σ_k Q_kᵀ (Ŝ P_k[y]) or Ŝ[:, y] ⊙ Ω[y]
        if full:
            v = (S.reshape(B * Dp, Dp) @ P[-1, :, d].T).view(B, Dp, H)
            a_y = sum(v[:, :, k] @ Q[-1, k] for k in range(H))
        else:
            v = None
            a_y = S[:, :, d] * Om[-1, d]
        q = S[:, :, D]
        y = -(q[:, d] + (a_y * q).sum(-1))  # ŷ = −(e_q + A e_q)_y
        if save:
            ctx.full, ctx.D, ctx.key, ctx.ws, ctx.v, ctx.a_y = full, D, key, ws, v, a_y
            ctx.save_for_backward(P, Q) if full else ctx.save_for_backward(Om)
        else:
            _release(key, ws)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy):
        if ctx.ws is None:
            raise RuntimeError("the moment path supports one backward per forward (no retain_graph)")
        if ctx.on_kernel:
            return _kernel_backward(ctx, gy)
        full, D, ws, a_y = ctx.full, ctx.D, ctx.ws, ctx.a_y
        Ss, Ns = ws["S"], ws["N"]
        L, B, Dp, _ = Ss.shape
        d = D - 1
        need_input = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        Gs = _buf(ws, "G", (2, B, Dp, Dp), gy)
        U, dN, R = (_buf(ws, name, (B, Dp, Dp), gy) for name in ("U", "dN", "R"))
        if full:
            P, Q = ctx.saved_tensors
            H, Ys = P.shape[1], ws["Y"]
            dP, dQ = torch.zeros_like(P), torch.zeros_like(Q)
        else:
            (Om,) = ctx.saved_tensors
            dOm = torch.zeros_like(Om)
        # last layer: ŷ = −(q_y + a_y · q) with q = Ŝ[:, D]; G = 2·sym(∂/∂Ŝ), a sum of u wᵀ + w uᵀ
        S = Ss[-1]
        q = S[:, :, D]
        a = -gy[:, None] * q  # ∂/∂(Aᵀ[:, y])
        dq = -gy[:, None] * a_y
        dq[:, d] -= gy
        G = Gs[(L - 1) % 2].zero_()
        pairs = [(dq, D)]
        if full:
            for k in range(H):
                w = a @ Q[-1, k].T  # Q_k a
                dP[-1, k, d] = (w.reshape(1, -1) @ S.reshape(B * Dp, Dp)).view(-1)
                dQ[-1, k] = ctx.v[:, :, k].T @ a
                pk = P[-1, k, d]
                G.addcmul_(w[:, :, None], pk[None, None, :]).addcmul_(pk[None, :, None], w[:, None, :])
        else:
            dOm[-1, d] = (a * S[:, :, d]).sum(0)
            pairs.append((a * Om[-1, d], d))
        for u, i in pairs:  # u e_iᵀ + e_i uᵀ
            G[:, :, i] += u
            G[:, i, :] += u
        for l in range(L - 2, -1, -1):
            S, N = Ss[l], Ns[l]
            G_next = Gs[l % 2] if (l > 0 or need_input) else None
            torch.bmm(N, G, out=U)
            torch.bmm(S, U, out=dN)  # ∂/∂N̂ of Ŝ' = N̂ᵀ Ŝ N̂: 2 Ŝ N̂ sym(∂/∂Ŝ') = Ŝ N̂ G
            if G_next is not None:
                torch.bmm(U, N.mT, out=G_next)  # through Ŝ directly: N̂ G N̂ᵀ
            if full:  # Aᵀ = Σ_k Q_kᵀ Ŝ P_kᵀ
                Sf, dNf, Xt = S.view(B * Dp, Dp), dN.view(B * Dp, Dp), U  # U is free again: reuse it
                for k in range(H):
                    torch.bmm(_expand(P[l, k].T, B), dN.mT, out=Xt)  # P_kᵀ dA with dA = ∂/∂A
                    Xf = Xt.view(B * Dp, Dp)
                    dQ[l, k] = Sf.T @ Xf
                    dP[l, k] = dNf.T @ Ys[l, k].view(B * Dp, Dp)
                    if G_next is not None:
                        torch.mm(Xf, Q[l, k].T, out=R.view(B * Dp, Dp))  # (Q_k dAᵀ P_k)ᵀ
                        G_next.add_(R).add_(R.mT)
            else:  # Aᵀ = Ŝ ⊙ Ωᵀ
                dOm[l] = torch.mul(dN, S, out=R).sum(0).T
                if G_next is not None:  # + R + Rᵀ with R = dAᵀ ⊙ Ωᵀ
                    torch.mul(dN, Om[l].T.contiguous(), out=R)
                    G_next.add_(R).add_(R.mT)
            G = G_next
        dS0 = 0.5 * G[:, :D, :D] if ctx.needs_input_grad[0] else None
        dq0 = G[:, :D, D].clone() if ctx.needs_input_grad[1] else None
        _release(ctx.key, ws)
        ctx.ws = None
        if full:
            return dS0, dq0, dP[..., :D, :D], dQ[..., :D, :D], None, None, None
        return dS0, dq0, _omega_grad(dOm, d), None, None, None, None


def _omega_grad(dOm: Float[Tensor, "L w w"], d: int) -> Float[Tensor, "L 4"]:
    """∂/∂(ω_xx, ω_xy, ω_yx, ω_yy) from ∂/∂Ω (the block sums of omega_matrix)."""
    return torch.stack([dOm[:, :d, :d].sum((1, 2)), dOm[:, :d, d].sum(1), dOm[:, d, :d].sum(1), dOm[:, d, d]], 1)


def _kernel_maps(W1: Tensor, W2: Tensor | None, full: bool, D: int) -> tuple[int, dict[str, Tensor]]:
    """(row length ld, the layer maps as the kernel reads them: FULL's "P", "Q", "Pt" in rows of ld lanes; DIAG's
    "P" = ω [L, 4], which the kernel expands into Ω and Ωᵀ itself)."""
    W = D + 1
    ld = kernel.row_length(W)

    def pad(M: Tensor) -> Tensor:  # [..., r, c] → [..., W, ld], zeros beyond
        return F.pad(M, (0, ld - M.shape[-1], 0, W - M.shape[-2])).contiguous()

    if full:
        return ld, {"P": pad(W1), "Q": pad(W2), "Pt": pad(W1.mT)}
    return ld, {"P": W1.contiguous()}


def _kernel_parts(like: Tensor, full: bool, L: int, H: int, D: int, ld: int) -> list[dict[str, Tensor]]:
    """Zeroed per-thread parameter-gradient accumulators for a kernel pass over a batch like `like` [B, ...]."""
    shape = (L, H, D + 1, ld) if full else (L, 4)
    return [
        {"dP": like.new_zeros(shape), "dQt": like.new_zeros(shape) if full else None}
        for _ in range(kernel.threads(like.shape[0]))
    ]


def _kernel_grads(full: bool, D: int, parts: list[dict[str, Tensor]]) -> tuple[Tensor, Tensor | None]:
    """(∂/∂W1, ∂/∂W2) in MomentRecursion's shapes from the threads' accumulators (DIAG's: ∂/∂ω already)."""
    dP = parts[0]["dP"] if len(parts) == 1 else sum(p["dP"] for p in parts)
    if full:
        dQt = parts[0]["dQt"] if len(parts) == 1 else sum(p["dQt"] for p in parts)
        return dP[..., :D, :D], dQt[..., :D, :D].mT
    return dP, None


def _kernel_forward(ctx, S0, q0, W1, W2, full: bool, save: bool) -> Tensor:
    """MomentRecursion.forward on the fused CPU kernel (interp.kernel): Ŝ of width D + 1 in rows of `ld` lanes.

    Only the inputs are kept for the backward, which recomputes each sequence's layers in cache.
    """
    B, D, _ = S0.shape
    ld, t = _kernel_maps(W1, W2, full, D)
    t.update(S0=S0.contiguous(), q0=q0.contiguous(), y=S0.new_empty(B))
    kernel.call("forward", full, ld, W1.shape[0], W1.shape[1] if full else 1, t)
    if save:
        ctx.full, ctx.D, ctx.ld, ctx.L, ctx.ws = full, D, ld, W1.shape[0], t  # ws: the inputs, kept for one backward
    return t["y"]


def _kernel_backward(ctx, gy: Tensor) -> tuple:
    """MomentRecursion.backward on the fused CPU kernel: each thread sums its sequences' parameter gradients."""
    t, D, ld, L, full = ctx.ws, ctx.D, ctx.ld, ctx.L, ctx.full
    H = t["P"].shape[1] if full else 1
    parts = _kernel_parts(gy, full, L, H, D, ld)
    need_input = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
    G0 = gy.new_empty(gy.shape[0], D + 1, ld) if need_input else None
    kernel.call("backward", full, ld, L, H, {**t, "gy": gy.contiguous(), "G0": G0}, parts)
    ctx.ws = None
    dS0 = 0.5 * G0[:, :D, :D] if ctx.needs_input_grad[0] else None
    dq0 = G0[:, :D, D].clone() if ctx.needs_input_grad[1] else None
    return dS0, dq0, *_kernel_grads(full, D, parts), None, None, None


class FusedHalfSE(torch.autograd.Function):
    """The training loss terms of a batch, with their parameter gradients from the same pass of the kernel.

    Per sequence b of a task draw (interp.tasks.TaskDraw: x, x_t, w, σ, ξ): the kernel forms its tokens
    e_i = (x_i, ⟨w, x_i⟩ + σ ξ_i) and S^0, runs its forward to ŷ_b, then ℓ_b = ½·v_b·(ŷ_b − ⟨w, x_t⟩)² (v the
    importance weights, or 1) and the loss term c_b = ℓ_b, or with `cap` the trainer's robust guard
    (interp.train.robust_half_se): c_b = 0 for a non-finite ℓ_b (the sequence is left out), cap·(1 + log(ℓ_b / cap))
    above the cap; then its backward from the layers still in cache, so nothing is recomputed. Returns (c, ℓ), both
    [B]; only c is differentiable, in W1 and W2, and only through a sum of its entries (an equal gradient for every b).
    """

    @staticmethod
    def forward(ctx, W1, W2, x, x_query, w, sigma, xi, weight, kind: str, cap: float | None):
        full = params.dense_maps(kind)
        args = _fused_args(W1, W2, kind, x, x_query, w, sigma, xi, weight)
        t, parts = args[-2:]
        kernel.call("fused", full, *args, cap=cap or 0.0, robust=cap is not None)
        ctx.grads = _kernel_grads(full, x.shape[-1] + 1, parts)
        ctx.mark_non_differentiable(t["y"])
        return t["c"], t["y"]

    @staticmethod
    @once_differentiable
    def backward(ctx, gc, _gl):
        scale = gc.reshape(-1)[0]
        if not bool((gc == scale).all()):
            raise RuntimeError("the fused training loss differentiates only a sum or mean of its loss terms")
        dW1, dW2 = ctx.grads
        return dW1 * scale, None if dW2 is None else dW2 * scale, *([None] * 8)


def _fused_args(W1, W2, kind: str, x, x_query, w, sigma, xi, weight) -> tuple:
    """kernel.call's (ld, L, H, t, parts) for the fused pass on a draw: the layer maps, the draw, fresh outputs "y"
    and "c" in t, zeroed gradient accumulators in parts."""
    B, _, d = x.shape
    full = params.dense_maps(kind)
    L, H = W1.shape[0], W1.shape[1] if full else 1
    ld, t = _kernel_maps(W1, W2, full, d + 1)
    draw = {"x": x, "xq": x_query, "w": w, "sigma": sigma, "xi": xi, "weight": weight}
    t.update({k: v.contiguous() for k, v in draw.items() if v is not None})
    t.update(y=x.new_empty(B), c=x.new_empty(B))
    return ld, L, H, t, _kernel_parts(x, full, L, H, d + 1, ld)


def half_squared_errors(
    model, draw, weight: Float[Tensor, "batch"] | None = None, cap: float | None = None
) -> tuple[Float[Tensor, "batch"], Float[Tensor, "batch"]]:
    """(c, ℓ) of FusedHalfSE for a LinearTransformer and a task draw (interp.tasks.TaskDraw) on the fused CPU kernel
    (`fused_supported`): the trainer's loss terms, differentiable in the model's parameters through their sum, and
    the half squared errors. The same numbers as the model's forward on `draw.batch()`, to float rounding."""
    _check_model(model)
    if not isinstance(draw, TaskDraw):
        raise InvalidType(f"draw must be an interp.TaskDraw (interp.draw_tasks), got {type(draw).__name__}")
    if not fused_supported(model, draw.x):
        raise InvalidArgument(
            "the fused training loss needs the compiled kernel, no hooks on the model, and a CPU float32/float64 "
            f"draw of the model's dtype (not requiring grad) with d + 2 <= {kernel.ROW_LENGTHS[-1]}; "
            "use the model's forward on draw.batch() instead"
        )
    kind, W1, W2 = layer_maps(model)
    weight = None if weight is None else weight.to(draw.x.dtype)
    return FusedHalfSE.apply(W1, W2, draw.x, draw.x_query, draw.w, draw.sigma, draw.xi, weight, kind, cap)


@dataclass(frozen=True)
class KernelChoice:
    """Whether the trainer (`train`: the fused pass against the torch backend's forward and backward) and the
    models' hook-free forward (`forward`: the kernel's forward and backward against the torch backend's) take the
    kernel by default, why, and the measured speedups (the torch backend's time over the kernel's)."""

    train: bool
    forward: bool
    why: str
    isa: str | None = None
    train_speedup: float | None = None
    forward_speedup: float | None = None

    def describe(self) -> str:
        if self.train_speedup is None:
            return self.why
        path = "kernel" if self.train else "torch backend"
        return (
            f"{path} ({self.why}: the {self.isa} kernel's training step {self.train_speedup:.2f}x the torch "
            f"backend's, its forward + backward {self.forward_speedup:.2f}x)"
        )


CHOICE_VERSION = 1  # bump when the measurement below changes: cached choices are then measured again


def kernel_choice() -> KernelChoice:
    """Whether the kernel is taken where it supports the tensors. The environment variable INTERP_KERNEL decides
    when set: 0 never (interp.kernel does not load), 1 always; otherwise ("auto") the kernel is taken only where it
    measured faster than the torch backend on this CPU: a FULL-3 step on 512 sequences at d = 10, each path timed
    in turn in this process, medians of 15 (`_measure`, about 0.1 s). The answer is cached per CPU, build and torch
    version in $XDG_CACHE_HOME/interp/kernel_choice.json (~/.cache/...; INTERP_CACHE_DIR overrides), so a machine
    keeps one path from run to run and a resumed run stays exact."""
    mode = os.environ.get("INTERP_KERNEL", "auto")
    info = kernel.info()
    if not info["available"]:
        return KernelChoice(False, False, f"torch backend (kernel {info['why']})")
    if mode == "1":
        return KernelChoice(True, True, f"kernel ({info['isa']} build; INTERP_KERNEL=1)", info["isa"])
    return _measured_choice(info["isa"], info["cpu"], info["torch"])


@cache
def _measured_choice(isa: str, cpu: str, torch_version: str) -> KernelChoice:
    key = f"v{CHOICE_VERSION}|{cpu}|{isa}|{torch_version}|{kernel.ABI}"
    fields = ("train_speedup", "forward_speedup")
    value, why = measured_once(key, fields, lambda: dict(zip(fields, _measure())))
    train, fwd = value["train_speedup"], value["forward_speedup"]
    return KernelChoice(train > 1.0, fwd > 1.0, why, isa, train, fwd)


def measured_once(
    key: str, fields: tuple[str, ...], measure: Callable[[], dict[str, float]]
) -> tuple[dict[str, float], str]:
    """This machine's answer to a speed question (`key` names the question, the CPU and the versions it holds for), its
    `fields`: from the choice cache ($XDG_CACHE_HOME/interp/kernel_choice.json; INTERP_CACHE_DIR overrides) where it
    has them all, else `measure()` now (gradients enabled: the first caller may be an evaluation under no_grad), added
    to the cache. Returns (the fields, why: when they were measured). One answer per machine, so that a machine keeps
    one path from run to run and a resumed run stays exact."""
    path = _choice_file()
    cached = _read_choices(path).get(key)
    if isinstance(cached, dict) and set(fields) <= set(cached):
        try:
            return {k: float(cached[k]) for k in fields}, f"measured on this CPU {cached.get('when', '')}".rstrip()
        except (TypeError, ValueError):  # an entry that is no number (edited by hand): measured again
            pass
    with torch.enable_grad():
        value = {k: float(v) for k, v in measure().items()}
    _write_choice(path, key, {**value, "when": time.strftime("%Y-%m-%d")})
    return value, "measured on this CPU now"


def _choice_file() -> Path:
    root = os.environ.get("INTERP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "interp"
    )
    return Path(root) / "kernel_choice.json"


def _read_choices(path: Path) -> dict:
    try:
        if not path.is_file():
            return {}
        data = json.loads(read_regular_file(path, 1 << 20, "kernel choice cache"))  # bounded; no FIFO, device, /proc
    except (OSError, ValueError, RecursionError):  # CheckpointError is a ValueError
        return {}
    return data if isinstance(data, dict) else {}


def _write_choice(path: Path, key: str, value: dict) -> None:
    """Add one answer to the cache file, atomically; a cache that cannot be written is skipped."""
    data = {**_read_choices(path), key: value}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def _measure(L: int = 3, B: int = 512, d: int = 10, n: int = 20, rounds: int = 15) -> tuple[float, float]:
    """(training step, forward + backward): the torch backend's median time over the kernel's, FULL-L, in turn."""
    gen = torch.Generator().manual_seed(0)
    D = d + 1
    P = (0.05 * torch.randn(L, 1, D, D, generator=gen)).requires_grad_()
    Q = (0.05 * torch.randn(L, 1, D, D, generator=gen)).requires_grad_()
    draw = draw_tasks(B, d, n, "uniform:5", gen)
    tokens = draw.batch().tokens
    S0, q0 = tokens[:, :-1].mT @ tokens[:, :-1], tokens[:, -1]
    width, maps = padded_width(D + 1), params.FULL.maps

    def fused():
        c, _ = FusedHalfSE.apply(P, Q, draw.x, draw.x_query, draw.w, draw.sigma, draw.xi, None, maps, None)
        c.mean().backward()

    def on(width_):
        def step():
            y = MomentRecursion.apply(S0, q0, P, Q, maps, width_, True)
            y.square().mean().backward()

        return step

    paths = {"fused": fused, "kernel": on(None), "torch": on(width)}
    times: dict[str, list[float]] = {k: [] for k in paths}
    for r in range(rounds + 2):
        for name, fn in paths.items():
            t0 = time.perf_counter()
            fn()
            if r > 1:  # the first two rounds warm up
                times[name].append(time.perf_counter() - t0)
            P.grad = Q.grad = None
    med = {k: statistics.median(v) for k, v in times.items()}
    return med["torch"] / med["fused"], med["torch"] / med["kernel"]


def fused_supported(model, x: Tensor) -> bool:
    """Whether `half_squared_errors` runs `model` on a draw with inputs `x` [batch, n, d]: the kernel takes them, no
    hook is attached (hooks see activations only on the per-token path), the inputs need no gradient, and the
    environment variable INTERP_FUSED is not 0 (with 0 the trainer takes the model's forward and the kernel's
    separate backward)."""
    if os.environ.get("INTERP_FUSED", "1") == "0" or not (model.cfg.is_lsa or model.cfg.merges_to_full):
        return False  # the family (interp.variants) trains through autograd, but for qkv: FULL in other weights
    return _kernel_takes(model, x) and not x.requires_grad and not model._hooks_active() and kernel_choice().train


def _kernel_takes(model, tokens: Tensor) -> bool:
    """Whether the kernel runs `model` on `tokens` (CPU float32 / float64 tokens of the model's own dtype and
    device, d + 2 no wider than the widest compiled row)."""
    weight = next(model.parameters())
    return (
        kernel.supports(tokens, model.cfg.d_model + 1)
        and (weight.device, weight.dtype) == (tokens.device, tokens.dtype)  # else torch raises on the mismatch
    )


def omega_matrix(omegas: Float[Tensor, "L 4"], d: int, width: int) -> Float[Tensor, "L width width"]:
    """Ω^l with Σ_k P_k S Q_k = S ⊙ Ω^l for DIAG / GD++ (blocks ω_xx, ω_xy, ω_yx, ω_yy; zero beyond d + 1)."""
    z = omegas.new_zeros(omegas.shape[0], width, width)
    z[:, :d, :d] = omegas[:, 0, None, None]
    z[:, :d, d] = omegas[:, 1, None]
    z[:, d, :d] = omegas[:, 2, None]
    z[:, d, d] = omegas[:, 3]
    return z


def predict(
    model, tokens: Float[Tensor, "batch pos D"], width: int | None = None, backend: str = "auto"
) -> Float[Tensor, "batch"]:
    """ŷ of a LinearTransformer without hooks.

    backend: "kernel" (the fused CPU kernel, interp.kernel), "torch" (batched torch products, any device) or
    "auto" (the kernel where it supports the tensors, else torch). `width` (torch backend only) overrides the
    padded width of Ŝ (≥ d + 2).
    """
    _check_model(model)
    # a floating tensor [batch, n+1, d+1] of the model's width; not cast: this path takes the model's dtype (a forward
    # casts first), and another one is refused by the kernel or by torch, never misread
    tokens = model._check_tokens(tokens, cast=False)
    cfg = model.cfg
    D = cfg.d_model
    if backend not in ("auto", "kernel", "torch"):
        raise InvalidArgument(f"backend must be auto, kernel or torch, got {backend!r}")
    if width is not None and (isinstance(width, bool) or not isinstance(width, numbers.Integral)):
        raise InvalidType(f"width must be an int or None, got {width!r:.60}")
    on_kernel = width is None and backend != "torch" and _kernel_takes(model, tokens)
    on_kernel = on_kernel and (backend == "kernel" or kernel_choice().forward)
    if backend == "kernel" and not on_kernel:
        raise InvalidArgument(
            "backend='kernel' needs the compiled kernel (interp.kernel.available()), CPU float32/float64 tokens "
            f"of the model's dtype, d + 2 <= {kernel.ROW_LENGTHS[-1]} and no width"
        )
    width = None if on_kernel else padded_width(D + 1) if width is None else width
    if width is not None and width < D + 1:
        raise InvalidArgument(f"width must be >= d + 2 = {D + 1}, got {width}")
    if width is not None and width > D + 1:  # a width of the caller's: Ŝ [batch, width, width] must fit in memory
        _check_width_memory(width, tokens, cfg.n_layers)
    ctx = tokens[:, :-1]
    S0 = ctx.mT @ ctx  # S^0 = Σ_{j≤n} e_j e_jᵀ over the context (the query is not a key)
    q0 = tokens[:, -1]
    kind, W1, W2 = layer_maps(model)
    save = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (S0, q0, W1, W2))
    return MomentRecursion.apply(S0, q0, W1, W2, kind, width, save)


def _check_width_memory(width: int, tokens: Tensor, n_layers: int) -> None:
    """InvalidArgument when the torch recursion at `width` would hold more than 80% of the memory this process can
    still use (files.available_memory: MemAvailable or its cgroup's headroom): about 4 + 2L matrices [batch, width,
    width] (Ŝ, its products, and the saved ones autograd keeps), checked before any is allocated."""
    if tokens.device.type != "cpu":
        return
    need = tokens.element_size() * tokens.shape[0] * width * width * (4 + 2 * n_layers)
    have = available_memory()
    if have is not None and need > 0.8 * have:
        raise InvalidArgument(
            f"width {width}: the recursion on {tokens.shape[0]} sequences needs about {need / 2**30:.1f} GiB, more "
            f"than the {have / 2**30:.1f} GiB free here (MemAvailable, or the memory cgroup's limit less its usage)"
        )


def _check_model(model) -> None:
    """InvalidType unless `model` is a LinearTransformer (interp.model, above this module: known by what it has)."""
    if not all(hasattr(model, name) for name in ("cfg", "arch", "blocks", "_check_tokens")):
        raise InvalidType(f"model must be an interp.LinearTransformer, got {type(model).__name__}")


def layer_maps(model) -> tuple[str, Tensor, Tensor | None]:
    """MomentRecursion's (kind, W1, W2) for a LinearTransformer, from its architecture (interp.params): ("full", P,
    Q) stacked [L, H, D, D] for FULL, or ("diag", ω [L, 4], None) for DIAG and GD++; differentiable in the model's
    parameters."""
    arch = model.arch
    return arch.maps, *arch.layer_maps([b.attn for b in model.blocks])
