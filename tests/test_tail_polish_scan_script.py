"""experiments/studies/tail_polish_scan.py: each κ polishes a copy of the run's model with interp.train.polish, and
the scores are the table's mean on eval seed 0 and blowup_rate.py's count on seed 11."""

import dataclasses

import torch

import interp.train as T
from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses
from interp.run import load
from interp.train import train
from tests.helpers import experiment_script

NOISE = "uniform:2"


def test_each_kappa_polishes_a_copy_and_scores_it(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    mod = experiment_script("studies/tail_polish_scan")
    cfg = TrainConfig(model=ModelConfig(d=3, n_layers=2, param="diag"), noise=NOISE, steps=30, batch=128)
    train(cfg, tmp_path / "run", progress=False)
    for name, value in (("TABLE_SEQ", 3000), ("GUARD_CAP", 0.02)):  # 100·d scaled down to 0.06
        monkeypatch.setattr(mod, name, value)
    for name, value in (("POLISH_BATCH", 512), ("POLISH_TAIL_BATCH", 128), ("POLISH_ITERS", 5)):
        monkeypatch.setattr(T, name, value)
    model = load(tmp_path / "run")
    # the run's own row: the same numbers as an evaluation of its model on the two sets
    table = adjusted_losses({"m": model}, EvalSet(NOISE, d=3, n=cfg.n, n_seq=3000, seed=0))["m"]
    count = adjusted_losses({"m": model}, EvalSet(NOISE, d=3, n=cfg.n, n_seq=2000, seed=11))["m"]
    s = mod.score(model, cfg, 2000)
    assert (s["mean"], s["worst"]) == (table.mean().item(), table.max().item())
    assert s["blowups"] == int((count > 0.06).sum()) and 10 < s["blowups"] < 1990
    assert s["tame_mean"] == count[count <= 0.06].mean().item() and s["count_mean"] == count.mean().item()
    # a κ row is the model polished by interp.train.polish with that polish_tail, from the run's weights
    polished = model.embed(model.cfg)
    T.polish(polished, dataclasses.replace(cfg, polish_tail=0.5), torch.Generator().manual_seed(12345), 1)
    want = mod.score(polished, cfg, 2000)
    out = tmp_path / "scan.md"
    argv = ["tail_polish_scan.py", str(tmp_path / "run"), "--kappa", "0.5", "--rounds", "1", "--n-seq", "2000"]
    monkeypatch.setattr("sys.argv", [*argv, "--out", str(out)])
    assert mod.main() == 0
    rows = out.read_text().splitlines()
    assert len(rows) == 4 and rows[2].startswith(f"| the run | {s['mean']:.5g} | {s['worst']:.4g} | {s['blowups']} |")
    assert rows[3].startswith(f"| polished again, κ = 0.5 | {want['mean']:.5g} | {want['worst']:.4g} |")
    assert load(tmp_path / "run").state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(load(tmp_path / "run").parameters(), model.parameters()))
