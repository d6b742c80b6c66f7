"""interp: mechanistic interpretability for linear transformers that learn linear regression in context."""

from interp.checkpoints import CheckpointError, load
from interp.config import ModelConfig, TrainConfig
from interp.model import LinearTransformer, Omegas
from interp.probes import (
    DiagProjection, ImplicitModel, diag_ablation, diag_projection, fit_layer_maps, implicit_model, lemma44, probe_model,
)
from interp.tasks import NoisePrior, TaskBatch, sample_tasks
from interp.train import train

__all__ = [
    "CheckpointError",
    "DiagProjection",
    "ImplicitModel",
    "LinearTransformer",
    "ModelConfig",
    "NoisePrior",
    "Omegas",
    "TaskBatch",
    "TrainConfig",
    "diag_ablation",
    "diag_projection",
    "fit_layer_maps",
    "implicit_model",
    "lemma44",
    "load",
    "probe_model",
    "sample_tasks",
    "train",
]
