"""experiments/studies/blowup_rate.py: a plain count on the run's own prior, at 100·d."""

import torch

from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses
from interp.run import load
from interp.train import train
from tests.helpers import experiment_script

NOISE = "uniform:2"


def _trained(tmp_path):
    """A one-layer DIAG run (d = 3) on NOISE, trained for 20 steps, and its config."""
    torch.set_num_threads(1)
    cfg = TrainConfig(model=ModelConfig(d=3, n_layers=1, param="diag"), noise=NOISE, steps=20, batch=128)
    train(cfg, tmp_path / "run", progress=False)
    return tmp_path / "run", cfg


def test_count_is_the_plain_count_of_the_run_prior_at_100_d(tmp_path, monkeypatch):
    mod = experiment_script("studies/blowup_rate")
    run, cfg = _trained(tmp_path)
    diff = adjusted_losses({"m": load(run)}, EvalSet(NOISE, d=3, n=cfg.n, n_seq=3000, seed=11))["m"]
    monkeypatch.setattr(mod, "GUARD_CAP", 0.02)  # 100·d scaled down to 0.06, which ordinary sequences cross
    want = int((diff > 0.06).sum())
    r = mod.count(run, 3000)
    assert 100 < want < 2900 and r["blowups"] == want
    assert r["rate"] == want / 3000 and abs(r["stderr"] - want**0.5 / 3000) < 1e-12
    assert r["worst"] == diff.max().item()
    assert r["which"] == (diff > 0.06).nonzero().flatten().tolist()


def test_main_writes_one_row_a_run(tmp_path, monkeypatch):
    mod = experiment_script("studies/blowup_rate")
    run, _ = _trained(tmp_path)
    out = tmp_path / "rates.md"
    monkeypatch.setattr("sys.argv", ["blowup_rate.py", str(run), "--n-seq", "2000", "--out", str(out)])
    assert mod.main() == 0
    rows = out.read_text().splitlines()
    assert rows[0].startswith("| run | blow-ups in 2,000 |") and len(rows) == 3
    assert rows[2].startswith(f"| `{run}` | 0 | 0 ± 0 | 1.00 |")  # a one-layer model does not blow up


def test_which_prints_each_run_and_the_shared_sequences(tmp_path, monkeypatch, capsys):
    mod = experiment_script("studies/blowup_rate")
    run, _ = _trained(tmp_path)
    monkeypatch.setattr(mod, "GUARD_CAP", 0.02)
    want = mod.count(run, 2000)["which"]
    monkeypatch.setattr("sys.argv", ["blowup_rate.py", str(run), str(run), "--n-seq", "2000", "--which"])
    assert mod.main() == 0
    out = capsys.readouterr().out
    assert f"{run}: {want}" in out and f"blown up in every run: {want}" in out and len(want) > 10
