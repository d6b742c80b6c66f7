"""Issue 51, nothing silent, on runs and their files: a finished run whose final checkpoint was deleted is restored bit
for bit (never reported done with an earlier checkpoint's loss), and interp eval says which step it read; a bad
metrics loss, sweep.json or checkpoint metadata is one line naming the file; a lock names its live holder; a refused
report creates nothing; interp table on a read-only root caches in the user's cache directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp import checkpoints as ck
from interp.config import ModelConfig, TrainConfig
from interp.files import CheckpointError
from interp.run import Run, RunLocked
from interp.sweep import SweepError, read_summary, run_task
from interp.train import train
from tests.helpers import run_cli

CFG = TrainConfig(
    model=ModelConfig(d=2, n_layers=1, param="diag"),
    noise="uniform:1",
    n=4,
    batch=16,
    steps=20,
    log_every=5,
    resume_every=5,
    n_checkpoints=3,
)


def same_file(a: bytes, b: bytes) -> bool:
    """Two safetensors files hold the same header (as JSON: safetensors writes its metadata map in no fixed order) and
    the same tensor bytes."""
    size_a, size_b = (int.from_bytes(x[:8], "little") for x in (a, b))
    head_a, head_b = json.loads(a[8 : 8 + size_a]), json.loads(b[8 : 8 + size_b])
    return head_a == head_b and a[8 + size_a :] == b[8 + size_b :]


@pytest.fixture
def finished(tmp_path) -> Run:
    train(CFG, tmp_path / "root" / "run", progress=False)
    return Run(tmp_path / "root" / "run")


def test_a_deleted_final_checkpoint_is_restored_bit_for_bit(finished, capsys):
    final = finished.checkpoint_path(20)
    original = final.read_bytes()
    final.unlink()
    code, _, err = run_cli(capsys, "eval", finished.path, "--eval-seq", "200", "--no-baselines")
    assert code == 0 and "read the checkpoint of step 1, not the run's last step 20" in err, err
    assert "final checkpoint is missing" in err
    result = run_task(str(finished.path), CFG.to_dict(), eval_seq=200)
    assert result["status"] == "done", result
    assert same_file(final.read_bytes(), original)  # the same weights bit for bit, the same metadata
    assert "written again from the resume state" in capsys.readouterr().err
    code, _, err = run_cli(capsys, "eval", finished.path, "--eval-seq", "200", "--no-baselines")
    assert code == 0 and "not the run's last step" not in err


def test_a_deleted_final_checkpoint_is_not_reported_done_with_an_earlier_loss(finished):
    """The sweep's rerun: the run is trained on (restored), and its loss is the final model's."""
    want = run_task(str(finished.path), CFG.to_dict(), eval_seq=200)["adjusted_loss"]
    finished.checkpoint_path(20).unlink()
    got = run_task(str(finished.path), CFG.to_dict(), eval_seq=200)["adjusted_loss"]
    assert got == want and finished.is_complete()


def test_a_non_numeric_loss_in_a_finished_runs_metrics_is_one_line(finished, capsys):
    rows = finished.metrics_path.read_text().splitlines()
    rows[-1] = json.dumps({**json.loads(rows[-1]), "loss": "abc"})
    finished.metrics_path.write_text("\n".join(rows) + "\n")
    code, _, err = run_cli(capsys, "train", "--resume", finished.path)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(finished.metrics_path) in err and "'abc'" in err


@pytest.mark.parametrize("summary", [[1, 2], {"runs": [1]}, {"runs": {"NAME": "done"}}])
def test_a_sweep_json_of_the_wrong_shape_is_one_line(tmp_path, capsys, summary):
    root = tmp_path / "root"
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps(summary))
    with pytest.raises(SweepError, match="sweep.json"):
        read_summary(root)
    argv = ["sweep", "--root", root, "--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--steps", "5"]
    code, _, err = run_cli(capsys, *argv, "--eval-seq", "0", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and str(root / "sweep.json") in err, err
    assert sorted(p.name for p in root.iterdir()) == ["sweep.json"]  # refused before any run started


def test_a_grid_override_whose_where_is_not_a_table_is_one_line(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text("arch = 'diag'\nlayers = [1]\n[[override]]\nwhere = 3\nlr = 0.1\n")
    code, _, err = run_cli(capsys, "sweep", "--root", tmp_path / "root", "--grid", grid, "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "where must be a table" in err, err


@pytest.mark.parametrize("noise", [5, ["uniform:1"], {"kind": "uniform"}])
def test_a_checkpoint_whose_noise_has_the_wrong_type_names_the_file_and_field(finished, tmp_path, noise):
    path = tmp_path / "loose.safetensors"
    tensors, meta = ck.read_tensors(finished.checkpoint_path(20))
    ck.save_tensors(path, tensors, {**meta, "noise": noise})
    with pytest.raises(CheckpointError) as info:
        ck.load_file(path)
    assert str(path) in str(info.value) and "noise" in str(info.value)


def test_a_lock_names_its_live_holder_not_the_stale_pid_in_the_file(tmp_path):
    """The lock belongs to an open file: here a process holds it while the file names another, gone, PID (as when a
    forked worker keeps its dead writer's lock, or a writer has not yet written its PID)."""
    run = Run(tmp_path / "run")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from interp.run import Run\n"
         f"with Run({str(run.path)!r}).lock():\n    print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        run.lock_path.write_text(f"{dead.pid}\n")  # the file now names a process that is gone
        with pytest.raises(RunLocked) as info:
            with run.lock():
                pass
        assert info.value.pid == holder.pid and f"PID {holder.pid}" in str(info.value), str(info.value)
        assert run.writer() == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_a_refused_report_creates_no_directory_inside_a_run(finished, capsys):
    out = finished.checkpoint_dir / "sub" / "r.html"
    code, _, err = run_cli(capsys, "report", "-o", out, finished.path)
    assert code == 2 and err.count("\n") == 1 and "write elsewhere" in err, err
    assert not (finished.checkpoint_dir / "sub").exists()


def test_table_on_a_read_only_root_caches_in_the_users_cache_directory(finished, tmp_path, monkeypatch, capsys):
    """A read-only root (os.access says so; these tests may run as root, where chmod would not)."""
    import interp.table as table

    root = finished.path.parent
    real_access = os.access
    monkeypatch.setattr(table.os, "access", lambda p, mode: False if Path(p) == root else real_access(p, mode))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    before = sorted(p.name for p in root.iterdir())
    text, _ = table.table1([root], arch=["diag"], layers=[1], noise=["uniform:1"], n_seq=200, baseline_seq=None)
    cached = list((tmp_path / "xdg" / "interp").glob("table1_evals-root-*.json"))
    assert len(cached) == 1 and cached[0].stat().st_size > 0
    assert sorted(p.name for p in root.iterdir()) == before  # nothing written into the root
    assert "is not writable; evaluations are cached in" in capsys.readouterr().err
    assert time.time() >= 0 and text
