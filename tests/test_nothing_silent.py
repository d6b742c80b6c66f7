"""Issue 51, nothing silent: what used to run on silently wrong (an asymmetric covariance, complex weights, an empty
grid), end in a traceback, or raise a raw AttributeError / KeyError / RuntimeError / IndexError from the Python API
now stops in one line naming what is wrong."""

from __future__ import annotations

import time

import pytest
import torch

import interp
from interp import patching
from interp.evalset import EvalSet
from interp.files import InterpError
from interp.limits import MAX_SWEEP_RUNS
from interp.sweep import SweepError, expand, load_grid_file
from tests.helpers import random_full, small_batch


def one_line(err: BaseException) -> str:
    text = str(err)
    assert isinstance(err, InterpError) and isinstance(err, (ValueError, TypeError)), repr(err)
    assert "\n" not in text and text, text
    return text


@pytest.fixture(scope="module")
def obj():
    class Objects:
        model = random_full(d=2, n_layers=2, n_heads=1)
        batch = small_batch(batch=8, d=2, n=5)
        corrupted = patching.permute_labels(batch.tokens, torch.Generator().manual_seed(1))

    o = Objects()
    o.P, o.Q = o.model.P.detach(), o.model.Q.detach()
    _, o.cache = o.model.run_with_cache(o.batch.tokens)
    o.metric = patching.recovery_metric(o.model(o.batch.tokens), o.model(o.corrupted))
    o.data = EvalSet("uniform:1", d=2, n=5, n_seq=16)
    return o


def shape_changing_metric():
    calls = iter(range(100))
    return lambda y_hat: y_hat[: next(calls) % 2 + 1]


# (id, call, a word the message holds): each used to run silently or raise a raw error.
BAD_CALLS = [
    # item 1: nothing silently wrong
    ("x_cov-asymmetric", lambda o: interp.sample_tasks(4, d=2, n=3, noise="fixed:0", generator=torch.Generator(),
                                                      x_cov=torch.tensor([[1.0, 0.9], [0.0, 1.0]])), "symmetric"),
    ("x_cov-indefinite", lambda o: interp.sample_tasks(4, d=2, n=3, noise="fixed:0", generator=torch.Generator(),
                                                      x_cov=[[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
    ("x_cov-complex", lambda o: interp.sample_tasks(4, d=2, n=3, noise="fixed:0", generator=torch.Generator(),
                                                   x_cov=torch.eye(2, dtype=torch.complex64)), "complex"),
    ("from_omegas-complex", lambda o: interp.LinearTransformer.from_omegas(torch.ones(1, 4, dtype=torch.cfloat), d=2),
     "complex"),
    ("from_omegas-int", lambda o: interp.LinearTransformer.from_omegas(torch.ones(1, 4, dtype=torch.long), d=2),
     "int64"),
    ("from_matrices-complex", lambda o: interp.LinearTransformer.from_matrices(o.P.cfloat(), o.Q.cfloat()), "complex"),
    ("from_matrices-int", lambda o: interp.LinearTransformer.from_matrices(o.P.int(), o.Q.int()), "int32"),
    ("expand-empty-list", lambda o: expand({"arch": "diag", "layers": []}), "layers"),
    # item 7: the Python API speaks in one line
    ("patch-cache-of-strings", lambda o: patching.get_act_patch_resid_pre(
        o.model, o.corrupted, {k: "x" for k in o.cache.keys()}, o.metric), "clean_cache"),
    ("patch-metric-none", lambda o: patching.get_act_patch_resid_pre(o.model, o.corrupted, o.cache, lambda y: None),
     "patching_metric"),
    ("patch-metric-changes-shape", lambda o: patching.get_act_patch_resid_pre(
        o.model, o.corrupted, o.cache, shape_changing_metric()), "one shape"),
    ("patch-bad-axis", lambda o: patching.generic_activation_patch(
        o.model, o.corrupted, o.cache, o.metric, patching.layer_pos_patch_setter, "resid_pre", ("layer", "bogus")),
     "bogus"),
    ("evaluate-predictor-shape", lambda o: interp.evaluate_predictors({"p": lambda b: torch.zeros(3)}, o.data),
     "'p'"),
    ("evaluate-predictor-type", lambda o: interp.evaluate_predictors({"p": lambda b: [0.0] * len(b.target)}, o.data),
     "'p'"),
    ("expand-unknown-where", lambda o: expand({"layers": [1]}, [{"where": {"bogus": 1}, "lr": 0.1}]), "bogus"),
    ("tokens-meta", lambda o: o.model(o.batch.tokens.to("meta")), "meta"),
    ("run_with_cache-meta", lambda o: o.model.run_with_cache(o.batch.tokens.to("meta")), "meta"),
    ("from_matrices-meta", lambda o: interp.LinearTransformer.from_matrices(o.P.to("meta"), o.Q.to("meta")), "meta"),
    ("from_omegas-meta", lambda o: interp.LinearTransformer.from_omegas(torch.ones(1, 4, device="meta"), d=2), "meta"),
    ("pos_slice-out-of-range", lambda o: o.model.run_with_cache(o.batch.tokens, pos_slice=100), "100"),
    ("pos_slice-list-out-of-range", lambda o: o.model.run_with_cache(o.batch.tokens, pos_slice=[0, -7]), "-7"),
    # item 5: NaN outputs are NaN, not "equal"
    ("recovery_metric-nan", lambda o: patching.recovery_metric(o.model(o.batch.tokens) * float("nan"),
                                                               o.model(o.corrupted)), "NaN"),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_a_bad_call_is_one_interp_error(obj, case):
    _, call, needle = case
    with pytest.raises(InterpError) as info:
        call(obj)
    assert needle in one_line(info.value), str(info.value)


def test_what_still_works(obj):
    """The checks refuse nothing they used to take: int lists as ω's, a symmetric covariance, in-range pos_slice."""
    assert interp.LinearTransformer.from_omegas([[1, 0, 0, 0]], d=2).omegas().omega_xx.item() == 1.0
    cov = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    a = interp.sample_tasks(4, d=2, n=3, noise="fixed:0", generator=torch.Generator().manual_seed(0), x_cov=cov)
    assert a.tokens.shape == (4, 4, 3)
    _, cache = obj.model.run_with_cache(obj.batch.tokens, pos_slice=-1)
    assert cache["blocks.0.hook_resid_pre"].shape[1] == 1
    grid = patching.get_act_patch_resid_pre(obj.model, obj.corrupted, obj.cache, lambda y: float(y.mean()))
    assert grid.shape == (2, 6)
    est = interp.evaluate_predictors({"zero": lambda b: torch.zeros(len(b.target))}, obj.data)
    assert est["zero"].n_seq == 16


def test_a_huge_grid_is_refused_at_once_naming_the_limit():
    options = {"arch": ["full", "diag", "gdpp"], "layers": list(range(1, 11)), "seed": list(range(10_000))}
    start = time.perf_counter()
    with pytest.raises(SweepError) as info:
        expand(options)
    assert (
        time.perf_counter() - start < 1 and "300000 runs" in str(info.value) and str(MAX_SWEEP_RUNS) in str(info.value)
    )


def test_a_large_grid_expands_in_seconds():
    """Each run's config used to re-evaluate every type annotation (typing.get_type_hints): 2 ms a run."""
    options = {"arch": ["full", "diag"], "layers": [1, 2, 3, 4, 5], "seed": list(range(300))}
    start = time.perf_counter()
    specs = expand(options)
    assert len(specs) == 3000 and all(s.cfg is not None for s in specs)
    assert time.perf_counter() - start < 3, time.perf_counter() - start


@pytest.mark.parametrize(
    "text, needle",
    [
        ("layers = []\narch = 'diag'\n", "layers = []"),
        ("seeds = []\n", "seed = []"),
        ("layers = [1]\n[[override]]\nwhere = 3\nlr = 0.1\n", "where must be a table"),
        ("layers = [1]\n[[override]]\nwhere = 'arch'\nlr = 0.1\n", "where must be a table"),
    ],
)
def test_a_bad_grid_file_is_one_line(tmp_path, text, needle):
    path = tmp_path / "grid.toml"
    path.write_text(text)
    with pytest.raises(SweepError) as info:
        load_grid_file(path)
    assert needle in one_line(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("rows", [[[1.0, 0.9], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
def test_x_cov_flag_refuses_what_is_not_symmetric_positive_definite(tmp_path, capsys, rows):
    import json

    from tests.helpers import run_cli

    cov = tmp_path / "cov.json"
    cov.write_text(json.dumps(rows))
    argv = ["train", "--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--steps", "5"]
    code, _, err = run_cli(capsys, *argv, "--x-cov", cov, "--out", tmp_path / "run")
    assert code == 2 and err.count("\n") == 1 and ("symmetric" in err or "positive definite" in err), err
    assert not (tmp_path / "run").exists()
