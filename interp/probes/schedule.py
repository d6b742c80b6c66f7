"""§5.3's layer schedule: which block of its token update each layer does, and which of them the model needs.

Layer l updates every token by e_i ← e_i + A^l e_i with A^l = Σ_k P_k S^l Q_k, S^l = Σ_{j≤n} e_j^l e_j^lᵀ the
statistics of that layer's own input tokens (README, Conventions). Split by what is written (rows) and what is
read (columns), A = [[A_xx, a_xy], [a_yxᵀ, a_yy]] (blocks d × d, d × 1, 1 × d, 1 × 1) has four blocks:

    "x<-x": A_xx x_i    the x's updated from the x's (GD++'s preconditioning)
    "x<-y": a_xy y_i    the x's updated from the labels (§5.3's first step: x-from-y, the momentum buffer u)
    "y<-x": a_yxᵀ x_i   the labels updated from the x's (a gradient step on y: the y-step)
    "y<-y": a_yy y_i    the labels rescaled (§5.2)

("x<-y" is the block the projection's `block_sv` calls "y->x": same block, arrow from source to target.) For
DIAG / GD++, A = S ⊙ Ω with Ω = [[ω_xx, ω_xy], [ω_yx, ω_yy]] in the same blocks, so the four blocks are the
ω_xx, ω_xy, ω_yx, ω_yy terms; for FULL they come from the true P, Q (not a DIAG projection).

Two measurements, layer first ([L, 4], columns in BLOCKS order):

- size (`block_sizes`): per sequence, the Frobenius norm of a block's contribution over the n context tokens,
  divided by the norm of the part of those tokens it writes, before the layer: ‖[A_xx x_i]_i‖_F / ‖[x_i]_i‖_F,
  ‖[a_xy y_i]_i‖_F / ‖[x_i]_i‖_F = ‖a_xy‖·‖y‖ / ‖X‖_F, ‖[a_yxᵀ x_i]_i‖ / ‖y‖ and |a_yy|; 0.3 means the block
  moves that part of the tokens by 30 % of its size. `Schedule.relative` is the median over sequences.
- need (`block_ablation`): the paired increase of the adjusted loss (interp.evaluate.adjusted_losses) when that
  one block of that one layer is zeroed, with its standard error, over the sequences on which the unablated model
  itself does not blow up (adjusted loss ≤ 100·d, interp.train.GUARD_CAP · d; one such sequence of the model's own,
  at 3 000 where the rest are near 0.05, gives every increase a standard error that hides every other effect; how
  many were left out is recorded). DIAG / GD++: the ω of that block set to 0 (LinearTransformer.from_omegas).
  FULL: for rows R and columns C of the block (E_R, E_C the diagonal 0/1 masks), every head k gets a partner head
  (−E_R P_k, Q_k E_C), so the layer computes Σ_k P_k S Q_k − E_R (Σ_k P_k S Q_k) E_C = A − E_R A E_C: exactly that
  block of A vanishes, for every S, and the rest of A is untouched. The unablated model is built the same way (the
  partner heads zero), so zeroing a block whose parameters are already zero changes nothing, to the last bit.

Labels (`schedule_labels`): zeroing a block *hurts* when its mean increase exceeds REL_THRESHOLD (5 %) of the
model's own adjusted loss on the same sequences and Z (2) standard errors, or when the ablated model blows up: its
increase is non-finite, or above 100·d on some sequence (a few such sequences inflate the standard error until the
first test fails however large the mean). A layer is "x-from-y" when zeroing its x<-y block hurts, "y-step" when
zeroing its y<-x block hurts, "both" when both do, "neither" when none does (the x<-x and y<-y increases are
measured and reported, not labelled).

The model is read only through run_with_cache (hook_resid_pre, attn.hook_stats) and its public P, Q / omegas().
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, ScoredSet, adjusted_losses
from interp.files import InvalidArgument
from interp.model import LinearTransformer
from interp.probes.implicit import as_float64, layer_update, probe_cache
from interp.records import Record
from interp.train import GUARD_CAP

BLOCKS = ("x<-x", "x<-y", "y<-x", "y<-y")  # the order of ω_xx, ω_xy, ω_yx, ω_yy
LABELS = ("neither", "x-from-y", "y-step", "both")
SHORT = {"neither": "-", "x-from-y": "x", "y-step": "y", "both": "xy"}  # Schedule.pattern
REL_THRESHOLD = 0.05  # an ablation hurts above this share of the model's adjusted loss ...
Z = 2.0  # ... and above this many standard errors

Vec = Tensor | list  # [layers, ...]: a tensor when computed, a list when read back from JSON


def block_masks(d: int, block: str) -> tuple[Tensor, Tensor]:
    """(E_R, E_C): the 0/1 diagonal masks of the rows and columns of `block` ("x<-y": rows x, column y)."""
    if block not in BLOCKS:
        raise InvalidArgument(f"unknown block {block!r} (one of {', '.join(BLOCKS)})")
    x = torch.cat([torch.ones(d), torch.zeros(1)]).double()
    part = {"x": x, "y": 1.0 - x}
    return torch.diag(part[block[0]]), torch.diag(part[block[-1]])


# ---------------------------------------------------------------------- sizes
def block_sizes(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L batch 4"]:
    """Relative size of each block of every layer's update, per sequence (the module docstring), float64."""
    model = as_float64(model)
    resid, S = probe_cache(model, tokens)
    P, Q = model.P.detach(), model.Q.detach()
    d = model.cfg.d
    tiny = torch.finfo(torch.float64).tiny
    out = []
    for l in range(model.cfg.n_layers):
        A = layer_update(P[l], Q[l], S[l])  # [B, D, D]
        ctx = resid[l][:, :-1]  # the n context tokens before layer l
        X, y = ctx[..., :d], ctx[..., d]
        x_norm = X.pow(2).sum((1, 2)).sqrt().clamp_min(tiny)
        y_norm = y.norm(dim=-1).clamp_min(tiny)
        xx = einsum(A[:, :d, :d], X, "b i j, b t j -> b t i").pow(2).sum((1, 2)).sqrt() / x_norm
        xy = A[:, :d, d].norm(dim=-1) * y.norm(dim=-1) / x_norm
        yx = einsum(A[:, d, :d], X, "b j, b t j -> b t").norm(dim=-1) / y_norm
        yy = A[:, d, d].abs() * y.norm(dim=-1) / y_norm
        out.append(torch.stack([xx, xy, yx, yy], dim=-1))
    return torch.stack(out)


# ---------------------------------------------------------------------- ablation
def _padded(P: Tensor, Q: Tensor) -> tuple[Tensor, Tensor]:
    """P, Q [L, 2H, D, D]: every head followed by a zero partner head."""
    return (torch.cat([t, torch.zeros_like(t)], dim=1) for t in (P, Q))  # type: ignore[return-value]


def _omegas(model: LinearTransformer) -> Tensor:
    return model.omegas().stack().detach().double()


def unablated(model: LinearTransformer) -> LinearTransformer:
    """The model rebuilt exactly as block_zeroed builds its ablations (a float64 DIAG from its ω's; FULL with a zero
    partner per head), so that a difference between the two is the ablation and nothing else."""
    model = as_float64(model)
    if model.arch.has_omegas:
        return LinearTransformer.from_omegas(_omegas(model), model.cfg.d)
    P, Q = _padded(model.P.detach(), model.Q.detach())
    return LinearTransformer.from_matrices(P, Q, dtype="float64")


def block_zeroed(model: LinearTransformer, layer: int, block: str) -> LinearTransformer:
    """A float64 copy of `model` whose layer `layer` (0-based) has the one block `block` of its update zeroed.

    DIAG / GD++: that ω set to 0. FULL: A − E_R A E_C through a partner head (−E_R P_k, Q_k E_C) per head."""
    model = as_float64(model)
    L, d = model.cfg.n_layers, model.cfg.d
    if not 0 <= layer < L:
        raise InvalidArgument(f"layer must be in [0, {L}), got {layer}")
    ER, EC = block_masks(d, block)
    if model.arch.has_omegas:
        omega = _omegas(model).clone()
        omega[layer, BLOCKS.index(block)] = 0.0
        return LinearTransformer.from_omegas(omega, d)
    P, Q = model.P.detach(), model.Q.detach()
    H = P.shape[1]
    P2, Q2 = _padded(P, Q)
    P2[layer, H:] = -(ER @ P[layer])
    Q2[layer, H:] = Q[layer] @ EC
    return LinearTransformer.from_matrices(P2, Q2, dtype="float64")


@dataclass(frozen=True)
class BlockAblation:
    """The unablated model's adjusted loss and, per layer and block [L][4], the paired increase when that block alone
    is zeroed (LossEstimate of the per-sequence differences: mean, standard error, ...), both on the n_seq − excluded
    sequences on which the unablated model itself stays below GUARD_CAP · d."""

    base: LossEstimate
    increase: list  # [L][4] LossEstimate
    blowups: list  # [L][4] sequences whose increase exceeds GUARD_CAP · d (or is not finite)
    n_seq: int  # sequences drawn
    excluded: int = 0  # of them, where the unablated model blows up (left out of base and increase)


def block_ablation(model: LinearTransformer, data: "EvalSet | ScoredSet") -> BlockAblation:
    """Adjusted loss with each single block of each layer zeroed (block_zeroed), paired with the unablated model's on
    the same sequences (one pass over `data`, the oracle computed once per batch)."""
    L = model.cfg.n_layers
    preds = {"base": unablated(model)}
    preds |= {f"{l}/{b}": block_zeroed(model, l, b) for l in range(L) for b in BLOCKS}
    diff = adjusted_losses(preds, data)
    base = diff.pop("base")
    cap = GUARD_CAP * model.cfg.d
    keep = base <= cap  # where the model itself does not blow up (nan included)
    inc = [[(diff[f"{l}/{b}"] - base)[keep] for b in BLOCKS] for l in range(L)]
    blowups = [[int((~(x <= cap)).sum()) for x in row] for row in inc]  # x > cap, or nan
    est = [[LossEstimate.of(x) for x in row] for row in inc]
    return BlockAblation(LossEstimate.of(base[keep]), est, blowups, len(base), int((~keep).sum()))


# ---------------------------------------------------------------------- labels
def hurts(
    mean: float | None, stderr: float | None, base: float, blowups: int = 0, rel: float = REL_THRESHOLD, z: float = Z
) -> bool:
    """Whether zeroing a block hurts: a blow-up (`blowups` > 0, or a non-finite mean: None as read back from JSON),
    or a mean increase > rel · base (base clipped at 0) and > z · stderr."""
    if blowups > 0 or mean is None or not math.isfinite(mean):
        return True
    return mean > rel * max(base, 0.0) and stderr is not None and mean > z * stderr


def schedule_labels(
    increase: list | Tensor,
    stderr: list | Tensor,
    base: float,
    blowups: list | Tensor | None = None,
    rel: float = REL_THRESHOLD,
    z: float = Z,
) -> list[str]:
    """Per layer, from [L][4] increases, their standard errors and blow-up counts (BLOCKS order): "x-from-y" (zeroing
    x<-y hurts), "y-step" (zeroing y<-x hurts), "both" or "neither"."""
    as_list = lambda v: v.tolist() if isinstance(v, Tensor) else v  # noqa: E731
    increase, stderr = as_list(increase), as_list(stderr)
    blowups = [[0] * len(BLOCKS)] * len(increase) if blowups is None else as_list(blowups)
    out = []
    for inc, se, bl in zip(increase, stderr, blowups):
        x = hurts(inc[1], se[1], base, bl[1], rel, z)
        y = hurts(inc[2], se[2], base, bl[2], rel, z)
        out.append(LABELS[int(x) + 2 * int(y)])
    return out


@dataclass(frozen=True)
class Schedule(Record):
    """§5.3's layer schedule of one model (interp.probes.schedule). Arrays have the layer first, then BLOCKS.

    relative [L, 4]: median over the `n_seq` probe sequences of each block's relative size (the module docstring);
    base, base_stderr: the model's adjusted loss on the `ablation_seq` ablation sequences less the `excluded` ones
    on which it blows up itself (adjusted loss > 100·d); increase, increase_stderr [L, 4]: mean paired increase of
    the adjusted loss on those sequences when that block of that layer alone is zeroed (non-finite: None in JSON);
    blowups [L, 4]: how many of them it raised by more than 100·d; labels [L]: "x-from-y" / "y-step" / "both" /
    "neither" by the rule of `schedule_labels` with rel_threshold and z. The ablation fields are None (absent from
    the JSON) when no ablation was run.
    """

    blocks: list
    relative: Vec
    n_seq: int
    rel_threshold: float = REL_THRESHOLD
    z: float = Z
    base: float | None = None
    base_stderr: float | None = None
    increase: Vec | None = None
    increase_stderr: Vec | None = None
    blowups: list | None = None
    labels: list | None = None
    ablation_seq: int | None = None
    excluded: int | None = None

    @classmethod
    def of(
        cls,
        sizes: Float[Tensor, "L n_seq 4"],
        ablation: BlockAblation | None = None,
        rel: float = REL_THRESHOLD,
        z: float = Z,
    ) -> "Schedule":
        """From per-sequence sizes (block_sizes, concatenated over batches) and an optional block_ablation."""
        relative = sizes.nanmedian(dim=1).values
        if ablation is None:
            return cls(list(BLOCKS), relative, sizes.shape[1], rel, z)
        inc = torch.tensor([[e.mean for e in row] for row in ablation.increase], dtype=torch.float64)
        se = torch.tensor([[e.stderr for e in row] for row in ablation.increase], dtype=torch.float64)
        base, blowups = ablation.base, ablation.blowups
        labels = schedule_labels(inc, se, base.mean, blowups, rel, z)
        n = sizes.shape[1]
        abl = (base.mean, base.stderr, inc, se, blowups, labels, ablation.n_seq, ablation.excluded)
        return cls(list(BLOCKS), relative, n, rel, z, *abl)

    def relabel(self, rel: float = REL_THRESHOLD, z: float = Z) -> list[str]:
        """The labels under another threshold, from the recorded increases (no recomputation)."""
        if self.increase is None:
            raise InvalidArgument("this schedule has no ablation (run with ablation sequences)")
        return schedule_labels(self.increase, self.increase_stderr, self.base, self.blowups, rel, z)

    @property
    def pattern(self) -> str | None:
        """The labels in short: "x" x-from-y, "y" y-step, "xy" both, "-" neither (e.g. "y y x y")."""
        return None if self.labels is None else " ".join(SHORT[s] for s in self.labels)


def layer_schedule(
    model: LinearTransformer,
    data: EvalSet,
    ablation: "EvalSet | ScoredSet | None" = None,
    rel: float = REL_THRESHOLD,
    z: float = Z,
) -> Schedule:
    """Block sizes on the sequences of `data` and the single-block ablation on `ablation` (default: `data`'s own
    sequences)."""
    if data.d != model.cfg.d:
        raise InvalidArgument(f"the evaluation set has d = {data.d} but the model d = {model.cfg.d}")
    model = as_float64(model)
    sizes = torch.cat([block_sizes(model, b.tokens) for b in data.batches()], dim=1)
    return Schedule.of(sizes, block_ablation(model, data if ablation is None else ablation), rel, z)
