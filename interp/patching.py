"""Activation patching with TransformerLens's names and argument order (as in `transformer_lens.patching`).

TransformerLens's own functions do not fit these models: the tokens are floats [batch, n+1, d+1], so the
position range they take from `tokens.shape[-1]` is the feature axis (the query is never patched), and
their layer-0 setter writes into the caller's corrupted tokens. Here positions run over the n + 1 tokens
(the query last), every patch is written into a copy of the corrupted activation, and nothing passed in
(tokens, cache, model) is changed. Each function runs one forward per cell, so the result is indexed
[layer, pos], [layer, head], [layer, pos, head] or [layer], followed by the shape of the metric's value.

The standard clean -> corrupted experiment on these tasks: corrupt a batch by shuffling each sequence's
context labels (`permute_labels`: same x's, same query, but the labels no longer fit one w), and ask
which clean activation, patched into the corrupted run, restores the clean prediction of the query:

    clean = interp.sample_tasks(64, d=10, n=20, noise="uniform:5", generator=torch.Generator().manual_seed(0))
    corrupted = permute_labels(clean.tokens, torch.Generator().manual_seed(1))
    y_clean, clean_cache = model.run_with_cache(clean.tokens)
    metric = recovery_metric(y_clean, model(corrupted))        # 0: the corrupted ŷ, 1: the clean ŷ
    grid = get_act_patch_resid_pre(model, corrupted, clean_cache, metric)   # [layer, n + 1]

On the zoo's full4_uniform5 (64 sequences; experiments/tutorial.ipynb draws the grid), patching one
context token restores at most 0.16 at layer 0 and less later (each token is one of n terms of every
S^l). The query's column grows with depth, 0 (the query is the same in both runs) -> 0.64 -> 0.90 -> 0.94
for resid_pre of layers 0-3: the query reads the context only through S^l, so a clean query state still
passes through the corrupted S of the later layers, and only resid_post of the last layer restores all of
it (1.00). Layer 0's update of the query alone (attn_out) restores 0.64. Patching S^l alone
(`get_act_patch_stats`) restores nothing, and at layer 0 derails the prediction (the later layers expect
S and the tokens to come from one context).
"""

from __future__ import annotations

import numbers
from typing import Callable, Mapping

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.ActivationCache import ActivationCache

from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer

HOOK_NAMES = {  # TransformerLens's short names (transformer_lens.utilities.get_act_name) -> hook points
    "resid_pre": "blocks.{}.hook_resid_pre",
    "resid_post": "blocks.{}.hook_resid_post",
    "attn_out": "blocks.{}.hook_attn_out",
    "result": "blocks.{}.attn.hook_result",
    "pattern": "blocks.{}.attn.hook_pattern",
    "stats": "blocks.{}.attn.hook_stats",
}


# --------------------------------------------------------------------------- setters (edit a copy in place)
def layer_patch_setter(corrupted_activation: Tensor, index: list[int], clean_activation: Tensor) -> Tensor:
    """index = [layer]: the whole activation (S^l has no position axis)."""
    corrupted_activation[...] = clean_activation
    return corrupted_activation


def layer_pos_patch_setter(corrupted_activation: Tensor, index: list[int], clean_activation: Tensor) -> Tensor:
    """index = [layer, pos] of a [batch, pos, ...] activation."""
    _, pos = index
    corrupted_activation[:, pos] = clean_activation[:, pos]
    return corrupted_activation


def layer_head_vector_patch_setter(corrupted_activation: Tensor, index: list[int], clean_activation: Tensor) -> Tensor:
    """index = [layer, head] of a [batch, pos, head, D] activation, every position."""
    _, head = index
    corrupted_activation[:, :, head] = clean_activation[:, :, head]
    return corrupted_activation


def layer_pos_head_vector_patch_setter(
    corrupted_activation: Tensor, index: list[int], clean_activation: Tensor
) -> Tensor:
    """index = [layer, pos, head] of a [batch, pos, head, D] activation."""
    _, pos, head = index
    corrupted_activation[:, pos, head] = clean_activation[:, pos, head]
    return corrupted_activation


def layer_head_pattern_patch_setter(corrupted_activation: Tensor, index: list[int], clean_activation: Tensor) -> Tensor:
    """index = [layer, head] of a [batch, head, query pos, key pos] pattern."""
    _, head = index
    corrupted_activation[:, head] = clean_activation[:, head]
    return corrupted_activation


# --------------------------------------------------------------------------- the loop
def generic_activation_patch(
    model: LinearTransformer,
    corrupted_tokens: Float[Tensor, "batch pos D"],
    clean_cache,
    patching_metric: Callable[[Tensor], Tensor | float],
    patch_setter: Callable[[Tensor, list[int], Tensor], Tensor],
    activation_name: str,
    index_axis_names: tuple[str, ...],
) -> Tensor:
    """patching_metric(ŷ) of the corrupted run with one clean activation patched in, for every index.

    activation_name: a key of HOOK_NAMES; index_axis_names: "layer" first, then "pos" (0..n, the query
    last) and / or "head". Returns [*axis sizes, *metric shape].
    """
    if not isinstance(model, LinearTransformer):
        raise InvalidType(f"model must be an interp.LinearTransformer, got {type(model).__name__}")
    if activation_name not in HOOK_NAMES:
        raise InvalidArgument(f"activation_name must be one of {', '.join(HOOK_NAMES)}, got {activation_name!r}")
    if not isinstance(corrupted_tokens, Tensor):
        raise InvalidType(f"corrupted_tokens must be a [batch, n+1, d+1] tensor, got {type(corrupted_tokens).__name__}")
    if corrupted_tokens.ndim != 3:
        got = list(corrupted_tokens.shape)
        raise InvalidArgument(f"corrupted_tokens must be a [batch, n+1, d+1] tensor, got {got}")
    corrupted_tokens = model._check_tokens(corrupted_tokens)  # its shape and dtype, before any hook runs
    if not isinstance(clean_cache, Mapping) and not isinstance(clean_cache, ActivationCache):
        raise InvalidType(
            "clean_cache must be the ActivationCache of model.run_with_cache(clean_tokens), "
            f"got {type(clean_cache).__name__}"
        )
    if not callable(patching_metric):
        raise InvalidType(f"patching_metric must be a function ŷ -> number, got {type(patching_metric).__name__}")
    if not callable(patch_setter):
        raise InvalidType(f"patch_setter must be a function, got {type(patch_setter).__name__}")
    sizes = {"layer": model.cfg.n_layers, "pos": corrupted_tokens.shape[1], "head": model.cfg.n_heads}
    if isinstance(index_axis_names, str) or not isinstance(index_axis_names, (tuple, list)):
        raise InvalidType(f"index_axis_names must be a tuple of axis names, got {index_axis_names!r:.60}")
    bad = [a for a in index_axis_names if not isinstance(a, str) or a not in sizes]
    if bad or not index_axis_names or index_axis_names[0] != "layer":
        why = f"unknown axis {bad[0]!r:.40}" if bad else "the first must be 'layer'"
        raise InvalidArgument(f"index_axis_names {tuple(index_axis_names)!r:.80}: {why} (axes: layer, then pos, head)")
    shape = [sizes[axis] for axis in index_axis_names]
    values = []
    for flat in range(int(torch.tensor(shape).prod())):
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat), shape)]
        name = HOOK_NAMES[activation_name].format(index[0])
        try:
            clean = clean_cache[name]
        except KeyError:
            raise InvalidArgument(
                f"clean_cache has no {name!r}: cache the clean run with model.run_with_cache(tokens) "
                "(no names_filter, pos_slice or remove_batch_dim)"
            ) from None
        if not isinstance(clean, Tensor) or not clean.is_floating_point():
            tensor = isinstance(clean, Tensor)
            got = str(clean.dtype).removeprefix("torch.") + " tensor" if tensor else type(clean).__name__
            raise InvalidType(
                f"clean_cache[{name!r}] must be a floating tensor (model.run_with_cache(tokens)'s), got {got}"
            )

        def hook(activation: Tensor, hook, index=index, clean=clean, name=name) -> Tensor:
            if activation.shape != clean.shape:
                raise InvalidArgument(
                    f"clean_cache[{name!r}] has shape {list(clean.shape)}, the corrupted run's "
                    f"{list(activation.shape)}: clean and corrupted tokens must have the same shape"
                )
            return patch_setter(activation.clone(), index, clean.to(activation.device, activation.dtype))

        with torch.no_grad():
            out = model.run_with_hooks(corrupted_tokens, fwd_hooks=[(name, hook)])
            values.append(_metric_value(patching_metric(out), index, values[0] if values else None))
    return torch.stack(values).reshape(*shape, *values[0].shape)


def _metric_value(value, index: list[int], first: Tensor | None) -> Tensor:
    """The metric's value at `index` as a tensor: a number or a numeric tensor, of one shape at every index."""
    if isinstance(value, bool) or not (isinstance(value, (Tensor, numbers.Real)) or hasattr(value, "__array__")):
        raise InvalidType(f"patching_metric must return a number or a tensor, got {type(value).__name__} at {index}")
    value = torch.as_tensor(value).detach()
    if value.is_complex() or value.dtype == torch.bool:
        raise InvalidType(f"patching_metric must return real numbers, got {value.dtype} at {index}")
    if first is not None and value.shape != first.shape:
        raise InvalidArgument(
            f"patching_metric returned shape {list(value.shape)} at {index}, {list(first.shape)} at the first index: "
            "it must return one shape for every patch"
        )
    return value


# --------------------------------------------------------------------------- TransformerLens's functions
def _act_patch(name: str, setter: Callable, hook: str, index: tuple[str, ...], what: str) -> Callable:
    """TransformerLens's `name`: generic_activation_patch of the `hook` activations, indexed by `index`."""

    def patch(model, corrupted_tokens, clean_cache, patching_metric) -> Tensor:
        return generic_activation_patch(model, corrupted_tokens, clean_cache, patching_metric, setter, hook, index)

    patch.__name__ = patch.__qualname__ = name
    patch.__doc__ = f"Patch {what}: [{', '.join(INDEX_SIZES[i] for i in index)}]."
    return patch


INDEX_SIZES = {"layer": "n_layers", "pos": "n + 1", "head": "n_heads"}
# name, patch setter, hook, index, what is patched
get_act_patch_resid_pre = _act_patch(
    "get_act_patch_resid_pre", layer_pos_patch_setter, "resid_pre", ("layer", "pos"),
    "the residual stream entering each layer, one token at a time",
)  # fmt: skip
get_act_patch_resid_post = _act_patch(
    "get_act_patch_resid_post", layer_pos_patch_setter, "resid_post", ("layer", "pos"),
    "the residual stream leaving each layer, one token at a time",
)  # fmt: skip
get_act_patch_attn_out = _act_patch(
    "get_act_patch_attn_out", layer_pos_patch_setter, "attn_out", ("layer", "pos"),
    "each layer's update Σ_k P_k S Q_k e_i, one token at a time",
)  # fmt: skip
get_act_patch_attn_head_out_all_pos = _act_patch(
    "get_act_patch_attn_head_out_all_pos", layer_head_vector_patch_setter, "result", ("layer", "head"),
    "each head's update P_k S Q_k e_i (hook_result) at every token",
)  # fmt: skip
get_act_patch_attn_head_out_by_pos = _act_patch(
    "get_act_patch_attn_head_out_by_pos", layer_pos_head_vector_patch_setter, "result", ("layer", "pos", "head"),
    "each head's update (hook_result) one token at a time",
)  # fmt: skip
get_act_patch_attn_head_pattern_all_pos = _act_patch(
    "get_act_patch_attn_head_pattern_all_pos", layer_head_pattern_patch_setter, "pattern", ("layer", "head"),
    "each head's whole pattern e_jᵀ Q_k e_i (hook_pattern)",
)  # fmt: skip
get_act_patch_stats = _act_patch(
    "get_act_patch_stats", layer_patch_setter, "stats", ("layer",),
    "the context statistics S^l = Σ_{j≤n} e_j e_jᵀ each layer reads (hook_stats)",
)  # fmt: skip


# --------------------------------------------------------------------------- the standard experiment
def permute_labels(
    tokens: Float[Tensor, "batch pos D"], generator: torch.Generator | None = None
) -> Float[Tensor, "batch pos D"]:
    """A copy of tokens with each sequence's n context labels y_j shuffled (x's and the query unchanged)."""
    if not isinstance(tokens, Tensor):
        raise InvalidType(f"tokens must be a [batch, n+1, d+1] tensor, got {type(tokens).__name__}")
    if tokens.ndim != 3 or tokens.shape[1] < 2:
        raise InvalidArgument(f"tokens must be a [batch, n+1, d+1] tensor, got {list(tokens.shape)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InvalidType(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    B, T, _ = tokens.shape
    perm = torch.rand(B, T - 1, generator=generator).argsort(dim=1).to(tokens.device)
    out = tokens.clone()
    out[:, :-1, -1] = tokens[:, :-1, -1].gather(1, perm)
    return out


def recovery_metric(
    clean_out: Float[Tensor, "batch"], corrupted_out: Float[Tensor, "batch"]
) -> Callable[[Tensor], Tensor]:
    """metric(ŷ) = 1 − mean (ŷ − ŷ_clean)² / mean (ŷ_corrupted − ŷ_clean)²: 0 for the corrupted run, 1 for
    the clean one, negative when a patch moves ŷ further from the clean prediction than the corruption did."""
    for name, t in (("clean_out", clean_out), ("corrupted_out", corrupted_out)):
        if not isinstance(t, Tensor) or not t.is_floating_point() or t.ndim != 1 or len(t) == 0:
            got = list(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise InvalidType(f"{name} must be the model's ŷ, a floating tensor [batch], got {got}")
    if clean_out.shape != corrupted_out.shape:
        raise InvalidArgument(
            "clean_out and corrupted_out must have one shape, "
            f"got {list(clean_out.shape)} and {list(corrupted_out.shape)}"
        )
    for name, t in (("clean_out", clean_out), ("corrupted_out", corrupted_out)):
        if not bool(torch.isfinite(t).all()):
            what = "NaN" if bool(torch.isnan(t).any()) else "inf"
            raise InvalidArgument(f"{name} holds {what} (a model whose prediction overflowed): no recovery to measure")
    clean = clean_out.detach()
    base = ((corrupted_out.detach() - clean) ** 2).mean()
    if not base > 0:
        raise InvalidArgument("clean_out and corrupted_out are equal: the corruption changed no prediction")
    return lambda y_hat: 1 - ((y_hat - clean) ** 2).mean() / base
