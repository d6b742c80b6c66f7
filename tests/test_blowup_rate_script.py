"""experiments/blowup_rate.py: the library's estimate on the run's own prior and threshold."""

import torch

from interp.config import ModelConfig, TrainConfig
from interp.evaluate import blowup_rate
from interp.run import load
from interp.train import train
from tests.helpers import experiment_script


def test_blowup_rate_script_uses_the_run_prior_and_100_d(tmp_path):
    torch.set_num_threads(1)
    mod = experiment_script("blowup_rate")
    cfg = TrainConfig(
        model=ModelConfig(d=3, n_layers=1, param="diag"), noise="categorical:1,3", steps=30, batch=256, n_checkpoints=2
    )
    run = tmp_path / "run"
    train(cfg, run, progress=False)
    got = mod.rate(run, n_seq=4000, seed=2)
    want = blowup_rate(load(run), "categorical:1,3", 3, cfg.n, 300.0, n_seq=4000, seed=2)
    assert got == want and got.threshold == 300.0 and got.n_seq == 4000
    low = blowup_rate(load(run), "categorical:1,3", 3, cfg.n, 1e-3, n_seq=4000, seed=2)
    assert low.hits > got.hits  # the threshold is what decides a hit


def test_count_is_the_plain_count_of_the_run_prior(tmp_path, monkeypatch):
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_losses

    torch.set_num_threads(1)
    mod = experiment_script("blowup_rate")
    cfg = TrainConfig(model=ModelConfig(d=3, n_layers=1, param="diag"), noise="uniform:2", steps=20, batch=128)
    run = tmp_path / "run"
    train(cfg, run, progress=False)
    diff = adjusted_losses({"m": load(run)}, EvalSet("uniform:2", d=3, n=cfg.n, n_seq=3000, seed=11))["m"]
    monkeypatch.setattr(mod, "GUARD_CAP", 0.02)  # a threshold of 0.06 that ordinary sequences cross
    want = int((diff > 0.06).sum())
    assert 100 < want < 2900 and mod.count(run, 3000) == want
