"""experiments/table1.py: discovers runs by their config, takes the best seed, renders paper values beside ours."""

import json

import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.evalcache import EvalCache
from interp.run import Run
from interp.train import train
from tests.helpers import experiment_script

torch.set_num_threads(1)


def load_script():
    return experiment_script("table1")


@pytest.mark.slow
def test_discovers_best_of_seeds_and_renders(tmp_path):
    root = tmp_path / "runs"
    for seed, steps in ((0, 3), (1, 60)):  # seed 1 trains longer, so it is the better seed
        cfg = TrainConfig(
            model=ModelConfig(n_layers=1, param="diag"),
            noise="uniform:5",
            seed=seed,
            steps=steps,
            batch=256,
            n_checkpoints=2,
            log_every=10,
        )
        train(cfg, root / f"whatever_name_{seed}", progress=False)
    (root / "broken").mkdir()
    Run(root / "broken").config_path.write_text("{not json")
    table1 = load_script()
    out, js = tmp_path / "t.md", tmp_path / "t.json"
    rc = table1.main(
        [
            "--roots",
            str(root),
            "--n-seq",
            "2000",
            "--baseline-seq",
            "2000",
            "--cache",
            str(tmp_path / "c.json"),
            "--out",
            str(out),
            "--json",
            str(js),
        ]
    )
    assert rc == 0
    text = out.read_text()
    assert "| 1 | DIAG | " in text and "(0.906)" in text and "| – | Bayes floor |" in text
    cells = json.loads(js.read_text())["cells"]
    assert cells["diag1|uniform:5"]["best_seed"] == 1 and cells["diag1|uniform:5"]["seeds"] == [0, 1]
    cache = EvalCache(tmp_path / "c.json")  # keyed by checkpoint content (interp.evalcache)
    runs = [e["about"]["run"] for e in cache.entries.values() if "whatever_name" in e["about"]["run"]]
    assert len(runs) == 2  # re-runs read these instead of evaluating
    assert "2000 sequences of evaluation seed 0 per model and per baseline" in text
