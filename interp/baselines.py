"""Baselines on the raw context (Vladymyrov et al. 2024, Table 1 baselines); every solve is batched and in float64.

All ridge-family predictors read the context through interp.spectral.SpectralContext (Σ = XᵀX in its
eigenbasis), so sweeping λ (tuning, the Bayes mixture) costs O(d) per sequence and λ.

Predictors (TaskBatch -> ŷ [batch], float64): `ols_predict`, `oracle_predict` (λ = σ_τ²),
`ConstRR(lam)`, `AdaRR()` (λ = σ̂², divisor n − d), `TunedRR(mult, clip)` (λ = mult·min(σ̂², clip)),
`GDk(steps, eta)` (k steps of gradient descent from w = 0), and `Bayes(prior)`, the posterior mean
of w under the mixed noise prior: the true floor for a predictor that does not know σ_τ.
Tuned values come from interp.tuning (cached per prior as package data).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from interp.files import InvalidArgument, InvalidType
from interp.spectral import SpectralContext
from interp.tasks import NoisePrior, TaskBatch, as_prior, check_batch


def ridge_weights(batch: TaskBatch, lam: Float[Tensor, "batch"] | float) -> Float[Tensor, "batch d"]:
    """ŵ = (Σ + λ I)^{-1} α with Σ = Σ_i x_i x_iᵀ, α = Σ_i y_i x_i (Vladymyrov et al. 2024, Table 1 baselines),
    float64; where λ = 0 the minimum-norm least-squares solution Σ⁺α (Σ is singular when n < d)."""
    check_batch(batch)
    x, y = batch.x.double(), batch.y.double()
    sigma = x.transpose(1, 2) @ x
    alpha = (x * y[..., None]).sum(1)
    try:
        lam = torch.as_tensor(lam, dtype=torch.float64, device=x.device)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidType(f"lam must be a number or a tensor [batch], got {type(lam).__name__}") from None
    if lam.ndim > 1 or lam.numel() not in (1, len(batch)):
        raise InvalidArgument(f"lam must be a number or [batch] with batch = {len(batch)}, got shape {list(lam.shape)}")
    if not bool(torch.isfinite(lam).all()) or bool((lam < 0).any()):
        raise InvalidArgument("lam: ridge λ must be finite and >= 0")
    lam = lam.expand(len(batch))
    eye = torch.eye(x.shape[-1], dtype=torch.float64, device=x.device)
    free = lam <= 0  # λ = 0 (noise-free): Σ is singular when n < d; the minimum-norm solution Σ⁺α there
    lam_safe = torch.where(free, torch.ones_like(lam), lam)
    w = torch.linalg.solve(sigma + lam_safe[:, None, None] * eye, alpha)
    if bool(free.any()):
        rows = free.nonzero().squeeze(1)
        sub = TaskBatch(*(t[rows] for t in (batch.tokens, batch.target, batch.sigma, batch.w)))
        w[rows] = SpectralContext.of(sub).ridge_weights(0.0)
    return w


def ridge_predict(batch: TaskBatch, lam: Float[Tensor, "batch"] | float) -> Float[Tensor, "batch"]:
    """ŷ = ⟨ŵ_λ, x_t⟩, float64."""
    return (ridge_weights(batch, lam) * batch.x_query.double()).sum(-1)


def oracle_predict(batch: TaskBatch) -> Float[Tensor, "batch"]:
    """Oracle ridge: λ = σ_τ², the true noise variance of each sequence (Vladymyrov et al. 2024, Table 1 baselines)."""
    check_batch(batch)
    return ridge_predict(batch, batch.sigma.double() ** 2)


# ---------------------------------------------------------------------------- predictors
def _check_number(name: str, value, low: float = -math.inf, infinite: bool = False) -> None:
    """A baseline's parameter: a real number (a Python, numpy or 0-dim torch scalar) >= low, finite unless
    `infinite`."""
    if isinstance(value, Tensor) and value.numel() == 1 and value.is_floating_point():
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidType(f"{name} must be a number, got {value!r:.60}")
    if not (value >= low and (infinite or math.isfinite(value))) or value != value:
        raise InvalidArgument(f"{name} must be {'' if infinite else 'finite and '}>= {low:g}, got {value}")


def ols_predict(batch: TaskBatch) -> Float[Tensor, "batch"]:
    """Ordinary least squares (λ = 0; minimum-norm when n < d)."""
    return SpectralContext.of(batch).ridge(0.0)


@dataclass(frozen=True)
class ConstRR:
    """Ridge with one λ for every sequence, tuned per noise prior (Vladymyrov et al. 2024, Table 1 baselines)."""

    lam: float

    def __post_init__(self) -> None:
        _check_number("ConstRR.lam", self.lam, 0.0)

    def __call__(self, batch: TaskBatch) -> Tensor:
        return SpectralContext.of(batch).ridge(self.lam)


@dataclass(frozen=True)
class AdaRR:
    """Ridge with λ = σ̂² = ρ / (n − d), the unbiased noise estimate (Vladymyrov et al. 2024, Table 1 baselines)."""

    def __call__(self, batch: TaskBatch) -> Tensor:
        sp = SpectralContext.of(batch)
        return sp.ridge(sp.sigma2_hat())


@dataclass(frozen=True)
class TunedRR:
    """Ridge with λ = mult · min(σ̂², clip), both tuned per prior (Vladymyrov et al. 2024, Table 1 baselines; clip =
    inf for none)."""

    mult: float
    clip: float = math.inf

    def __post_init__(self) -> None:
        _check_number("TunedRR.mult", self.mult, 0.0)
        _check_number("TunedRR.clip", self.clip, 0.0, infinite=True)

    def __call__(self, batch: TaskBatch) -> Tensor:
        sp = SpectralContext.of(batch)
        return sp.ridge(self.mult * sp.sigma2_hat().clamp_max(self.clip))


@dataclass(frozen=True)
class GDk:
    """k steps of gradient descent from w = 0 with one step size η, tuned per prior and k."""

    steps: int
    eta: float

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, numbers.Integral):
            raise InvalidType(f"GDk.steps must be an int, got {self.steps!r:.60}")
        if self.steps < 0:
            raise InvalidArgument(f"GDk.steps must be >= 0, got {self.steps}")
        _check_number("GDk.eta", self.eta)

    def __call__(self, batch: TaskBatch) -> Tensor:
        return SpectralContext.of(batch).gd(self.steps, self.eta)


def sigma_nodes(prior: "str | NoisePrior", nodes: int = 16, panels: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Points σ_j and prior weights π_j (summing to 1) that integrate over the noise prior.

    Categorical / fixed: the support itself, exactly. Uniform U(0, σ_max): composite Gauss–Legendre
    with `panels` panels whose edges shrink geometrically toward 0 (σ_max·4^{-k}), `nodes` points each,
    so the narrow posteriors of nearly noiseless sequences are resolved.
    """
    prior = as_prior(prior)
    if prior.kind != "uniform":
        return np.array(prior.values, dtype=np.float64), np.array(prior.category_probs(), dtype=np.float64)
    smax = prior.values[0]
    if smax == 0:
        return np.zeros(1), np.ones(1)
    edges = [0.0] + [smax * 4.0**-k for k in range(panels - 1, -1, -1)]
    x, w = np.polynomial.legendre.leggauss(nodes)
    pts, wts = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        pts.append(lo + (hi - lo) * (x + 1) / 2)
        wts.append(w * (hi - lo) / 2 / smax)
    return np.concatenate(pts), np.concatenate(wts)


class Bayes:
    """Bayes-optimal prediction under the noise prior: ŷ = ⟨E[w | context], x_t⟩ (not in the paper: the floor).

    E[w | ctx] = ∫ (Σ + σ²I)^{-1}α p(σ | ctx) dσ with p(σ | ctx) ∝ p(σ) N(y; 0, XXᵀ + σ²I_n):
    an exact sum for categorical / fixed priors, composite Gauss–Legendre for uniform ones.
    A σ = 0 atom uses σ² = interp.spectral.SIGMA2_FLOOR in the likelihood (degenerate when n > d: it wins iff
    ρ ≈ 0).
    """

    def __init__(self, prior: "str | NoisePrior", nodes: int = 16, panels: int = 4):
        for name, value in (("nodes", nodes), ("panels", panels)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 1000:
                raise InvalidArgument(f"Bayes {name} must be an int in [1, 1000], got {value!r:.60}")
        self.prior = as_prior(prior)
        self.sigma, self.weight = sigma_nodes(self.prior, nodes, panels)
        keep = self.weight > 0
        self.sigma, self.weight = self.sigma[keep], self.weight[keep]

    def posterior(self, sp: SpectralContext) -> Float[Tensor, "batch J"]:
        """p(σ_j | context) for every node σ_j."""
        logp = torch.stack([sp.log_marginal(s**2) for s in self.sigma], dim=-1)
        logp = logp + torch.as_tensor(np.log(self.weight), dtype=torch.float64, device=logp.device)
        return torch.softmax(logp, dim=-1)

    def __call__(self, batch: TaskBatch) -> Tensor:
        sp = SpectralContext.of(batch)
        post = self.posterior(sp)
        return sum(post[:, j] * sp.ridge(s**2) for j, s in enumerate(self.sigma))

    def __repr__(self) -> str:
        return f"Bayes({self.prior.spec!r}, {len(self.sigma)} nodes)"
