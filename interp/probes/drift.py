"""Drift of a FULL model toward (or away from) the DIAG structure along a training trajectory (PAPER.md §9).

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
  map on the checkpoint's own statistics S^l (forms.fit_layer_maps; uncentered, see fit_r2), and the adjusted loss of the
  model, of its DIAG projection (every layer replaced by its ω's) and of each layer alone replaced;
  their difference is the functional gap.

Every metric is invariant to P_k → c P_k, Q_k → Q_k / c, to permuting heads, and to one rotation
R = diag(O, 1) of the x coordinates applied to every layer (P → R P Rᵀ, Q → R Q Rᵀ); the DIAG basis
commutes with R, so the projection does too. The function-space metrics are invariant in
distribution (x, w ~ N(0, I) are rotation invariant), and exactly when the sequences are rotated too.
"""

from __future__ import annotations

from pathlib import Path

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from interp.baselines import oracle_predict
from interp.evaluate import batches
from interp.model import LinearTransformer
from interp.probes.forms import (
    BLOCKS, OMEGA_NAMES, diag_basis, diag_projection, fit_layer_maps, form_features, layer_operator, with_diag_layers,
)
from interp.probes.implicit import as_float64, layer_update, probe_cache
from interp.probes.summary import jsonable
from interp.tasks import TaskBatch, as_prior, sample_tasks

EVAL_SEED = 20_240_914  # sequences of the adjusted loss (the same for every checkpoint)
FIT_SEED = 20_240_915  # sequences whose statistics the DIAG / equivariant fits use
TOP_SV = 8  # singular values kept per layer in the JSON


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
    near[..., :d, :d] = (M[..., :d, :d].diagonal(dim1=-2, dim2=-1).sum(-1) / d)[..., None, None] * torch.eye(d, dtype=M.dtype)
    near[..., d, d] = M[..., d, d]
    return M - near


def effective_rank(sv: Float[Tensor, "... k"]) -> Float[Tensor, "..."]:
    """exp of the entropy of sv² / Σ sv² (1 for rank one, k for a flat spectrum; 0 if all vanish)."""
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
    return {"write": write, "read": read, "write_share": (col**2).sum(-1).amax(-1), "register_cos": torch.triu(cos, diagonal=1)}


def weight_metrics(P: Float[Tensor, "L H D D"], Q: Float[Tensor, "L H D D"]) -> dict[str, Tensor]:
    """Every weight-space drift metric of one checkpoint (the layer as the first axis of each)."""
    P, Q = P.detach().double(), Q.detach().double()
    L, H, D, _ = P.shape
    d = D - 1
    proj = diag_projection(P, Q)
    K = layer_operator(P, Q)
    rem = K - einsum(proj.omega, diag_basis(d), "l k, k i j a b -> l i j a b")  # K − proj K
    rem2 = (rem**2).flatten(1).sum(-1)
    read_K2, read_rem2 = (K**2).flatten(1).sum(-1), rem2.clone()  # the last layer: only output row d is read
    read_K2[-1], read_rem2[-1] = (K[-1, d] ** 2).sum(), (rem[-1, d] ** 2).sum()
    block_energy = {name: (rem[:, i, j] ** 2).flatten(1).sum(-1) / rem2.clamp_min(1e-300) for name, (i, j) in BLOCKS.items()}
    x_dev = {"P": scalar_identity_deviation(P[..., :d, :d]), "Q": scalar_identity_deviation(Q[..., :d, :d])}
    out = {
        "omega": proj.omega,
        "norm": proj.norm,
        "share_outside": proj.share_outside,
        "share_outside_read": torch.where(read_K2 > 0, read_rem2 / read_K2.clamp_min(1e-300), torch.zeros_like(rem2)),
        "remainder_sv": proj.remainder_sv,
        "remainder_sv_rel": proj.remainder_sv / proj.norm[:, None].clamp_min(1e-300),
        "remainder_effective_rank": effective_rank(proj.remainder_sv),
        "remainder_top1_share": proj.remainder_sv[:, 0] ** 2 / (proj.remainder_sv**2).sum(-1).clamp_min(1e-300),
        "remainder_block_share": block_energy,
        "remainder_block_sv": proj.block_sv,
        "x_block_dev_P_per_head": x_dev["P"], "x_block_dev_Q_per_head": x_dev["Q"],
        "x_block_dev_P": x_dev["P"].amax(-1), "x_block_dev_Q": x_dev["Q"].amax(-1),
    }
    reg = register_directions(P, Q)
    out["write_share"], out["register_cos"] = reg["write_share"], reg["register_cos"]
    for name, M in (("P", P), ("Q", Q)):
        sv = torch.linalg.svdvals(offdiag_part(M))
        out[f"offdiag_sv_rel_{name}_per_head"] = sv / M.flatten(-2).norm(dim=-1)[..., None].clamp_min(1e-300)
    return out


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
    return {"r2_diag": torch.stack(r2["diag"]), "r2_equivariant": torch.stack(r2["equivariant"]), "fit_omega": fits.diag}


def oracle_losses(eval_batches) -> list[Tensor]:
    """½(ŷ_oracle − y_t)² [batch] per batch (PAPER.md §6)."""
    return [0.5 * (oracle_predict(b) - b.target) ** 2 for b in eval_batches]


def paired_losses(predictors: dict[str, LinearTransformer], eval_batches, oracle: list[Tensor] | None = None) -> dict[str, Tensor]:
    """Per-sequence adjusted loss ½(ŷ − y_t)² − ½(ŷ_oracle − y_t)² [n_seq] of every model, same sequences."""
    out: dict[str, list[Tensor]] = {k: [] for k in predictors}
    oracle = oracle_losses(eval_batches) if oracle is None else oracle
    with torch.no_grad():
        for batch, base in zip(eval_batches, oracle):
            for name, m in predictors.items():
                out[name].append(0.5 * (m(batch.tokens.double()).double() - batch.target) ** 2 - base)
    return {k: torch.cat(v) for k, v in out.items()}


def _mean_se(x: Tensor) -> tuple[float, float]:
    return x.mean().item(), (x.std().item() / len(x) ** 0.5 if len(x) > 1 else float("nan"))


def functional_metrics(model: LinearTransformer, eval_batches, fit_tokens: Tensor, per_layer: bool = True,
                       oracle: list[Tensor] | None = None) -> dict:
    """Fits' R² and the adjusted loss of the model, its DIAG projection (all layers; each layer alone if
    `per_layer`) and the DIAG model of the fitted ω's, with the paired gap to the model (mean, stderr)."""
    model = as_float64(model)
    L, d = model.cfg.n_layers, model.cfg.d
    omega = diag_projection(model.P.detach(), model.Q.detach()).omega
    r2 = fit_r2(model, fit_tokens)
    preds = {"model": model, "diag_projection": LinearTransformer.from_omegas(omega, d),
             "diag_fit": LinearTransformer.from_omegas(r2["fit_omega"], d)}
    if per_layer:
        preds |= {f"layer{l}": with_diag_layers(model, omega, [l]) for l in range(L)}
    loss = paired_losses(preds, eval_batches, oracle)
    base = loss["model"]
    out = {**r2}
    out["loss"], out["loss_stderr"] = _mean_se(base)
    for name in ("diag_projection", "diag_fit"):
        out[f"loss_{name}"] = _mean_se(loss[name])[0]
        out[f"gap_{name}"], out[f"gap_{name}_stderr"] = _mean_se(loss[name] - base)
    if per_layer:
        gaps = [_mean_se(loss[f"layer{l}"] - base) for l in range(L)]
        out["gap_per_layer"] = torch.tensor([g[0] for g in gaps], dtype=torch.float64)
        out["gap_per_layer_stderr"] = torch.tensor([g[1] for g in gaps], dtype=torch.float64)
    return out


class DriftData:
    """The fixed sequences every checkpoint is measured on: `eval_seq` for the losses (seed `eval_seed`,
    drawn once and reused) and `fit_seq` for the form fits (seed `fit_seed`)."""

    def __init__(self, noise, d: int = 10, n: int = 20, eval_seq: int = 20_000, fit_seq: int = 2_048,
                 eval_seed: int = EVAL_SEED, fit_seed: int = FIT_SEED):
        self.noise, self.d, self.n = as_prior(noise).spec, d, n
        self.eval_seq, self.fit_seq, self.eval_seed, self.fit_seed = eval_seq, fit_seq, eval_seed, fit_seed
        self.eval_batches: list[TaskBatch] = list(batches(noise, eval_seq, d, n, eval_seed))
        self.oracle = oracle_losses(self.eval_batches)
        self.fit_tokens = sample_tasks(fit_seq, d, n, noise, torch.Generator().manual_seed(fit_seed), dtype=torch.float64).tokens

    def describe(self) -> dict:
        return {"noise": self.noise, "d": self.d, "n": self.n, "eval_seq": self.eval_seq, "eval_seed": self.eval_seed,
                "fit_seq": self.fit_seq, "fit_seed": self.fit_seed}


def drift_metrics(model: LinearTransformer, data: DriftData, per_layer_gap: bool = True) -> dict:
    """Every drift metric of one checkpoint (tensors; see the module docstring)."""
    return weight_metrics(model.P, model.Q) | functional_metrics(model, data.eval_batches, data.fit_tokens, per_layer_gap, data.oracle)


# ---------------------------------------------------------------------- trajectories
def _truncate(x, top: int, sv: bool = False):
    """Singular-value spectra (keys with "sv") cut to their largest `top`; everything else kept."""
    if isinstance(x, dict):
        return {k: _truncate(v, top, sv or "sv" in k) for k, v in x.items()}
    if sv and isinstance(x, Tensor):
        return x[..., :top]
    return x


def drift_record(step: int, model: LinearTransformer, data: DriftData, per_layer_gap: bool = True, top_sv: int = TOP_SV) -> dict:
    """One checkpoint's metrics, JSON-ready (singular values truncated to the largest `top_sv`)."""
    rec = drift_metrics(model, data, per_layer_gap)
    return {"step": step, **jsonable(_truncate(rec, top_sv))}


def drift_trajectory(trajectory, data: DriftData, per_layer_gap: bool = True, top_sv: int = TOP_SV,
                     progress=None) -> dict:
    """Metrics of every (step, model) of a trajectory (interp.run.Run.trajectory), JSON-ready."""
    records = []
    for step, model in trajectory:
        records.append(drift_record(step, model, data, per_layer_gap, top_sv))
        if progress is not None:
            progress(step)
    first = trajectory[0][1]
    return {"format": "interp-drift", "format_version": 1, "param": first.cfg.param, "n_layers": first.cfg.n_layers,
            "n_heads": first.cfg.n_heads, "omega_names": list(OMEGA_NAMES), "blocks": list(BLOCKS), **data.describe(),
            "checkpoints": records}


def run_drift(run_dir: str | Path, noise=None, per_layer_gap: bool = True, **data_kwargs) -> dict:
    """drift_trajectory over every checkpoint of a run directory, on the run's own prior and context length."""
    from interp.run import Run

    run = Run(run_dir)
    cfg = run.config()
    traj = run.trajectory()
    data = DriftData(noise or cfg.noise, d=traj[0][1].cfg.d, n=cfg.n, **data_kwargs)
    return {"run_dir": str(run_dir)} | drift_trajectory(traj, data, per_layer_gap)
