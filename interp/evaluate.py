"""Adjusted evaluation loss (PAPER.md §6): ½·MSE minus the oracle ridge's ½·MSE on the same sequences.

Models and baselines share one call shape, a Predictor: TaskBatch -> ŷ [batch]. Sequences are drawn
in blocks of BLOCK from torch.Generator(seed), so the numbers depend on (seed, n_seq) only; `chunk`
bounds how many sequences are run through a predictor at once (memory), not which ones are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from interp.baselines import oracle_predict
from interp.model import LinearTransformer
from interp.tasks import NoisePrior, TaskBatch, as_prior, sample_tasks

Predictor = Callable[[TaskBatch], Tensor]
BLOCK = 10_000


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
    """Mean of the per-sequence adjusted loss, its standard error, the number of sequences; the median
    and the largest per-sequence value show when a few blown-up sequences dominate the mean."""

    mean: float
    stderr: float
    n_seq: int
    median: float = math.nan
    worst: float = math.nan

    @classmethod
    def of(cls, diff: Tensor) -> "LossEstimate":
        sd = diff.std().item() if len(diff) > 1 else math.nan
        return cls(diff.mean().item(), sd / len(diff) ** 0.5, len(diff), diff.median().item(), diff.max().item())

    @property
    def dominated(self) -> bool:
        """True when the single worst sequence contributes more than half of the mean."""
        return self.worst / self.n_seq > 0.5 * abs(self.mean)

    def to_dict(self) -> dict:
        return {"mean": self.mean, "stderr": self.stderr, "n_seq": self.n_seq, "median": self.median, "worst": self.worst}


def batches(noise: "str | NoisePrior", n_seq: int, d: int = 10, n: int = 20, seed: int = 0,
            chunk: int = BLOCK, sigma: float | None = None) -> Iterator[TaskBatch]:
    """Float64 task batches of at most `chunk` sequences; the same sequences for any `chunk`."""
    if n_seq < 1 or chunk < 1:
        raise ValueError(f"n_seq and chunk must be >= 1, got {n_seq} and {chunk}")
    prior = as_prior(noise)
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, n_seq, BLOCK):
        size = min(BLOCK, n_seq - start)
        block = sample_tasks(size, d, n, prior, gen, sigma=None if sigma is None else torch.tensor(sigma),
                             dtype=torch.float64)
        for i in range(0, size, chunk):
            sl = slice(i, i + chunk)
            yield TaskBatch(block.tokens[sl], block.target[sl], block.sigma[sl], block.w[sl])


def _half_se(pred: Tensor, target: Tensor) -> Tensor:
    return 0.5 * (pred.double() - target) ** 2


def evaluate(
    predictors: Mapping[str, "LinearTransformer | Predictor"],
    noise: "str | NoisePrior",
    n_seq: int = 100_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = BLOCK,
    sigma: float | None = None,
) -> dict[str, LossEstimate]:
    """Adjusted loss of every predictor on the same `n_seq` sequences (the oracle is computed once).

    `sigma` fixes every sequence's noise std (one point of a per-σ profile); the oracle still uses it.
    """
    preds = {name: as_predictor(p) for name, p in predictors.items()}
    diffs: dict[str, list[Tensor]] = {name: [] for name in preds}
    for batch in batches(noise, n_seq, d, n, seed, chunk, sigma):
        base = _half_se(oracle_predict(batch), batch.target)  # PAPER.md §6
        for name, predict in preds.items():
            diffs[name].append(_half_se(predict(batch), batch.target) - base)
    return {name: LossEstimate.of(torch.cat(parts)) for name, parts in diffs.items()}


def adjusted_loss(
    model: "LinearTransformer | Predictor",
    noise: "str | NoisePrior",
    n_seq: int = 100_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = BLOCK,
) -> LossEstimate:
    """E[½(ŷ − y_t)²] − E[½(ŷ_oracle − y_t)²] over `n_seq` fresh sequences, with its standard error."""
    return evaluate({"model": model}, noise, n_seq, d, n, seed, chunk)["model"]


def sigma_grid(noise: "str | NoisePrior", step: float = 0.5) -> list[float]:
    """Evaluation σ's from 0 to σ_max + 1 (PAPER.md §6, per-variance profiles)."""
    top = as_prior(noise).sigma_max + 1
    count = int(math.floor(top / step + 1e-9))
    return [round(i * step, 10) for i in range(count + 1)]


def sigma_profile(
    predictors: Mapping[str, "LinearTransformer | Predictor"],
    sigmas: Sequence[float],
    n_seq: int = 10_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = BLOCK,
    noise: "str | NoisePrior" = "fixed:0",
) -> dict[str, list[LossEstimate]]:
    """Adjusted loss at each fixed σ, `n_seq` sequences per σ.

    Every σ reuses the same seed, so w, x and the unit noise ξ are shared across σ (common random
    numbers: the profile is smooth). `noise` only matters for predictors that read batch.sigma.
    """
    out: dict[str, list[LossEstimate]] = {name: [] for name in predictors}
    for s in sigmas:
        for name, est in evaluate(predictors, noise, n_seq, d, n, seed, chunk, sigma=float(s)).items():
            out[name].append(est)
    return out


def per_layer_loss(
    model: LinearTransformer,
    noise: "str | NoisePrior",
    n_seq: int = 100_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = BLOCK,
    sigma: float | None = None,
) -> list[LossEstimate]:
    """Adjusted loss of the prediction −y_query after K = 0..L layers of an L-layer model (PAPER.md §1)."""
    L = model.cfg.n_layers
    diffs: list[list[Tensor]] = [[] for _ in range(L + 1)]
    for batch in batches(noise, n_seq, d, n, seed, chunk, sigma):
        base = _half_se(oracle_predict(batch), batch.target)
        with torch.no_grad():
            per = model.predict_per_layer(batch.tokens.to(model.cfg.torch_dtype))
        for k in range(L + 1):
            diffs[k].append(_half_se(per[k], batch.target) - base)
    return [LossEstimate.of(torch.cat(parts)) for parts in diffs]


def per_layer_profile(
    model: LinearTransformer,
    sigmas: Sequence[float],
    n_seq: int = 10_000,
    d: int = 10,
    n: int = 20,
    seed: int = 0,
    chunk: int = BLOCK,
) -> list[list[LossEstimate]]:
    """[K][σ]: adjusted loss after K = 0..L layers at each fixed σ (PAPER.md §9, figures 5 and 7)."""
    cols = [per_layer_loss(model, "fixed:0", n_seq, d, n, seed, chunk, sigma=float(s)) for s in sigmas]
    return [[col[k] for col in cols] for k in range(model.cfg.n_layers + 1)]


# ---------------------------------------------------------------------------- the paper's Table 1
TABLE1_COLUMNS = ("uniform:0", "uniform:1", "uniform:2", "uniform:3", "uniform:4", "uniform:5", "uniform:6",
                  "uniform:7", "categorical:1,3", "categorical:1,3,5")


def paper_table() -> dict:
    """The paper's Table 1 (PAPER.md §8), shipped as interp/data/table1.json."""
    import json
    from importlib import resources

    return json.loads(resources.files("interp").joinpath("data", "table1.json").read_text())


def paper_value(method: str, noise: "str | NoisePrior", layers: int | None = None, d: int = 10, n: int = 20) -> float | None:
    """Table 1's number for a method ("full", "diag", "gdpp" with `layers`, or "constrr", "adarr",
    "tunedrr") on a prior; None where the paper has no such cell (other priors, d, n or depth)."""
    if (d, n) != (10, 20):
        return None
    spec = as_prior(noise).spec
    table = paper_table()
    if method in table["models"]:
        return table["models"][method].get(str(layers), {}).get(spec)
    if method in table["baselines"]:
        return table["baselines"][method].get(spec)
    return None
