"""experiments/studies/tail_check.py: the table's evaluation sequences, then a second, disjoint set for the tail."""

import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.run import load
from interp.train import train
from tests.helpers import experiment_script


def test_tail_check_measures_on_the_run_prior_and_two_seeds(tmp_path):
    torch.set_num_threads(1)
    mod = experiment_script("studies/tail_check")
    cfg = TrainConfig(
        model=ModelConfig(d=3, n_layers=1, param="diag"), noise="categorical:1,3", steps=30, batch=256, n_checkpoints=2
    )
    run = tmp_path / "run"
    train(cfg, run, progress=False)
    r = mod.check(run, n_seq=3000, tail_seq=5000, tail_seed=7)
    model = load(run)
    want = adjusted_loss(model, EvalSet("categorical:1,3", d=3, n_seq=3000, seed=0))
    assert r["est"].mean == pytest.approx(want.mean, rel=1e-9) and r["est"].worst == pytest.approx(want.worst)
    tail = adjusted_loss(model, EvalSet("categorical:1,3", d=3, n_seq=5000, seed=7))
    assert r["tail_mean"] == pytest.approx(tail.mean, rel=1e-9) and r["tail_worst"] == pytest.approx(tail.worst)
    assert r["blowups"] == 0 and tail.worst < 100 * 3  # a one-layer model cannot blow up
