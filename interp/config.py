"""Frozen configuration dataclasses (no global mutable config)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch

from interp import params
from interp.files import CheckpointError, InvalidArgument, InvalidType, read_regular_file
from interp.limits import (
    MAX_BATCH_ELEMENTS,
    MAX_COV_D,
    MAX_D,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_N,
    MAX_PARAMS,
    MAX_SEED,
    MAX_STEPS,
)
from interp.tasks import as_prior, check_device  # noqa: F401 - interp.config.check_device, where it lived

PARAMS = tuple(params.ARCHS)  # ModelConfig.param: "full", "diag", "gdpp" (interp.params)
# ModelConfig.attention: "lsa" is the paper's P, Q layer (parameterized by `param`); the rest is the linear-attention
# family and its nonlinear neighbours (interp.variants). ModelConfig.mlp: the FFN after each attention layer.
ATTENTIONS = ("lsa", "qkv", "causal", "retnet", "gated", "gla", "delta", "softmax", "kernel", "kernel_norm")
MLPS = ("none", "linear", "relu", "quadratic")
# Fields of the family that a config at their defaults leaves out of to_dict (so the paper's models keep their files).
FAMILY_FIELDS = ("attention", "head_width", "mlp", "mlp_width", "feature_map", "qk_scale")
FEATURE_MAPS = ("elu1", "identity")  # kernel attention's φ: elu(x) + 1 (positive features) or x
DTYPES = {"float32": torch.float32, "float64": torch.float64}

Matrix = tuple[tuple[float, ...], ...]

OPTION = "interp.option"  # the dataclasses.field metadata key of a training option (see `option`)
KINDS = ("count", "int", "number", "choice", "noise", "x_cov", "path", "device")


@dataclass(frozen=True)
class Option:
    """A config field that is a training option: its one declaration, from which `interp train`'s and `interp sweep`'s
    flags, the sweep's option keys and run names, and the check of a resumed run's config against the flags given
    are all derived (`OPTIONS`).

    flag: the flag (`--save-every`); its name with underscores is the option's key everywhere else (`save_every`:
    sweeps, grid files, `config_from_options`, run names). field: the TrainConfig attribute ("model." for
    ModelConfig's). default: the field's default. help: the flag's help text. kind: how a flag's text is read
    (interp.cli): "count" an int >= 1 (<= maximum), "int" any int, "number" a finite float > 0 (>= 0 with `zero`),
    "choice" one of `choices`, "noise" a prior spec, "x_cov" a covariance spec (diag:λ1,...,λd or a .json file),
    "path" an existing file or directory, "device" a usable torch device. zero_is_none: 0 stands for None (--clip 0).
    aliases: further spellings `interp sweep` accepts, where every option takes a list (--seeds).
    """

    flag: str
    field: str
    default: Any
    help: str
    kind: str
    choices: tuple[str, ...] = ()
    maximum: int | None = None
    zero: bool = False
    zero_is_none: bool = False
    metavar: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def to_field(self, value: Any) -> Any:
        """The field's value for an option value: a noise spec canonicalised (uniform:5.0 -> uniform:5), an x_cov spec
        read into its matrix, 0 as None where 0 means none."""
        if self.kind == "noise":
            return as_prior(value).spec
        if self.kind == "x_cov" and isinstance(value, str):
            return covariance_spec(value)
        if self.zero_is_none:
            return value or None
        return value

    def of(self, cfg: "TrainConfig") -> Any:
        """The field's value in `cfg`."""
        owner = cfg.model if self.field.startswith("model.") else cfg
        return getattr(owner, self.field.removeprefix("model."))

    def agrees(self, value: Any, stored: Any) -> bool:
        """Whether an option value given again (`interp train --resume RUN --flag value`) asks for the field value
        `stored`: the same prior, the same file (by real path), the same matrix, or the same value."""
        if self.kind == "noise":
            return as_prior(value) == as_prior(stored)
        if self.kind == "path":
            return stored is not None and os.path.realpath(value) == os.path.realpath(stored)
        return self.to_field(value) == stored

    def describe(self, stored: Any) -> str:
        """A field value as the flag would say it."""
        if self.kind == "x_cov":
            return describe_covariance(stored)
        if self.zero_is_none and stored is None:
            return "0.0"
        return str(stored)


def option(default: Any, flag: str, help: str, kind: str, **how: Any) -> Any:
    """A dataclass field with `default` that is also a training option, `flag` on the command line (`Option`; `help`
    may say `{default}`)."""
    if kind not in KINDS:
        raise InvalidArgument(f"{flag}: unknown option kind {kind!r}")
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    meta = {"flag": flag, "help": help.format(default=shown), "kind": kind, **how}
    return dataclasses.field(default=default, metadata={OPTION: meta})


@functools.cache
def _field_kinds(cls: type) -> tuple[tuple[str, tuple, Any, bool], ...]:
    """(name, the annotation's types, the one type that is not None or None, whether that is a matrix) of every
    field of a config class, once: typing.get_type_hints evaluates every annotation string anew (about 1 ms a
    config, which made the expansion of a grid of 300 000 runs take a quarter of an hour)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        kinds = [a for a in args if a is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else None
        out.append((f.name, args, kind, typing.get_origin(kind) is tuple))
    return tuple(out)


def _check_fields(obj: Any) -> None:
    """Type-check a frozen dataclass against its annotations: int (not bool), float (finite, ints allowed),
    str, a nested dataclass, a matrix (a list or tuple of rows; its entries are the field's own check), or None
    where the annotation allows it. Integral / real numbers are normalised."""
    for name, args, kind, matrix in _field_kinds(type(obj)):
        value = getattr(obj, name)
        if value is None and type(None) in args:
            continue
        if matrix and isinstance(value, (tuple, list)):
            continue
        if kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
            object.__setattr__(obj, name, int(value))
        elif kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise InvalidArgument(f"{name} must be finite, got {value}")
            object.__setattr__(obj, name, float(value))
        elif not (isinstance(kind, type) and isinstance(value, kind) and not isinstance(value, bool)):
            want = " or ".join(_type_name(a) for a in args)
            raise InvalidType(f"{name} must be {want}, got {value!r}")


def _type_name(kind: Any) -> str:
    if kind is type(None):
        return "null"
    return "a matrix" if typing.get_origin(kind) is tuple else getattr(kind, "__name__", str(kind))


def _check_range(name: str, value: int | float, low: int | float, high: int | float) -> None:
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be in [{low}, {high}], got {value}")


def covariance(name: str, value: Any, d: int | None = None) -> Matrix:
    """`value` (a list of rows) as a symmetric positive-definite d×d matrix of floats (any d ≤ MAX_COV_D when None);
    a one-line ValueError / TypeError naming `name`. Asymmetry at rounding level is averaged away."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in value) or not value:
        raise InvalidType(f"{name} must be a d×d matrix (a list of rows), got {value!r:.60}")
    k = len(value)
    if d is not None and k != d or any(len(row) != k for row in value):
        want = f"{d}×{d} (d={d})" if d is not None else "square"
        raise InvalidArgument(f"{name} must be {want}, got {k} rows of lengths {sorted({len(r) for r in value})}")
    if k > MAX_COV_D:
        raise InvalidArgument(f"{name}: a full covariance is stored in the run config, d <= {MAX_COV_D}; got {k}×{k}")
    for row in value:
        for v in row:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise InvalidArgument(f"{name} entries must be finite numbers, got {v!r:.60}")
    m = torch.tensor(value, dtype=torch.float64)
    scale = m.abs().max().item()
    asym = (m - m.T).abs().max().item()
    if asym > 1e-12 * scale:
        raise InvalidArgument(f"{name} must be symmetric (largest |Λ_ij − Λ_ji| is {asym:.3g})")
    m = (m + m.T) / 2
    if torch.linalg.cholesky_ex(m).info != 0:
        raise InvalidArgument(
            f"{name} must be positive definite (smallest eigenvalue {torch.linalg.eigvalsh(m)[0]:.3g})"
        )
    return tuple(tuple(row) for row in m.tolist())


def covariance_spec(spec: str) -> Matrix:
    """The matrix of an `--x-cov` spec: `diag:λ1,...,λd` or a .json file holding a d×d matrix (a list of rows)."""
    if not isinstance(spec, str):
        raise InvalidType(f"{spec!r:.60} is not a covariance spec (diag:λ1,...,λd or a .json file)")
    if spec.startswith("diag:"):
        try:
            values = [float(v) for v in spec[len("diag:") :].split(",")]
        except ValueError:
            raise InvalidArgument(f"{spec!r}: comma-separated numbers expected after 'diag:'") from None
        rows = [[v if i == j else 0.0 for j in range(len(values))] for i, v in enumerate(values)]
    elif spec.endswith(".json"):
        try:
            rows = json.loads(read_regular_file(Path(spec), 1 << 20, "covariance file"))
        except (ValueError, RecursionError) as err:
            if isinstance(err, CheckpointError):
                raise
            raise InvalidArgument(f"{spec}: not a JSON matrix ({err})") from None
    else:
        raise InvalidArgument(f"{spec!r} is neither diag:λ1,...,λd nor a .json file holding a d×d matrix")
    return covariance(spec, rows)


def describe_covariance(cov: Matrix | None) -> str:
    """Short: 'I' (None), 'diag:3,1.5' for a diagonal Λ, else 'a full d×d matrix'."""
    if cov is None:
        return "I"
    if all(v == 0 for i, row in enumerate(cov) for j, v in enumerate(row) if i != j):
        return "diag:" + ",".join(f"{row[i]:g}" for i, row in enumerate(cov))
    return f"a full {len(cov)}×{len(cov)} matrix"


def inputs_suffix(cov: Matrix | None) -> str:
    """', x ~ N(0, Λ)' to append to a description of sequences whose inputs have covariance Λ; '' for I."""
    return "" if cov is None else f", x ~ N(0, {describe_covariance(cov)})"


class TokenWidth:
    """What a model config derives from its fields `d` and `dtype` (ModelConfig, interp.variants.VariantConfig)."""

    @property
    def d_model(self) -> int:
        """Token width d + 1 (TransformerLens name)."""
        return self.d + 1

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class ModelConfig(TokenWidth):
    """A linear transformer of Vladymyrov et al. 2024; README, Conventions.

    d: input dimension (tokens have width d + 1); n_layers: L; n_heads: H;
    param: "full" (free P, Q), "diag" (p_x, p_y, q_x, q_y per head) or "gdpp" (DIAG with q_y = 0).
    """

    d: int = option(10, "--d", "input dimension d (default {default})", "count", maximum=MAX_D)
    n_layers: int = option(4, "--layers", "number of layers L (default {default})", "count", maximum=MAX_LAYERS)
    n_heads: int = option(1, "--heads", "heads per layer (default {default}, as the paper)", "count", maximum=MAX_HEADS)
    param: str = option("full", "--arch", "parameterization (default {default})", "choice", choices=PARAMS)
    dtype: str = option(
        "float32",
        "--dtype",
        "float type of the weights and of training (default {default})",
        "choice",
        choices=tuple(DTYPES),
    )
    init_scale: float = 2e-3  # std of the initial entries, divided by n_layers (Vladymyrov et al. 2024, training setup)
    # ---- the linear-attention family (interp.variants); at these defaults the model is the paper's LinearTransformer
    attention: str = option(
        "lsa",
        "--attention",
        "token mixer: lsa (the paper's P, Q layer, --arch), qkv (separate W_Q, W_K, W_V, W_O), causal, retnet (decay "
        "per head), gated (scalar gate, Mamba-2 / SSD), gla (vector gate), delta (DeltaNet), softmax, kernel (elu+1), "
        "kernel_norm (normalised elu+1) (default {default})",
        "choice",
        choices=ATTENTIONS,
    )
    head_width: int | None = option(
        None,
        "--head-width",
        "width of q, k, v per head of every attention but lsa; 0 for d + 1 (default d + 1)",
        "int",
        zero_is_none=True,
    )
    mlp: str = option(
        "none", "--mlp", "FFN after each attention layer: none, linear, relu or quadratic (default {default})",
        "choice", choices=MLPS,
    )  # fmt: skip
    mlp_width: int = option(32, "--mlp-width", "hidden width of the FFN (default {default})", "count", maximum=MAX_D)
    feature_map: str = "elu1"  # kernel attention's φ (FEATURE_MAPS)
    qk_scale: float | None = None  # kernel attention: std of the initial W_Q, W_K (None: init_scale / n_layers)

    def __post_init__(self) -> None:
        _check_fields(self)
        _check_range("d", self.d, 1, MAX_D)
        _check_range("n_layers", self.n_layers, 1, MAX_LAYERS)
        _check_range("n_heads", self.n_heads, 1, MAX_HEADS)
        _check_range("init_scale", self.init_scale, 0.0, 1e6)
        if self.param not in PARAMS:
            raise InvalidArgument(f"param must be one of {', '.join(PARAMS)}, got {self.param!r}")
        if self.dtype not in DTYPES:
            raise InvalidArgument(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for name, choices in (("attention", ATTENTIONS), ("mlp", MLPS), ("feature_map", FEATURE_MAPS)):
            if getattr(self, name) not in choices:
                raise InvalidArgument(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r:.60}")
        if self.attention != "lsa" and self.param != "full":
            raise InvalidArgument(f"param {self.param!r} parameterizes lsa attention; {self.attention} has its own")
        if self.head_width is not None:
            _check_range("head_width", self.head_width, 1, MAX_D)
            if self.attention == "lsa":
                raise InvalidArgument("head_width is the qkv family's; lsa attention's heads are d + 1 wide")
        _check_range("mlp_width", self.mlp_width, 1, MAX_D)
        if self.qk_scale is not None:
            _check_range("qk_scale", self.qk_scale, 0.0, 1e6)
        if self.n_params > MAX_PARAMS:
            raise InvalidArgument(
                f"{self.n_params} weights (L={self.n_layers}, H={self.n_heads}, d={self.d}) exceed the "
                f"limit of {MAX_PARAMS}"
            )

    @property
    def n_params(self) -> int:
        """Number of weights: 2·(d+1)² per FULL head (P, Q), 4 per DIAG head, 3 per GD++ head; the family's
        (interp.variants): 4·h·D per head (W_Q, W_K, W_V, W_O) plus its decay / gate / β weights, and the FFN's."""
        D, h = self.d_model, self.d_head
        if self.attention == "lsa":
            head = params.of(self.param).per_head(D)
        else:
            extra = {"retnet": 1, "gated": D + 1, "gla": h * D + h, "delta": D + 1}.get(self.attention, 0)
            head = 4 * h * D + extra
        mlp = {"none": 0, "linear": 2, "relu": 2, "quadratic": 3}[self.mlp] * D * self.mlp_width
        return self.n_layers * (self.n_heads * head + mlp)

    @property
    def is_lsa(self) -> bool:
        """Whether this is the paper's model (interp.model.LinearTransformer): lsa attention and no FFN."""
        return self.attention == "lsa" and self.mlp == "none"

    @property
    def merges_to_full(self) -> bool:
        """Whether the model is FULL's function in other weights: qkv attention without an FFN (P = W_O W_V,
        Q = W_Kᵀ W_Q per head), so the kernel's fused pass for FULL trains it (interp.moments.fused_supported)."""
        return self.attention == "qkv" and self.mlp == "none"

    @property
    def family_label(self) -> str:
        """How tables write the model: "FULL", "retnet", "qkv+quadratic FFN", ..."""
        name = params.of(self.param).label if self.attention == "lsa" else self.attention
        return name if self.mlp == "none" else f"{name}+{self.mlp} FFN"

    # What TransformerLens's utilities read from a model's cfg (ActivationCache decompositions, patching).
    # Properties, not fields: checkpoints and config files store exactly the fields above.
    attn_only = property(lambda self: self.mlp == "none", doc="No MLP layers (the paper's model).")
    normalization_type = property(lambda self: None, doc="No LayerNorm: apply_ln leaves stacks unchanged.")
    final_rms = property(lambda self: False)
    d_mlp = property(lambda self: None if self.mlp == "none" else self.mlp_width)
    d_head = property(
        lambda self: self.head_width or self.d + 1,
        doc="lsa: each head writes a full token-width update P_k S Q_k e_i; the family: the width of q, k, v.",
    )
    n_key_value_heads = property(lambda self: None)
    device = property(
        lambda self: getattr(self, "_device", "cpu"),
        doc="Where the model's weights live; kept current by LinearTransformer, never stored.",
    )

    def to_dict(self) -> dict[str, Any]:
        """The fields; the family's (FAMILY_FIELDS) only where they differ from their defaults, so that the paper's
        models write the same configs and checkpoints as before the family existed."""
        out = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in FAMILY_FIELDS and out[f.name] == f.default:
                del out[f.name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        if not isinstance(data, dict):
            raise InvalidType(f"model config must be a JSON object, got {data!r:.60}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise InvalidArgument(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained (Vladymyrov et al. 2024, training setup). `preset` fills lr / steps / schedule when
    left at None."""

    model: ModelConfig = ModelConfig()
    noise: str = option(
        "uniform:5",
        "--noise",
        "noise prior: fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2] (default {default})",
        "noise",
    )
    n: int = option(20, "--n", "context length n (default {default})", "count", maximum=MAX_N)
    seed: int = option(0, "--seed", "seed of init and data (default {default})", "int", aliases=("--seeds",))
    # "fast" (one-cycle, tuned) or "paper" (Adam 1e-4 constant, 200k steps): interp.presets
    preset: str = option(
        "fast",
        "--preset",
        "fast: one-cycle schedule tuned here; paper: Adam 1e-4, 200 000 steps (default {default})",
        "choice",
        choices=("fast", "paper"),
    )
    steps: int | None = option(None, "--steps", "training steps (default from --preset)", "count", maximum=MAX_STEPS)
    batch: int = option(2048, "--batch", "sequences per step (default {default})", "count", maximum=MAX_BATCH_ELEMENTS)
    lr: float | None = option(None, "--lr", "(peak) learning rate (default from --preset)", "number")
    schedule: str | None = option(
        None, "--schedule", "lr schedule (default from --preset)", "choice", choices=("onecycle", "constant")
    )
    warmup: float = 0.1  # one-cycle: fraction of steps spent warming up
    clip: float | None = option(
        1.0, "--clip", "gradient-norm clip, 0 for none (default {default})", "number", zero=True, zero_is_none=True
    )
    # "robust": blown-up sequences are dropped or log-compressed (train._loss); "none"
    guard: str = option(
        "robust",
        "--guard",
        "robust: a sequence whose prediction blows up is left out of its batch when its loss overflows, and "
        "log-compressed above 100·d; none: plain ½·MSE, stop on overflow (default {default})",
        "choice",
        choices=("robust", "none"),
    )
    n_checkpoints: int = option(
        30, "--checkpoints", "checkpoints on a geometric schedule from step 0 to the end (default {default})", "count"
    )
    resume_every: int = option(
        500, "--save-every", "steps between saves of the resume state (default {default})", "count", maximum=MAX_STEPS
    )
    log_every: int = 50
    # a checkpoint to start from (FULL runs may start from a DIAG model)
    init: str | None = option(None, "--init", "start from this checkpoint or run directory", "path", metavar="CKPT")
    init_noise: float = option(
        0.0,
        "--init-noise",
        "std of a Gaussian perturbation added to --init weights (default {default})",
        "number",
        zero=True,
    )
    device: str = option("cpu", "--device", "torch device (default {default}; cuda on a GPU machine)", "device")
    # x_i, x_t ~ N(0, Λ) with Λ = x_cov (Zhang, Frei & Bartlett 2024); None: I_d
    x_cov: Matrix | None = option(
        None,
        "--x-cov",
        "covariance Λ of the inputs, x ~ N(0, Λ) (Zhang, Frei & Bartlett 2024): diag:λ1,...,λd or a .json "
        "file holding a d×d matrix (default I)",
        "x_cov",
        metavar="SPEC",
    )
    # The task: y = ⟨w, x⟩ + quad·(x(1)² − 1) + noise (interp.tasks.TaskDraw; Theorem 4.2's target). 0: the paper's.
    quad: float = option(
        0.0,
        "--quad",
        "coefficient c of a quadratic term in every label, y = <w, x> + c·(x(1)² − 1) + noise: a task a quadratic "
        "FFN can fit and linear attention cannot (Theorem 4.2); eval scores the paper's task (default {default})",
        "number",
        zero=True,
        metavar="C",
    )
    # Fraction of each batch drawn at stress_scale times the size (importance-weighted, interp.tasks.stressed_tasks):
    # a deep FULL model then meets the rare large-XᵀX contexts its iteration diverges on. None: the preset's.
    stress: float | None = option(
        None,
        "--stress",
        "fraction of each batch drawn with x, x_t and the noise --stress-scale times larger, importance-"
        "weighted so the loss is unchanged in expectation: deep FULL models meet the rare large contexts they "
        "diverge on (default from --preset)",
        "number",
        zero=True,
        metavar="FRAC",
    )
    # None: the preset's (1.25 for FULL from 3 layers, FAST_LONG; 1.4 otherwise)
    stress_scale: float | None = option(
        None,
        "--stress-scale",
        "scale of the stressed sequences (default from --preset: 1.25 for FULL from 3 layers, else 1.4)",
        "number",
        metavar="C",
    )

    # Rounds of full-batch L-BFGS after Adam (interp.train.polish), each on a fresh fixed batch. None: the preset's.
    polish: int | None = option(
        None,
        "--polish",
        "rounds of full-batch L-BFGS after Adam, each on a fresh fixed batch of 65 536 sequences, a round kept only "
        "where it lowers the loss on a second fresh batch; 0 for none (default from --preset: 4 on a noise-free "
        "prior, with float64, else 0)",
        "int",
        metavar="ROUNDS",
    )
    # Weight κ of the polish's tail term (interp.train.polish: κ × ½·MSE on interp.tasks.tail_tasks' large-Σ y²
    # contexts, added to the loss of every round). None: the preset's.
    polish_tail: float | None = option(
        None,
        "--polish-tail",
        "weight of the polish's tail term: that many times the ½·MSE of 16 384 contexts at the prior's largest noise "
        "with their labels 1.35× their size, added to each round's loss, so that a model whose prediction blows up "
        "on large Σ y² is not kept; 0 for none (default from --preset: 1e-3 for 3- and 4-layer DIAG on a noisy "
        "prior, else 0)",
        "number",
        zero=True,
        metavar="KAPPA",
    )
    # Rounds of the spectral polish (interp.train.spectral_polish): L-BFGS on GD++'s exact noise-free loss over a
    # multi-scale importance-weighted proposal of eigenvalues (interp.noise_free). None: the preset's.
    spectral_polish: int | None = option(
        None,
        "--spectral-polish",
        "rounds of L-BFGS on GD++'s exact noise-free loss, eigenvalue by eigenvalue, over contexts drawn at several "
        "scales and importance-weighted so that the rare contexts that carry a deep model's mean are in every round; "
        "a round kept only where it lowers the exact mean over 10^6 fresh contexts; GD++ Adam phases (--arch gdpp, "
        "or --start-as gdpp) on a noise-free prior only; 0 for none (default from --preset: 3 from 5 layers on a "
        "noise-free prior, else 0)",
        "int",
        metavar="ROUNDS",
    )
    # GD++ ⊂ DIAG ⊂ FULL (interp.params.nests): Adam and the polish may train a nested parameterization, whose model is
    # embedded exactly in the run's own for the saved checkpoints. None: the preset's (interp.presets).
    start_as: str | None = option(
        None,
        "--start-as",
        "train the Adam phase and the polish as this parameterization, one that --arch holds (gdpp in diag or full, "
        "diag in full), with its preset's steps and lr, then embed the model exactly in --arch; every checkpoint is an "
        "--arch model (default from --preset: gdpp for DIAG and FULL from 4 layers on a noise-free prior, else --arch)",
        "choice",
        choices=PARAMS,
        metavar="ARCH",
    )

    def __post_init__(self) -> None:
        _check_fields(self)
        as_prior(self.noise)  # InvalidArgument naming the spec
        fields = {f.name: f for f in dataclasses.fields(self)}
        for name in ("preset", "schedule", "guard"):  # one of the choices its option declares (None: the preset's)
            choices, value = fields[name].metadata[OPTION]["choices"], getattr(self, name)
            if value is not None and value not in choices:
                raise InvalidArgument(f"{name} must be one of {', '.join(choices)}, got {value!r:.60}")
        if self.x_cov is not None:
            object.__setattr__(self, "x_cov", covariance("x_cov", self.x_cov, self.model.d))
        _check_range("n", self.n, 1, MAX_N)
        _check_range("seed", self.seed, -MAX_SEED, MAX_SEED)
        _check_range("batch", self.batch, 1, MAX_BATCH_ELEMENTS)
        _check_range("n_checkpoints", self.n_checkpoints, 1, 10_000)
        _check_range("resume_every", self.resume_every, 1, MAX_STEPS)
        _check_range("log_every", self.log_every, 1, MAX_STEPS)
        _check_range("warmup", self.warmup, 0.0, 1.0)
        _check_range("init_noise", self.init_noise, 0.0, 1e6)
        if self.steps is not None:
            _check_range("steps", self.steps, 1, MAX_STEPS)
        if self.lr is not None and not 0 < self.lr <= 1e3:
            raise InvalidArgument(f"lr must be in (0, 1000], got {self.lr}")
        if self.stress is not None and not 0 <= self.stress < 1:
            raise InvalidArgument(f"stress must be in [0, 1), got {self.stress}")
        if self.stress_scale is not None and not 1 < self.stress_scale <= 4:
            raise InvalidArgument(f"stress_scale must be in (1, 4], got {self.stress_scale}")
        if self.polish is not None:
            _check_range("polish", self.polish, 0, 100)
        if self.polish_tail is not None:
            _check_range("polish_tail", self.polish_tail, 0.0, 1e6)
            if self.polish_tail > 0 and not as_prior(self.noise).sigma_max > 0:
                raise InvalidArgument("polish_tail must be 0 on a noise-free prior (its tail set needs σ_max > 0)")
        if self.spectral_polish is not None:
            _check_range("spectral_polish", self.spectral_polish, 0, 100)
            if self.spectral_polish > 0:
                if as_prior(self.noise).sigma_max > 0:
                    raise InvalidArgument("spectral_polish needs a noise-free prior (uniform:0 or fixed:0)")
                if self.x_cov is not None:
                    raise InvalidArgument("spectral_polish needs x ~ N(0, I) (no --x-cov)")
        if self.start_as is not None:
            if not self.model.attention == "lsa" and self.start_as != self.model.param:
                raise InvalidArgument(
                    f"start_as nests lsa parameterizations; {self.model.attention} attention has none"
                )
            if self.start_as not in PARAMS:
                raise InvalidArgument(f"start_as must be one of {', '.join(PARAMS)}, got {self.start_as!r:.60}")
            if not params.nests(self.model.param, self.start_as):
                raise InvalidArgument(
                    f"start_as {self.start_as} is not nested in {self.model.param} "
                    "(gdpp ⊂ diag ⊂ full: a run starts as its own parameterization or one it holds)"
                )
        if self.clip is not None and not self.clip > 0:
            raise InvalidArgument(f"clip must be > 0 or null, got {self.clip}")
        elements = self.batch * (self.n + 1) * self.model.d_model
        if elements > MAX_BATCH_ELEMENTS:
            raise InvalidArgument(
                f"batch {self.batch} x (n+1) {self.n + 1} x (d+1) {self.model.d_model} = {elements} token "
                f"entries per step exceed the limit of {MAX_BATCH_ELEMENTS}"
            )

    @property
    def adam_model(self) -> ModelConfig:
        """The model the Adam phase trains: `model` as the parameterization `start_as` (itself when None)."""
        return dataclasses.replace(self.model, param=self.start_as or self.model.param)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["model"] = self.model.to_dict()
        out["x_cov"] = None if self.x_cov is None else [list(row) for row in self.x_cov]  # as JSON reads it back
        if self.quad == 0.0:  # the paper's task: configs written as before the option existed
            del out["quad"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        if not isinstance(data, dict):
            raise InvalidType(f"train config must be a JSON object, got {data!r:.60}")
        if "model" not in data:
            raise InvalidArgument("train config has no 'model'")
        data = dict(data)
        data["model"] = ModelConfig.from_dict(data["model"])
        data.setdefault("stress", 0.0)  # written before the field existed: trained without it
        data.setdefault("polish", 0)  # the same
        data.setdefault("polish_tail", 0.0)  # the same
        data.setdefault("spectral_polish", 0)  # the same
        data.setdefault("start_as", data["model"].param)  # the same: Adam trained the run's own parameterization
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise InvalidArgument(f"unknown train config keys: {', '.join(sorted(unknown))}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _options() -> dict[str, Option]:
    """Every field declared with `option`, ModelConfig's (in TrainConfig.model) first, by key."""
    out: dict[str, Option] = {}
    for f in dataclasses.fields(TrainConfig):
        owner, prefix = (ModelConfig, "model.") if f.name == "model" else (None, "")
        for g in dataclasses.fields(owner) if owner else [f]:
            if OPTION in g.metadata:
                opt = Option(field=prefix + g.name, default=g.default, **g.metadata[OPTION])
                if opt.key in out:
                    raise RuntimeError(f"{opt.flag} is declared twice ({out[opt.key].field}, {opt.field})")
                out[opt.key] = opt
    return out


# The training options by key (`interp train` flag name with underscores): "save_every" -> Option(flag="--save-every",
# field="resume_every", ...). interp.cli builds both parsers from it, interp.sweep its option keys and run names.
OPTIONS: dict[str, Option] = _options()


def config_from_options(options: Mapping[str, Any]) -> TrainConfig:
    """The TrainConfig of one run from option values by key (OPTIONS; missing ones default).

    `clip` 0 means no clipping; `noise` is canonicalised (uniform:5.0 -> uniform:5); an `x_cov` spec
    (diag:λ1,...,λd or a .json file) becomes its matrix.
    """
    model, train = {}, {}
    for key, value in options.items():
        if key not in OPTIONS:
            raise InvalidArgument(f"unknown run option {key!r}")
        opt = OPTIONS[key]
        value = opt.to_field(value)
        if opt.field.startswith("model."):
            model[opt.field.removeprefix("model.")] = value
        else:
            train[opt.field] = value
    return TrainConfig(model=ModelConfig(**model), **train)
