"""The evaluation set: which sequences a loss, profile, probe or drift metric is measured on.

One frozen record names them: the noise prior, d, n, how many sequences, the seed, for one point
of a per-σ profile a fixed noise std, and the input covariance Λ a model was trained on (x ~ N(0, Λ); I by
default). Sequences are drawn in blocks of BLOCK from torch.Generator(seed), so they depend on
(noise, d, n, n_seq, seed, sigma, x_cov) only; `chunk` bounds how many
are run through a predictor at once (memory), never which ones are drawn.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Iterator

import torch

from interp.config import Matrix, covariance
from interp.files import InvalidArgument, InvalidType
from interp.limits import MAX_BATCH_ELEMENTS, MAX_SEED, MAX_SIGMA
from interp.tasks import NoisePrior, TaskBatch, as_prior, sample_tasks

BLOCK = 10_000


@dataclass(frozen=True)
class EvalSet:
    """`n_seq` float64 sequences of the noise prior (σ fixed to `sigma` when given), context length n, dimension d,
    inputs x_i, x_t ~ N(0, x_cov) (N(0, I) when None)."""

    noise: NoisePrior
    d: int = 10
    n: int = 20
    n_seq: int = 10_000
    seed: int = 0
    chunk: int = BLOCK
    sigma: float | None = None  # every sequence's noise std (a per-σ profile point); None: drawn from the prior
    x_cov: Matrix | None = None  # covariance Λ of the inputs (interp.config.TrainConfig.x_cov); None: I_d
    quad: float = 0.0  # c of the quadratic task, labels + c·(x(1)² − 1) (interp.tasks.sample_tasks); 0: the paper's

    def __post_init__(self):
        object.__setattr__(self, "noise", as_prior(self.noise))  # a spec string is parsed once, here
        for name in ("d", "n", "n_seq", "chunk", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InvalidType(f"EvalSet.{name} must be an int, got {value!r:.60}")
            object.__setattr__(self, name, int(value))
            if name != "seed" and value < 1:
                raise InvalidArgument(f"EvalSet.{name} must be a positive integer, got {value!r}")
        if not -MAX_SEED <= self.seed <= MAX_SEED:
            raise InvalidArgument(f"EvalSet.seed must be in [{-MAX_SEED}, {MAX_SEED}], got {self.seed}")
        if self.sigma is not None:
            if isinstance(self.sigma, bool) or not isinstance(self.sigma, numbers.Real):
                raise InvalidType(f"EvalSet.sigma must be a number or None, got {self.sigma!r:.60}")
            object.__setattr__(self, "sigma", float(self.sigma))
            if not 0 <= self.sigma <= MAX_SIGMA:
                raise InvalidArgument(f"EvalSet.sigma must be in [0, {MAX_SIGMA:g}], got {self.sigma}")
        if self.x_cov is not None:
            object.__setattr__(self, "x_cov", covariance("EvalSet.x_cov", self.x_cov, self.d))
        if isinstance(self.quad, bool) or not isinstance(self.quad, numbers.Real):
            raise InvalidType(f"EvalSet.quad must be a number, got {self.quad!r:.60}")
        if not math.isfinite(self.quad):
            raise InvalidArgument(f"EvalSet.quad must be finite, got {self.quad!r}")
        object.__setattr__(self, "quad", float(self.quad))

    def replace(self, **changes) -> "EvalSet":
        return dataclasses.replace(self, **changes)

    def at_sigma(self, sigma: float) -> "EvalSet":
        """The same sequences (w, x, unit noise ξ) with every noise std fixed to σ (common random numbers)."""
        try:
            sigma = float(sigma)  # a number, a numpy or 0-dim torch scalar
        except (TypeError, ValueError):
            raise InvalidType(f"sigma must be a number, got {sigma!r:.60}") from None
        return self.replace(sigma=sigma)

    def batches(self) -> Iterator[TaskBatch]:
        """Float64 task batches of at most `chunk` sequences; the same sequences for any `chunk`."""
        gen = torch.Generator().manual_seed(self.seed)
        sigma = None if self.sigma is None else torch.tensor(self.sigma, dtype=torch.float64)
        step = self.block
        for start in range(0, self.n_seq, step):
            size = min(step, self.n_seq - start)
            block = sample_tasks(
                size,
                self.d,
                self.n,
                self.noise,
                gen,
                x_cov=self.x_cov,
                sigma=sigma,
                dtype=torch.float64,
                quad=self.quad,
            )
            for i in range(0, size, self.chunk):
                sl = slice(i, i + self.chunk)
                yield TaskBatch(block.tokens[sl], block.target[sl], block.sigma[sl], block.w[sl])

    @property
    def block(self) -> int:
        """Sequences drawn at a time: BLOCK, or fewer where BLOCK sequences' tokens would exceed
        interp.limits.MAX_BATCH_ELEMENTS (very long contexts); the sequences depend on it, never on `chunk`."""
        return max(1, min(BLOCK, MAX_BATCH_ELEMENTS // ((self.n + 1) * (self.d + 1))))

    def draw(self) -> TaskBatch:
        """All `n_seq` sequences as one batch."""
        parts = list(self.replace(chunk=self.block).batches())
        if len(parts) == 1:
            return parts[0]
        return TaskBatch(*(torch.cat([getattr(b, f) for b in parts]) for f in ("tokens", "target", "sigma", "w")))

    def describe(self) -> dict:
        """JSON-ready: which sequences (the chunk size is left out: it never changes them)."""
        out = {"noise": self.noise.spec, "d": self.d, "n": self.n, "n_seq": self.n_seq, "seed": self.seed}
        if self.x_cov is not None:
            out["x_cov"] = [list(row) for row in self.x_cov]
        if self.quad:
            out["quad"] = self.quad
        return out if self.sigma is None else out | {"sigma": self.sigma}

    def identity(self) -> dict:
        """Everything the sequences depend on: `describe()` and the block size they are drawn in. The evaluation cache
        keys an entry by it (interp.evalcache), so two sets with one identity hold the same sequences."""
        return self.describe() | {"block": self.block}
