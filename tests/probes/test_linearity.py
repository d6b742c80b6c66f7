"""interp.probes.linearity: the per-layer distance from Theorem 4.1's implicit linear model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import interp
from interp.config import ModelConfig
from interp.probes.implicit import implicit_model
from interp.probes.linearity import LinearitySummary, implicit_maps, layer_linearity
from interp.variants import VariantTransformer, build
from tests.helpers import random_diag, random_full, small_batch

TABLE1 = Path(__file__).resolve().parents[2] / "experiments" / "zoo" / "best" / "uniform5"


def variant(scale=0.15, **fields) -> VariantTransformer:
    model = build(ModelConfig(d=4, n_layers=3, dtype="float64", **fields), init=False)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model.eval()


def worst(lin) -> float:
    return max(lin.context.max().item(), lin.query.max().item(), (lin.gap / (1 + lin.pred.abs())).max().item())


@pytest.mark.parametrize("make", [random_full, random_diag, lambda: random_diag(param="gdpp")])
def test_linear_transformers_are_exactly_linear(make):
    lin = layer_linearity(make(), small_batch(d=4).tokens)
    assert lin.context.shape == (4, 16) and worst(lin) < 1e-10


@pytest.mark.parametrize("arch", ["full2", "diag3"])
def test_trained_zoo_models_are_exactly_linear(arch):
    """The Table 1 zoo's trained models (float32 weights, probed in float64): residual at rounding on 200 sequences."""
    path = TABLE1 / f"{arch}.safetensors"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    data = interp.EvalSet("uniform:5", n_seq=200, seed=1).draw()
    assert worst(layer_linearity(interp.load(path), data.tokens)) < 1e-10


def test_linear_ffn_is_exactly_linear_and_its_fit_is_the_closed_form():
    model, tokens = variant(mlp="linear"), small_batch(d=4).tokens
    lin = layer_linearity(model, tokens)
    assert worst(lin) < 1e-10
    T = implicit_maps(model, tokens)
    assert (lin.T - T).abs().max() <= 1e-9 * T.abs().max()


def test_closed_form_is_theorem_41s_recursion_for_a_linear_transformer():
    model, tokens = random_full(), small_batch(d=4).tokens
    torch.testing.assert_close(implicit_maps(model, tokens), implicit_model(model, tokens).T, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fields", [dict(mlp="relu"), dict(attention="softmax"), dict(attention="kernel")])
def test_nonlinear_variants_leave_the_implicit_linear_model(fields):
    lin = layer_linearity(variant(scale=0.4, **fields), small_batch(d=4).tokens)
    assert lin.context[0].max() < 1e-12 and lin.query[0].max() < 1e-12  # layer 0: the tokens themselves
    assert lin.query[-1].median() > 1e-3 and lin.context[-1].median() > 1e-4


def test_summary_is_a_record_with_the_layer_first():
    summary = layer_linearity(random_full(n_layers=2), small_batch(d=4).tokens).summary()
    assert summary.layer == [0, 1, 2] and summary.n_seq == 16 and len(summary.query_median) == 3
    assert LinearitySummary.from_json(summary.to_json()) == summary
    assert list(summary.to_json())[0] == "layer"


def test_bad_inputs_raise():
    with pytest.raises(interp.InvalidArgument, match="d \\+ 1"):
        layer_linearity(random_full(), small_batch(d=4, n=3).tokens)
    with pytest.raises(interp.InvalidType, match="model"):
        layer_linearity(object(), small_batch(d=4).tokens)
    with pytest.raises(interp.InvalidType, match="tokens"):
        layer_linearity(random_full(), [[0.0]])
