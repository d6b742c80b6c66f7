"""Adjusted evaluation loss (PAPER.md §6): ½·MSE minus the oracle ridge's ½·MSE on the same sequences.

Models and baselines share one call shape, a Predictor: TaskBatch -> ŷ [batch].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from interp.baselines import oracle_predict
from interp.model import LinearTransformer
from interp.tasks import NoisePrior, TaskBatch, as_prior, sample_tasks

Predictor = Callable[[TaskBatch], Tensor]


def as_predictor(model: "LinearTransformer | Predictor") -> Predictor:
    """A model becomes batch -> model(batch.tokens); a predictor is returned as is."""
    if isinstance(model, LinearTransformer):
        def predict(batch: TaskBatch) -> Tensor:
            with torch.no_grad():
                return model(batch.tokens.to(model.cfg.torch_dtype))
        return predict
    return model


@dataclass
class LossEstimate:
    mean: float
    stderr: float
    n_seq: int


def adjusted_loss(
    model: "LinearTransformer | Predictor",
    noise: "str | NoisePrior",
    n_seq: int = 100_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = 10_000,
) -> LossEstimate:
    """E[½(ŷ − y_t)²] − E[½(ŷ_oracle − y_t)²] over `n_seq` fresh sequences, with its standard error."""
    predict, prior = as_predictor(model), as_prior(noise)
    gen = torch.Generator().manual_seed(seed)
    diffs = []
    for start in range(0, n_seq, chunk):
        batch = sample_tasks(min(chunk, n_seq - start), d, n, prior, gen, dtype=torch.float64)
        target = batch.target
        diffs.append(0.5 * (predict(batch).double() - target) ** 2 - 0.5 * (oracle_predict(batch) - target) ** 2)
    diff = torch.cat(diffs)
    return LossEstimate(diff.mean().item(), (diff.std() / len(diff) ** 0.5).item(), len(diff))
