"""interp: mechanistic interpretability for linear transformers that learn linear regression in context.

The package's functions never shadow its modules: `interp.train`, `interp.evaluate` and `interp.sweep` are the
modules; their entry points are `interp.train_model`, `interp.evaluate_predictors` and `interp.run_sweep`."""

from interp.baselines import AdaRR, Bayes, ConstRR, GDk, TunedRR, ols_predict, oracle_predict, ridge_predict
from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import (
    LossEstimate,
    adjusted_loss,
    paper_value,
    per_layer_loss,
    per_layer_profile,
    sigma_grid,
    sigma_profile,
)
from interp.evaluate import evaluate as evaluate_predictors
from interp.files import CheckpointError
from interp.model import LinearTransformer, Omegas
from interp.probes import (
    DiagProjection,
    DriftData,
    ImplicitModel,
    diag_ablation,
    diag_projection,
    drift_trajectory,
    fit_layer_maps,
    implicit_model,
    lemma44,
    probe_model,
    run_drift,
)
from interp.run import Run, RunLocked, load
from interp.spectral import SpectralContext
from interp.sweep import sweep as run_sweep
from interp.tasks import NoisePrior, TaskBatch, TaskDraw, draw_tasks, sample_tasks
from interp.train import train as train_model
from interp.tuning import baselines as tuned_baselines
from interp.tuning import tuned

__all__ = [
    "AdaRR",
    "Bayes",
    "CheckpointError",
    "ConstRR",
    "DiagProjection",
    "DriftData",
    "EvalSet",
    "GDk",
    "ImplicitModel",
    "LinearTransformer",
    "LossEstimate",
    "ModelConfig",
    "NoisePrior",
    "Omegas",
    "Run",
    "RunLocked",
    "SpectralContext",
    "TaskBatch",
    "TaskDraw",
    "TrainConfig",
    "TunedRR",
    "adjusted_loss",
    "diag_ablation",
    "diag_projection",
    "draw_tasks",
    "drift_trajectory",
    "evaluate_predictors",
    "fit_layer_maps",
    "implicit_model",
    "lemma44",
    "load",
    "ols_predict",
    "oracle_predict",
    "paper_value",
    "per_layer_loss",
    "per_layer_profile",
    "probe_model",
    "ridge_predict",
    "run_drift",
    "sample_tasks",
    "sigma_grid",
    "sigma_profile",
    "train_model",
    "tuned",
    "run_sweep",
    "tuned_baselines",
]
