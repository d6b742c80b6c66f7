"""experiments/studies/tail_anatomy.py: per-sequence losses and context features, cross-checked against independent
code."""

import numpy as np
import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.run import load
from interp.train import train
from tests.helpers import experiment_script


def test_tail_anatomy_losses_features_and_scan(tmp_path):
    torch.set_num_threads(1)
    mod = experiment_script("studies/tail_anatomy")
    cfg = TrainConfig(model=ModelConfig(d=3, n_layers=2, param="diag"), noise="uniform:2", steps=30, batch=256)
    run = tmp_path / "run"
    train(cfg, run, progress=False)
    a = mod.anatomy(run, n_seq=3000, seed=1)
    model = load(run)
    data = EvalSet("uniform:2", d=3, n_seq=3000, seed=1)
    want = adjusted_loss(model, data)
    assert a["D"].mean().item() == pytest.approx(want.mean, rel=1e-9) and a["D"].max().item() == pytest.approx(
        want.worst
    )
    batch = next(iter(data.batches()))  # the features of the first sequences, from numpy's eigensolver
    x, y = batch.x[0].double().numpy(), batch.y[0].double()
    ev = np.linalg.eigvalsh(x.T @ x)
    assert a["F"][0].tolist() == pytest.approx(
        [ev[-1], ev[0], batch.w[0].norm().item(), batch.sigma[0].item(), y.square().sum().item(),
         batch.x_query[0].norm().item()], rel=1e-5
    )  # fmt: skip
    # the scan at t = 1 is the worst sequence's own prediction: its loss is the worst one
    (pred,) = [p for t, p in a["scan"] if t == 1.0]
    assert 0.5 * (pred - a["target"]) ** 2 >= a["D"].max().item() - 1e-6  # the oracle's own loss is >= 0
    text = mod.render(run, a, top=3)
    assert "worst 3" in text and f"{want.mean:.4g}" in text
