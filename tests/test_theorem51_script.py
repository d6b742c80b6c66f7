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


def test_prints_each_model_and_the_depths(tmp_path, capsys):
    """Two hand-built GD++ (LinearTransformer.from_omegas, ω_xy = ω_yy = 0) on uniform:0: a table each, the worst
    sequences, and the across-depths table."""
    import torch

    from interp.model import LinearTransformer

    paths = []
    for L in (1, 2):
        om = torch.zeros(L, 4, dtype=torch.float64)
        om[:, 0], om[:, 2] = -0.01, -0.03
        paths.append(tmp_path / f"gdpp{L}.safetensors")
        save_checkpoint(paths[-1], LinearTransformer.from_omegas(om, d=3), 0, noise="uniform:0")
    args = [*map(str, paths), "--eval-seq", "64", "--probe-seq", "16", "--worst", "2"]
    assert experiment_script("theorem51").main(args) == 0
    out = capsys.readouterr().out
    assert out.count("Fitted order:") == 2 and "The 2 worst sequences" in out and "### Across depths" in out
    assert "map error" in out and "| 2 |" in out
