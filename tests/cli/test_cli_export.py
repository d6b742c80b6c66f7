"""`interp export`: a run's last checkpoint as one standalone file that every command reads like the run."""

from __future__ import annotations

import torch

from interp.config import ModelConfig, TrainConfig
from interp.run import Run, resolve_model
from interp.variants import build
from tests.helpers import random_diag, run_cli


def _run(tmp_path, steps=(0, 7)):
    run = Run(tmp_path / "run")
    run.path.mkdir()
    models = {s: random_diag(d=3, n_layers=2, seed=s) for s in steps}
    cfg = TrainConfig(model=models[steps[0]].cfg, noise="categorical:1,3", n=12, steps=7, lr=1e-3, seed=4)
    run.write_config(cfg)
    for s, m in models.items():
        run.save_checkpoint(m, s, cfg)
    return run, models, cfg


def test_export_writes_the_last_checkpoint_with_the_runs_config(tmp_path, capsys):
    run, models, cfg = _run(tmp_path)
    out = tmp_path / "ship" / "diag2.safetensors"
    out.parent.mkdir()
    code, stdout, err = run_cli(capsys, "export", run.path, "-o", out)
    assert code == 0, err
    assert f"wrote {out}: DIAG L=2, step 7 of 7, categorical:1,3" in stdout
    m = resolve_model(out)
    assert m.run is None and m.config == run.config() and (m.noise, m.n, m.step) == ("categorical:1,3", 12, 7)
    assert all(torch.equal(a, b) for a, b in zip(m.model.state_dict().values(), models[7].state_dict().values()))
    code, stdout, err = run_cli(capsys, "eval", out, "--eval-seq", "200", "--no-baselines")
    assert code == 0 and "categorical:1,3" in stdout, err  # the file says what it was trained on


def test_a_family_run_exports_as_its_variant(tmp_path, capsys):
    """A DeltaNet run exports as DeltaNet: named so, and the file holds the same weights and config."""
    model = build(ModelConfig(d=3, n_layers=2, attention="delta"), generator=torch.Generator().manual_seed(1))
    run = Run(tmp_path / "run")
    run.path.mkdir()
    cfg = TrainConfig(model=model.cfg, noise="uniform:1", n=12, steps=3, seed=0)
    run.write_config(cfg)
    run.save_checkpoint(model, 3, cfg)
    out = tmp_path / "delta2.safetensors"
    code, stdout, err = run_cli(capsys, "export", run.path, "-o", out)
    assert code == 0, err
    assert f"wrote {out}: delta L=2, step 3 of 3, uniform:1" in stdout
    m = resolve_model(out)
    assert m.model.cfg == model.cfg and m.config == run.config()
    assert all(torch.equal(a, b) for a, b in zip(m.model.state_dict().values(), model.state_dict().values()))


def test_export_errors_are_one_line_naming_the_argument(tmp_path, capsys):
    run, _, _ = _run(tmp_path)
    loose = tmp_path / "loose.safetensors"
    loose.write_bytes(run.checkpoint_path(7).read_bytes())
    for argv, words in (
        ([run.path, "-o", tmp_path / "x.pt"], "must end in .safetensors"),
        ([loose, "-o", tmp_path / "y.safetensors"], "not a run directory"),
        ([run.path, "-o", run.checkpoint_path(7)], "one of this command's inputs"),
        ([run.path, "-o", tmp_path / "nodir" / "z.safetensors"], "does not exist"),
        ([tmp_path / "nope", "-o", tmp_path / "z.safetensors"], "no such file"),
    ):
        code, _, err = run_cli(capsys, "export", *argv)
        assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "y.safetensors").exists() and not (tmp_path / "x.pt").exists()
