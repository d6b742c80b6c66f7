"""interp.Run: one writer per run directory, resume trusts the resume file, torn metrics and early kills recover;
resolve_model says what a path is."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from interp import checkpoints as ck
from interp.config import ModelConfig, TrainConfig
from interp.files import CheckpointError
from interp.model import LinearTransformer
from interp.run import Run, RunLocked, resolve_model
from interp.train import train
from tests.helpers import random_diag, random_full, run_cli

train_mod = importlib.import_module("interp.train")  # the module (interp.train is also the function)
CFG = TrainConfig(
    model=ModelConfig(d=2, n_layers=1, param="full"),
    noise="uniform:1",
    n=4,
    batch=16,
    steps=40,
    log_every=5,
    resume_every=10,
    n_checkpoints=5,
)
TRAIN_ARGS = [
    "--arch",
    "full",
    "--layers",
    "1",
    "--d",
    "2",
    "--n",
    "4",
    "--batch",
    "16",
    "--steps",
    "40",
    "--noise",
    "uniform:1",
    "--save-every",
    "10",
    "--checkpoints",
    "5",
    "--no-progress",
]
# A writer as Run.lock() is one (exclusive flock on the lock file, PID inside), without importing torch.
HOLD = (
    "import fcntl, os, sys, time\nos.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
    "os.write(fd, str(os.getpid()).encode())\nprint('locked', flush=True)\ntime.sleep(120)\n"
)


@pytest.fixture
def holder(tmp_path):
    """A second process holding the writer lock of tmp_path/'run' until the test ends."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(Run(tmp_path / "run").lock_path)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    proc.kill()
    proc.wait()


def _final(run_dir):
    return load_file(str(Run(run_dir).checkpoints()[-1][1]))


def _assert_same_weights(a_dir, b_dir):
    a, b = _final(a_dir), _final(b_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class Interrupt(Exception):
    pass


def _interrupt_at(monkeypatch, calls: int):
    """Make training raise on its `calls`-th loss evaluation (a crash between saves)."""
    real, count = train_mod._loss, [0]

    def loss(*args, **kwargs):
        count[0] += 1
        if count[0] == calls:
            raise Interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_mod, "_loss", loss)


def test_second_writer_is_refused_naming_the_holder_pid(tmp_path, holder, capsys):
    with pytest.raises(RunLocked, match=rf"PID {holder.pid}\b") as err:
        train(CFG, tmp_path / "run", progress=False)
    assert err.value.pid == holder.pid and isinstance(err.value, ValueError)
    assert Run(tmp_path / "run").writer() == holder.pid
    code, _, err_text = run_cli(capsys, "train", *TRAIN_ARGS, "--out", tmp_path / "run")
    assert code == 2 and f"PID {holder.pid}" in err_text and err_text.count("\n") == 1
    assert not Run(tmp_path / "run").is_run(tmp_path / "run")  # nothing was written
    holder.kill()
    holder.wait()
    assert Run(tmp_path / "run").writer() is None  # the lock died with its process, nothing to clean
    train(CFG, tmp_path / "run", progress=False)
    assert Run(tmp_path / "run").is_complete()


@pytest.mark.slow
def test_two_concurrent_trainings_one_wins_the_other_names_its_pid(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    args = [*TRAIN_ARGS]
    args[args.index("--steps") + 1] = "20000"  # long enough to still be running when the second one starts
    cmd = [sys.executable, "-m", "interp.cli", "train", *args, "--out", str(tmp_path / "run")]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while Run(tmp_path / "run").writer() is None and time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    first.kill()
    first.wait()
    assert second.returncode == 2 and f"PID {first.pid}" in second.stderr and second.stderr.count("\n") == 1
    steps = {s for s, _ in Run(tmp_path / "run").checkpoints()}
    assert steps and all(s <= 20000 for s in steps)


def test_readers_say_the_run_is_training(tmp_path, holder, capsys):
    train(CFG, tmp_path / "done", progress=False)
    run = Run(tmp_path / "run")
    for src in (Run(tmp_path / "done").config_path, *[p for _, p in Run(tmp_path / "done").checkpoints()]):
        (run.path / src.relative_to(tmp_path / "done")).parent.mkdir(parents=True, exist_ok=True)
        (run.path / src.relative_to(tmp_path / "done")).write_bytes(src.read_bytes())
    code, out, err = run_cli(capsys, "eval", run.path, "--no-baselines", "--n-seq", "200")
    assert code == 0 and f"is training (PID {holder.pid})" in err and "last checkpoint is step 40" in err


def test_edited_config_is_refused_on_resume(tmp_path, monkeypatch, capsys):
    _interrupt_at(monkeypatch, 25)
    with pytest.raises(Interrupt):
        train(CFG, tmp_path / "run", progress=False)
    monkeypatch.undo()
    run = Run(tmp_path / "run")
    original = run.config_path.read_text()
    for edit, needle in (
        (lambda c: c["model"].update(n_layers=2), "model.n_layers: 1 in the checkpoint, 2 in the config"),
        (
            lambda c: (c["model"].update(param="diag"), c.update(start_as="diag")),
            "model.param: 'full' in the checkpoint",
        ),
        (lambda c: c.update(noise="uniform:3"), "noise: 'uniform:1' in the checkpoint"),
        (lambda c: c.update(batch=32), "batch: 16 in the checkpoint, 32 in the config"),
        (lambda c: c.update(x_cov=[[2.0, 0.0], [0.0, 1.0]]), "x_cov: None in the checkpoint, [[2.0, 0.0], [0.0, 1.0]]"),
    ):
        cfg = json.loads(original)
        edit(cfg)
        run.config_path.write_text(json.dumps(cfg))
        with pytest.raises(CheckpointError, match="disagrees with") as err:
            train(CFG, run.path, resume=True, progress=False)
        assert needle in str(err.value) and "\n" not in str(err.value)
        code, _, err_text = run_cli(capsys, "train", "--resume", run.path, "--no-progress")
        assert code == 2 and needle in err_text and err_text.count("\n") == 1
    run.config_path.write_text(original)
    train(CFG, run.path, resume=True, progress=False)
    train(CFG, tmp_path / "straight", progress=False)
    _assert_same_weights(tmp_path / "straight", run.path)


@pytest.mark.parametrize(
    "option,value",
    [
        ("--batch", "32"),
        ("--save-every", "7"),
        ("--checkpoints", "9"),
        ("--preset", "paper"),
        ("--clip", "0"),
        ("--device", "cpu:0"),
        ("--init-noise", "0.1"),
        ("--x-cov", "diag:2,1"),
        ("--out", "elsewhere"),
    ],
)
def test_resume_refuses_options_that_change_the_run(tmp_path, capsys, option, value):
    code, _, _ = run_cli(capsys, "train", *TRAIN_ARGS, "--out", tmp_path / "run")
    assert code == 0
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    value = str(tmp_path / value) if option == "--out" else value
    code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", option, value)
    assert code == 2 and option in err and err.count("\n") == 1
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before
    code, _, err = run_cli(
        capsys, "train", "--resume", tmp_path / "run", "--batch", "16", "--out", tmp_path / "run", "--no-progress"
    )
    assert code == 0, err  # the same values are fine


def test_torn_metrics_line_is_dropped_on_resume(tmp_path, monkeypatch):
    _interrupt_at(monkeypatch, 28)
    with pytest.raises(Interrupt):
        train(CFG, tmp_path / "run", progress=False)
    monkeypatch.undo()
    run = Run(tmp_path / "run")
    with open(run.metrics_path, "a") as fh:
        fh.write('{"step": 30, "loss": 0.')  # a power loss mid-line
    assert [r["step"] for r in run.read_metrics()] == [5, 10, 15, 20, 25]
    train(CFG, run.path, resume=True, progress=False)
    assert [r["step"] for r in run.read_metrics()] == list(range(5, 41, 5))
    train(CFG, tmp_path / "straight", progress=False)
    _assert_same_weights(tmp_path / "straight", run.path)
    run.metrics_path.write_text('{"step": 5}\nnot json\n{"step": 10}\n')
    with pytest.raises(CheckpointError, match=rf"{run.metrics_path}: line 2 is not a metrics row"):
        run.read_metrics()


def test_run_killed_before_its_first_resume_state_restarts(tmp_path, monkeypatch, capsys):
    cfg = dataclasses.replace(CFG, n_checkpoints=1)  # checkpoints at 0 and 40 only: the first resume state is at 10
    _interrupt_at(monkeypatch, 4)
    with pytest.raises(Interrupt):
        train(cfg, tmp_path / "run", progress=False)
    monkeypatch.undo()
    run = Run(tmp_path / "run")
    assert run.is_run(run.path) and not run.has_resume()
    code, _, err = run_cli(capsys, "train", "--resume", run.path, "--no-progress")
    assert code == 0, err
    train(cfg, tmp_path / "straight", progress=False)
    _assert_same_weights(tmp_path / "straight", run.path)
    assert [r["step"] for r in run.read_metrics()] == list(range(5, 41, 5))


def test_fresh_train_into_a_run_is_refused(tmp_path):
    train(CFG, tmp_path / "run", progress=False)
    with pytest.raises(CheckpointError, match="already holds files"):
        train(CFG, tmp_path / "run", progress=False)


def test_trajectory_of_mixed_architectures_is_refused(tmp_path):
    train(CFG, tmp_path / "run", progress=False)
    run = Run(tmp_path / "run")
    run.save_checkpoint(LinearTransformer(ModelConfig(d=2, n_layers=2)), 7)
    with pytest.raises(CheckpointError, match="model.n_layers: 2 in the checkpoint, 1 in the config") as err:
        run.trajectory()
    assert str(run.checkpoint_path(7)) in str(err.value) and "\n" not in str(err.value)


def test_resume_file_without_train_config_still_resumes_and_checks_the_model(tmp_path, monkeypatch):
    _interrupt_at(monkeypatch, 25)
    with pytest.raises(Interrupt):
        train(CFG, tmp_path / "run", progress=False)
    monkeypatch.undo()
    run = Run(tmp_path / "run")
    tensors, meta = ck.read_tensors(run.resume_path)
    run.write_resume(tensors, {k: v for k, v in meta.items() if k != "train_config"})  # as written before Run
    cfg = json.loads(run.config_path.read_text())
    run.config_path.write_text(json.dumps({**cfg, "model": {**cfg["model"], "n_heads": 2}}))
    with pytest.raises(CheckpointError, match="model.n_heads: 1 in the checkpoint, 2 in the config"):
        train(CFG, run.path, resume=True, progress=False)
    run.config_path.write_text(json.dumps(cfg))
    train(CFG, run.path, resume=True, progress=False)
    train(CFG, tmp_path / "straight", progress=False)
    _assert_same_weights(tmp_path / "straight", run.path)


# ---------------------------------------------------------------------------- resolve_model
LAM = ((2.0, 0.5, 0.0), (0.5, 1.0, 0.0), (0.0, 0.0, 0.5))  # an input covariance Λ, x ~ N(0, Λ), d = 3


@pytest.fixture
def n40_run(tmp_path):
    """A run directory (d = 3, n = 40, uniform:2 on x ~ N(0, Λ)) holding checkpoints at steps 0, 5 and 10."""
    run = Run(tmp_path / "run")
    run.path.mkdir()
    models = {step: random_diag(d=3, n_layers=2, seed=step) for step in (0, 5, 10)}
    run.write_config(TrainConfig(model=models[0].cfg, noise="uniform:2", n=40, steps=10, x_cov=LAM))
    for step, model in models.items():
        run.save_checkpoint(model, step, noise="uniform:2", seed=0)
    return run, models


def _same_model(a: LinearTransformer, b: LinearTransformer) -> bool:
    return a.cfg == b.cfg and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_resolve_model_of_a_run_directory_is_its_last_checkpoint_and_its_config(n40_run):
    run, models = n40_run
    m = resolve_model(str(run.path))
    assert m.path == run.path and m.checkpoint == run.checkpoint_path(10) and m.step == 10
    assert _same_model(m.model, models[10])
    assert (m.noise, m.d, m.n, m.x_cov) == ("uniform:2", 3, 40, run.config().x_cov) and m.x_cov is not None
    assert m.run is not None and m.run.path == run.path and m.config == run.config()


def test_resolve_model_of_a_checkpoint_inside_a_run_reads_the_runs_config(n40_run):
    run, models = n40_run
    m = resolve_model(run.checkpoint_path(5))
    assert m.path == m.checkpoint == run.checkpoint_path(5) and m.step == 5 and _same_model(m.model, models[5])
    assert (m.noise, m.d, m.n, m.x_cov) == ("uniform:2", 3, 40, run.config().x_cov)
    assert m.run.path == run.path and m.config.n == 40


def test_resolve_model_of_a_loose_checkpoint_reads_its_metadata(n40_run, tmp_path):
    run, models = n40_run
    loose = tmp_path / "loose.safetensors"
    loose.write_bytes(run.checkpoint_path(5).read_bytes())  # the same file, outside the run: no config to read
    m = resolve_model(loose)
    assert m.checkpoint == loose and m.step == 5 and _same_model(m.model, models[5])
    assert (m.noise, m.d, m.n, m.x_cov, m.run, m.config) == ("uniform:2", 3, None, None, None, None)
    bare = tmp_path / "bare.safetensors"
    ck.save_checkpoint(bare, models[0], 3)  # no training prior recorded
    assert (resolve_model(bare).noise, resolve_model(bare).step) == (None, 3)


def test_resolve_model_errors_name_the_file(n40_run, tmp_path):
    run, _ = n40_run
    for path, match in (
        (tmp_path / "nope.safetensors", "no such file"),
        (tmp_path, "holds no checkpoints"),
    ):
        with pytest.raises(CheckpointError, match=match) as err:
            resolve_model(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    run.config_path.write_text("{not json")
    for path in (run.path, run.checkpoint_path(5)):
        with pytest.raises(CheckpointError, match="unreadable run config") as err:
            resolve_model(path)
        assert str(run.config_path) in str(err.value)


def test_a_loose_copy_of_a_checkpoint_keeps_what_it_was_trained_on_or_says_it_lost_it(tmp_path):
    """Issue: a loose copy of an --x-cov checkpoint was evaluated on x ~ N(0, I) without a note."""
    model = random_full(d=3, n_layers=1)
    cfg = TrainConfig.from_dict(
        {"model": model.cfg.to_dict(), "noise": "uniform:2", "n": 7, "x_cov": [[2, 0, 0], [0, 1, 0], [0, 0, 0.5]]}
    )
    run = Run(tmp_path / "run")
    run.path.mkdir()
    saved = run.save_checkpoint(model, 0, cfg)
    loose = shutil.copy(saved, tmp_path / "loose.safetensors")
    m = resolve_model(loose)
    assert m.run is None and m.noise == "uniform:2" and m.n == 7 and m.note is None
    assert m.x_cov == ((2.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.5))
    old = tmp_path / "old.safetensors"
    ck.save_checkpoint(old, model, 0, noise="uniform:2")  # as a trainer that recorded no covariance wrote it
    m = resolve_model(old)
    assert m.x_cov is None and m.n is None and "records no input covariance" in m.note and "\n" not in m.note


def test_an_exported_run_is_one_file_that_says_how_it_was_trained(n40_run, tmp_path):
    """Run.export: the zoo ships each model as one standalone file (the last checkpoint and the run's config), and
    resolve_model reads that file as the run would be read, without the run directory."""
    run, models = n40_run
    out = run.export(tmp_path / "zoo" / "diag2.safetensors")
    assert sorted(p.name for p in out.parent.iterdir()) == ["diag2.safetensors"]  # no trajectory, no resume state
    m = resolve_model(out)
    assert m.run is None and m.step == 10 and _same_model(m.model, models[10])
    assert m.config == run.config() and (m.noise, m.n, m.x_cov) == ("uniform:2", 40, run.config().x_cov)
    assert m.note is None


def test_an_embedded_config_that_disagrees_with_its_file_is_refused(n40_run, tmp_path):
    run, models = n40_run
    out = run.export(tmp_path / "a.safetensors")
    tensors, meta = ck.read_tensors(out)
    bad = dict(meta, train_config=dict(run.config().to_dict(), noise="uniform:3"))
    ck.save_tensors(tmp_path / "b.safetensors", tensors, bad)
    with pytest.raises(CheckpointError, match="embedded training config's noise") as err:
        resolve_model(tmp_path / "b.safetensors")
    assert str(tmp_path / "b.safetensors") in str(err.value)
    junk = dict(meta, train_config={"model": models[0].cfg.to_dict(), "not_an_option": 1})
    ck.save_tensors(tmp_path / "c.safetensors", tensors, junk)
    with pytest.raises(CheckpointError, match="bad embedded training config"):
        resolve_model(tmp_path / "c.safetensors")
    with pytest.raises(ck.InvalidArgument, match="embed_config"):
        ck.save_checkpoint(tmp_path / "d.safetensors", models[0], 0, embed_config=True)


def test_the_machine_record_keeps_the_segments_that_made_the_weights(tmp_path):
    """A resumed Adam segment replaces the ones it replays and any polish; a polish replaces an earlier polish; a start
    from step 0 replaces everything; a torn or foreign line is refused naming the file."""
    run = Run(tmp_path / "r")
    run.path.mkdir()
    assert run.trained_on() == []  # a run trained before interp recorded its machine
    a, b = {"path": "kernel avx512", "threads": 1}, {"path": "kernel avx2", "threads": 1}
    steps = lambda: [(r["step"], r["phase"], r["path"]) for r in run.trained_on()]  # noqa: E731
    run.record_trained_on(0, "adam", a, fresh=True)
    run.record_trained_on(500, "adam", a)
    run.record_trained_on(1000, "adam", b)
    run.record_trained_on(2000, "polish", b)
    assert steps() == [(0, "adam", "kernel avx512"), (500, "adam", "kernel avx512"), (1000, "adam", "kernel avx2"),
                       (2000, "polish", "kernel avx2")]  # fmt: skip
    run.record_trained_on(2000, "polish", a)  # killed in the polish: it restarts from the last Adam step
    assert steps()[-1] == (2000, "polish", "kernel avx512") and len(steps()) == 4
    run.record_trained_on(1000, "adam", a)  # resumed from step 1000 again: that segment and the polish are replayed
    assert steps() == [(0, "adam", "kernel avx512"), (500, "adam", "kernel avx512"), (1000, "adam", "kernel avx512")]
    run.record_trained_on(0, "adam", b, fresh=True)
    assert steps() == [(0, "adam", "kernel avx2")]
    assert Run.owns(run.trained_on_path) is None  # no config yet: not a run
    run.trained_on_path.write_text('{"step": 0, "phase": "adam"}\n[1, 2]\n')
    with pytest.raises(CheckpointError, match=r"trained_on.jsonl: line 2 is not a segment"):
        run.trained_on()
