"""`interp drift`: the per-layer table, the JSON of every checkpoint, and one-line errors with exit status 2."""

from __future__ import annotations

import json

import pytest

from interp.cli import main
from interp.config import ModelConfig, TrainConfig
from interp.run import Run
from tests.probes.test_drift import _interpolated

STEPS = [0, 3, 10, 30, 100]


@pytest.fixture
def run_dir(tmp_path):
    """A 2-layer FULL run (d = 4, n = 10) whose checkpoints move from a random FULL model into a DIAG one."""
    run = Run(tmp_path / "run")
    run.path.mkdir()
    cfg = TrainConfig(
        model=ModelConfig(d=4, n_layers=2, param="full", dtype="float64"), noise="uniform:1", n=10, steps=100
    )
    run.write_config(cfg)
    for i, step in enumerate(STEPS):
        run.save_checkpoint(_interpolated(i / (len(STEPS) - 1)), step, noise="uniform:1")
    return run.path


def drift(args, capsys):
    try:
        code = main(["drift", *map(str, args)])
    except SystemExit as exit:  # argparse errors exit through Parser.error
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_drift_table_and_json(run_dir, tmp_path, capsys):
    out = tmp_path / "drift.json"
    code, stdout, _ = drift([run_dir, "--eval-seq", 2_000, "--fit-seq", 256, "--json", out], capsys)
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "interp-drift" and doc["command"][:2] == ["interp", "drift"]
    assert doc["noise"] == "uniform:1" and doc["n"] == 10 and doc["eval_seq"] == 2_000 and doc["n_layers"] == 2
    assert "x_cov" not in doc  # trained on x ~ N(0, I)
    recs = doc["checkpoints"]
    assert [r["step"] for r in recs] == STEPS
    for key in (
        "share_outside",
        "share_outside_read",
        "x_block_dev_P",
        "x_block_dev_Q",
        "r2_diag",
        "r2_equivariant",
        "remainder_sv",
        "remainder_block_share",
        "loss",
        "loss_diag_projection",
        "gap_diag_projection",
        "gap_per_layer",
        "omega",
    ):
        assert key in recs[0], key
    assert len(recs[0]["remainder_sv"][0]) == 8  # the largest 8 of 25
    assert recs[0]["share_outside"][0] > 0.1 and recs[-1]["share_outside"][0] < 1e-28
    assert abs(recs[-1]["gap_diag_projection"]) < 1e-12
    lines = stdout.splitlines()
    table = [ln for ln in lines if ln.split() and ln.split()[0] in {"0", "10", "100"}]
    assert len(table) == 6  # first, middle, last checkpoint x 2 layers
    assert "off-DIAG" in stdout and "DIAG R²" in stdout and sum("adjusted loss" in ln for ln in lines) == 3
    assert f"wrote {out}" in stdout


def test_drift_without_json_or_per_layer(run_dir, capsys):
    code, stdout, _ = drift(
        [run_dir, "--eval-seq", 500, "--fit-seq", 128, "--no-per-layer", "--noise", "fixed:0.5"], capsys
    )
    assert code == 0 and "fixed:0.5" in stdout and "wrote" not in stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["/no/such/run"], "RUN_DIR"),
        (["--eval-seq", "0"], "--eval-seq"),
        (["--noise", "gaussian:3"], "--noise"),
        (["--json", "/no/such/dir/x.json"], "--json"),
    ],
)
def test_drift_bad_input_is_one_line_exit_2(run_dir, capsys, args, needle):
    full = args if args[0].startswith("/no/such/run") else [run_dir, *args]
    code, _, err = drift(full, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_drift_not_a_run_dir(tmp_path, capsys):
    code, _, err = drift([tmp_path], capsys)
    assert code == 2 and Run.CONFIG_FILE in err and len(err.strip().splitlines()) == 1


def test_drift_of_a_run_trained_on_x_cov(tmp_path, capsys):
    """A run trained on x ~ N(0, Λ) is measured on such inputs: each checkpoint's loss is its adjusted loss on
    EvalSet(x_cov=Λ) of the drift seed (not on N(0, I)), and the JSON records Λ."""
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.probes.drift import EVAL_SEED

    lam = [[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.5]]
    run = Run(tmp_path / "run")
    run.path.mkdir()
    cfg = TrainConfig(
        model=ModelConfig(d=4, n_layers=2, param="full", dtype="float64"), noise="uniform:1", n=10, x_cov=lam
    )
    run.write_config(cfg)
    model = _interpolated(0.5)
    run.save_checkpoint(model, 0, noise="uniform:1")
    out = tmp_path / "drift.json"
    code, stdout, err = drift([run.path, "--eval-seq", 500, "--fit-seq", 64, "--no-per-layer", "--json", out], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    on = lambda x_cov: EvalSet("uniform:1", d=4, n=10, n_seq=500, seed=EVAL_SEED, x_cov=x_cov)  # noqa: E731
    assert doc["x_cov"] == lam and "x ~ N(0, diag:2,1,1,0.5)" in stdout
    assert doc["checkpoints"][0]["loss"] == pytest.approx(adjusted_loss(model, on(lam)).mean, rel=1e-12)
    assert doc["checkpoints"][0]["loss"] != pytest.approx(adjusted_loss(model, on(None)).mean, rel=1e-2)


def test_drift_of_a_family_run_is_refused_and_a_quad_run_measured_on_its_task(tmp_path, capsys):
    """A RetNet has no P, Q to project onto DIAG: one line naming it; a FULL trained with --quad is measured on the
    quadratic task it trained on."""
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.probes.drift import EVAL_SEED
    from interp.train import train

    retnet = tmp_path / "retnet"
    train(
        TrainConfig(model=ModelConfig(d=4, n_layers=1, attention="retnet"), steps=2, batch=8, n=10),
        retnet,
        progress=False,
    )
    code, _, err = drift([retnet], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{retnet} trains a retnet model" in err
    quad = tmp_path / "quad"
    result = train(
        TrainConfig(model=ModelConfig(d=4, n_layers=1), steps=2, batch=8, n=10, quad=1.0), quad, progress=False
    )
    out = tmp_path / "drift.json"
    code, _, err = drift([quad, "--eval-seq", 300, "--fit-seq", 64, "--no-per-layer", "--json", out], capsys)
    assert code == 0, err
    on_task = EvalSet("uniform:5", d=4, n=10, n_seq=300, seed=EVAL_SEED, quad=1.0)
    loss = json.loads(out.read_text())["checkpoints"][-1]["loss"]
    assert loss == pytest.approx(adjusted_loss(result.model, on_task).mean, rel=1e-9)
