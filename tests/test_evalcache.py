"""interp.evalcache: one key (checkpoint bytes, sequences, evaluation code), validated files, the committed caches."""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.evalcache import (
    EvalCache,
    baseline_subject,
    cache_key,
    cached_loss,
    is_loss,
    run_loss,
)
from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_loss
from interp.files import CheckpointError
from interp.run import Run, checkpoint_sha256
from interp.train import train

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One tiny complete run (d = 10, n = 20: a Table 1 setting)."""
    root = tmp_path_factory.mktemp("evalcache")
    cfg = TrainConfig(
        model=ModelConfig(n_layers=1, param="diag"), noise="uniform:5", steps=4, batch=64, n_checkpoints=2, log_every=1
    )
    train(cfg, root / "run", progress=False)
    return root / "run"


def test_the_key_is_the_content_the_sequences_and_the_code():
    data = EvalSet("uniform:5", n_seq=1000, seed=0)
    key = cache_key("a" * 64, data)
    assert key == cache_key("a" * 64, EvalSet("uniform:5", n_seq=1000, seed=0, chunk=7))  # chunk: same sequences
    assert key != cache_key("b" * 64, data)
    for other in (data.replace(n_seq=1001), data.replace(seed=1), data.replace(noise="uniform:4"), data.at_sigma(1)):
        assert cache_key("a" * 64, other) != key
    assert cache_key("a" * 64, data, kind="report") != key
    assert baseline_subject("constrr", {"lam": 8.0}) != baseline_subject("constrr", {"lam": 8.1})


def test_a_copy_of_a_run_elsewhere_with_a_new_mtime_hits_the_cache(trained, tmp_path):
    cache = tmp_path / "evals.json"
    first = run_loss(trained, 500, cache=cache)
    assert first.n_seq == 500 and first == adjusted_loss(Run(trained).load()[0], EvalSet("uniform:5", n_seq=500))
    copy = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(trained, copy)
    for _, ckpt in Run(copy).checkpoints():
        os.utime(ckpt, (1e9, 1e9))  # another mtime, as a fresh clone has
    again = run_loss(copy, 500, cache=cache, compute=False)  # only what the cache holds
    assert again == first
    assert run_loss(copy, 501, cache=cache, compute=False) is None  # other sequences: a miss


def test_a_retrained_checkpoint_misses(trained, tmp_path):
    cache = tmp_path / "evals.json"
    run_loss(trained, 300, cache=cache)
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    run = Run(copy)
    model, _ = run.load()
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    step, path = run.checkpoints()[-1]
    run.save_checkpoint(model, step, noise="uniform:5", seed=0)
    assert run_loss(copy, 300, cache=cache, compute=False) is None


def test_files_are_validated(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match=f"{path}: a JSON list, not an evaluation cache"):
        EvalCache(path)
    said = []
    assert len(EvalCache(path, strict=False, log=said.append)) == 0 and "c.json" in said[0]  # a report's: dropped

    data = EvalSet("uniform:5", n_seq=10, seed=0)
    good = LossEstimate(0.5, 0.01, 10, 0.4, 2.0)
    cache = EvalCache(path.with_name("d.json"))
    est, hit = cached_loss("s" * 64, data, cache, lambda: good, {"run": "some/run"})
    assert (est, hit) == (good, False)
    assert cached_loss("s" * 64, data, EvalCache(cache.path), None) == (good, True)

    stored = json.loads(cache.path.read_text())
    (entry,) = stored["entries"].values()
    entry["value"]["mean"] = 0.001  # edited by hand: no longer its check
    cache.path.write_text(json.dumps(stored))
    said = []
    assert cached_loss("s" * 64, data, EvalCache(cache.path, log=said.append), None) == (None, False)
    assert len(said) == 1 and "d.json" in said[0] and "some/run" in said[0] and "check" in said[0]

    edited = EvalCache(None)
    edited.put("k", {"mean": "0.5", "stderr": 0.1, "n_seq": 10})  # the wrong type, with a matching check
    said = []
    edited.log = said.append
    assert edited.get("k", lambda v: is_loss(v, 10)) is None and "wrong shape" in said[0]
    assert not is_loss({"mean": 0.5, "stderr": 0.1, "n_seq": 9}, 10) and not is_loss([0.5], 10)
    assert not is_loss({"mean": True, "stderr": 0.1, "n_seq": 10})


def test_a_cache_of_the_old_format_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"model|runs/x|10|1796016218|100000|0": {"mean": 1.0, "stderr": 0.1, "n_seq": 100000}}))
    said = []
    assert len(EvalCache(path, log=said.append)) == 0 and "older interp" in said[0]


def test_committed_caches_hit_in_a_fresh_clone():
    """The committed caches are keyed by checkpoint content: zoo and grid runs hit, whatever their mtime here."""
    zoo = EvalCache(RESULTS / "table1_evals.json")
    for name in ("diag1_uniform5", "full4_uniform5", "seeds/full7_uniform5_s0", "drift/full4_cat13_s2"):
        run = REPO / "experiments" / "zoo" / "studies" / "short_recipe" / name  # the former top level (issue 49)
        step, ckpt = Run(run).checkpoints()[-1]
        cfg = Run(run).config()
        key = cache_key(checkpoint_sha256(ckpt), EvalSet(cfg.noise, n_seq=100_000, seed=0))
        assert is_loss(zoo.get(key), 100_000), name
    grid = EvalCache(RESULTS / "table1_grid_evals.json")
    assert len(grid) > 50
    for cache in (zoo, grid):
        for entry in cache.entries.values():
            assert is_loss(entry["value"]) and entry["about"]["run"]


def test_evalcache_sits_below_probes_sweep_table_and_the_report():
    tree = ast.parse((REPO / "interp" / "evalcache.py").read_text())
    names = {
        node.module.split(".")[1]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("interp.")
    }
    below = {"limits", "files", "checkpoints", "config", "evalset", "evaluate", "model", "run", "tasks"}
    assert names <= below, names - below
