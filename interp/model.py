"""Linear transformers of Vladymyrov et al. 2024 (README, Conventions) as a TransformerLens HookedRootModule.

One layer (README, Conventions): e_i ← e_i + Σ_k P_k S Q_k e_i with S = Σ_{j≤n} e_j e_jᵀ over the n
context tokens (the query is masked as a key, no 1/n), applied to every token, query included.
The prediction is ŷ = −y of the query after the last layer.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from einops import einsum, rearrange
from jaxtyping import Float
from torch import Tensor, nn

try:  # TransformerLens >= 4 exports it at the top level
    from transformer_lens import HookedRootModule
except ImportError:  # pragma: no cover - older releases
    from transformer_lens.hook_points import HookedRootModule
from transformer_lens.ActivationCache import ActivationCache
from transformer_lens.hook_points import HookPoint

from interp import moments, params
from interp.config import ModelConfig
from interp.files import InvalidArgument, InvalidType
from interp.params import diag_matrices  # noqa: F401 - where it lived before interp.params


@dataclass
class Omegas:
    """The four products of a DIAG layer (Vladymyrov et al. 2024, DIAG; README, Conventions), each [L]: ω_xx = Σ_k
    p_x q_x, ..."""

    omega_xx: Tensor
    omega_xy: Tensor
    omega_yx: Tensor
    omega_yy: Tensor
    _stacked: Tensor | None = field(default=None, repr=False, compare=False)  # stack(), when built stacked

    def stack(self) -> Float[Tensor, "L 4"]:
        """Columns ω_xx, ω_xy, ω_yx, ω_yy."""
        if self._stacked is not None:
            return self._stacked
        return torch.stack([self.omega_xx, self.omega_xy, self.omega_yx, self.omega_yy], dim=-1)


def has_hooks(module: nn.Module) -> bool:
    """Whether any forward, forward-pre or backward hook is registered on this one module (the test
    nn.Module._call_impl makes before it skips hooks)."""
    return bool(
        module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or module._backward_pre_hooks
    )


def hooks_active(model: HookedRootModule) -> bool:
    """Whether any hook (HookPoint, module forward / pre-forward / backward, global) can see a submodule of a model
    that called setup().

    Only then does the model's forward run layer by layer through its submodules; otherwise its hook-free fast path,
    which calls no submodule, is exact. Hooks on the model itself see the same input and ŷ either way.
    """
    # No public torch API says whether a hook is registered: torch's own tests, checked once by hook_detection()
    return global_hooks() or any(has_hooks(m) for m in model.mod_dict.values())  # every submodule, from setup()


# Fallback where torch lacks _has_any_global_hook: the dicts register_module_*_hook write to.
_GLOBAL_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


@dataclass(frozen=True)
class HookDetection:
    """How this process tells whether a hook is registered (`hook_detection()`)."""

    ok: bool  # hooks are seen, so a forward with none takes the hook-free path; False: every forward is per-token
    how: str  # what is read, or what a hook registered through torch's public API went unseen by
    any_global: Callable[[], object] = field(repr=False)  # truthy while a global module hook is registered


def _global_reader() -> tuple[Callable[[], object] | None, str]:
    m = torch.nn.modules.module
    reader = getattr(m, "_has_any_global_hook", None)
    if callable(reader):
        return reader, "torch.nn.modules.module._has_any_global_hook()"
    dicts = [getattr(m, name, None) for name in _GLOBAL_HOOK_DICTS]
    if all(isinstance(d, dict) for d in dicts):
        return (lambda: any(dicts)), f"torch.nn.modules.module.{{{', '.join(_GLOBAL_HOOK_DICTS)}}}"
    return None, f"torch {torch.__version__} has neither _has_any_global_hook nor the dicts {_GLOBAL_HOOK_DICTS}"


def _missed_hook(reader: Callable[[], object]) -> str | None:
    """None when has_hooks and `reader` see a hook of each kind registered through torch's public functions (the
    global ones: forward and forward-pre only, as a global backward hook would pin torch's full/non-full choice for
    good), and stop seeing it once removed; else which hook went unseen. No hook is ever called."""
    probe, noop, m = nn.Identity(), (lambda *args: None), torch.nn.modules.module
    per_module = (
        probe.register_forward_hook,
        probe.register_forward_pre_hook,
        probe.register_full_backward_hook,
        probe.register_full_backward_pre_hook,
    )
    try:
        for register in per_module:
            handle = register(noop)
            seen = has_hooks(probe)
            handle.remove()
            if not seen or has_hooks(probe):
                return f"a hook of nn.Module.{register.__name__} ({'un' if not seen else ''}seen by has_hooks)"
        for register in (m.register_module_forward_hook, m.register_module_forward_pre_hook):
            handle = register(noop)
            seen = bool(reader())
            handle.remove()
            if not seen:
                return f"a hook of torch.nn.modules.module.{register.__name__}"
    except (AttributeError, TypeError) as e:  # a renamed attribute or a changed signature
        return f"{type(e).__name__}: {e}"
    return None


@functools.cache
def hook_detection() -> HookDetection:
    """How `LinearTransformer.forward` tells a hooked model from a hook-free one, checked once per process.

    torch has no public query for registered hooks, only the register_* functions that add them; so interp asks
    what torch asks itself (has_hooks: nn.Module._call_impl's test of a module's hook dicts; global hooks:
    torch.nn.modules.module._has_any_global_hook(), torch.compile's test), and checks here, by registering and
    removing a no-op hook through the public functions, that both still see one. If not (a torch release moved
    them), every forward runs token by token (exact, hooks honoured, slower) and says so once, instead of bypassing
    a hook without a word. tests/test_transformerlens.py fails if that fallback is in use.
    """
    reader, how = _global_reader()
    missed = how if reader is None else _missed_hook(reader)
    if missed is None:
        return HookDetection(True, f"{how}; has_hooks on every submodule", reader)
    warnings.warn(
        f"interp: on torch {torch.__version__} interp cannot tell whether a hook is registered ({missed}); every "
        "forward runs token by token (exact, slower)",
        stacklevel=3,
    )
    return HookDetection(False, missed, lambda: True)


def global_hooks() -> bool:
    """Whether a hook registered with torch.nn.modules.module.register_module_*_hook applies to every module (True
    as well when this torch keeps them where interp cannot see: then no hook can be bypassed)."""
    detection = hook_detection()
    return not detection.ok or bool(detection.any_global())


def check_generator(generator) -> None:
    """InvalidType unless `generator` is a torch.Generator or None (a model's init draws from it)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InvalidType(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def _as_tensor(name: str, value) -> Tensor:
    """A tensor argument given as a tensor, an array or nested lists of numbers; InvalidType naming it otherwise."""
    if isinstance(value, Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidType(f"{name} must be a tensor (or nested lists of numbers), got {type(value).__name__}") from None


def _weights(name: str, value) -> Tensor:
    """Weights as a tensor: a tensor (or array) must be real floating point (never complex, whose imaginary part a cast
    drops silently, nor integer or bool) and hold values (not on the meta device); nested lists of real numbers become
    float64. InvalidType / InvalidArgument naming `name`."""
    given = isinstance(value, Tensor) or hasattr(value, "__array__")
    value = _as_tensor(name, value)
    if not given and not value.is_complex() and value.dtype != torch.bool:
        value = value.to(torch.float64)  # nested lists of ints
    if value.is_complex() or not value.is_floating_point():
        raise InvalidType(f"{name} must be real floating point, got {str(value.dtype).removeprefix('torch.')}")
    if value.device.type == "meta":
        raise InvalidArgument(f"{name} is on the meta device: it holds no values to take weights from")
    return value


def _check_device(name: str, value: Tensor, device: torch.device) -> None:
    """InvalidArgument when `value` is on another device than the model's weights (meta tokens for a model with values:
    no values to run it on; a model moved to meta with meta tokens traces shapes, and is left alone)."""
    if value.device != device:
        why = " (no values to run it on)" if value.device.type == "meta" else ""
        raise InvalidArgument(f"{name} is on the {value.device} device{why}, the model on {device}; move one (.to)")


def _check_pos_slice(pos_slice, n_pos: int) -> None:
    """pos_slice as TransformerLens takes it (None, an int, a slice, a (start, stop[, step]) tuple, a list or tensor of
    indices), every index within the n + 1 = `n_pos` positions; InvalidArgument / InvalidType otherwise."""
    if pos_slice is None or isinstance(pos_slice, slice):
        return
    if isinstance(pos_slice, tuple):  # TransformerLens reads a tuple as slice(*tuple)
        try:
            slice(*pos_slice).indices(n_pos)
        except (TypeError, ValueError) as err:
            raise InvalidArgument(f"pos_slice {pos_slice!r:.60} is not (start, stop[, step]) ({err})") from None
        return
    if isinstance(pos_slice, Tensor):
        if pos_slice.is_floating_point() or pos_slice.is_complex() or pos_slice.ndim > 1:
            raise InvalidType(f"pos_slice must hold integer positions, got a {pos_slice.dtype} tensor")
        indices = pos_slice.reshape(-1).tolist()
    elif isinstance(pos_slice, list):
        indices = pos_slice
    else:
        indices = [pos_slice]
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidType(f"pos_slice must be an int, a slice, a tuple or a list of ints, got {pos_slice!r:.60}")
        if not -n_pos <= i < n_pos:
            raise InvalidArgument(f"pos_slice: position {i} is out of range for the {n_pos} positions (n + 1)")


class LinearAttention(nn.Module):
    """One multi-head linear self-attention layer, parameterized as FULL, DIAG or GD++."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.arch = params.of(cfg.param)
        self.arch.make(self, cfg.n_heads, cfg.d_model, cfg.torch_dtype)  # FULL: P, Q [H, D, D]; DIAG: p_x, ... [H]
        self.hook_stats = HookPoint()  # S = Σ_{j≤n} e_j e_jᵀ, [batch, D, D]
        self.hook_pattern = HookPoint()  # e_jᵀ Q_k e_i, [batch, head, query pos, key pos]; only when hooked
        self.hook_result = HookPoint()  # per-head update P_k S Q_k e_i, [batch, pos, head, D]

    def diag_params(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(p_x, p_y, q_x, q_y), each [H]; q_y is zero for GD++."""
        return self.arch.diag_params(self)

    def matrices(self) -> tuple[Float[Tensor, "H D D"], Float[Tensor, "H D D"]]:
        """The materialized (P, Q) of every head."""
        return self.arch.matrices(self)

    def head_maps(
        self, S: Float[Tensor, "batch D D"], matrices: tuple[Tensor, Tensor] | None = None
    ) -> Float[Tensor, "batch H D D"]:
        """A_k = P_k S Q_k for every head (Lemma 4.3's Σ_k P_k S Q_k before the sum over k), with this layer's
        `matrices()` or the (P, Q) given (interp.variants' hook-free path passes them zero-padded to S's width).

        P and Q are shared by the batch, so both products are single large GEMMs over the folded
        batch rather than thousands of tiny ones (measured in experiments/bench_train.py).
        """
        B, D, _ = S.shape
        P, Q = self.matrices() if matrices is None else matrices
        H = P.shape[0]
        SQ = (S.reshape(B * D, D) @ rearrange(Q, "h j k -> j (h k)")).reshape(B, D, H, D)
        SQ = rearrange(SQ, "b j h k -> h j (b k)")
        return rearrange(P @ SQ, "h i (b k) -> b h i k", b=B)

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos H D"]:
        B, T, D = resid.shape
        ctx = resid[:, :-1]  # keys and values come from the n context tokens only
        S = self.hook_stats(ctx.transpose(1, 2) @ ctx)  # S = Σ_{j≤n} e_j e_jᵀ (README, Conventions)
        A = self.head_maps(S).reshape(B, -1, D)  # [B, H*D, D]
        result = (resid @ A.transpose(1, 2)).reshape(B, T, -1, D)  # A_k e_i per head
        if not hook_detection().ok or has_hooks(self.hook_pattern):  # O(pos²): built only for a hook or a cache
            result = result + self.pattern_edit(resid)
        return self.hook_result(result)

    def pattern_edit(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos H D"]:
        """Runs hook_pattern; returns what its edit adds to every head's update (exactly 0 when unedited).

        pattern[b, k, i, j] = e_jᵀ Q_k e_i is the weight context token j gets in token i's update
        P_k S Q_k e_i = Σ_j P_k e_j (e_jᵀ Q_k e_i) (the linear self-attention of Vladymyrov et al. 2024);
        the query's own key column is 0 (the query is masked as a key).
        An edit to pattern' adds Σ_j P_k e_j (pattern' − pattern)[b, k, i, j].
        """
        P, Q = self.matrices()
        pattern = einsum(resid, Q, resid, "b j a, h a c, b i c -> b h i j")
        is_query_key = torch.arange(resid.shape[1], device=resid.device) == resid.shape[1] - 1
        pattern = pattern.masked_fill(is_query_key, 0.0)
        edited = self.hook_pattern(pattern.clone())  # a copy, so an in-place hook edit shows in the difference
        return einsum(P, edited - pattern, resid, "h a c, b h i j, b j c -> b i h a")


class LinearBlock(nn.Module):
    """Residual wrapper: e ← e + Σ_k P_k S Q_k e (README, Conventions)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = LinearAttention(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        resid = self.hook_resid_pre(resid)
        attn_out = self.hook_attn_out(self.attn(resid).sum(dim=2))
        return self.hook_resid_post(resid + attn_out)


class LinearTransformer(HookedRootModule):
    """L layers of linear self-attention reading out ŷ = −y_query (README, Conventions).

    Hook points (TransformerLens names): `hook_tokens` and `hook_embed` (both the input tokens, on a
    copy, so in-place hooks never change the caller's tensor), and for every layer l
    `blocks.{l}.hook_resid_pre`, `blocks.{l}.attn.hook_stats` [batch, D, D],
    `blocks.{l}.attn.hook_pattern` [batch, head, pos, pos] (computed only when hooked or cached),
    `blocks.{l}.attn.hook_result` [batch, pos, head, D], `blocks.{l}.hook_attn_out`,
    `blocks.{l}.hook_resid_post`; D = d + 1, pos = n + 1.
    """

    def __init__(self, cfg: ModelConfig, init: bool = True, generator: torch.Generator | None = None):
        if not isinstance(cfg, ModelConfig):
            raise InvalidType(f"cfg must be an interp.ModelConfig, got {type(cfg).__name__} (ModelConfig(**fields))")
        check_generator(generator)
        super().__init__()
        self.cfg = cfg
        self.arch = params.of(cfg.param)  # what FULL, DIAG and GD++ do differently (interp.params)
        self.hook_tokens = HookPoint()
        self.hook_embed = HookPoint()  # the tokens as the residual stream's first term (decompose_resid's "embed")
        self.blocks = nn.ModuleList([LinearBlock(cfg) for _ in range(cfg.n_layers)])
        self.setup()
        if init:
            self.init_weights(generator)
        self._sync_device()

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        self._sync_device()
        return out

    def _sync_device(self) -> None:
        """Keep cfg.device (read by TransformerLens) on the weights' device; cfg is copied, never shared-mutated."""
        param = next(self.parameters(), None)
        if param is not None and str(param.device) != self.cfg.device:
            cfg = dataclasses.replace(self.cfg)
            object.__setattr__(cfg, "_device", str(param.device))
            self.cfg = cfg

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Small Gaussian init, std = init_scale / n_layers (Vladymyrov et al. 2024 give no init; ~1e-3 keeps deep
        models stable)."""
        std = self.cfg.init_scale / self.cfg.n_layers
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype) * std)

    # ------------------------------------------------------------------ running
    def run_with_cache(
        self,
        tokens: Float[Tensor, "batch pos D"],
        *,
        names_filter=None,
        device=None,
        remove_batch_dim: bool = False,
        incl_bwd: bool = False,
        metric=None,
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        pos_slice=None,
        return_cache_object: bool = True,
    ):
        """(ŷ, cache) as in TransformerLens; the cache is an ActivationCache (`cache["resid_pre", 0]`).

        incl_bwd=True backpropagates `metric(ŷ)`, which must be one number (default: ŷ itself, so a batch
        of one sequence; on a larger batch pass e.g. `metric=lambda y_hat: ((y_hat - target) ** 2).mean()`), and caches
        every gradient as `<hook name>_grad`, the input tokens' included. pos_slice slices the
        positional activations only; hook_stats (S, no position axis) is cached whole.
        """
        self._check_tokens(tokens, cast=False)  # a list, None or meta tokens: one line before any hook is set
        if remove_batch_dim and tokens.shape[0] != 1:
            raise InvalidArgument(f"remove_batch_dim needs a batch of 1, got tokens of shape {list(tokens.shape)}")
        _check_pos_slice(pos_slice, tokens.shape[1])
        cache_dict, fwd, bwd = self.get_caching_hooks(
            names_filter, incl_bwd, device, remove_batch_dim, pos_slice=pos_slice
        )
        if incl_bwd and not tokens.requires_grad:  # so the tokens' own hooks (and layer 0's S) get gradients
            tokens = tokens.detach().clone().requires_grad_(True)
        with self.hooks(fwd, bwd, reset_hooks_end, clear_contexts):
            out = self(tokens)
            if incl_bwd:
                value = out if metric is None else metric(out)
                if not isinstance(value, Tensor) or value.numel() != 1:
                    shape = list(value.shape) if isinstance(value, Tensor) else type(value).__name__
                    raise InvalidArgument(
                        f"incl_bwd backpropagates a scalar, got {shape}: on a batch pass metric=, "
                        "e.g. metric=lambda y_hat: y_hat.sum()"
                    )
                value.backward()
        if return_cache_object:
            return out, ActivationCache(cache_dict, self, has_batch_dim=not remove_batch_dim)
        return out, cache_dict

    def get_caching_hooks(
        self,
        names_filter=None,
        incl_bwd: bool = False,
        device=None,
        remove_batch_dim: bool = False,
        cache: dict | None = None,
        pos_slice=None,
    ):
        """TransformerLens's caching hooks, except that pos_slice leaves hook_stats (no position axis) whole."""
        if names_filter is None:
            keep = lambda name: True
        elif isinstance(names_filter, str):
            keep = lambda name: name == names_filter
        elif isinstance(names_filter, (list, tuple, set)):
            keep = lambda name: name in names_filter
        elif callable(names_filter):
            keep = names_filter
        else:
            raise InvalidType(f"names_filter must be a hook name, a list of names or a function, got {names_filter!r}")
        is_stats = lambda name: name.endswith("attn.hook_stats")
        cache = {} if cache is None else cache
        hooks = [
            super().get_caching_hooks(
                lambda name: keep(name) and not is_stats(name),
                incl_bwd,
                device,
                remove_batch_dim,
                cache,
                pos_slice=pos_slice,
            ),
            super().get_caching_hooks(
                lambda name: keep(name) and is_stats(name), incl_bwd, device, remove_batch_dim, cache, pos_slice=None
            ),
        ]
        return cache, hooks[0][1] + hooks[1][1], hooks[0][2] + hooks[1][2]

    def accumulated_bias(
        self, layer: int | None = None, mlp_input: bool = False, include_mlp_biases: bool = True
    ) -> Float[Tensor, "D"]:
        """Zeros: the model has no biases (TransformerLens's get_full_resid_decomposition adds this term)."""
        param = next(self.parameters())
        return torch.zeros(self.cfg.d_model, dtype=param.dtype, device=param.device)

    def residual_stream(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch pos D"]:
        """Tokens before the first layer and after every layer."""
        resid = self._embed(tokens)
        out = [resid]
        for block in self.blocks:
            resid = block(resid)
            out.append(resid)
        return torch.stack(out)

    def forward(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch"]:
        """ŷ = −y_{n+1} after the last layer (floating tokens of another dtype are cast to the model's)."""
        tokens = self._check_tokens(tokens)
        if not self._hooks_active():
            return self._forward_moments(tokens)
        resid = self._embed(tokens)
        for block in self.blocks:
            resid = block(resid)
        return -resid[:, -1, -1]

    def _embed(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch pos D"]:
        """hook_tokens, then hook_embed, on a copy: an in-place hook never changes the caller's tensor."""
        tokens = self._check_tokens(tokens)
        return self.hook_embed(self.hook_tokens(tokens.clone()))

    def _hooks_active(self) -> bool:
        """Whether any hook can see a submodule (`hooks_active`): only then does forward run layer by layer."""
        return hooks_active(self)

    def _forward_moments(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "batch"]:
        """The same prediction from second moments only (Theorem 4.1; interp.moments). Used when no hook is attached."""
        return moments.predict(self, tokens)

    def predict_per_layer(self, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L+1 batch"]:
        """ŷ after 0, 1, ..., L layers (row 0 is the zero prediction of the raw query)."""
        return -self.residual_stream(tokens)[:, :, -1, -1]

    def _check_tokens(self, tokens: Tensor, cast: bool = True) -> Tensor:
        """The tokens in the model's dtype: floating tokens of another dtype (float64 evaluation batches into a
        float32 model) are cast, as the model's own arithmetic would round them anyway (with `cast` False, returned
        as given). TypeError for a list, a numpy array or integer / bool tokens; ValueError for a wrong shape or an
        empty batch."""
        if not isinstance(tokens, Tensor):
            raise InvalidType(f"tokens must be a torch.Tensor, got {type(tokens).__name__} (use torch.as_tensor)")
        if not tokens.is_floating_point():
            raise InvalidType(
                f"tokens must be floating point, got {str(tokens.dtype).removeprefix('torch.')} "
                f"(the model is {self.cfg.dtype})"
            )
        if tokens.ndim != 3 or tokens.shape[-1] != self.cfg.d_model or tokens.shape[1] < 2:
            raise InvalidArgument(
                f"tokens must be [batch, n+1, d+1] with d+1 = {self.cfg.d_model} and n >= 1, got {list(tokens.shape)}"
            )
        if tokens.shape[0] == 0:
            raise InvalidArgument("tokens: empty batch (batch size 0)")
        _check_device("tokens", tokens, next(self.parameters()).device)
        return tokens.to(self.cfg.torch_dtype) if cast else tokens

    # ------------------------------------------------------------------ weights
    @property
    def P(self) -> Float[Tensor, "L H D D"]:
        """Materialized P^l_k of every layer and head."""
        return torch.stack([b.attn.matrices()[0] for b in self.blocks])

    @property
    def Q(self) -> Float[Tensor, "L H D D"]:
        """Materialized Q^l_k of every layer and head."""
        return torch.stack([b.attn.matrices()[1] for b in self.blocks])

    def omegas(self) -> Omegas:
        """ω_xx, ω_xy, ω_yx, ω_yy per layer (Vladymyrov et al. 2024, DIAG; README, Conventions), for DIAG and GD++
        models."""
        stacked = self.arch.omegas([b.attn for b in self.blocks])  # ValueError for FULL
        return Omegas(*stacked.unbind(-1), _stacked=stacked)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_matrices(cls, P: Tensor, Q: Tensor, dtype: str | None = None) -> "LinearTransformer":
        """A FULL model with the given P, Q of shape [L, H, d+1, d+1]."""
        P, Q = _weights("P", P), _weights("Q", Q)
        if P.ndim != 4 or P.shape != Q.shape or P.shape[-1] != P.shape[-2] or P.shape[-1] < 2:
            raise InvalidArgument(f"P and Q must both be [L, H, d+1, d+1], got {list(P.shape)} and {list(Q.shape)}")
        if not (P.is_floating_point() and Q.is_floating_point()):
            raise InvalidType(f"P and Q must be floating point, got {P.dtype} and {Q.dtype}")
        if not (torch.isfinite(P).all() and torch.isfinite(Q).all()):
            raise InvalidArgument("P and Q must be finite (the checkpoint loader rejects NaN and inf too)")
        if dtype is None:
            dtype = "float64" if P.dtype == torch.float64 else "float32"
        L, H, D, _ = P.shape
        model = cls(ModelConfig(d=D - 1, n_layers=L, n_heads=H, param=params.FULL.name, dtype=dtype), init=False)
        with torch.no_grad():
            for block, p, q in zip(model.blocks, P, Q):
                block.attn.P.copy_(p)
                block.attn.Q.copy_(q)
        return model.eval()

    @classmethod
    def from_omegas(cls, omegas: Tensor, d: int, dtype: str = "float64") -> "LinearTransformer":
        """A 2-head DIAG model realising any ω's, given as [L, 4] (ω_xx, ω_xy, ω_yx, ω_yy).

        Head 1: p_x = 1, q_x = ω_xx, q_y = ω_xy; head 2: p_y = 1, q_x = ω_yx, q_y = ω_yy.
        """
        omegas = _weights("omegas", omegas).to(torch.float64)
        if omegas.ndim != 2 or omegas.shape[1] != 4:
            raise InvalidArgument(f"omegas must be [L, 4], got {list(omegas.shape)}")
        if not torch.isfinite(omegas).all():
            raise InvalidArgument("omegas must be finite")
        cfg = ModelConfig(d=d, n_layers=omegas.shape[0], n_heads=2, param=params.DIAG.name, dtype=dtype)
        model = cls(cfg, init=False)
        with torch.no_grad():
            for block, (w_xx, w_xy, w_yx, w_yy) in zip(model.blocks, omegas):
                a = block.attn
                a.p_x.copy_(torch.tensor([1.0, 0.0]))
                a.p_y.copy_(torch.tensor([0.0, 1.0]))
                a.q_x.copy_(torch.stack([w_xx, w_yx]))
                a.q_y.copy_(torch.stack([w_xy, w_yy]))
        return model.eval()

    def gdpp_omegas(self) -> Float[Tensor, "L 2"]:
        """(ω_xx, ω_yx) per layer of a model that is a GD++ one: GD++ itself, DIAG with ω_xy = ω_yy = 0, or FULL whose
        P_k, Q_k are GD++'s diag(p_x I, p_y), diag(q_x I, 0) (what `embed` makes); InvalidArgument otherwise."""
        if self.arch.has_omegas:
            om = self.omegas()
            if not (bool((om.omega_xy == 0).all()) and bool((om.omega_yy == 0).all())):
                raise InvalidArgument(f"a {self.arch.label} model with ω_xy or ω_yy ≠ 0 is not a GD++ model")
            return torch.stack([om.omega_xx, om.omega_yx], dim=-1).detach()
        P, Q = self.P.detach(), self.Q.detach()  # [L, H, D, D]
        d = self.cfg.d
        p_x, p_y, q_x = P[..., 0, 0], P[..., d, d], Q[..., 0, 0]
        want_p, want_q = diag_matrices(p_x, p_y, q_x, torch.zeros_like(q_x), d)
        if not (torch.equal(P, want_p) and torch.equal(Q, want_q)):
            raise InvalidArgument(
                f"a {self.arch.label} model whose P, Q are not GD++'s diag(p_x I, p_y), diag(q_x I, 0)"
            )
        return torch.stack([(p_x * q_x).sum(-1), (p_y * q_x).sum(-1)], dim=-1)

    @classmethod
    def from_gdpp_omegas(cls, omegas: Tensor, cfg: ModelConfig) -> "LinearTransformer":
        """A model of `cfg` (any parameterization that holds GD++) computing the GD++ of these (ω_xx, ω_yx) [L, 2]:
        head 0 with p_x = ω_xx, p_y = ω_yx, q_x = 1, the other heads 0, embedded in cfg's parameterization."""
        gdpp = cls(dataclasses.replace(cfg, param=params.GDPP.name), init=False)
        with torch.no_grad():
            for block, (w_xx, w_yx) in zip(gdpp.blocks, _weights("omegas", omegas).double()):
                a = block.attn
                for weight, value in ((a.p_x, w_xx), (a.p_y, w_yx), (a.q_x, 1.0)):
                    weight.zero_()
                    weight[0] = value
        return gdpp if cfg.param == params.GDPP.name else gdpp.embed(cfg)

    def to_full(self) -> "LinearTransformer":
        """The same function as a FULL model (materialized P, Q)."""
        with torch.no_grad():
            return type(self).from_matrices(self.P.detach().clone(), self.Q.detach().clone(), dtype=self.cfg.dtype)

    def embed(self, cfg: ModelConfig) -> "LinearTransformer":
        """The same function as a model of `cfg`, whose parameterization holds this one (GD++ ⊂ DIAG ⊂ FULL,
        interp.params.nests; the same d, layers and heads; any dtype): GD++'s q_y = 0 in DIAG, P_k and Q_k
        materialized in FULL. Exact but for rounding to cfg's dtype."""
        if not isinstance(cfg, ModelConfig):
            raise InvalidType(f"cfg must be an interp.ModelConfig, got {type(cfg).__name__}")
        if not params.nests(cfg.param, self.cfg.param):
            raise InvalidArgument(f"a {self.arch.label} model is not a {params.of(cfg.param).label} model")
        shape, want = (self.cfg.d, self.cfg.n_layers, self.cfg.n_heads), (cfg.d, cfg.n_layers, cfg.n_heads)
        if shape != want:
            raise InvalidArgument(f"(d, layers, heads) = {shape} cannot be embedded in a model of {want}")
        out = type(self)(cfg, init=False)
        with torch.no_grad():
            for dst, src in zip(out.blocks, self.blocks):
                values = src.attn.matrices() if out.arch.dense else src.attn.diag_params()
                for name, value in zip(out.arch.weights, values):
                    getattr(dst.attn, name).copy_(value)
        return out.to(next(self.parameters()).device).train(self.training)
