"""interp.params: one object per architecture, agreeing with the configs, the checkpoints and the model."""

import copy
import pickle

import pytest
import torch

from interp import moments, params
from interp.config import PARAMS, ModelConfig
from interp.model import LinearTransformer
from tests.helpers import random_diag, random_full, small_batch


def test_one_object_per_config_name():
    assert tuple(params.ARCHS) == PARAMS
    for name in PARAMS:
        arch = params.of(name)
        assert arch.name == name and arch is params.ARCHS[name]
        assert copy.deepcopy(arch) is arch and pickle.loads(pickle.dumps(arch)) is arch
    assert [params.of(n).label for n in PARAMS] == ["FULL", "DIAG", "GD++"]
    with pytest.raises(ValueError, match="param must be one of full, diag, gdpp, got 'ful'"):
        params.of("ful")
    with pytest.raises(ValueError, match="layer-map kind"):
        params.dense_maps("gdpp")  # GD++ hands the moment path DIAG's maps


@pytest.mark.parametrize("name", PARAMS)
def test_weights_shapes_and_counts_as_the_model_and_config_have_them(name):
    cfg = ModelConfig(d=3, n_layers=2, n_heads=3, param=name, dtype="float64")
    model = LinearTransformer(cfg, generator=torch.Generator().manual_seed(0))
    arch = params.of(name)
    assert model.arch is arch and all(b.attn.arch is arch for b in model.blocks)
    expected = {f"blocks.{l}.attn.{w}": s for l in range(2) for w, s in arch.shapes(3, 4).items()}
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == expected  # checkpoint names
    assert [n.split(".")[-1] for n, _ in model.blocks[0].named_parameters()] == list(arch.weights)
    assert cfg.n_params == 2 * 3 * arch.per_head(4) == sum(p.numel() for p in model.parameters())
    kind, W1, W2 = moments.layer_maps(model)
    assert kind == arch.maps and params.dense_maps(kind) == arch.dense
    assert (W2 is None) == arch.has_omegas


def test_diag_and_gdpp_matrices_and_omegas_from_the_paper_equations():
    """P_k = diag(p_x I, p_y), Q_k = diag(q_x I, q_y), ω_ab = Σ_k p_a q_b; GD++ has q_y = 0."""
    for name in ("diag", "gdpp"):
        model = random_diag(d=2, n_layers=2, n_heads=3, param=name, scale=0.5)
        for l, block in enumerate(model.blocks):
            p_x, p_y, q_x, q_y = block.attn.diag_params()
            if name == "gdpp":
                assert torch.equal(q_y, torch.zeros(3, dtype=torch.float64))
            P, Q = block.attn.matrices()
            for k in range(3):
                assert torch.equal(P[k], torch.diag(torch.stack([p_x[k], p_x[k], p_y[k]])))
                assert torch.equal(Q[k], torch.diag(torch.stack([q_x[k], q_x[k], q_y[k]])))
            omega = torch.stack([(a * b).sum() for a in (p_x, p_y) for b in (q_x, q_y)])
            torch.testing.assert_close(model.omegas().stack()[l], omega, rtol=1e-15, atol=0)
    full = random_full(d=2, n_layers=1)
    with pytest.raises(ValueError, match="omegas\\(\\) is defined for diag and gdpp"):
        full.omegas()
    with pytest.raises(ValueError, match="a FULL layer has no"):
        full.blocks[0].attn.diag_params()
    tokens = small_batch(batch=2, d=2, n=3).tokens
    with torch.no_grad():  # the DIAG model as FULL matrices: the same function
        diag = random_diag(d=2, n_layers=2, n_heads=3)
        torch.testing.assert_close(diag.to_full()(tokens), diag(tokens), rtol=1e-12, atol=1e-14)
