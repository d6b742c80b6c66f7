"""The three parameterizations of a layer (Vladymyrov et al. 2024; README, Conventions), one object each.

    FULL   free P_k, Q_k ∈ R^{(d+1)×(d+1)} per head;
    DIAG   P_k = diag(p_x I_d, p_y), Q_k = diag(q_x I_d, q_y), so that Σ_k P_k S Q_k = S ⊙ Ω with
           Ω = [[ω_xx, ω_xy], [ω_yx, ω_yy]] in blocks (d, 1) × (d, 1), ω_ab = Σ_k p_a q_b;
    GD++   DIAG with q_y = 0 (ω_xy = ω_yy = 0).

`ModelConfig.param` stays the string ("full", "diag", "gdpp") in configs, checkpoints and on the command line;
`of(name)` maps it to its object, which the model keeps as `.arch` and asks for everything that differs: which
weights a layer has and their shapes (`shapes`; checkpoint names are `blocks.{l}.attn.<name>`), P and Q from them
(`matrices`), the ω's (`omegas`), and what the hook-free moment path is handed (`layer_maps`, of the kind `maps`:
dense P_k, Q_k on the kernel's FULL ABI, or ω [L, 4] on its DIAG ABI). Nothing else compares the strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.files import InvalidArgument

# The moment path's two kinds of layer maps (interp.moments.MomentRecursion's `kind`): dense P_k, Q_k [L, H, D, D]
# ("full", the kernel's FULL ABI) or ω [L, 4] ("diag", its DIAG ABI, which DIAG and GD++ both use).
MAP_KINDS = {"full": True, "diag": False}  # kind → dense


def dense_maps(kind: str) -> bool:
    """Whether layer maps of `kind` ("full" or "diag") are dense P_k, Q_k (else ω [L, 4])."""
    try:
        return MAP_KINDS[kind]
    except (KeyError, TypeError):
        raise InvalidArgument(f"layer-map kind must be one of {', '.join(MAP_KINDS)}, got {kind!r}") from None


def diag_matrices(
    p_x: Tensor, p_y: Tensor, q_x: Tensor, q_y: Tensor, d: int
) -> tuple[Float[Tensor, "*h D D"], Float[Tensor, "*h D D"]]:
    """P_k = diag(p_x I_d, p_y), Q_k = diag(q_x I_d, q_y) for scalars of any leading shape."""
    ones = torch.ones(d, dtype=p_x.dtype, device=p_x.device)
    p_diag = torch.cat([p_x[..., None] * ones, p_y[..., None]], dim=-1)
    q_diag = torch.cat([q_x[..., None] * ones, q_y[..., None]], dim=-1)
    return torch.diag_embed(p_diag), torch.diag_embed(q_diag)


@dataclass(frozen=True, eq=False)
class Parameterization:
    """What one architecture owns. `attn` below is a layer (interp.model.LinearAttention) holding the weights named
    by `weights` as attributes; `attns` one per layer, bottom to top."""

    name: str  # ModelConfig.param
    label: str  # how tables and figures write it
    weights: tuple[str, ...]  # a layer's parameters, in registration order (the init draws them in this order)
    dense: bool  # the moment path takes dense P_k, Q_k (else the ω's)

    @property
    def maps(self) -> str:
        """The kind of layer maps `layer_maps` returns (MAP_KINDS)."""
        return "full" if self.dense else "diag"

    @property
    def has_omegas(self) -> bool:
        """Whether a layer is exactly its four ω's (DIAG, GD++), so `omegas` and Lemma 4.4 apply."""
        return not self.dense

    def shapes(self, n_heads: int, d_model: int) -> dict[str, tuple[int, ...]]:
        """The shape of every weight of a layer of `n_heads` heads on tokens of width d_model = d + 1."""
        raise NotImplementedError

    def per_head(self, d_model: int) -> int:
        """Weights per head and layer (ModelConfig.n_params): 2·(d+1)² for FULL, 4 for DIAG, 3 for GD++."""
        return sum(torch.Size(s).numel() for s in self.shapes(1, d_model).values())

    def make(self, attn: nn.Module, n_heads: int, d_model: int, dtype: torch.dtype) -> None:
        """Register `attn`'s weights, zero-filled (the model's init draws them)."""
        for name, shape in self.shapes(n_heads, d_model).items():
            setattr(attn, name, nn.Parameter(torch.zeros(shape, dtype=dtype)))

    def matrices(self, attn) -> tuple[Float[Tensor, "H D D"], Float[Tensor, "H D D"]]:
        """The materialized (P, Q) of every head of one layer."""
        raise NotImplementedError

    def diag_params(self, attn) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(p_x, p_y, q_x, q_y) of one layer, each [H]."""
        raise InvalidArgument("a FULL layer has no (p_x, p_y, q_x, q_y); fit it with interp.probes")

    def omegas(self, attns: Sequence) -> Float[Tensor, "L 4"]:
        """ω_xx, ω_xy, ω_yx, ω_yy per layer, differentiable in the weights."""
        raise InvalidArgument("omegas() is defined for diag and gdpp models; fit a FULL model with interp.probes")

    def layer_maps(self, attns: Sequence) -> tuple[Tensor, Tensor | None]:
        """(W1, W2) for interp.moments.MomentRecursion, of kind `maps`, differentiable in the weights."""
        raise NotImplementedError

    def __reduce__(self):  # pickling and deepcopy give back the one object per architecture
        return of, (self.name,)

    def __repr__(self) -> str:
        return f"<parameterization {self.label}>"


class Full(Parameterization):
    def shapes(self, n_heads, d_model):
        return {"P": (n_heads, d_model, d_model), "Q": (n_heads, d_model, d_model)}

    def matrices(self, attn):
        return attn.P, attn.Q

    def layer_maps(self, attns):  # each attention's (P, Q): FULL's own, or qkv's merged (interp.variants)
        P, Q = zip(*(a.matrices() for a in attns))
        return torch.stack(P), torch.stack(Q)


class Diag(Parameterization):
    def shapes(self, n_heads, d_model):
        return {name: (n_heads,) for name in self.weights}

    def diag_params(self, attn):
        return attn.p_x, attn.p_y, attn.q_x, attn.q_y

    def matrices(self, attn):
        return diag_matrices(*self.diag_params(attn), d=attn.cfg.d)

    def omegas(self, attns):
        pq = torch.stack([t for a in attns for t in self.diag_params(a)]).unflatten(0, (-1, 4))  # [L, 4, H]
        # [[ω_xx, ω_xy], [ω_yx, ω_yy]] = Σ_k (p_x, p_y)ᵀ (q_x, q_y) per layer, in one batched product
        return torch.bmm(pq[:, :2], pq[:, 2:].mT).flatten(1)

    def layer_maps(self, attns):
        return self.omegas(attns), None


class GDpp(Diag):
    def diag_params(self, attn):
        return attn.p_x, attn.p_y, attn.q_x, torch.zeros_like(attn.q_x)


FULL = Full("full", "FULL", ("P", "Q"), dense=True)
DIAG = Diag("diag", "DIAG", ("p_x", "p_y", "q_x", "q_y"), dense=False)
GDPP = GDpp("gdpp", "GD++", ("p_x", "p_y", "q_x"), dense=False)
ARCHS = {a.name: a for a in (FULL, DIAG, GDPP)}  # in interp.config.PARAMS's order
# GD++ ⊂ DIAG ⊂ FULL: every model of the inner parameterization is one of the outer (GD++ is DIAG with q_y = 0, and any
# DIAG layer's P_k, Q_k are FULL's); inner → the parameterizations that hold it, itself included.
HELD_BY = {"gdpp": ("gdpp", "diag", "full"), "diag": ("diag", "full"), "full": ("full",)}


def nests(outer: str, inner: str) -> bool:
    """Whether every model of parameterization `inner` is a model of `outer` (HELD_BY)."""
    of(outer)
    return outer in HELD_BY[of(inner).name]


def of(name: str) -> Parameterization:
    """The object of ModelConfig.param `name`."""
    try:
        return ARCHS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(f"param must be one of {', '.join(ARCHS)}, got {name!r}") from None
