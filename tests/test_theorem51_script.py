"""experiments/theorem51.py refuses what it cannot check with one line and exit status 2, before evaluating."""

from __future__ import annotations

from interp.checkpoints import save_checkpoint
from tests.helpers import experiment_script, random_diag


def test_refuses_a_model_that_is_not_gdpp(tmp_path, capsys):
    path = tmp_path / "diag.safetensors"
    save_checkpoint(path, random_diag(d=3, n_layers=2, param="diag"), 0)
    assert experiment_script("theorem51").main([str(path), "--eval-seq", "10", "--probe-seq", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "GD++" in err and "DIAG" in err


def test_refuses_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "none.safetensors"
    assert experiment_script("theorem51").main([str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(missing) in err
