"""Frozen configuration dataclasses (no global mutable config)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import torch

PARAMS = ("full", "diag", "gdpp")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class ModelConfig:
    """A linear transformer of PAPER.md §1-§2.

    d: input dimension (tokens have width d + 1); n_layers: L; n_heads: H;
    param: "full" (free P, Q), "diag" (p_x, p_y, q_x, q_y per head) or "gdpp" (DIAG with q_y = 0).
    """

    d: int = 10
    n_layers: int = 4
    n_heads: int = 1
    param: str = "full"
    dtype: str = "float32"
    init_scale: float = 2e-3  # std of the initial entries, divided by n_layers (PAPER.md §7)

    def __post_init__(self) -> None:
        if self.d < 1:
            raise ValueError(f"d must be >= 1, got {self.d}")
        if self.n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {self.n_layers}")
        if self.n_heads < 1:
            raise ValueError(f"n_heads must be >= 1, got {self.n_heads}")
        if self.param not in PARAMS:
            raise ValueError(f"param must be one of {', '.join(PARAMS)}, got {self.param!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @property
    def d_model(self) -> int:
        """Token width d + 1 (TransformerLens name)."""
        return self.d + 1

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    # What TransformerLens's utilities read from a model's cfg (ActivationCache decompositions, patching).
    # Properties, not fields: checkpoints and config files store exactly the fields above.
    attn_only = property(lambda self: True, doc="No MLP layers.")
    normalization_type = property(lambda self: None, doc="No LayerNorm: apply_ln leaves stacks unchanged.")
    final_rms = property(lambda self: False)
    d_mlp = property(lambda self: None)
    d_head = property(lambda self: self.d + 1, doc="Each head writes a full token-width update P_k S Q_k e_i.")
    n_key_value_heads = property(lambda self: None)
    device = property(lambda self: getattr(self, "_device", "cpu"),
                      doc="Where the model's weights live; kept current by LinearTransformer, never stored.")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained (PAPER.md §7). `preset` fills lr / steps / schedule when left at None."""

    model: ModelConfig = ModelConfig()
    noise: str = "uniform:5"
    n: int = 20  # context length
    seed: int = 0
    preset: str = "fast"  # "fast" (one-cycle, tuned) or "paper" (Adam 1e-4 constant, 200k steps)
    steps: int | None = None
    batch: int = 2048
    lr: float | None = None
    schedule: str | None = None  # "onecycle" or "constant"
    warmup: float = 0.1  # one-cycle: fraction of steps spent warming up
    clip: float | None = 1.0  # gradient-norm clip; None for none
    guard: str = "robust"  # "robust": blown-up sequences are dropped or log-compressed (train._loss); "none"
    n_checkpoints: int = 30  # geometric trajectory, step 0 to the end
    resume_every: int = 500  # steps between resume-state saves
    log_every: int = 50
    init: str | None = None  # checkpoint to start from (FULL runs may start from a DIAG model)
    init_noise: float = 0.0  # std of the perturbation added to an `init` model
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["model"] = self.model.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        data = dict(data)
        data["model"] = ModelConfig.from_dict(data["model"])
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown train config keys: {', '.join(sorted(unknown))}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)
