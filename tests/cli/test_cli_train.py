"""Every `interp train` error path: exit status 2 and one line naming the argument, never a traceback."""

import pytest

from interp import checkpoints as ck
from interp.run import Run
from tests.helpers import random_full, run_cli


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    ck.save_checkpoint(path, random_full(d=3, n_layers=2, n_heads=1), 0)
    return path


@pytest.mark.parametrize(
    "argv,name",
    [
        (["--noise", "uniform:-1"], "--noise"),
        (["--noise", "fixed:-0.5"], "--noise"),
        (["--noise", "gaussian:1"], "--noise"),
        (["--layers", "0"], "--layers"),
        (["--layers", "two"], "--layers"),
        (["--arch", "sparse"], "--arch"),
        (["--d", "-3"], "--d"),
        (["--lr", "-1"], "--lr"),
        (["--steps", "0"], "--steps"),
        (["--init", "/nonexistent/ckpt.safetensors"], "--init"),
        (["--resume", "/nonexistent/run"], "--resume"),
        (["--x-cov", "diag:1,-1"], "--x-cov"),
        (["--x-cov", "diag:1,x"], "--x-cov"),
        (["--x-cov", "cov.txt"], "--x-cov"),
        (["--x-cov", "/nonexistent/cov.json"], "--x-cov"),
        (["--x-cov", "diag:1,2"], "--x-cov"),  # 2×2 for the default d = 10
        ([], "--out"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, tmp_path, argv, name):
    if "--init" not in argv and "--resume" not in argv and argv:
        argv = [*argv, "--out", str(tmp_path / "run")]
    code, _, err = run_cli(capsys, "train", *argv)
    assert code == 2
    assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_d_mismatch_with_init_checkpoint(capsys, tmp_path, ckpt):
    code, _, err = run_cli(
        capsys, "train", "--init", str(ckpt), "--d", "10", "--layers", "2", "--out", str(tmp_path / "r")
    )
    assert code == 2 and "--d" in err and "d=3" in err and err.count("\n") == 1


def test_unreadable_or_corrupt_init(capsys, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"garbage")
    code, _, err = run_cli(capsys, "train", "--init", str(bad), "--d", "3", "--out", str(tmp_path / "r"))
    assert code == 2 and str(bad) in err and err.count("\n") == 1


def test_out_directory_not_empty(capsys, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("keep me")
    code, _, err = run_cli(capsys, "train", "--out", str(tmp_path / "run"))
    assert code == 2 and "--out" in err
    assert (tmp_path / "run" / "x").read_text() == "keep me"


def test_resume_of_a_non_run_and_conflicting_args(capsys, tmp_path):
    (tmp_path / "plain").mkdir()
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "plain"))
    assert code == 2 and Run.CONFIG_FILE in err and err.count("\n") == 1
    code, _, _ = run_cli(
        capsys,
        "train",
        "--arch",
        "diag",
        "--layers",
        "1",
        "--d",
        "2",
        "--n",
        "4",
        "--batch",
        "8",
        "--steps",
        "5",
        "--save-every",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "ok"),
    )
    assert code == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "ok"), "--d", "5")
    assert code == 2 and "--d" in err and err.count("\n") == 1


def test_x_cov_from_a_json_file(capsys, tmp_path):
    """--x-cov FILE.json: a full matrix lands in the run config; a bad file is one line naming it."""
    import json

    cov = tmp_path / "cov.json"
    cov.write_text(json.dumps([[2.0, 0.5], [0.1, 1.0]]))
    argv = ["train", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "5", "--no-progress"]
    code, _, err = run_cli(capsys, *argv, "--x-cov", cov, "--out", tmp_path / "bad")
    assert code == 2 and err.count("\n") == 1 and "--x-cov" in err and str(cov) in err and "symmetric" in err
    cov.write_text(json.dumps([[2.0, 0.5], [0.5, 1.0]]))
    code, out, err = run_cli(capsys, *argv, "--x-cov", cov, "--out", tmp_path / "run")
    assert code == 0, err
    assert Run(tmp_path / "run").config().x_cov == ((2.0, 0.5), (0.5, 1.0))
    assert "x ~ N(0, a full 2×2 matrix)" in out
    code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", "--x-cov", "diag:2,1")
    assert code == 2 and err.count("\n") == 1 and "--x-cov: diag:2,1" in err and "has a full 2×2 matrix" in err
    code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", "--x-cov", cov, "--no-progress")
    assert code == 0, err  # the same matrix is fine


def test_help_for_every_command(capsys):
    from interp.cli import COMMANDS

    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0 and "usage: interp" in out


def test_resuming_a_finished_run_says_so_and_recomputes_nothing(capsys, tmp_path):
    """--resume on a finished run prints its recorded final loss and exits 0: no training, no evaluation, no
    checkpoint touched, with or without its resume state."""
    run_dir = tmp_path / "run"
    argv = ["--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "20"]
    code, _, err = run_cli(capsys, "train", *argv, "--no-progress", "--out", run_dir)
    assert code == 0, err
    recorded = Run(run_dir).read_metrics()[-1]["loss"]
    before = {p.name: p.read_bytes() for _, p in Run(run_dir).checkpoints()}
    for drop_resume in (False, True):
        if drop_resume:
            Run(run_dir).resume_path.unlink()
        code, out, err = run_cli(capsys, "train", "--resume", run_dir, "--no-progress")
        assert code == 0, err
        assert "already finished at step 20" in out and f"{recorded:.4f}" in out and "nan" not in out
        assert "eval on" not in out  # nothing recomputed
        assert {p.name: p.read_bytes() for _, p in Run(run_dir).checkpoints()} == before
