"""interp: mechanistic interpretability for linear transformers that learn linear regression in context.

The package's functions never shadow its modules: `interp.train`, `interp.evaluate` and `interp.sweep` are the
modules; their entry points are `interp.train_model`, `interp.evaluate_predictors` and `interp.run_sweep`.

Every public name is imported on first use (PEP 562): `import interp` costs nothing, `interp.load` imports
interp.run (and torch, TransformerLens) the first time it is read, and `from interp import X` works as usual. So
does a submodule read as an attribute (`interp.kernel.info()`). `_EXPORTS` maps each name of `__all__` to where it
lives.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up: the CLI imports this package first)

# name -> (module, attribute there)
_EXPORTS: dict[str, tuple[str, str]] = {
    "AdaRR": ("interp.baselines", "AdaRR"),
    "Bayes": ("interp.baselines", "Bayes"),
    "CheckpointError": ("interp.files", "CheckpointError"),
    "ConstRR": ("interp.baselines", "ConstRR"),
    "DiagProjection": ("interp.probes", "DiagProjection"),
    "DriftData": ("interp.probes", "DriftData"),
    "EvalSet": ("interp.evalset", "EvalSet"),
    "GDk": ("interp.baselines", "GDk"),
    "ImplicitModel": ("interp.probes", "ImplicitModel"),
    "InterpError": ("interp.files", "InterpError"),
    "InvalidArgument": ("interp.files", "InvalidArgument"),
    "InvalidType": ("interp.files", "InvalidType"),
    "LinearTransformer": ("interp.model", "LinearTransformer"),
    "LossEstimate": ("interp.evaluate", "LossEstimate"),
    "ModelConfig": ("interp.config", "ModelConfig"),
    "NoisePrior": ("interp.tasks", "NoisePrior"),
    "Omegas": ("interp.model", "Omegas"),
    "Run": ("interp.run", "Run"),
    "RunLocked": ("interp.run", "RunLocked"),
    "SpectralContext": ("interp.spectral", "SpectralContext"),
    "TaskBatch": ("interp.tasks", "TaskBatch"),
    "TaskDraw": ("interp.tasks", "TaskDraw"),
    "TrainConfig": ("interp.config", "TrainConfig"),
    "TrainingDiverged": ("interp.train", "TrainingDiverged"),
    "TunedRR": ("interp.baselines", "TunedRR"),
    "adjusted_loss": ("interp.evaluate", "adjusted_loss"),
    "diag_ablation": ("interp.probes", "diag_ablation"),
    "diag_projection": ("interp.probes", "diag_projection"),
    "draw_tasks": ("interp.tasks", "draw_tasks"),
    "drift_trajectory": ("interp.probes", "drift_trajectory"),
    "evaluate_predictors": ("interp.evaluate", "evaluate"),
    "fit_layer_maps": ("interp.probes", "fit_layer_maps"),
    "implicit_model": ("interp.probes", "implicit_model"),
    "import_checkpoint": ("interp.convert", "import_checkpoint"),
    "lemma44": ("interp.probes", "lemma44"),
    "load": ("interp.run", "load"),
    "ols_predict": ("interp.baselines", "ols_predict"),
    "oracle_predict": ("interp.baselines", "oracle_predict"),
    "paper_value": ("interp.evaluate", "paper_value"),
    "per_layer_loss": ("interp.evaluate", "per_layer_loss"),
    "per_layer_profile": ("interp.evaluate", "per_layer_profile"),
    "probe_model": ("interp.probes", "probe_model"),
    "ridge_predict": ("interp.baselines", "ridge_predict"),
    "run_drift": ("interp.probes", "run_drift"),
    "sample_tasks": ("interp.tasks", "sample_tasks"),
    "sigma_grid": ("interp.evaluate", "sigma_grid"),
    "sigma_profile": ("interp.evaluate", "sigma_profile"),
    "train_model": ("interp.train", "train"),
    "tuned": ("interp.tuning", "tuned"),
    "run_sweep": ("interp.sweep", "sweep"),
    "tuned_baselines": ("interp.tuning", "baselines"),
}

__all__ = [  # the keys of _EXPORTS (tests/test_api_errors.py checks it)
    "AdaRR",
    "Bayes",
    "CheckpointError",
    "ConstRR",
    "DiagProjection",
    "DriftData",
    "EvalSet",
    "GDk",
    "ImplicitModel",
    "InterpError",
    "InvalidArgument",
    "InvalidType",
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
    "TrainingDiverged",
    "TunedRR",
    "adjusted_loss",
    "diag_ablation",
    "diag_projection",
    "draw_tasks",
    "drift_trajectory",
    "evaluate_predictors",
    "fit_layer_maps",
    "implicit_model",
    "import_checkpoint",
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


def __getattr__(name: str) -> object:
    """A public name (imported from its module once, then kept here), or a submodule (`interp.kernel`)."""
    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":  # the submodule exists but something it imports does not
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see: the names as if imported eagerly
    from interp.baselines import AdaRR, Bayes, ConstRR, GDk, TunedRR, ols_predict, oracle_predict, ridge_predict
    from interp.config import ModelConfig, TrainConfig
    from interp.convert import import_checkpoint
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
    from interp.files import CheckpointError, InterpError, InvalidArgument, InvalidType
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
    from interp.train import TrainingDiverged
    from interp.train import train as train_model
    from interp.tuning import baselines as tuned_baselines
    from interp.tuning import tuned
