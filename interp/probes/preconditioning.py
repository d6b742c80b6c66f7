"""GD++'s preconditioning step (Vladymyrov et al. 2024, Theorem 5.1), read off a trained model through its hooks.

A GD++ layer moves every x-token by x_i ← (I + ω_xx^l Σ^l) x_i (q_y = 0, so no y enters the x's), hence the context's
Σ^{l+1} = (I − γ_l Σ^l) Σ^l (I − γ_l Σ^l) with γ_l = −ω_xx^l: each eigenvalue s of Σ^l maps to s (1 − γ_l s)². With
γ_l s_max = 1/3 the largest eigenvalues shrink by 4/9 per layer while the smallest stay, so the condition number κ
falls geometrically (the O(log κ) part of the theorem) and the y-steps then converge second order.

`preconditioning` measures the eigenvalues of Σ^l = Σ_i x_i^l x_i^lᵀ from the residual stream at every layer (the
hooks, not the ω's), and sets beside them what the map predicts from the layer below, γ_l s_max^l, and κ^l.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.model import LinearTransformer
from interp.probes.implicit import as_float64, probe_cache
from interp.records import Record


@dataclass
class Preconditioning(Record):
    """Per layer of a GD++ model, over a batch of contexts (l = 0 is the raw context, l = L after the last layer).

    gamma[l]: γ_l = −ω_xx^l of layer l+1 (summed over heads), l = 0..L−1;
    map_error[l]: max over sequences and eigenvalues of |s^{l+1} − s^l (1 − γ_l s^l)²| / s_max^{l+1};
    gamma_smax[l]: median over sequences of γ_l · s_max(Σ^l) (Theorem 5.1's choice: 1/3);
    kappa[l]: median condition number s_max / s_min of Σ^l, l = 0..L; kappa_q90[l] its 90th percentile;
    smax[l], smin[l]: median largest and smallest eigenvalue of Σ^l.
    """

    gamma: Float[Tensor, "L"]
    map_error: Float[Tensor, "L"]
    gamma_smax: Float[Tensor, "L"]
    kappa: Float[Tensor, "L1"]
    kappa_q90: Float[Tensor, "L1"]
    smax: Float[Tensor, "L1"]
    smin: Float[Tensor, "L1"]


def context_spectra(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch d"]:
    """Eigenvalues (ascending) of Σ^l = Σ_{i≤n} x_i^l x_i^lᵀ of the residual stream before layer l+1 (l = 0..L−1) and
    after the last layer (l = L), float64, read through the hooks."""
    resid, _ = probe_cache(model, tokens)  # [L+1, batch, pos, D]
    x = resid[:, :, :-1, :-1]  # the context tokens' x-part (the query is no key)
    return torch.linalg.eigvalsh(x.transpose(-1, -2) @ x)


def preconditioning(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Preconditioning:
    """The preconditioning step of a GD++ model on a batch of contexts (module docstring); ValueError for another
    architecture (DIAG's ω_xy moves the x's by y, FULL has no ω's)."""
    if model.cfg.param != "gdpp":
        raise ValueError(f"preconditioning is GD++'s (Theorem 5.1); this model is {model.cfg.param}")
    s = context_spectra(model, tokens)  # [L+1, batch, d]
    gamma = -as_float64(model).omegas().omega_xx.detach().reshape(model.cfg.n_layers)  # as the hooks computed
    predicted = s[:-1] * (1 - gamma[:, None, None] * s[:-1]) ** 2  # s ↦ s (1 − γ s)² (Theorem 5.1)
    # the map is monotone only on γ s < 1/3; sorting compares the same multiset of eigenvalues either way
    predicted = predicted.sort(dim=-1).values
    top = s[1:, :, -1:].clamp_min(torch.finfo(s.dtype).tiny)
    map_error = ((s[1:] - predicted).abs() / top).amax(dim=(1, 2))
    kappa = s[..., -1] / s[..., 0].clamp_min(torch.finfo(s.dtype).tiny)
    return Preconditioning(
        gamma=gamma,
        map_error=map_error,
        gamma_smax=(gamma[:, None] * s[:-1, :, -1]).median(dim=1).values,
        kappa=kappa.median(dim=1).values,
        kappa_q90=kappa.quantile(0.9, dim=1),
        smax=s[..., -1].median(dim=1).values,
        smin=s[..., 0].median(dim=1).values,
    )
