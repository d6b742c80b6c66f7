"""experiments/theorem51.py refuses what it cannot check with one line and exit status 2, before evaluating."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from interp.checkpoints import save_checkpoint
from tests.helpers import random_diag

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "theorem51.py"


def _script():
    spec = importlib.util.spec_from_file_location("theorem51", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_refuses_a_model_that_is_not_gdpp(tmp_path, capsys):
    path = tmp_path / "diag.safetensors"
    save_checkpoint(path, random_diag(d=3, n_layers=2, param="diag"), 0)
    assert _script().main([str(path), "--eval-seq", "10", "--probe-seq", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "GD++" in err and "DIAG" in err


def test_refuses_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "none.safetensors"
    assert _script().main([str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(missing) in err
