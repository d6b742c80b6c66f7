"""GD++ on noise-free contexts, eigenvalue by eigenvalue: its exact loss, and a proposal that reaches the tails.

At σ = 0 a GD++ model (ω_xy = ω_yy = 0) maps every eigenvalue s of Σ = XᵀX on its own: the preconditioning step
s ↦ s(1 + ω_xx s)² (Vladymyrov et al. 2024, Theorem 5.1) and the residual factor f(s) = Π_l (1 + ω_yx^l s^l) of the
query's error wᵀ Π_l (I + ω_yx^l Σ^l) x_t (derived). So a context's expected ½·error² over w ~ N(0, I) and
x_t ~ N(0, Λ) is ½ Σ_j u_j f(s_j)² (`gdpp_noise_free_loss`), and the loss over contexts is an integral over the
eigenvalues of Σ alone.

The mean over 10⁶ noise-free sequences of a deep GD++ is carried by its rarest contexts: a large λ_max(XᵀX), where
the degree-3^L polynomial s^L diverges, or a small λ_min, where the iteration has not converged (presets.md,
sessions 10-12). `spectral_proposal` draws eigenvalues of contexts X ~ C·N(0, I) for several scales C and weights
each by p/q, p the contexts' own density and q the scales' equal mixture (the balance heuristic of multiple importance
sampling), so a sample of 10⁵ contexts sees the tails that 10⁹ plain ones would, and still estimates the same mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.files import InvalidArgument
from interp.tasks import draw_tasks

LOG_HUGE = 600.0  # log s above which exp(log s) would near float64's range: 1 + ω s is then taken as ω s


def gdpp_noise_free_loss(
    omega_xx: Float[Tensor, " L"], omega_yx: Float[Tensor, " L"], s: Float[Tensor, "batch d"], u: Tensor | None = None
) -> Float[Tensor, " batch"]:
    """E over w ~ N(0, I) and x_t ~ N(0, Λ) of ½(ŷ − y_t)² for a GD++ model (ω_xy = ω_yy = 0) on a noise-free
    context with spectrum s (and query variances u, interp.spectral.context_spectrum), differentiable in the ω's.

    Every token's x goes through A^l = I + ω_xx^l Σ^l (Σ^l commutes with Σ: the eigenvalues map as
    s ↦ s(1 + ω_xx s)², Vladymyrov et al. 2024, Theorem 5.1), and the query's error is wᵀ Π_l (I + ω_yx^l Σ^l) x_t,
    so the loss is ½ Σ_j u_j f(s_j)² with f(s) = Π_l (1 + ω_yx^l s^l) (derived; tests/test_spectral.py checks it
    against the model's error matrix).
    """
    f = torch.ones_like(s)
    for w_xx, w_yx in zip(omega_xx, omega_yx):
        f = f * (1 + w_yx * s)
        s = s * (1 + w_xx * s) ** 2
    f2 = f * f
    return 0.5 * (f2 if u is None else f2 * u).sum(-1)


def _log_abs_one_plus(omega: Tensor, log_s: Tensor) -> Tensor:
    """log|1 + ω s| from log s, finite for any s ≥ 0 (ω s alone where s is beyond float64's range)."""
    s = torch.exp(log_s.clamp_max(LOG_HUGE))
    near = torch.log((1 + omega * s).abs().clamp_min(1e-300))
    far = log_s + torch.log(omega.abs().clamp_min(1e-300))
    return torch.where(log_s > LOG_HUGE, far, near)


def gdpp_log_residual(
    omega_xx: Float[Tensor, " L"], omega_yx: Float[Tensor, " L"], s: Float[Tensor, "*shape"]
) -> Float[Tensor, "*shape"]:
    """log|f(s)|, f(s) = Π_l (1 + ω_yx^l s^l) with s^{l+1} = s^l (1 + ω_xx^l s^l)² (Theorem 5.1's map), computed in
    the log domain so that it stays finite (and differentiable) where f itself overflows, on the far tails where a
    deep model diverges."""
    log_s = s.clamp_min(1e-300).log()
    log_f = torch.zeros_like(log_s)
    for w_xx, w_yx in zip(omega_xx, omega_yx):
        log_f = log_f + _log_abs_one_plus(w_yx, log_s)
        log_s = log_s + 2 * _log_abs_one_plus(w_xx, log_s)
    return log_f


def robust_half_square(log_f: Tensor, cap: float) -> Tensor:
    """½ f² from log|f|, log-compressed above `cap`: cap·(1 + log(½f²/cap)), the trainer's robust guard
    (interp.train.robust_half_se) in closed form, so a diverged eigenvalue pulls with ∇ℓ/ℓ and never overflows."""
    log_l = 2 * log_f + math.log(0.5)
    log_cap = math.log(cap)
    return torch.where(log_l > log_cap, cap * (1 + log_l.clamp_min(log_cap) - log_cap), log_l.clamp_max(log_cap).exp())


@dataclass(frozen=True)
class EigenSample:
    """Eigenvalues of XᵀX with weights: Σ_k weight_k g(s_k) estimates E over contexts of Σ_j g(s_j) (d eigenvalues a
    context), for any g. s, weight: [m], float64."""

    s: Tensor
    weight: Tensor

    def mean(self, g: Tensor) -> Tensor:
        """The estimate Σ_k weight_k g_k of E Σ_j g(s_j) for g = g(s) [m]."""
        return (self.weight * g).sum()

    def binned(self, bins: int) -> "EigenSample":
        """The same sample on at most `bins` log-spaced bins: each bin's weighted mean eigenvalue carries its total
        weight (a smooth g changes across a bin by about its relative width, log(s_max / s_min) / bins), so that an
        objective costs O(bins), not O(contexts·d)."""
        if bins < 2:
            raise InvalidArgument(f"bins must be >= 2, got {bins}")
        log_s = self.s.clamp_min(1e-300).log()
        lo, hi = log_s.min(), log_s.max()
        idx = ((log_s - lo) / (hi - lo).clamp_min(1e-300) * (bins - 1)).long()
        weight = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, self.weight)
        moment = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, self.weight * self.s)
        keep = weight > 0
        return EigenSample(moment[keep] / weight[keep], weight[keep])


def spectral_proposal(
    contexts: int, d: int, n: int, scales: Sequence[float], generator: torch.Generator, chunk: int = 32_768
) -> EigenSample:
    """Eigenvalues of XᵀX for `contexts` noise-free contexts x_i ~ N(0, I_d), i ≤ n, each taken at every scale C of
    `scales` (X → C·X, so s → C² s), weighted by p/q with q = the scales' equal mixture (the balance heuristic):
    an unbiased estimate of E Σ_j g(s_j) under p = N(0, I) that reaches C_max² times further out than a plain sample
    (λ_max) and C_min² times further in (λ_min). log p_C(X) = −nd log C − tr(XᵀX)/(2C²) + const."""
    if contexts < 1 or not scales or any(not (0 < c < 10) for c in scales):
        raise InvalidArgument(f"spectral_proposal needs contexts >= 1 and scales in (0, 10), got {contexts}, {scales}")
    parts = []
    for start in range(0, contexts, chunk):
        x = draw_tasks(min(chunk, contexts - start), d, n, "uniform:0", generator, dtype=torch.float64).x
        parts.append(torch.linalg.eigvalsh(x.mT @ x).clamp_min(0))
    base = torch.cat(parts)  # [contexts, d]
    c = torch.tensor(list(scales), dtype=torch.float64)
    log_c = c.log()
    s_all, w_all = [], []
    for k in range(len(c)):
        s = base * c[k] ** 2
        trace = s.sum(-1, keepdim=True)  # tr(XᵀX) of the scaled context
        log_p = -n * d * log_c - trace / (2 * c**2)  # [contexts, K]: log p_C of this context under every scale
        log_q = torch.logsumexp(log_p, -1) - math.log(len(c))
        weight = torch.exp(-trace[:, 0] / 2 - log_q) / (len(c) * contexts)  # p_1 / q, over all K·contexts draws
        s_all.append(s.flatten())
        w_all.append(weight[:, None].expand_as(s).flatten())
    return EigenSample(torch.cat(s_all), torch.cat(w_all))
