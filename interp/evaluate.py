"""Adjusted evaluation loss (README, Conventions: adjusted loss): ½·MSE minus the oracle ridge's ½·MSE on the same
sequences.

Models and baselines share one call shape, a Predictor: TaskBatch -> ŷ [..., batch]. Which sequences
is an EvalSet (interp.evalset); `adjusted_losses` is the one place the adjusted loss is computed, per
sequence, and every estimate below (on the prior, per σ, after K layers) is built on it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import torch
from torch import Tensor

from interp.baselines import oracle_predict
from interp.evalset import EvalSet
from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer
from interp.records import Record
from interp.tasks import NoisePrior, TaskBatch, as_prior, check_batch
from interp.variants import MODELS

Predictor = Callable[[TaskBatch], Tensor]

# The version of the evaluation code. Bump it when a change alters what an evaluation returns for the same model and
# the same EvalSet: the adjusted loss (`adjusted_losses`, the oracle ridge), a baseline's predictor, or the task
# sampler behind EvalSet.batches. Every entry of the evaluation cache (interp.evalcache) is keyed by it, so an entry
# computed by other code is never read as this code's result.
EVAL_VERSION = 1
# The largest standard error, relative to the value, at which an estimate is compared with a reference (the paper's
# Table 1): above it the noise can flip the comparison, so no ratio or mark is shown (`precise`).
MAX_REL_STDERR = 0.1


def as_predictor(model: "LinearTransformer | Predictor") -> Predictor:
    """A model becomes batch -> model(batch.tokens) in the model's own dtype; a predictor is returned as is."""
    if isinstance(model, MODELS):  # the paper's model or the family's (interp.variants)

        def predict(batch: TaskBatch) -> Tensor:
            with torch.no_grad():
                return model(batch.tokens.to(model.cfg.torch_dtype))

        return predict
    if not callable(model):
        raise InvalidType(
            f"a predictor must be an interp.LinearTransformer or a function TaskBatch -> ŷ, got {type(model).__name__}"
        )
    return model


def per_layer_predictor(model: LinearTransformer) -> Predictor:
    """batch -> [L+1, batch]: the prediction −y_query after K = 0..L layers."""
    _check_model(model)

    def predict(batch: TaskBatch) -> Tensor:
        with torch.no_grad():
            return model.predict_per_layer(batch.tokens.to(model.cfg.torch_dtype))

    return predict


def skipped_layer_predictor(model: LinearTransformer) -> Predictor:
    """batch -> [L, batch]: row l is the prediction with layer l skipped, its residual update removed (resid_post^l
    := resid_pre^l: attention and FFN alike), every other layer as trained. Paired against the model on the same
    sequences (adjusted_losses) it says how much of the loss each layer's update is worth."""
    _check_model(model)
    L = model.cfg.n_layers

    def skip(layer: int) -> list:
        kept = {}

        def keep(resid_pre: Tensor, hook) -> None:
            kept["resid_pre"] = resid_pre

        def restore(resid_post: Tensor, hook) -> Tensor:
            return kept.pop("resid_pre")

        return [(f"blocks.{layer}.hook_resid_pre", keep), (f"blocks.{layer}.hook_resid_post", restore)]

    def predict(batch: TaskBatch) -> Tensor:
        tokens = batch.tokens.to(model.cfg.torch_dtype)
        with torch.no_grad():
            return torch.stack([model.run_with_hooks(tokens, fwd_hooks=skip(layer)) for layer in range(L)])

    return predict


@dataclass
class LossEstimate(Record):
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
    def precise(self) -> bool:
        """Whether the estimate is precise enough to compare with a reference (`precise`)."""
        return precise(self.mean, self.stderr)

    @property
    def dominated(self) -> bool:
        """True when the single worst sequence contributes more than half of the mean (`dominated`)."""
        return dominated(self.mean, self.worst, self.n_seq)

    def to_dict(self) -> dict:
        return {
            "mean": self.mean,
            "stderr": self.stderr,
            "n_seq": self.n_seq,
            "median": self.median,
            "worst": self.worst,
        }


def precise(mean: float, stderr: float, rel: float = MAX_REL_STDERR) -> bool:
    """True when the standard error is at most `rel` of |mean| (a value that is exactly 0 with no error counts):
    only then is a ratio to, or a mark against, a reference value shown."""
    if not (math.isfinite(mean) and math.isfinite(stderr)):
        return False
    return stderr <= rel * abs(mean) or (mean == 0 and stderr == 0)


# An adjusted loss per sequence at or below this is a difference of rounding (float32 predictions of labels of size
# ~3 err by ~1e-7, squared ~1e-14), never a blow-up: σ = 0 runs, where every predictor is exact, show it.
ROUNDING_LEVEL = 1e-9


def dominated(mean: float, worst: float | None, n_seq: int) -> bool:
    """True when one sequence carries the mean: the worst sequence's share worst / n_seq is more than half of |mean| (a
    blown-up prediction on an atypical context). What interp eval and interp table mark with ⚠. An estimate without a
    worst sequence (None, nan) is not dominated."""
    if worst is None or not n_seq or not worst > ROUNDING_LEVEL:  # a worst of rounding size carries nothing
        return False
    return worst / n_seq > 0.5 * abs(mean)


def half_se(pred: Tensor, target: Tensor) -> Tensor:
    """½(ŷ − y_t)² per sequence, float64."""
    return 0.5 * (pred.double() - target) ** 2


@dataclass
class ScoredSet:
    """An EvalSet's batches held in memory with the oracle's ½(ŷ_oracle − y_t)² of each, for measuring many
    predictors (the checkpoints of a trajectory) on the same sequences without redrawing them."""

    batches: list[TaskBatch]
    oracle: list[Tensor]  # ½(ŷ_oracle − y_t)² [batch] per batch
    evalset: EvalSet | None = None  # where the batches came from (None: given by hand)

    @classmethod
    def of(cls, evalset: EvalSet) -> "ScoredSet":
        if not isinstance(evalset, EvalSet):
            raise InvalidType(f"evalset must be an interp.EvalSet, got {type(evalset).__name__}")
        return cls.of_batches(list(evalset.batches()), evalset)

    @classmethod
    def of_batches(cls, batches: list[TaskBatch], evalset: EvalSet | None = None) -> "ScoredSet":
        if not isinstance(batches, (list, tuple)) or not batches:
            raise InvalidArgument(f"batches must be a non-empty list of TaskBatch, got {batches!r:.60}")
        for b in batches:
            check_batch(b, "each of batches")
        return cls(batches, [half_se(oracle_predict(b), b.target) for b in batches], evalset)

    def scored(self) -> Iterable[tuple[TaskBatch, Tensor]]:
        return zip(self.batches, self.oracle)


def _check_model(model, name: str = "model") -> None:
    if not isinstance(model, MODELS):
        raise InvalidType(
            f"{name} must be an interp.LinearTransformer or VariantTransformer, got {type(model).__name__}"
        )


def _check_data(data) -> None:
    """The sequences of an evaluation: an EvalSet, or a ScoredSet of them."""
    if not isinstance(data, (EvalSet, ScoredSet)):
        raise InvalidType(f"data must be an interp.EvalSet (or a ScoredSet), got {type(data).__name__}")


def _data_d(data: "EvalSet | ScoredSet") -> int | None:
    if isinstance(data, EvalSet):
        return data.d
    return data.batches[0].tokens.shape[-1] - 1 if data.batches else None


def _scored(data: "EvalSet | ScoredSet") -> Iterable[tuple[TaskBatch, Tensor]]:
    _check_data(data)
    if isinstance(data, ScoredSet):
        return data.scored()
    return ((b, half_se(oracle_predict(b), b.target)) for b in data.batches())  # the oracle ridge: λ = σ_τ²


Predictors = Mapping[str, "LinearTransformer | Predictor"]


def adjusted_losses(predictors: Predictors, data: "EvalSet | ScoredSet") -> dict[str, Tensor]:
    """Per-sequence adjusted loss ½(ŷ − y_t)² − ½(ŷ_oracle − y_t)² [..., n_seq] of every predictor, on the
    same sequences (the oracle computed once per batch). A predictor returning [..., batch] gets [..., n_seq]."""
    if not isinstance(predictors, Mapping):
        raise InvalidType(f"predictors must be a dict name -> model or predictor, got {type(predictors).__name__}")
    _check_data(data)
    d = _data_d(data)
    for name, p in predictors.items():
        if isinstance(p, MODELS) and d is not None and p.cfg.d != d:
            raise InvalidArgument(f"{name}: the model has d = {p.cfg.d} but the evaluation set d = {d}")
    preds = {name: as_predictor(p) for name, p in predictors.items()}
    diffs: dict[str, list[Tensor]] = {name: [] for name in preds}
    for batch, base in _scored(data):
        for name, predict in preds.items():
            y_hat = _prediction(name, predict(batch), len(batch.target), diffs[name])
            diffs[name].append(half_se(y_hat, batch.target.to(y_hat.device)) - base.to(y_hat.device))
    return {name: torch.cat(parts, dim=-1) for name, parts in diffs.items()}


def _prediction(name: str, y_hat, batch: int, before: list[Tensor]) -> Tensor:
    """A predictor's ŷ of one batch, checked: a real floating tensor [..., batch] of the leading shape it returned on
    the batches before (InvalidType / InvalidArgument naming the predictor)."""
    if not isinstance(y_hat, Tensor) or not y_hat.is_floating_point():
        tensor = isinstance(y_hat, Tensor)
        got = f"a {str(y_hat.dtype).removeprefix('torch.')} tensor" if tensor else type(y_hat).__name__
        raise InvalidType(f"predictor {name!r}: must return ŷ, a floating tensor [batch], got {got}")
    if y_hat.device.type == "meta":
        raise InvalidArgument(f"predictor {name!r}: returned a tensor on the meta device (no values)")
    if y_hat.ndim == 0 or y_hat.shape[-1] != batch or (before and y_hat.shape[:-1] != before[0].shape[:-1]):
        want = f"[..., {batch}]" if not before else f"{[*before[0].shape[:-1], batch]}"
        got = list(y_hat.shape)
        raise InvalidArgument(f"predictor {name!r}: returned shape {got} for a batch of {batch}, want {want}")
    return y_hat


def evaluate(predictors: Predictors, data: "EvalSet | ScoredSet") -> dict[str, LossEstimate]:
    """Adjusted loss of every predictor on the same sequences (`data.sigma` fixes every sequence's noise std)."""
    return {name: LossEstimate.of(diff) for name, diff in adjusted_losses(predictors, data).items()}


def adjusted_loss(model: "LinearTransformer | Predictor", data: "EvalSet | ScoredSet") -> LossEstimate:
    """E[½(ŷ − y_t)²] − E[½(ŷ_oracle − y_t)²] over the evaluation set, with its standard error."""
    return evaluate({"model": model}, data)["model"]


def sigma_grid(noise: "str | NoisePrior", step: float = 0.5) -> list[float]:
    """Evaluation σ's from 0 to σ_max + 1 (README, Conventions: adjusted loss, per-variance profiles)."""
    if isinstance(step, bool) or not isinstance(step, numbers.Real) or not 0 < step < math.inf:
        raise InvalidArgument(f"step must be a finite number > 0, got {step!r:.60}")
    top = as_prior(noise).sigma_max + 1
    count = int(math.floor(top / step + 1e-9))
    return [round(i * step, 10) for i in range(count + 1)]


def sigma_profile(predictors: Predictors, sigmas: Sequence[float], data: EvalSet) -> dict[str, list[LossEstimate]]:
    """Adjusted loss at each fixed σ on `data.at_sigma(σ)`.

    Every σ reuses the same seed, so w, x and the unit noise ξ are shared across σ (common random
    numbers: the profile is smooth); with σ fixed, `data.noise` draws nothing (the sequences do not depend on it).
    """
    sigmas = _check_sigmas(sigmas, data)
    out: dict[str, list[LossEstimate]] = {name: [] for name in predictors}
    for s in sigmas:
        for name, est in evaluate(predictors, data.at_sigma(s)).items():
            out[name].append(est)
    return out


def per_layer_loss(model: LinearTransformer, data: "EvalSet | ScoredSet") -> list[LossEstimate]:
    """Adjusted loss of the prediction −y_query after K = 0..L layers of an L-layer model (README, Conventions)."""
    return _loss_rows(model, data, per_layer_predictor)


def skipped_layer_loss(model: LinearTransformer, data: "EvalSet | ScoredSet") -> list[LossEstimate]:
    """[L]: adjusted loss of the model with layer l skipped (skipped_layer_predictor); the median and the worst
    sequence say when a few sequences that blow up without that layer dominate the mean."""
    return _loss_rows(model, data, skipped_layer_predictor)


def _loss_rows(model, data, predictor: Callable) -> list[LossEstimate]:
    """One LossEstimate per row of predictor(model)'s [rows, batch] prediction, on `data`."""
    _check_model(model)
    _check_data(data)
    if _data_d(data) not in (None, model.cfg.d):
        raise InvalidArgument(f"model: the model has d = {model.cfg.d} but the evaluation set d = {_data_d(data)}")
    diff = adjusted_losses({"model": predictor(model)}, data)["model"]
    return [LossEstimate.of(row) for row in diff]


def per_layer_profile(model: LinearTransformer, sigmas: Sequence[float], data: EvalSet) -> list[list[LossEstimate]]:
    """[K][σ]: adjusted loss after K = 0..L layers at each fixed σ on `data.at_sigma(σ)` (figures 5 and 7)."""
    _check_model(model)
    sigmas = _check_sigmas(sigmas, data)
    cols = [per_layer_loss(model, data.at_sigma(s)) for s in sigmas]
    return [[col[k] for col in cols] for k in range(model.cfg.n_layers + 1)]


def _check_sigmas(sigmas, data) -> list[float]:
    """A profile's σ's (a list of numbers, each checked by EvalSet.at_sigma) on an EvalSet."""
    if not isinstance(data, EvalSet):
        raise InvalidType(f"data must be an interp.EvalSet (a profile redraws it at each σ), got {type(data).__name__}")
    if isinstance(sigmas, (str, bytes)) or not isinstance(sigmas, Iterable):
        raise InvalidType(f"sigmas must be a list of noise stds, got {sigmas!r:.60}")
    return list(sigmas)


# ---------------------------------------------------------------------------- the paper's Table 1
TABLE1_COLUMNS = (
    "uniform:0",
    "uniform:1",
    "uniform:2",
    "uniform:3",
    "uniform:4",
    "uniform:5",
    "uniform:6",
    "uniform:7",
    "categorical:1,3",
    "categorical:1,3,5",
)


def paper_table() -> dict:
    """The paper's Table 1 (Vladymyrov et al. 2024, Table 1), shipped as interp/data/table1.json."""
    import json
    from importlib import resources

    return json.loads(resources.files("interp").joinpath("data", "table1.json").read_text())


def paper_value(
    method: str, noise: "str | NoisePrior", layers: int | None = None, d: int = 10, n: int = 20, x_cov=None
) -> float | None:
    """Table 1's number for a method ("full", "diag", "gdpp" with `layers`, or "constrr", "adarr",
    "tunedrr") on a prior; None where the paper has no such cell (other priors, d, n or depth, or inputs
    x ~ N(0, x_cov): Table 1 has x ~ N(0, I) only)."""
    if (d, n) != (10, 20) or x_cov is not None:
        return None
    spec = as_prior(noise).spec
    table = paper_table()
    if method in table["models"]:
        return table["models"][method].get(str(layers), {}).get(spec)
    if method in table["baselines"]:
        return table["baselines"][method].get(spec)
    return None
