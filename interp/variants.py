"""Variants of the linear transformer of Vladymyrov et al. 2024 (README, Conventions), as TransformerLens models: an FFN
after each attention layer, softmax attention and kernel (feature-map) attention. They ask how far Theorem 4.1's
readouts hold once the model leaves the linear family (interp.probes.linearity measures it; docs/variants.md).

Same conventions as interp.model: tokens [batch, n+1, d+1], y in the last column, the query's y = 0, keys and values
from the n context tokens only (the query is masked as a key), every token updated, residual, no 1/n, no LayerNorm,
bias or embedding, ŷ = −y of the query after the last layer. One block (column vectors, D = d + 1):

    attention  linear   e_i ← e_i + Σ_k P_k S Q_k e_i,  S = Σ_{j≤n} e_j e_jᵀ   (interp.model.LinearAttention, FULL/DIAG)
               softmax  e_i ← e_i + Σ_k P_k Σ_{j≤n} softmax_j(e_jᵀ Q_k e_i) e_j
               kernel   e_i ← e_i + Σ_k P_k Σ_{j≤n} e_j φ(K_k e_j)ᵀ φ(Q_k e_i),  φ = elu + 1 (or the identity)
    mlp        e_i ← e_i + W_out φ(W_in e_i) per token, φ linear or ReLU, W_in [d_mlp, D], W_out [D, d_mlp]

With φ the identity, kernel attention is the linear one with Q = K_kᵀ Q_k; a linear FFN keeps the model an implicit
linear model, T^{l+1} = (I + W_out W_in)(I + Σ_k P_k S^l Q_k) T^l (Theorem 4.1 with the FFN's factor).

Training (`train_variant`) is Adam on fresh tasks each step with interp.train's one-cycle schedule, gradient clip and
blow-up guard; the result is one standalone safetensors file (interp.checkpoints' format) embedding its configs,
read back by `load_variant`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn
from torch.nn import functional as F

try:  # TransformerLens >= 4 exports it at the top level
    from transformer_lens import HookedRootModule
except ImportError:  # pragma: no cover - older releases
    from transformer_lens.hook_points import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp import kernel
from interp.checkpoints import read_tensors, save_tensors
from interp.config import DTYPES, ModelConfig, TokenWidth, _check_fields, _check_range
from interp.files import CheckpointError, InvalidArgument, InvalidType, as_path
from interp.limits import MAX_BATCH_ELEMENTS, MAX_D, MAX_HEADS, MAX_LAYERS, MAX_N, MAX_PARAMS, MAX_SEED, MAX_STEPS
from interp.model import LinearAttention, check_generator
from interp.params import ARCHS
from interp.tasks import TaskBatch, as_prior, sample_tasks
from interp.train import GUARD_CAP, TrainingDiverged, _half_squared_errors, adam, learning_rate

ATTENTIONS = ("linear", "softmax", "kernel")
MLPS = ("none", "linear", "relu")
FEATURE_MAPS = ("elu1", "identity")  # kernel attention's φ: elu(x) + 1 (positive features) or x
FORMAT = "interp-variant"  # meta["format"] of a variant checkpoint (the file itself is interp.checkpoints' format)
MAX_ROLLBACKS = 3  # a diverged run restarts from its last good weights at half the lr, at most this many times


@dataclass(frozen=True)
class VariantConfig(TokenWidth):
    """A variant of the linear transformer (module docstring). d: input dimension; n_layers: L; n_heads: H;
    attention: "linear" (interp.params' `param`: full, diag, gdpp), "softmax" or "kernel" (φ = `feature_map`);
    mlp: "none", "linear" or "relu" with hidden width d_mlp."""

    d: int = 10
    n_layers: int = 2
    n_heads: int = 1
    attention: str = "linear"
    param: str = "full"  # the linear attention's parameterization (interp.params); softmax and kernel: full only
    mlp: str = "none"
    d_mlp: int = 32
    feature_map: str = "elu1"
    dtype: str = "float32"
    init_scale: float = 2e-3  # std of the initial entries, divided by n_layers (as interp.config.ModelConfig)
    # kernel attention: std of the initial K_k, Q_k (None: init_scale / n_layers). Near 0, elu + 1 is 1 + z and the
    # bilinear term of φ(K e_j)ᵀ φ(Q e_i) is third order in the small weights: a plateau (results/variants.md)
    qk_scale: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self)
        _check_range("d", self.d, 1, MAX_D)
        _check_range("n_layers", self.n_layers, 1, MAX_LAYERS)
        _check_range("n_heads", self.n_heads, 1, MAX_HEADS)
        _check_range("d_mlp", self.d_mlp, 1, MAX_D)
        _check_range("init_scale", self.init_scale, 0.0, 1e6)
        if self.qk_scale is not None:
            _check_range("qk_scale", self.qk_scale, 0.0, 1e6)
            if self.attention != "kernel":
                raise InvalidArgument(f"qk_scale is kernel attention's K, Q init; {self.attention} attention has none")
        for name, choices in (
            ("attention", ATTENTIONS),
            ("param", tuple(ARCHS)),
            ("mlp", MLPS),
            ("feature_map", FEATURE_MAPS),
            ("dtype", tuple(DTYPES)),
        ):
            if getattr(self, name) not in choices:
                raise InvalidArgument(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r:.60}")
        if self.attention != "linear" and self.param != "full":
            raise InvalidArgument(f"param {self.param!r} is linear attention's; {self.attention} attention is dense")
        if self.n_params > MAX_PARAMS:
            raise InvalidArgument(f"{self.n_params} weights exceed the limit of {MAX_PARAMS}")

    @property
    def linear_attention(self) -> ModelConfig:
        """The ModelConfig of the linear attention layers (interp.model.LinearAttention)."""
        return ModelConfig(d=self.d, n_layers=self.n_layers, n_heads=self.n_heads, param=self.param, dtype=self.dtype)

    @property
    def n_params(self) -> int:
        D, H = self.d_model, self.n_heads
        attn = {"linear": None, "softmax": 2 * H * D * D, "kernel": 3 * H * D * D}[self.attention]
        if attn is None:
            attn = H * ARCHS[self.param].per_head(D)
        mlp = 0 if self.mlp == "none" else 2 * D * self.d_mlp
        return self.n_layers * (attn + mlp)

    @property
    def label(self) -> str:
        """How tables write it: "FULL+ReLU FFN", "softmax", "kernel (elu+1)", ..."""
        attn = {"linear": ARCHS[self.param].label, "softmax": "softmax", "kernel": f"kernel ({self.feature_map})"}
        name = attn[self.attention].replace("(elu1)", "(elu+1)")
        return name if self.mlp == "none" else f"{name}+{'ReLU' if self.mlp == 'relu' else 'linear'} FFN"

    # What TransformerLens's utilities read from a model's cfg; properties, not fields (as interp.config.ModelConfig).
    attn_only = property(lambda self: self.mlp == "none")
    normalization_type = property(lambda self: None, doc="No LayerNorm.")
    final_rms = property(lambda self: False)
    d_head = property(lambda self: self.d + 1, doc="Each head writes a full token-width update.")
    n_key_value_heads = property(lambda self: None)
    device = property(lambda self: getattr(self, "_device", "cpu"), doc="Where the weights live; never stored.")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "VariantConfig":
        if not isinstance(data, dict):
            raise InvalidType(f"variant config must be a JSON object, got {data!r:.60}")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidArgument(f"unknown variant config keys: {', '.join(sorted(unknown))}")
        return cls(**data)


def _masked_query_key(scores: Tensor, fill: float) -> Tensor:
    """scores [batch, head, query pos, key pos] with the query's own key column (the last) set to `fill`: the query
    is masked as a key (README, Conventions)."""
    is_query_key = torch.arange(scores.shape[-1], device=scores.device) == scores.shape[-1] - 1
    return scores.masked_fill(is_query_key, fill)


def _query_maps(Q: Float[Tensor, "H D D"], resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch H pos D"]:
    """Q_k e_i for every head and token."""
    return resid[:, None] @ Q.transpose(-1, -2)[None]


def _value_updates(
    P: Float[Tensor, "H D D"], pattern: Float[Tensor, "batch H pos pos"], resid: Float[Tensor, "batch pos D"]
) -> Float[Tensor, "batch pos H D"]:
    """P_k Σ_j pattern[k, i, j] e_j for every head and token (keys j: the pattern's query-key column is 0)."""
    return ((pattern @ resid[:, None]) @ P.transpose(-1, -2)[None]).transpose(1, 2)


class SoftmaxAttention(nn.Module):
    """e_i ← e_i + Σ_k P_k Σ_{j≤n} softmax_j(e_jᵀ Q_k e_i) e_j: keys and values the n context tokens, no 1/√d."""

    def __init__(self, cfg: VariantConfig):
        super().__init__()
        H, D = cfg.n_heads, cfg.d_model
        self.P = nn.Parameter(torch.zeros(H, D, D, dtype=cfg.torch_dtype))
        self.Q = nn.Parameter(torch.zeros(H, D, D, dtype=cfg.torch_dtype))
        self.hook_attn_scores = HookPoint()  # e_jᵀ Q_k e_i, [batch, head, query pos, key pos]; −inf at the query key
        self.hook_pattern = HookPoint()  # softmax over the context keys, [batch, head, query pos, key pos]
        self.hook_result = HookPoint()  # per-head update, [batch, pos, head, D]

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos H D"]:
        scores = _query_maps(self.Q, resid) @ resid[:, None].transpose(-1, -2)  # e_jᵀ Q_k e_i
        scores = self.hook_attn_scores(_masked_query_key(scores, -math.inf))
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        return self.hook_result(_value_updates(self.P, pattern, resid))


class KernelAttention(nn.Module):
    """e_i ← e_i + Σ_k P_k Σ_{j≤n} e_j φ(K_k e_j)ᵀ φ(Q_k e_i): separate key and query maps K_k, Q_k [D, D] and a feature
    map φ, unnormalised (no 1/n, as the linear model)."""

    def __init__(self, cfg: VariantConfig):
        super().__init__()
        H, D = cfg.n_heads, cfg.d_model
        self.feature_map = cfg.feature_map
        self.P = nn.Parameter(torch.zeros(H, D, D, dtype=cfg.torch_dtype))
        self.K = nn.Parameter(torch.zeros(H, D, D, dtype=cfg.torch_dtype))
        self.Q = nn.Parameter(torch.zeros(H, D, D, dtype=cfg.torch_dtype))
        self.hook_q = HookPoint()  # φ(Q_k e_i), [batch, pos, head, D]
        self.hook_k = HookPoint()  # φ(K_k e_j), [batch, pos, head, D]
        self.hook_pattern = HookPoint()  # φ(K_k e_j)ᵀ φ(Q_k e_i), [batch, head, query pos, key pos]; 0 at the query key
        self.hook_result = HookPoint()  # per-head update, [batch, pos, head, D]

    def phi(self, z: Tensor) -> Tensor:
        return F.elu(z) + 1 if self.feature_map == "elu1" else z

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos H D"]:
        q = self.hook_q(self.phi(_query_maps(self.Q, resid)).transpose(1, 2))  # φ(Q_k e_i) [b, pos, h, D]
        k = self.hook_k(self.phi(_query_maps(self.K, resid)).transpose(1, 2))  # φ(K_k e_j)
        pattern = q.transpose(1, 2) @ k.permute(0, 2, 3, 1)  # φ(K_k e_j)ᵀ φ(Q_k e_i) [b, h, i, j]
        pattern = self.hook_pattern(_masked_query_key(pattern, 0.0))
        return self.hook_result(_value_updates(self.P, pattern, resid))


class FFN(nn.Module):
    """e ← e + W_out φ(W_in e) per token, φ linear or ReLU, no bias (this module returns W_out φ(W_in e))."""

    def __init__(self, cfg: VariantConfig):
        super().__init__()
        self.relu = cfg.mlp == "relu"
        self.W_in = nn.Parameter(torch.zeros(cfg.d_mlp, cfg.d_model, dtype=cfg.torch_dtype))
        self.W_out = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_mlp, dtype=cfg.torch_dtype))
        self.hook_pre = HookPoint()  # W_in e, [batch, pos, d_mlp]
        self.hook_post = HookPoint()  # φ(W_in e), [batch, pos, d_mlp]

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        pre = self.hook_pre(resid @ self.W_in.T)
        post = self.hook_post(torch.relu(pre) if self.relu else pre)
        return post @ self.W_out.T

    def matrix(self) -> Float[Tensor, "D D"]:
        """I + W_out W_in: the token map of a linear FFN (InvalidArgument for ReLU)."""
        if self.relu:
            raise InvalidArgument("a ReLU FFN is no matrix; only a linear FFN is I + W_out W_in")
        return torch.eye(self.W_in.shape[1], dtype=self.W_in.dtype, device=self.W_in.device) + self.W_out @ self.W_in


class VariantBlock(nn.Module):
    """resid_mid = resid_pre + attn_out, resid_post = resid_mid + mlp_out (without an FFN, resid_post = resid_pre +
    attn_out and there is no hook_resid_mid)."""

    def __init__(self, cfg: VariantConfig):
        super().__init__()
        if cfg.attention == "linear":
            self.attn = LinearAttention(cfg.linear_attention)  # interp.model's layer: FULL, DIAG or GD++
        else:
            self.attn = SoftmaxAttention(cfg) if cfg.attention == "softmax" else KernelAttention(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        if cfg.mlp != "none":
            self.mlp = FFN(cfg)
            self.hook_resid_mid = HookPoint()
            self.hook_mlp_out = HookPoint()
        else:
            self.mlp = None
        self.hook_resid_post = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        resid = self.hook_resid_pre(resid)
        resid = resid + self.hook_attn_out(self.attn(resid).sum(dim=2))  # Σ_k of the heads' updates
        if self.mlp is not None:
            resid = self.hook_resid_mid(resid)
            resid = resid + self.hook_mlp_out(self.mlp(resid))  # e ← e + W_out φ(W_in e)
        return self.hook_resid_post(resid)


class VariantTransformer(HookedRootModule):
    """L blocks of a variant (module docstring) reading out ŷ = −y_query.

    Hook points (TransformerLens names): `hook_tokens`, `hook_embed`, and per layer l `blocks.{l}.hook_resid_pre`,
    `blocks.{l}.attn.hook_pattern` [batch, head, pos, pos], `blocks.{l}.attn.hook_result` [batch, pos, head, D],
    `blocks.{l}.hook_attn_out`, `blocks.{l}.hook_resid_mid`, `blocks.{l}.mlp.hook_pre` / `hook_post`
    [batch, pos, d_mlp], `blocks.{l}.hook_mlp_out`, `blocks.{l}.hook_resid_post` (the FFN's only with one); linear
    attention adds `attn.hook_stats` (S, [batch, D, D]), softmax `attn.hook_attn_scores`, kernel `attn.hook_q` and
    `attn.hook_k` (φ(Q_k e), φ(K_k e), [batch, pos, head, D]). Every forward runs token by token.
    """

    def __init__(self, cfg: VariantConfig, init: bool = True, generator: torch.Generator | None = None):
        if not isinstance(cfg, VariantConfig):
            raise InvalidType(f"cfg must be an interp.variants.VariantConfig, got {type(cfg).__name__}")
        check_generator(generator)
        super().__init__()
        self.cfg = cfg
        self.hook_tokens = HookPoint()
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList([VariantBlock(cfg) for _ in range(cfg.n_layers)])
        self.setup()
        if init:
            self.init_weights(generator)

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Small Gaussian init, std = init_scale / n_layers, every weight (as interp.model.LinearTransformer); kernel
        attention's K_k, Q_k std qk_scale where it is set."""
        small, qk = self.cfg.init_scale / self.cfg.n_layers, self.cfg.qk_scale
        with torch.no_grad():
            for name, p in self.named_parameters():
                std = qk if qk is not None and name.endswith(("attn.K", "attn.Q")) else small
                p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype) * std)

    def _check_tokens(self, tokens: Tensor) -> Tensor:
        """Floating tokens [batch, n+1, d+1] cast to the model's dtype; InvalidType / InvalidArgument naming them."""
        if not isinstance(tokens, Tensor) or not tokens.is_floating_point():
            raise InvalidType(f"tokens must be a floating-point torch.Tensor, got {type(tokens).__name__}")
        if tokens.ndim != 3 or tokens.shape[-1] != self.cfg.d_model or tokens.shape[1] < 2 or tokens.shape[0] == 0:
            raise InvalidArgument(
                f"tokens must be [batch, n+1, d+1] with d+1 = {self.cfg.d_model}, n >= 1 and batch >= 1, "
                f"got {list(tokens.shape)}"
            )
        return tokens.to(self.cfg.torch_dtype)

    def residual_stream(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch pos D"]:
        """Tokens before the first block and after every block."""
        resid = self.hook_embed(self.hook_tokens(self._check_tokens(tokens).clone()))
        out = [resid]
        for block in self.blocks:
            resid = block(resid)
            out.append(resid)
        return torch.stack(out)

    def forward(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch"]:
        """ŷ = −y_{n+1} after the last block."""
        resid = self.hook_embed(self.hook_tokens(self._check_tokens(tokens).clone()))
        for block in self.blocks:
            resid = block(resid)
        return -resid[:, -1, -1]

    def predict_per_layer(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch"]:
        """ŷ after 0, 1, ..., L blocks (row 0 is the zero prediction of the raw query)."""
        return -self.residual_stream(tokens)[:, :, -1, -1]


def as_float64(model: VariantTransformer) -> VariantTransformer:
    """A float64 copy (the same weights), or the model itself when it is float64 already."""
    if not isinstance(model, VariantTransformer):
        raise InvalidType(f"model must be an interp.variants.VariantTransformer, got {type(model).__name__}")
    if model.cfg.dtype == "float64":
        return model
    out = VariantTransformer(dataclasses.replace(model.cfg, dtype="float64"), init=False)
    out.load_state_dict({k: v.detach().double().cpu() for k, v in model.state_dict().items()})
    return out.eval()


def predictor(model: VariantTransformer):
    """The model as an interp.evaluate predictor: TaskBatch -> ŷ [batch] in the model's dtype, without gradients (so
    `interp.evaluate.adjusted_loss(predictor(model), data)` measures it as any model)."""
    if not isinstance(model, VariantTransformer):
        raise InvalidType(f"model must be an interp.variants.VariantTransformer, got {type(model).__name__}")

    def predict(batch: TaskBatch) -> Tensor:
        with torch.no_grad():
            return model(batch.tokens)

    return predict


# ---------------------------------------------------------------------------- training
@dataclass(frozen=True)
class VariantTrainConfig:
    """How a variant is trained: Adam with interp.train's one-cycle schedule (warm-up then cosine, peak `lr`), the
    gradient-norm clip and the robust guard of interp.train, `batch` fresh sequences of the prior every step."""

    model: VariantConfig = VariantConfig()
    noise: str = "uniform:5"
    n: int = 20
    seed: int = 0
    steps: int = 4000
    batch: int = 1024
    lr: float = 3e-3
    schedule: str = "onecycle"  # or "constant" (interp.train.learning_rate reads schedule, lr, warmup, steps)
    warmup: float = 0.1
    clip: float = 1.0
    log_every: int = 100

    def __post_init__(self) -> None:
        _check_fields(self)
        object.__setattr__(self, "noise", as_prior(self.noise).spec)
        _check_range("n", self.n, 1, MAX_N)
        _check_range("seed", self.seed, -MAX_SEED, MAX_SEED)
        _check_range("steps", self.steps, 1, MAX_STEPS)
        _check_range("batch", self.batch, 1, MAX_BATCH_ELEMENTS)
        _check_range("warmup", self.warmup, 0.0, 1.0)
        _check_range("log_every", self.log_every, 1, MAX_STEPS)
        if not 0 < self.lr <= 1e3:
            raise InvalidArgument(f"lr must be in (0, 1000], got {self.lr}")
        if not self.clip > 0:
            raise InvalidArgument(f"clip must be > 0, got {self.clip}")
        if self.schedule not in ("onecycle", "constant"):
            raise InvalidArgument(f"schedule must be onecycle or constant, got {self.schedule!r:.60}")
        if self.batch * (self.n + 1) * self.model.d_model > MAX_BATCH_ELEMENTS:
            raise InvalidArgument(f"batch {self.batch} x (n+1) x (d+1) exceeds {MAX_BATCH_ELEMENTS} token entries")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"model": self.model.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> "VariantTrainConfig":
        if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
            raise InvalidType(f"variant train config must be a JSON object with a 'model', got {data!r:.60}")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidArgument(f"unknown variant train config keys: {', '.join(sorted(unknown))}")
        return cls(**(data | {"model": VariantConfig.from_dict(data["model"])}))


@dataclass
class VariantResult:
    model: VariantTransformer
    path: Path
    loss: float  # mean training ½·MSE over the last logging window
    history: list[dict]  # one row per logging window: step, loss, lr, grad_norm
    wall_s: float
    rollbacks: int


def _guarded_loss(model: VariantTransformer, cfg: VariantTrainConfig, gen: torch.Generator) -> tuple[Tensor, int]:
    """(loss of one fresh batch, sequences left out): interp.train's robust guard (non-finite ½·error² left out, above
    GUARD_CAP·d log-compressed, the sum divided by the full batch)."""
    batch = sample_tasks(cfg.batch, cfg.model.d, cfg.n, cfg.noise, gen, dtype=cfg.model.torch_dtype)
    terms, per_seq = _half_squared_errors(model, batch, None, GUARD_CAP * cfg.model.d)
    kept = int(torch.isfinite(per_seq.detach()).sum())
    return (per_seq.mean() if kept == 0 else terms.sum() / cfg.batch), cfg.batch - kept


def train_variant(cfg: VariantTrainConfig, out: str | Path, progress: bool = False) -> VariantResult:
    """Train `cfg` and write the final model to `out` (a .safetensors file, atomically, embedding both configs, the
    loss history and the machine). The init is torch.Generator(seed), the data torch.Generator(seed + 1). A step whose
    loss is non-finite or overflows on more than half the batch restarts from the last finite weights of a logging
    window with a fresh Adam at half the lr (MAX_ROLLBACKS times at most, then TrainingDiverged). Subnormal floats are
    flushed to zero while it trains (torch.set_flush_denormal; off again afterwards, torch's default)."""
    if not isinstance(cfg, VariantTrainConfig):
        raise InvalidType(f"cfg must be an interp.variants.VariantTrainConfig, got {type(cfg).__name__}")
    out = as_path(out, "out")
    torch.set_flush_denormal(True)  # the FFN's tiny early weights make subnormal floats: 3-5× slower steps unflushed
    try:
        return _train_variant(cfg, out, progress)
    finally:
        torch.set_flush_denormal(False)  # torch's default


def _train_variant(cfg: VariantTrainConfig, out: Path, progress: bool) -> VariantResult:
    model = VariantTransformer(cfg.model, generator=torch.Generator().manual_seed(cfg.seed))
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    params = list(model.parameters())
    opt, scale, rollbacks = adam(params, cfg.lr), 1.0, 0
    good = copy.deepcopy(model.state_dict())
    history, window, t0 = [], [], time.perf_counter()
    step = 0
    while step < cfg.steps:
        for group in opt.param_groups:
            group["lr"] = learning_rate(cfg, step) * scale  # one-cycle: warm-up, cosine to lr/1000
        loss, dropped = _guarded_loss(model, cfg, gen)
        if not math.isfinite(loss.item()) or dropped > cfg.batch // 2:
            rollbacks += 1
            if rollbacks > MAX_ROLLBACKS:
                raise TrainingDiverged(f"{out}: step {step + 1} diverged after {MAX_ROLLBACKS} rollbacks")
            model.load_state_dict(good)
            opt, scale = adam(params, cfg.lr), scale / 2
            continue
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.clip)
        if bool(torch.isfinite(grad_norm)):  # an overflowed backward pass: no update from this batch
            opt.step()
        window.append(loss.item())
        step += 1
        if step % cfg.log_every == 0 or step == cfg.steps:
            row = {"step": step, "loss": sum(window) / len(window), "lr": opt.param_groups[0]["lr"]}
            history.append(row | {"grad_norm": float(grad_norm), "elapsed_s": time.perf_counter() - t0})
            window = []
            if all(bool(torch.isfinite(p).all()) for p in params):
                good = copy.deepcopy(model.state_dict())
            if progress:
                print(f"{out.name}: step {step} loss {row['loss']:.4g}", flush=True)
    wall = time.perf_counter() - t0
    model.load_state_dict(good)  # the last finite weights (the final ones, unless the last window overflowed)
    machine = {"cpu": kernel.cpu_model(), "cpu_capability": kernel.cpu_capability(), "torch": torch.__version__}
    meta = {
        "format": FORMAT,
        "variant_config": cfg.model.to_dict(),
        "train_config": cfg.to_dict(),
        "step": cfg.steps,
        "loss": history[-1]["loss"],
        "history": history,
        "wall_s": wall,
        "rollbacks": rollbacks,
        "machine": machine | {"threads": torch.get_num_threads()},
    }
    save_tensors(out, dict(model.state_dict()), meta)
    return VariantResult(model.eval(), out, history[-1]["loss"], history, wall, rollbacks)


def load_variant_with_meta(path: str | Path) -> tuple[VariantTransformer, dict[str, Any]]:
    """(model, metadata) of a file written by `train_variant`: bounded, checked read (interp.checkpoints), the config
    validated, every tensor's name, shape, dtype and finiteness checked before it is loaded; CheckpointError naming
    the file otherwise. meta["train_config"] is a VariantTrainConfig."""
    path = as_path(path, "variant checkpoint")
    tensors, meta = read_tensors(path)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a variant checkpoint (load a linear transformer with interp.load)")
    try:
        cfg = VariantConfig.from_dict(meta.get("variant_config"))
        meta["train_config"] = VariantTrainConfig.from_dict(meta.get("train_config"))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: bad variant config ({err})") from None
    if meta["train_config"].model != cfg:
        raise CheckpointError(f"{path}: the embedded training config's model is not the file's variant_config")
    with torch.device("meta"):
        expected = VariantTransformer(cfg, init=False).state_dict()
    if set(expected) != set(tensors):
        diff = sorted(set(expected) ^ set(tensors))
        raise CheckpointError(f"{path}: tensors do not match the config ({', '.join(diff[:4])})")
    for key, ref in expected.items():
        t = tensors[key]
        if tuple(t.shape) != tuple(ref.shape) or t.dtype != cfg.torch_dtype or not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{path}: tensor {key} is not a finite {cfg.dtype} of shape {list(ref.shape)}")
    model = VariantTransformer(cfg, init=False)
    model.load_state_dict(tensors)
    return model.eval(), meta


def load_variant(path: str | Path) -> VariantTransformer:
    """The model of a file written by `train_variant` (load_variant_with_meta without the metadata)."""
    return load_variant_with_meta(path)[0]
