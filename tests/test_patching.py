"""interp.patching against a float64 forward written from the definition, and against hand-written patch loops."""

import pytest
import torch
from einops import einsum

import interp
from interp import patching
from tests.helpers import random_full, small_batch

ZOO = "experiments/zoo/studies/short_recipe/full4_uniform5"


def reference_run(P, Q, tokens, patch=None):
    """(ŷ, activations) of e_i ← e_i + Σ_k P_k Σ_{j≤n} e_j (e_jᵀ Q_k e_i) in float64; patch(name, l, act) may
    return a replacement for any activation."""
    acts = {}

    def put(name, l, act):
        new = patch(name, l, act) if patch else None
        acts[name, l] = act if new is None else new
        return acts[name, l]

    Z = tokens.double()
    n = Z.shape[1] - 1
    for l in range(P.shape[0]):
        Z = put("resid_pre", l, Z)
        S = put("stats", l, einsum(Z[:, :n], Z[:, :n], "b j a, b j c -> b a c"))
        scores = einsum(Z[:, :n], Q[l], Z, "b j a, k a c, b i c -> b k i j")
        pattern = torch.cat([scores, torch.zeros_like(scores[..., :1])], dim=-1)  # the query is no key
        patched = put("pattern", l, pattern)
        if patched is pattern:
            U = einsum(P[l], S, Q[l], Z, "k a c, b c e, k e f, b i f -> b i k a")  # P_k S Q_k e_i
        else:
            U = einsum(P[l], patched, Z, "k a c, b k i j, b j c -> b i k a")  # Σ_j P_k e_j pattern[k, i, j]
        U = put("result", l, U)
        Z = put("resid_post", l, Z + put("attn_out", l, U.sum(2)))
    return -Z[:, -1, -1], acts


def put_pos(act, clean, i):
    act[:, i[1]] = clean[:, i[1]]
    return act


def put_head(act, clean, i):  # result [batch, pos, head, D]
    act[:, :, i[1]] = clean[:, :, i[1]]
    return act


def put_pos_head(act, clean, i):
    act[:, i[1], i[2]] = clean[:, i[1], i[2]]
    return act


def put_pattern_head(act, clean, i):  # pattern [batch, head, query, key]
    act[:, i[1]] = clean[:, i[1]]
    return act


CELLS = {  # function -> (activation, axes, how one cell writes the clean activation into the corrupted one)
    patching.get_act_patch_resid_pre: ("resid_pre", ("layer", "pos"), put_pos),
    patching.get_act_patch_resid_post: ("resid_post", ("layer", "pos"), put_pos),
    patching.get_act_patch_attn_out: ("attn_out", ("layer", "pos"), put_pos),
    patching.get_act_patch_attn_head_out_all_pos: ("result", ("layer", "head"), put_head),
    patching.get_act_patch_attn_head_out_by_pos: ("result", ("layer", "pos", "head"), put_pos_head),
    patching.get_act_patch_attn_head_pattern_all_pos: ("pattern", ("layer", "head"), put_pattern_head),
    patching.get_act_patch_stats: ("stats", ("layer",), lambda act, clean, i: clean.clone()),
}


@pytest.mark.parametrize("fn", list(CELLS), ids=lambda f: f.__name__)
def test_patching_matches_the_float64_reference_forward(fn):
    model = random_full(d=3, n_layers=3, n_heads=2, scale=0.2)
    P, Q = model.P.detach(), model.Q.detach()
    clean = small_batch(batch=4, d=3, n=5).tokens
    corrupted = patching.permute_labels(clean, torch.Generator().manual_seed(1))
    _, clean_cache = model.run_with_cache(clean)
    result = fn(model, corrupted, clean_cache, lambda y_hat: y_hat)  # a [batch] metric keeps every sequence
    name, axes, replace = CELLS[fn]
    sizes = {"layer": 3, "pos": 6, "head": 2}
    assert result.shape == (*[sizes[a] for a in axes], 4)
    _, ref_clean = reference_run(P, Q, clean)
    for index in torch.cartesian_prod(*[torch.arange(sizes[a]) for a in axes]).reshape(-1, len(axes)):
        layer = int(index[0])
        cell = [int(i) for i in index]
        patch = lambda n, l, act: (
            replace(act.clone(), ref_clean[name, layer], cell) if (n, l) == (name, layer) else None
        )
        expected, _ = reference_run(P, Q, corrupted, patch)
        torch.testing.assert_close(result[tuple(index.tolist())], expected, rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def zoo_run():
    model = interp.load(ZOO)
    clean = interp.sample_tasks(64, d=10, n=20, noise="uniform:5", generator=torch.Generator().manual_seed(0))
    corrupted = patching.permute_labels(clean.tokens, torch.Generator().manual_seed(1))
    y_clean, clean_cache = model.run_with_cache(clean.tokens)
    with torch.no_grad():
        metric = patching.recovery_metric(y_clean, model(corrupted))
    return model, clean.tokens, corrupted, clean_cache, metric


@pytest.mark.parametrize(
    "fn, name, where",
    [
        (patching.get_act_patch_resid_pre, "blocks.{}.hook_resid_pre", lambda p: (slice(None), p)),
        (patching.get_act_patch_attn_out, "blocks.{}.hook_attn_out", lambda p: (slice(None), p)),
        (
            patching.get_act_patch_attn_head_out_all_pos,
            "blocks.{}.attn.hook_result",
            lambda h: (slice(None), slice(None), h),
        ),
        (patching.get_act_patch_resid_post, "blocks.{}.hook_resid_post", lambda p: (slice(None), p)),
        (patching.get_act_patch_attn_head_pattern_all_pos, "blocks.{}.attn.hook_pattern", lambda h: (slice(None), h)),
        (patching.get_act_patch_stats, "blocks.{}.attn.hook_stats", None),
    ],
    ids=["resid_pre", "attn_out", "head_out", "resid_post", "pattern", "stats"],
)
def test_patching_matches_a_hand_written_loop_and_changes_nothing(zoo_run, fn, name, where):
    model, _, corrupted, clean_cache, metric = zoo_run
    before = corrupted.clone(), {k: v.clone() for k, v in clean_cache.items()}, model.P.detach().clone()
    result = fn(model, corrupted, clean_cache, metric)
    second = result.shape[1] if result.ndim == 2 else 1
    by_hand = torch.zeros(result.shape)
    for layer in range(4):
        for j in range(second):

            def hook(act, hook, layer=layer, j=j):
                act = act.clone()
                clean = clean_cache[name.format(layer)]
                if where is None:
                    return clean.clone()
                act[where(j)] = clean[where(j)]
                return act

            with torch.no_grad():
                out = model.run_with_hooks(corrupted, fwd_hooks=[(name.format(layer), hook)])
            by_hand[(layer, j) if result.ndim == 2 else layer] = metric(out)
    assert torch.equal(result, by_hand)
    assert torch.equal(corrupted, before[0]) and torch.equal(model.P, before[2])
    assert all(torch.equal(clean_cache[k], v) for k, v in before[1].items())


def test_the_documented_clean_to_corrupted_experiment(zoo_run):
    """The numbers quoted in interp.patching's docstring (and the tutorial)."""
    model, _, corrupted, clean_cache, metric = zoo_run
    pre = patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric)
    post = patching.get_act_patch_resid_post(model, corrupted, clean_cache, metric)
    assert pre.shape == post.shape == (4, 21)
    assert torch.equal(pre[1:], post[:-1])  # resid_post of layer l is resid_pre of layer l + 1
    # permuting context labels leaves the query token unchanged: 0 to float rounding (here and below: the patched
    # run takes the hooked per-token path, the metric's corrupted baseline the hook-free forward; ŷ differs ~1e-6)
    assert abs(float(pre[0, -1])) < 1e-5
    torch.testing.assert_close(pre[:, -1], torch.tensor([0.0, 0.64, 0.90, 0.94]), rtol=0, atol=0.01)
    assert post[-1, -1] == 1 and post[-1, :-1].abs().max() < 1e-5  # only the final query state is read out
    assert pre[:, :-1].abs().max() < 0.2  # one context token is one of n terms of every S^l
    attn = patching.get_act_patch_attn_out(model, corrupted, clean_cache, metric)
    assert abs(attn[0, -1] - 0.64) < 0.01
    stats = patching.get_act_patch_stats(model, corrupted, clean_cache, metric)
    assert stats[0] < -100 and stats[1:].abs().max() < 0.5


def test_permute_labels_and_recovery_metric():
    tokens = small_batch(batch=3, d=2, n=6).tokens
    before = tokens.clone()
    out = patching.permute_labels(tokens, torch.Generator().manual_seed(0))
    assert torch.equal(tokens, before)
    assert torch.equal(out[:, :, :-1], tokens[:, :, :-1]) and torch.equal(out[:, -1], tokens[:, -1])
    assert torch.equal(out[:, :-1, -1].sort(1).values, tokens[:, :-1, -1].sort(1).values)
    assert not torch.equal(out, tokens)
    clean, corrupted = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 0.0])
    metric = patching.recovery_metric(clean, corrupted)
    assert metric(clean) == 1 and metric(corrupted) == 0 and metric(torch.tensor([2.0, 1.0])) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="changed no prediction"):
        patching.recovery_metric(clean, clean)


def test_bad_inputs_get_one_line_errors():
    model = random_full(d=2, n_layers=2, n_heads=1)
    clean = small_batch(batch=2, d=2, n=4).tokens
    _, cache = model.run_with_cache(clean)
    _, partial = model.run_with_cache(clean, names_filter=lambda name: "resid_post" in name)
    metric = lambda y: y.sum()
    with pytest.raises(ValueError, match="clean_cache has no 'blocks.0.hook_resid_pre'"):
        patching.get_act_patch_resid_pre(model, clean, partial, metric)
    with pytest.raises(ValueError, match="same shape"):
        patching.get_act_patch_resid_pre(model, clean[:1], cache, metric)
    with pytest.raises(ValueError, match="corrupted_tokens"):
        patching.get_act_patch_resid_pre(model, clean[0], cache, metric)
    with pytest.raises(ValueError, match="activation_name"):
        patching.generic_activation_patch(
            model, clean, cache, metric, patching.layer_pos_patch_setter, "mlp_out", ("layer", "pos")
        )
