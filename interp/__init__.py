"""interp: mechanistic interpretability for linear transformers that learn linear regression in context."""

from interp.checkpoints import CheckpointError, load
from interp.config import ModelConfig, TrainConfig
from interp.model import LinearTransformer, Omegas
from interp.tasks import NoisePrior, TaskBatch, sample_tasks
from interp.train import train

__all__ = [
    "CheckpointError",
    "LinearTransformer",
    "ModelConfig",
    "NoisePrior",
    "Omegas",
    "TaskBatch",
    "TrainConfig",
    "load",
    "sample_tasks",
    "train",
]
