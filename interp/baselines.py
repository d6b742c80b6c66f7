"""Ridge-family baselines on the raw context (PAPER.md §5); every solve is batched and in float64."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from interp.tasks import TaskBatch


def ridge_weights(batch: TaskBatch, lam: Float[Tensor, "batch"] | float) -> Float[Tensor, "batch d"]:
    """ŵ = (Σ + λ I)^{-1} α with Σ = Σ_i x_i x_iᵀ, α = Σ_i y_i x_i (PAPER.md §5), float64."""
    x, y = batch.x.double(), batch.y.double()
    sigma = x.transpose(1, 2) @ x
    alpha = (x * y[..., None]).sum(1)
    lam = torch.as_tensor(lam, dtype=torch.float64, device=x.device).expand(len(batch))
    eye = torch.eye(x.shape[-1], dtype=torch.float64, device=x.device)
    return torch.linalg.solve(sigma + lam[:, None, None] * eye, alpha)


def ridge_predict(batch: TaskBatch, lam: Float[Tensor, "batch"] | float) -> Float[Tensor, "batch"]:
    """ŷ = ⟨ŵ_λ, x_t⟩, float64."""
    return (ridge_weights(batch, lam) * batch.x_query.double()).sum(-1)


def oracle_predict(batch: TaskBatch) -> Float[Tensor, "batch"]:
    """Oracle ridge: λ = σ_τ², the true noise variance of each sequence (PAPER.md §5)."""
    return ridge_predict(batch, batch.sigma.double() ** 2)
