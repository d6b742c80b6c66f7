"""How far a model is from Theorem 4.1's implicit linear model, layer by layer (Vladymyrov et al. 2024, Theorem 4.1).

Theorem 4.1: after l layers of a linear transformer every token is mapped by one context-dependent matrix,
e_i^l = T^l e_i (the query included), and ŷ^l = ⟨w^l, x_t⟩ with w^l = −T^l[d, :d]. For any model read through its
hooks (interp.model.LinearTransformer or interp.variants.VariantTransformer), `layer_linearity` fits, per sequence
and layer, the best such T^l over the n context tokens only (least squares, d + 1 unknowns per row) and reports how
well it maps the context (the fit's own relative residual) and the query (held out: ‖e^l_{n+1} − T^l e_{n+1}‖ /
‖e^l_{n+1}‖), and the gap |ŷ^l − ⟨w^l, x_t⟩| of the prediction from the readout. For FULL, DIAG and GD++ models, and
linear attention with a linear FFN, all three are rounding (`implicit_maps` gives their T^l in closed form); an FFN
with ReLU, softmax or kernel attention leave it.

Everything is float64, every tensor has the layer (l = 0..L) first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.evaluate import LossEstimate
from interp.files import InvalidArgument, InvalidType
from interp.probes.implicit import implicit_by_lstsq, layer_update
from interp.records import Record
from interp.variants import as_float64 as _float64


def residual_stream(model, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch pos D"]:
    """e^l of every token for l = 0..L, read through the hooks (blocks.{l}.hook_resid_pre and the last
    hook_resid_post), float64."""
    model = _float64(model)
    L = model.cfg.n_layers
    last = f"blocks.{L - 1}.hook_resid_post"
    names = [f"blocks.{l}.hook_resid_pre" for l in range(L)] + [last]
    if not isinstance(tokens, Tensor):
        raise InvalidType(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens.double(), names_filter=lambda name: name in names)
    return torch.stack([cache[name] for name in names])


@dataclass
class Linearity:
    """Per layer l = 0..L and sequence: T^l fitted on the context (e_i^l ≈ T^l e_i, i ≤ n), its relative residual on
    the context and on the query, and the prediction's gap from Theorem 4.1's readout ⟨w^l, x_t⟩, w^l = −T^l[d, :d]."""

    T: Float[Tensor, "L1 batch D D"]
    context: Float[Tensor, "L1 batch"]  # ‖E^l − E⁰ T^lᵀ‖_F / ‖E^l‖_F over the context tokens
    query: Float[Tensor, "L1 batch"]  # ‖e^l_{n+1} − T^l e_{n+1}‖ / ‖e^l_{n+1}‖
    gap: Float[Tensor, "L1 batch"]  # |ŷ^l − ⟨w^l, x_t⟩|, ŷ^l = −y of the query after l layers
    pred: Float[Tensor, "L1 batch"]  # ŷ^l

    def summary(self) -> "LinearitySummary":
        """Median, 90th percentile and largest value over the sequences, per layer."""
        q = lambda t, p: t.quantile(p, dim=-1).tolist()  # noqa: E731
        return LinearitySummary(
            layer=list(range(self.context.shape[0])),
            n_seq=self.context.shape[1],
            context_median=q(self.context, 0.5),
            context_max=self.context.amax(-1).tolist(),
            query_median=q(self.query, 0.5),
            query_p90=q(self.query, 0.9),
            query_max=self.query.amax(-1).tolist(),
            gap_median=q(self.gap, 0.5),
            gap_max=self.gap.amax(-1).tolist(),
        )


@dataclass
class LinearitySummary(Record):
    """Linearity per layer l = 0..L (every list is indexed by the layer), over n_seq sequences."""

    layer: list[int]
    n_seq: int
    context_median: list[float]
    context_max: list[float]
    query_median: list[float]
    query_p90: list[float]
    query_max: list[float]
    gap_median: list[float]
    gap_max: list[float]


@dataclass
class StudyRow(Record):
    """One model of a variants study (experiments/variants.py, docs/variants.md): what it is, its adjusted loss on its
    training prior, and its linearity summary."""

    name: str  # "full" / "diag" (the Table 1 zoo's files), or the variant's name ("ffn_relu", "softmax", ...)
    label: str  # how tables and figures write it ("FULL+ReLU FFN")
    layers: int
    file: str  # relative to the repository
    loss: LossEstimate
    linearity: LinearitySummary
    steps: int | None = None  # training steps of a variant (None: a Table 1 zoo file)
    train_wall_s: float | None = None
    sha256: str | None = None  # of the file measured
    pin_loss: LossEstimate | None = None  # the adjusted loss on fewer sequences (a pin tests recompute)
    vs_control: LossEstimate | None = None  # per sequence, its adjusted loss minus the same-budget FULL's (paired)


@dataclass
class VariantStudy(Record):
    """Every model of a variants study, and how it was measured (the report's variants views read it)."""

    rows: list[StudyRow]
    eval: dict  # the adjusted loss's sequences (interp.EvalSet.describe())
    probe: dict  # the linearity probe's sequences
    machine: dict  # CPU model, torch's CPU capability, threads
    command: str
    wall_s: float  # the measurements' wall time


def layer_linearity(model, tokens: Float[Tensor, "batch pos D"]) -> Linearity:
    """Linearity of every layer of `model` on `tokens` (module docstring); needs n >= d + 1 context tokens."""
    resid = residual_stream(model, tokens)
    L1, B, pos, D = resid.shape
    if pos - 1 < D:
        raise InvalidArgument(f"tokens: the fit needs n >= d + 1 = {D} context tokens, got n = {pos - 1}")
    T, context = implicit_by_lstsq(resid[:, :, :-1])  # T^l from the context tokens only
    e_q, e_q0 = resid[:, :, -1], resid[0, :, -1]
    mapped = (T @ e_q0[None, :, :, None])[..., 0]  # T^l e_{n+1}
    query = (e_q - mapped).norm(dim=-1) / e_q.norm(dim=-1).clamp_min(torch.finfo(torch.float64).tiny)
    pred = -e_q[..., -1]
    readout = (-T[..., -1, :-1] * e_q0[None, :, :-1]).sum(-1)  # ⟨w^l, x_t⟩ with w^l = −T^l[d, :d]
    return Linearity(T, context, query, (pred - readout).abs(), pred)


def implicit_maps(model, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch D D"]:
    """Theorem 4.1's T^l in closed form for linear attention with a linear FFN or none (a LinearTransformer or such a
    VariantTransformer): T^0 = I, T^{l+1} = F^l (I + Σ_k P_k S^l Q_k) T^l with S^l = Σ_{j≤n} e_j^l e_j^lᵀ read from
    blocks.{l}.attn.hook_stats and F^l = I + W_out W_in (I without an FFN); float64."""
    model = _float64(model)
    cfg = model.cfg
    if cfg.attention != "lsa" or cfg.mlp not in ("none", "linear"):
        raise InvalidArgument(
            f"model: a {cfg.family_label} model has no closed-form T^l (lsa attention, linear FFN only)"
        )
    L, D = cfg.n_layers, cfg.d_model
    names = [f"blocks.{l}.attn.hook_stats" for l in range(L)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens.double(), names_filter=lambda name: name in names)
        eye = torch.eye(D, dtype=torch.float64)
        T = [eye.expand(tokens.shape[0], D, D)]
        for l, block in enumerate(model.blocks):
            P, Q = block.attn.matrices()
            step = eye + layer_update(P, Q, cache[names[l]])  # I + A^l (Lemma 4.3)
            mlp = getattr(block, "mlp", None)
            if mlp is not None:
                step = mlp.matrix() @ step  # the FFN's I + W_out W_in
            T.append(step @ T[-1])
    return torch.stack(T)
