"""Drift of a FULL model toward (or away from) the DIAG structure along a training trajectory (Vladymyrov et al.
2024, Figures 1–7).

Per checkpoint and layer l (shapes: L layers, H heads, D = d + 1):
- weight-space metrics, from the layer operator K = Σ_k P_k ⊗ Q_k and its DIAG projection
  (interp.probes.forms.diag_projection): the off-DIAG share ‖K − proj K‖²/‖K‖², the same share on the
  part the readout uses (`share_outside_read`: the last layer's x output rows are never read, since
  ŷ = −y_query), the remainder's singular values, its effective rank and its energy per block,
  the scalar-identity deviation ‖B − (tr B / d) I‖/‖B‖ of the x-blocks B of P_k and Q_k
  (`*_per_head`: for H > 1 heads can be mixed without changing K), and the singular values of
  P_k, Q_k minus their nearest diag(a I_d, b) (`*_per_head` too), and the rank-one "register" a layer
  writes into one x-direction and a later layer reads back (register_directions);
- function-space metrics, from fresh sequences: R² of the DIAG and equivariant fits of every layer
  map on the checkpoint's own statistics S^l (forms.fit_layer_maps; uncentered, see fit_r2), and the adjusted loss
  of the model, of its DIAG projection (every layer replaced by its ω's) and of each layer alone replaced;
  their difference is the functional gap.

Every metric is invariant to P_k → c P_k, Q_k → Q_k / c, to permuting heads, and to one rotation
R = diag(O, 1) of the x coordinates applied to every layer (P → R P Rᵀ, Q → R Q Rᵀ); the DIAG basis
commutes with R, so the projection does too. The function-space metrics are invariant in
distribution (x, w ~ N(0, I) are rotation invariant), and exactly when the sequences are rotated too.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, adjusted_losses
from interp.files import CheckpointError, InvalidArgument, InvalidType, as_path
from interp.model import LinearTransformer
from interp.probes.forms import (
    BLOCKS,
    OMEGA_NAMES,
    diag_basis,
    diag_projection,
    fit_layer_maps,
    form_features,
    layer_operator,
    with_diag_layers,
)
from interp.probes.implicit import as_float64, layer_update, probe_cache
from interp.probes.summary import TOP_SV
from interp.records import Record
from interp.run import Run, resolve_model

EVAL_SEED = 20_240_914  # sequences of the adjusted loss (the same for every checkpoint)
FIT_SEED = 20_240_915  # sequences whose statistics the DIAG / equivariant fits use


# ---------------------------------------------------------------------- weight space
def scalar_identity_deviation(B: Float[Tensor, "... d d"]) -> Float[Tensor, "..."]:
    """‖B − (tr B / d) I‖_F / ‖B‖_F: 0 for a multiple of I, 1 for a traceless B."""
    d = B.shape[-1]
    t = B.diagonal(dim1=-2, dim2=-1).sum(-1) / d
    dev = B - t[..., None, None] * torch.eye(d, dtype=B.dtype)
    return dev.flatten(-2).norm(dim=-1) / B.flatten(-2).norm(dim=-1).clamp_min(1e-300)


def offdiag_part(M: Float[Tensor, "... D D"]) -> Float[Tensor, "... D D"]:
    """M minus its nearest (Frobenius) diag(a I_d, b): a = tr(M_xx)/d, b = M_yy."""
    d = M.shape[-1] - 1
    near = torch.zeros_like(M)
    near[..., :d, :d] = (M[..., :d, :d].diagonal(dim1=-2, dim2=-1).sum(-1) / d)[..., None, None] * torch.eye(
        d, dtype=M.dtype
    )
    near[..., d, d] = M[..., d, d]
    return M - near


def effective_rank(sv: Float[Tensor, "... k"], floor: Tensor | float = 0.0) -> Float[Tensor, "..."]:
    """exp of the entropy of sv² / Σ sv² (1 for rank one, k for a flat spectrum; 0 if all vanish). Singular values
    at or below `floor` ([...] or a number) count as zero: rounding noise has a flat spectrum, not a rank."""
    floor = torch.as_tensor(floor, dtype=sv.dtype)
    sv = torch.where(sv > floor[..., None] if floor.ndim else sv > floor, sv, torch.zeros_like(sv))
    p = sv**2 / (sv**2).sum(-1, keepdim=True).clamp_min(1e-300)
    ent = -(p * p.clamp_min(1e-300).log()).sum(-1)
    return torch.where((sv**2).sum(-1) > 0, ent.exp(), torch.zeros_like(ent))


def _top_vector(cols: Float[Tensor, "d H"]) -> Float[Tensor, "d"]:
    """Leading left singular vector (sign arbitrary; zero if cols vanish)."""
    U, sv, _ = torch.linalg.svd(cols, full_matrices=False)
    return U[:, 0] * (sv[0] > 0)


def register_directions(P: Float[Tensor, "L H D D"], Q: Float[Tensor, "L H D D"]) -> dict[str, Tensor]:
    """The x-direction each layer writes y-channel content into and the one each layer reads from x.

    write [L, d]: leading direction of the columns P_k[:d, d] / ‖P_k‖ (the y → x column of P; DIAG has
    none: x_i += P_k[:d, d] · (S Q_k)[d, :] e_i stores a scalar built from α, λ along it);
    read [L, d]: leading right singular direction of the stacked (Q_k,xx − tr/d I) / ‖Q_k‖ (what the
    layer reads from the token's x beyond the DIAG ω_xx, ω_yx terms);
    write_share [L]: max over heads of ‖P_k[:d, d]‖² / ‖P_k‖²;
    register_cos [L, L]: |cos(write_l, read_m)| for m > l (0 elsewhere): a rank-one channel from layer l to m.
    """
    L, H, D, _ = P.shape
    d = D - 1
    nP, nQ = P.flatten(-2).norm(dim=-1).clamp_min(1e-300), Q.flatten(-2).norm(dim=-1).clamp_min(1e-300)  # [L, H]
    col = P[..., :d, d] / nP[..., None]  # [L, H, d]
    write = torch.stack([_top_vector(col[l].T) for l in range(L)])
    dev = (offdiag_part(Q)[..., :d, :d]) / nQ[..., None, None]  # [L, H, d, d]
    read = torch.stack([_top_vector(dev[l].reshape(H * d, d).T) for l in range(L)])
    cos = (write @ read.T).abs()
    return {
        "write": write,
        "read": read,
        "write_share": (col**2).sum(-1).amax(-1),
        "register_cos": torch.triu(cos, diagonal=1),
    }


@dataclass
class WeightMetrics(Record):
    """Every weight-space drift metric of one checkpoint, the layer as the first axis of each (module docstring).

    Tensors: [L] unless noted; *_sv*: [L, k] largest first; *_per_head: [L, H]; register_cos [L, L];
    remainder_block_share / remainder_block_sv: block name -> [L] / [L, k]."""

    omega: Tensor  # [L, 4]
    norm: Tensor
    share_outside: Tensor
    share_outside_read: Tensor
    remainder_sv: Tensor
    remainder_sv_rel: Tensor
    remainder_effective_rank: Tensor
    remainder_top1_share: Tensor
    remainder_block_share: dict
    remainder_block_sv: dict
    x_block_dev_P_per_head: Tensor
    x_block_dev_Q_per_head: Tensor
    x_block_dev_P: Tensor
    x_block_dev_Q: Tensor
    write_share: Tensor
    register_cos: Tensor
    offdiag_sv_rel_P_per_head: Tensor  # [L, H, k]
    offdiag_sv_rel_Q_per_head: Tensor

    SPECTRA = (
        "remainder_sv",
        "remainder_sv_rel",
        "remainder_block_sv",
        "offdiag_sv_rel_P_per_head",
        "offdiag_sv_rel_Q_per_head",
    )  # singular-value spectra: cut to the largest TOP_SV in the JSON

    def truncated(self, top: int = TOP_SV) -> "WeightMetrics":
        def cut(v):  # tensors only: lists read back from JSON were cut when written
            if isinstance(v, dict):
                return {k: cut(x) for k, x in v.items()}
            return v[..., :top] if isinstance(v, Tensor) else v

        return WeightMetrics(
            **{
                f.name: cut(getattr(self, f.name)) if f.name in self.SPECTRA else getattr(self, f.name)
                for f in fields(self)
            }
        )


def weight_metrics(P: Float[Tensor, "L H D D"], Q: Float[Tensor, "L H D D"]) -> WeightMetrics:
    """Every weight-space drift metric of one checkpoint."""
    P, Q = P.detach().double(), Q.detach().double()
    L, H, D, _ = P.shape
    d = D - 1
    proj = diag_projection(P, Q)
    K = layer_operator(P, Q)
    rem = K - einsum(proj.omega, diag_basis(d), "l k, k i j a b -> l i j a b")  # K − proj K
    rem2 = (rem**2).flatten(1).sum(-1)
    read_K2, read_rem2 = (K**2).flatten(1).sum(-1), rem2.clone()  # the last layer: only output row d is read
    read_K2[-1], read_rem2[-1] = (K[-1, d] ** 2).sum(), (rem[-1, d] ** 2).sum()
    block_energy = {
        name: (rem[:, i, j] ** 2).flatten(1).sum(-1) / rem2.clamp_min(1e-300) for name, (i, j) in BLOCKS.items()
    }
    x_dev = {"P": scalar_identity_deviation(P[..., :d, :d]), "Q": scalar_identity_deviation(Q[..., :d, :d])}
    reg = register_directions(P, Q)
    sv_rel = {
        name: torch.linalg.svdvals(offdiag_part(M)) / M.flatten(-2).norm(dim=-1)[..., None].clamp_min(1e-300)
        for name, M in (("P", P), ("Q", Q))
    }
    return WeightMetrics(
        omega=proj.omega,
        norm=proj.norm,
        share_outside=proj.share_outside,
        share_outside_read=torch.where(read_K2 > 0, read_rem2 / read_K2.clamp_min(1e-300), torch.zeros_like(rem2)),
        remainder_sv=proj.remainder_sv,
        remainder_sv_rel=proj.remainder_sv / proj.norm[:, None].clamp_min(1e-300),
        # a DIAG layer's remainder is zero up to rounding (~eps·‖K‖): rank 0, not the flat spectrum of the noise
        remainder_effective_rank=effective_rank(proj.remainder_sv, 100 * torch.finfo(P.dtype).eps * proj.norm),
        remainder_top1_share=proj.remainder_sv[:, 0] ** 2 / (proj.remainder_sv**2).sum(-1).clamp_min(1e-300),
        remainder_block_share=block_energy,
        remainder_block_sv=proj.block_sv,
        x_block_dev_P_per_head=x_dev["P"],
        x_block_dev_Q_per_head=x_dev["Q"],
        x_block_dev_P=x_dev["P"].amax(-1),
        x_block_dev_Q=x_dev["Q"].amax(-1),
        write_share=reg["write_share"],
        register_cos=reg["register_cos"],
        offdiag_sv_rel_P_per_head=sv_rel["P"],
        offdiag_sv_rel_Q_per_head=sv_rel["Q"],
    )


# ---------------------------------------------------------------------- function space
def fit_r2(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> dict[str, Tensor]:
    """R² [L] of the DIAG and equivariant fits (forms.fit_layer_maps) of each layer map F^l = Σ_k P_k S^l Q_k
    on the model's own statistics S^l, as 1 − ‖F − fit‖² / ‖F‖² over all entries of all sequences.

    Uncentered, unlike fit_layer_maps' R² (about the mean entry, which a rotation of x changes); the two
    agree to about 1e-3 on trained models. fit_omega [L, 4]: the fitted DIAG ω's."""
    model = as_float64(model)
    _, S = probe_cache(model, tokens)
    fits = fit_layer_maps(model, S)
    P, Q = model.P.detach(), model.Q.detach()
    r2 = {"diag": [], "equivariant": []}
    for l in range(S.shape[0]):
        F = layer_update(P[l], Q[l], S[l])
        for form, coef in (("diag", fits.diag[l]), ("equivariant", fits.equivariant[l])):
            res = F - form_features(S[l], form) @ coef
            r2[form].append(1 - (res**2).sum() / (F**2).sum().clamp_min(1e-300))
    return {
        "r2_diag": torch.stack(r2["diag"]),
        "r2_equivariant": torch.stack(r2["equivariant"]),
        "fit_omega": fits.diag,
    }


def _mean_se(x: Tensor) -> tuple[float, float]:
    return x.mean().item(), (x.std().item() / len(x) ** 0.5 if len(x) > 1 else float("nan"))


@dataclass
class FunctionalMetrics(Record):
    """Function-space drift metrics of one checkpoint: the fits' R² [L] and fitted ω's [L, 4]; the adjusted loss of
    the model, of its DIAG projection and of the DIAG model of the fitted ω's; each one's paired gap to the model
    (mean and standard error); with `per_layer`, the gap when each layer alone is DIAG-projected [L]."""

    r2_diag: Tensor
    r2_equivariant: Tensor
    fit_omega: Tensor
    loss: float
    loss_stderr: float
    loss_diag_projection: float
    gap_diag_projection: float
    gap_diag_projection_stderr: float
    loss_diag_fit: float
    gap_diag_fit: float
    gap_diag_fit_stderr: float
    gap_per_layer: Tensor | None = None
    gap_per_layer_stderr: Tensor | None = None


def functional_metrics(
    model: LinearTransformer, scored: ScoredSet, fit_tokens: Tensor, per_layer: bool = True
) -> FunctionalMetrics:
    """Fits' R² and the adjusted loss of the model, its DIAG projection (all layers; each layer alone if
    `per_layer`) and the DIAG model of the fitted ω's, on the sequences of `scored`, with the paired gaps."""
    model = as_float64(model)
    L, d = model.cfg.n_layers, model.cfg.d
    omega = diag_projection(model.P.detach(), model.Q.detach()).omega
    r2 = fit_r2(model, fit_tokens)
    preds = {
        "model": model,
        "diag_projection": LinearTransformer.from_omegas(omega, d),
        "diag_fit": LinearTransformer.from_omegas(r2["fit_omega"], d),
    }
    if per_layer:
        preds |= {f"layer{l}": with_diag_layers(model, omega, [l]) for l in range(L)}
    loss = adjusted_losses(preds, scored)
    base = loss["model"]
    gap_proj, gap_fit = _mean_se(loss["diag_projection"] - base), _mean_se(loss["diag_fit"] - base)
    out = FunctionalMetrics(
        r2["r2_diag"],
        r2["r2_equivariant"],
        r2["fit_omega"],
        *_mean_se(base),
        loss["diag_projection"].mean().item(),
        *gap_proj,
        loss["diag_fit"].mean().item(),
        *gap_fit,
    )
    if per_layer:
        gaps = [_mean_se(loss[f"layer{l}"] - base) for l in range(L)]
        out.gap_per_layer = torch.tensor([g[0] for g in gaps], dtype=torch.float64)
        out.gap_per_layer_stderr = torch.tensor([g[1] for g in gaps], dtype=torch.float64)
    return out


class DriftData:
    """The fixed sequences every checkpoint is measured on: `evalset` for the losses (drawn once, held in memory
    with the oracle's loss) and `fit_seq` sequences of seed `fit_seed` for the form fits."""

    def __init__(self, evalset: EvalSet, fit_seq: int = 2_048, fit_seed: int = FIT_SEED):
        if not isinstance(evalset, EvalSet):
            raise InvalidType(f"evalset must be an interp.EvalSet, got {type(evalset).__name__}")
        self.evalset, self.fit_seq, self.fit_seed = evalset, fit_seq, fit_seed
        self.scored = ScoredSet.of(evalset)
        self.fit_tokens = evalset.replace(n_seq=fit_seq, seed=fit_seed).draw().tokens

    @classmethod
    def default(
        cls,
        noise,
        d: int = 10,
        n: int = 20,
        eval_seq: int = 20_000,
        fit_seq: int = 2_048,
        eval_seed: int = EVAL_SEED,
        fit_seed: int = FIT_SEED,
        x_cov=None,
    ) -> "DriftData":
        """The drift defaults: `eval_seq` sequences of seed EVAL_SEED, `fit_seq` of seed FIT_SEED, inputs
        x ~ N(0, x_cov) (None: I)."""
        return cls(EvalSet(noise, d=d, n=n, n_seq=eval_seq, seed=eval_seed, x_cov=x_cov), fit_seq, fit_seed)

    def describe(self) -> dict:
        """JSON-ready: which sequences (the input covariance Λ only when it is not I, as in EvalSet.describe)."""
        e = self.evalset
        out = {
            "noise": e.noise.spec,
            "d": e.d,
            "n": e.n,
            "eval_seq": e.n_seq,
            "eval_seed": e.seed,
            "fit_seq": self.fit_seq,
            "fit_seed": self.fit_seed,
        }
        return out if e.x_cov is None else out | {"x_cov": e.describe()["x_cov"]}


@dataclass
class DriftRecord(Record):
    """One checkpoint: its step, weight-space and function-space metrics. The JSON is flat (one object per
    checkpoint, README 'Drift'), the singular-value spectra cut to the largest TOP_SV."""

    step: int
    weights: WeightMetrics
    functional: FunctionalMetrics

    def to_json(self) -> dict:
        return {"step": self.step, **self.weights.truncated().to_json(), **self.functional.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> "DriftRecord":
        return cls(data["step"], WeightMetrics.from_json(data), FunctionalMetrics.from_json(data))


def drift_metrics(
    model: LinearTransformer, data: DriftData, per_layer_gap: bool = True
) -> tuple[WeightMetrics, FunctionalMetrics]:
    """Every drift metric of one checkpoint (tensors; see the module docstring)."""
    return weight_metrics(model.P, model.Q), functional_metrics(model, data.scored, data.fit_tokens, per_layer_gap)


# ---------------------------------------------------------------------- trajectories
def drift_record(step: int, model: LinearTransformer, data: DriftData, per_layer_gap: bool = True) -> DriftRecord:
    """One checkpoint's metrics."""
    return DriftRecord(step, *drift_metrics(model, data, per_layer_gap))


def drift_trajectory(trajectory, data: DriftData, per_layer_gap: bool = True, progress=None) -> dict:
    """Metrics of every (step, model) of a trajectory (interp.run.Run.trajectory), JSON-ready."""
    if not isinstance(data, DriftData):
        raise InvalidType(f"data must be an interp.DriftData, got {type(data).__name__}")
    if not isinstance(trajectory, (list, tuple)) or not trajectory:
        raise InvalidArgument(f"trajectory must be a non-empty list of (step, model), got {trajectory!r:.60}")
    for item in trajectory:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], LinearTransformer)):
            raise InvalidType(f"trajectory must hold (step, LinearTransformer) pairs, got {item!r:.60}")
    records = []
    for step, model in trajectory:
        records.append(drift_record(step, model, data, per_layer_gap).to_json())
        if progress is not None:
            progress(step)
    first = trajectory[0][1]
    return {
        "format": "interp-drift",
        "format_version": 1,
        "param": first.cfg.param,
        "n_layers": first.cfg.n_layers,
        "n_heads": first.cfg.n_heads,
        "omega_names": list(OMEGA_NAMES),
        "blocks": list(BLOCKS),
        **data.describe(),
        "checkpoints": records,
    }


def run_drift(run_dir: str | Path, noise=None, per_layer_gap: bool = True, **data_kwargs) -> dict:
    """drift_trajectory over every checkpoint of a run directory, on the run's own prior, context length and input
    covariance."""
    as_path(run_dir, "run_dir")
    if not Run.is_run(run_dir):
        raise CheckpointError(f"{run_dir}: not a run directory (it has no {Run.CONFIG_FILE})")
    m = resolve_model(run_dir)  # the run's prior, d, n and input covariance (its config)
    traj = m.run.trajectory()
    data = DriftData.default(noise or m.noise, d=m.d, n=m.n, x_cov=m.x_cov, **data_kwargs)
    return {"run_dir": str(run_dir)} | drift_trajectory(traj, data, per_layer_gap)
