"""Hostile files: a crafted resume file's optimizer state, FIFOs, devices, /proc files and sparse files in every read
path, and checkpoints that are not their run's model.

Every case ends in one line naming the file (exit status 2 from the CLI) or a CheckpointError in Python, promptly:
never a SIGSEGV, a hang, a read until memory runs out, or a silent reset of Adam's state. The tests run as root too
(CI does): nothing here relies on permissions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import interp
from interp import checkpoints as ck
from interp import evalcache, moments
from interp.config import ModelConfig, TrainConfig, covariance_spec
from interp.files import CheckpointError, read_regular_file
from interp.limits import MAX_CHECKPOINT_BYTES
from interp.model import LinearTransformer
from interp.report.data import Settings, _read_cache, drift_records, make_entry
from interp.run import Run, checkpoint_sha256, load_with_digest, resolve_model
from interp.sweep import SweepError, load_grid_file, read_summary
from interp.sweep.planning import last_step
from interp.train import _optimizer_tensors, adam, train
from tests.helpers import random_diag, run_cli

train_mod = importlib.import_module("interp.train")  # the module (interp.train is also the function)
CFG = TrainConfig(
    model=ModelConfig(d=2, n_layers=1, param="full"),
    noise="uniform:1",
    n=4,
    batch=16,
    steps=20,
    log_every=5,
    resume_every=5,
    n_checkpoints=3,
)


def _one_line(code, err, *needles):
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in err, (needle, err)


@contextlib.contextmanager
def _prompt(seconds: int = 20):
    """A hang (a FIFO opened for reading, /dev/zero read to the end) fails the test instead of stalling the suite."""

    def hung(*_):
        raise TimeoutError(f"no answer within {seconds} s: a read hung")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def paused(tmp_path_factory):
    """A run killed between saves: its resume state is at step 10 of 20 (and a straight run to compare with)."""
    root = tmp_path_factory.mktemp("hostile_files")
    real, count = train_mod._loss, [0]

    def loss(*args, **kwargs):
        count[0] += 1
        if count[0] == 13:
            raise Interrupt
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_mod, "_loss", loss)
        with pytest.raises(Interrupt):
            train(CFG, root / "paused", progress=False)
    assert ck.read_tensors(Run(root / "paused").resume_path)[1]["step"] == 10
    train(CFG, root / "straight", progress=False)
    return root


def _copy(paused, tmp_path) -> Run:
    shutil.copytree(paused / "paused", tmp_path / "run")
    return Run(tmp_path / "run")


def _edit_resume(run: Run, edit) -> None:
    tensors, meta = ck.read_tensors(run.resume_path)
    edit(tensors, meta)
    run.write_resume(tensors, meta)


def _group(**kw):
    return lambda t, m: m["param_groups"][0].update(kw)


def _drop(*names):
    return lambda t, m: [t.pop(k) for k in [k for k in t if k.startswith(names)]]


def _set(name, value):
    return lambda t, m: t.__setitem__(name, value)


def _poke(name, value):
    """Set the first entry of tensor `name`."""

    def edit(t, m):
        t[name] = t[name].clone()
        t[name].view(-1)[0] = value

    return edit


# ---------------------------------------------------------------------------- the resume file's optimizer state
OPT_CASES = {
    "exp_avg zeros(1)": (_set("opt.0.exp_avg", torch.zeros(1)), "opt.0.exp_avg (Adam's exp_avg of blocks.0.attn.P)"),
    "exp_avg int64": (
        lambda t, m: t.__setitem__("opt.1.exp_avg", t["opt.1.exp_avg"].to(torch.int64)),
        "opt.1.exp_avg (Adam's exp_avg of blocks.0.attn.Q) is int64, the parameter float32",
    ),
    "exp_avg float64": (
        lambda t, m: t.__setitem__("opt.0.exp_avg", t["opt.0.exp_avg"].double()),
        "is float64, the parameter float32",
    ),
    "exp_avg nan": (
        _poke("opt.0.exp_avg", float("nan")),
        "opt.0.exp_avg (Adam's exp_avg of blocks.0.attn.P) holds non-finite values",
    ),
    "exp_avg_sq negative": (
        _poke("opt.1.exp_avg_sq", -1.0),
        "opt.1.exp_avg_sq (Adam's exp_avg_sq of blocks.0.attn.Q) holds negative values",
    ),
    "step 1e30": (_set("opt.0.step", torch.tensor(1e30)), "opt.0.step (Adam's step count of blocks.0.attn.P) is 1e+30"),
    "step vector": (_set("opt.1.step", torch.tensor([10.0, 10.0])), "must be a float scalar, got float32 of shape [2]"),
    "step int64": (_set("opt.1.step", torch.tensor(10)), "must be a float scalar, got int64"),
    "step fractional": (_set("opt.0.step", torch.tensor(9.5)), "is 9.5; it must be a whole number in 0..10"),
    "step negative": (_set("opt.0.step", torch.tensor(-1.0)), "is -1; it must be a whole number in 0..10"),
    "step past the resume step": (_set("opt.0.step", torch.tensor(11.0)), "is 11; it must be a whole number in 0..10"),
    "step inf": (_set("opt.0.step", torch.tensor(float("inf"))), "is inf"),
    "eps -1": (_group(eps=-1), "optimizer eps is -1; it must be a finite number > 0"),
    "eps other": (_group(eps=1e-6), "optimizer eps is 1e-06, the run's config implies 1e-08"),
    "lr nan": (_group(lr=float("nan")), "optimizer lr is nan; it must be a finite number > 0"),
    "lr other": (_group(lr=0.5), "optimizer lr is 0.5, the run's config implies"),
    "betas out of range": (_group(betas=[0.9, 1.5]), "optimizer betas is [0.9, 1.5]; it must be two finite numbers"),
    "betas other": (_group(betas=[0.5, 0.999]), "optimizer betas is [0.5, 0.999], the run's config implies (0.9"),
    "weight_decay negative": (_group(weight_decay=-0.1), "optimizer weight_decay is -0.1; it must be a finite number"),
    "weight_decay other": (_group(weight_decay=0.1), "optimizer weight_decay is 0.1, the run's config implies 0"),
    "amsgrad": (_group(amsgrad=True), "optimizer amsgrad is True, the run's config implies False"),
    "fused a string": (_group(fused="yes"), "optimizer fused is 'yes'; it must be true, false or null"),
    "fused and foreach": (_group(foreach=True), "optimizer fused and foreach are both true"),
    "unknown setting": (_group(momentum=0.9), "unknown optimizer settings momentum"),
    "params": (_group(params=[1, 0]), "optimizer params is [1, 0]; it must be [0, ..., 1]"),
    "no eps": (lambda t, m: m["param_groups"][0].pop("eps"), "resume state has no optimizer eps"),
    "two groups": (lambda t, m: m["param_groups"].append(dict(m["param_groups"][0])), "2 optimizer parameter groups"),
    "every opt tensor removed": (_drop("opt."), "optimizer state lacks opt.0.exp_avg, opt.0.exp_avg_sq, opt.0.step"),
    "one opt tensor removed": (_drop("opt.1.exp_avg_sq"), "optimizer state lacks opt.1.exp_avg_sq; resuming would"),
    "extra parameter": (_set("opt.2.exp_avg", torch.zeros(1, 3, 3)), "optimizer state holds unknown tensors opt.2."),
    "extra state": (_set("opt.0.max_exp_avg_sq", torch.zeros(1, 3, 3)), "unknown tensors opt.0.max_exp_avg_sq"),
    "stray tensor": (_set("junk", torch.zeros(2)), "resume state holds unknown tensors junk"),
    "loss window": (lambda t, m: m.update(window=[0.5]), "holds 1 losses since the last log line, step 10 implies 0"),
    "loss window nan": (lambda t, m: m.update(window=[float("nan")]), "malformed loss window"),
}


@pytest.mark.parametrize("case", sorted(OPT_CASES))
def test_a_crafted_optimizer_state_is_refused_in_one_line(paused, tmp_path, capsys, case):
    edit, needle = OPT_CASES[case]
    run = _copy(paused, tmp_path)
    _edit_resume(run, edit)
    before = {p: p.read_bytes() for p in run.path.rglob("*") if p.is_file() and p.name != Run.LOCK_FILE}
    with pytest.raises(CheckpointError) as err:
        train(CFG, run.path, resume=True, progress=False)
    assert needle in str(err.value) and str(run.resume_path) in str(err.value) and "\n" not in str(err.value)
    code, _, text = run_cli(capsys, "train", "--resume", run.path, "--no-progress")
    _one_line(code, text, run.resume_path, needle)
    after = {p: p.read_bytes() for p in run.path.rglob("*") if p.is_file() and p.name != Run.LOCK_FILE}
    assert after == before  # refused before anything was written


def test_a_wrong_shape_exp_avg_never_reaches_the_fused_kernel(paused, tmp_path):
    """zeros(1) for a [1, 3, 3] parameter crashed the fused Adam kernel with SIGSEGV: in a subprocess, so that a
    regression fails this test instead of killing the suite."""
    run = _copy(paused, tmp_path)
    _edit_resume(run, _set("opt.0.exp_avg", torch.zeros(1)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "interp.cli", "train", "--resume", str(run.path), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)  # -11 is SIGSEGV
    _one_line(done.returncode, done.stderr, run.resume_path, "has shape [1], the parameter [1, 3, 3]")


def test_the_untouched_resume_state_resumes_exactly(paused, tmp_path):
    run = _copy(paused, tmp_path)
    train(CFG, run.path, resume=True, progress=False)
    a = load_file(str(Run(paused / "straight").last_checkpoint()))
    b = load_file(str(run.last_checkpoint()))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_trained_before_adam_went_fused_resumes_exactly_on_its_own_implementation(tmp_path, monkeypatch):
    """Resume files written when the trainer ran torch's default Adam loop hold fused = None: a resumed run keeps that
    implementation and ends with the weights of an uninterrupted run on it, bit for bit."""
    monkeypatch.setattr(train_mod, "adam", lambda params, lr: torch.optim.Adam(list(params), lr=lr))
    train(CFG, tmp_path / "straight", progress=False)
    real, count = train_mod._loss, [0]

    def loss(*args, **kwargs):
        count[0] += 1
        if count[0] == 13:
            raise Interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_mod, "_loss", loss)
    with pytest.raises(Interrupt):
        train(CFG, tmp_path / "run", progress=False)
    monkeypatch.undo()  # today's trainer: fused Adam
    assert ck.read_tensors(Run(tmp_path / "run").resume_path)[1]["param_groups"][0]["fused"] is None
    train(CFG, tmp_path / "run", resume=True, progress=False)
    a = load_file(str(Run(tmp_path / "straight").last_checkpoint()))
    b = load_file(str(Run(tmp_path / "run").last_checkpoint()))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_parameter_adam_has_not_stepped_is_saved_as_adams_zeros():
    """Every update skipped by the guard leaves Adam without state; the resume file still holds every parameter's
    (the zeros Adam starts from), so a reader can require all of them, and loading them is a fresh Adam."""
    model = LinearTransformer(ModelConfig(d=2, n_layers=1, param="diag"))
    tensors, groups = _optimizer_tensors(adam(model.parameters(), 1e-3))
    assert sorted(tensors) == sorted(f"opt.{i}.{k}" for i in range(4) for k in ("exp_avg", "exp_avg_sq", "step"))
    assert all(not t.any() for t in tensors.values()) and tensors["opt.0.step"].dtype == torch.float32
    fresh, loaded = (LinearTransformer(ModelConfig(d=2, n_layers=1, param="diag"), init=False) for _ in range(2))
    loaded.load_state_dict(fresh.state_dict())
    opt_a, opt_b = adam(fresh.parameters(), 1e-3), adam(loaded.parameters(), 1e-3)
    state = {i: {k: tensors[f"opt.{i}.{k}"] for k in ("step", "exp_avg", "exp_avg_sq")} for i in range(4)}
    opt_b.load_state_dict({"state": state, "param_groups": groups})
    for model, opt in ((fresh, opt_a), (loaded, opt_b)):
        for p in model.parameters():
            p.grad = torch.full_like(p, 0.5)
        opt.step()
    assert all(torch.equal(x, y) for x, y in zip(fresh.parameters(), loaded.parameters()))


# ---------------------------------------------------------------------------- FIFOs, devices, /proc, sparse files
def _plant(path: Path, kind: str) -> None:
    """Replace `path` with a FIFO, a symlink to /dev/zero or to /proc/self/pagemap, or a directory."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to({"zero": "/dev/zero", "pagemap": "/proc/self/pagemap"}[kind])


NEEDLE = {
    "fifo": "not a regular file (a FIFO)",
    "zero": "not a regular file (a character device)",
    "pagemap": "not a regular file (a /proc or /sys pseudo-file)",
    "directory": "is a directory",
}
KINDS = sorted(NEEDLE)


@pytest.mark.parametrize("kind", KINDS)
def test_reader_refuses_what_is_not_a_regular_file(tmp_path, kind):
    path = tmp_path / "f"
    _plant(path, kind)
    with _prompt(), pytest.raises(CheckpointError, match=r"^" + str(path)) as err:
        read_regular_file(path, 1 << 20, "file")
    assert NEEDLE[kind] in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kind", KINDS)
def test_every_run_file_read_path_refuses_it(paused, tmp_path, capsys, kind):
    """Checkpoint, resume file, config.json and metrics.jsonl, each in turn, through the Python API and the CLI."""
    for target in ("checkpoint", "resume", "config", "metrics"):
        run = Run(tmp_path / target)
        shutil.copytree(paused / "paused", run.path)
        path = {
            "checkpoint": run.last_checkpoint(),
            "resume": run.resume_path,
            "config": run.config_path,
            "metrics": run.metrics_path,
        }[target]
        _plant(path, kind)
        with _prompt():
            if target == "checkpoint":
                with pytest.raises(CheckpointError) as err:
                    interp.load(path)  # a directory given as a path is taken for a run directory: none in it
                needle = "holds no checkpoints" if kind == "directory" else NEEDLE[kind]
                assert needle in str(err.value) and str(path) in str(err.value)
                code, _, text = run_cli(capsys, "eval", run.path, "--no-baselines", "--n-seq", "100")
                _one_line(code, text, path, NEEDLE[kind])
            elif target == "metrics":
                with pytest.raises(CheckpointError) as err:
                    run.read_metrics()
                assert NEEDLE[kind] in str(err.value) and str(path) in str(err.value)
                assert last_step(run.path) == 0  # the sweep's progress: no log to read
            else:
                if target == "config":
                    with pytest.raises(CheckpointError) as err:
                        resolve_model(run.path)
                    assert NEEDLE[kind] in str(err.value) and str(path) in str(err.value)
                code, _, text = run_cli(capsys, "train", "--resume", run.path, "--no-progress")
                _one_line(code, text, path, NEEDLE[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_sweep_table_report_and_kernel_files_refuse_it(tmp_path, kind):
    """sweep.json, a grid file, covariance file, the table's evaluation cache, a report cache, the kernel cache."""
    with _prompt():
        grid = tmp_path / "grid.toml"
        _plant(grid, kind)
        with pytest.raises(SweepError) as err:
            load_grid_file(grid)
        assert NEEDLE[kind] in str(err.value) and str(grid) in str(err.value)

        cov = tmp_path / "cov.json"
        _plant(cov, kind)
        with pytest.raises(ValueError, match="not a regular file|is a directory"):
            covariance_spec(str(cov))

        table_cache = tmp_path / "table1_evals.json"
        _plant(table_cache, kind)
        with pytest.raises(CheckpointError) as err:
            evalcache.EvalCache(table_cache).values()
        assert NEEDLE[kind] in str(err.value) and str(table_cache) in str(err.value)

        (tmp_path / "sweep").mkdir()
        _plant(tmp_path / "sweep" / "sweep.json", kind)
        assert read_summary(tmp_path / "sweep") == {}  # unreadable: the sweep starts its summary afresh

        report_cache = tmp_path / "report_cache.json"
        _plant(report_cache, kind)
        assert _read_cache(report_cache) == {"records": {}}  # left out (with a warning), recomputed

        choices = tmp_path / "kernel_choice.json"
        _plant(choices, kind)
        assert moments._read_choices(choices) == {}


def test_a_sparse_checkpoint_is_refused_on_its_size_before_any_read(tmp_path, monkeypatch):
    """A 15 GiB sparse file costs no disk; reading it would cost 15 GiB of memory."""
    huge = tmp_path / "huge.safetensors"
    with open(huge, "wb") as fh:
        fh.truncate(15 << 30)
    assert 15 << 30 > MAX_CHECKPOINT_BYTES
    monkeypatch.setattr("interp.files.RegularFile._read", lambda *a: pytest.fail("read a byte of a sparse file"))
    with _prompt(), pytest.raises(CheckpointError, match=f"{15 << 30} bytes, more than the {MAX_CHECKPOINT_BYTES}"):
        interp.load(huge)


def test_a_body_the_header_does_not_declare_is_never_read(tmp_path, monkeypatch):
    """A valid checkpoint followed by a 1 GiB hole, or a sparse file of zeros: refused on the header alone."""
    good = tmp_path / "good.safetensors"
    ck.save_checkpoint(good, random_diag(d=2, n_layers=1), 3)
    padded = tmp_path / "padded.safetensors"
    padded.write_bytes(good.read_bytes())
    with open(padded, "r+b") as fh:
        fh.truncate(good.stat().st_size + (1 << 30))
    zeros = tmp_path / "zeros.safetensors"
    with open(zeros, "wb") as fh:
        fh.truncate(1 << 30)
    monkeypatch.setattr("interp.files.RegularFile.read_all", lambda *a: pytest.fail("read the body"))
    with _prompt():
        with pytest.raises(CheckpointError, match="trailing bytes"):
            interp.load(padded)
        with pytest.raises(CheckpointError, match="header is not JSON"):
            interp.load(zeros)
    monkeypatch.undo()
    assert interp.load(good).cfg.param == "diag"


# ---------------------------------------------------------------------------- checkpoints against their run's config
@pytest.fixture
def full_run_with_a_diag_checkpoint(paused, tmp_path):
    """A finished FULL run (checkpoints 0, 1, 20) whose step-1 checkpoint is a DIAG model, and a DIAG one at 21."""
    shutil.copytree(paused / "straight", tmp_path / "run")
    run = Run(tmp_path / "run")
    assert [s for s, _ in run.checkpoints()] == [0, 1, 20]
    diag = LinearTransformer(dataclasses.replace(CFG.model, param="diag"))  # only the parameterization differs
    for step in (1, 21):
        run.save_checkpoint(diag, step, noise=CFG.noise, seed=0)
    return run


def test_a_diag_checkpoint_in_a_full_run_is_refused_everywhere(full_run_with_a_diag_checkpoint, capsys):
    run = full_run_with_a_diag_checkpoint
    last = run.last_checkpoint()
    needle = "model.param: 'diag' in the checkpoint, 'full' in the config"
    for call, path in (
        (lambda: resolve_model(run.path), last),
        (lambda: resolve_model(last), last),
        (lambda: interp.load(run.path), last),
        (lambda: interp.load(run.checkpoint_path(1)), run.checkpoint_path(1)),
        (lambda: run.load(), last),
        (lambda: run.trajectory(), run.checkpoint_path(1)),
        (lambda: checkpoint_sha256(run.checkpoint_path(1)), run.checkpoint_path(1)),
        (lambda: load_with_digest(last), last),  # interp table, the report's cache keys (report.data)
        (lambda: evalcache.run_loss(run.path, 100, compute=False), last),  # the sweep's end table
        (lambda: load_with_digest(run.checkpoint_path(1)), run.checkpoint_path(1)),  # the report's drift keys
    ):
        with pytest.raises(CheckpointError) as err:
            call()
        assert str(err.value).startswith(f"{path} disagrees with {run.config_path}: ") and needle in str(err.value)
        assert "\n" not in str(err.value)
    for argv, path in (
        (["eval", run.path, "--no-baselines", "--n-seq", "100"], last),
        (["probe", run.path, "--out", run.path.parent / "probe.json"], last),
        (["drift", run.path], last),
    ):
        code, _, err = run_cli(capsys, *argv)
        _one_line(code, err, path, needle)


def test_the_reports_drift_curves_refuse_a_diag_checkpoint_of_a_full_run(full_run_with_a_diag_checkpoint):
    run = full_run_with_a_diag_checkpoint
    entry = make_entry(run.checkpoint_path(20))  # the FULL run's own last checkpoint: a valid entry
    assert entry.arch == "full"
    with pytest.raises(CheckpointError, match="model.param: 'diag' in the checkpoint") as err:
        drift_records([entry], Settings.quick(), use_cache=False)
    assert str(run.checkpoint_path(1)) in str(err.value)


@pytest.mark.parametrize(
    "edit,needle",
    [
        (dict(d=3), "model.d: 3 in the checkpoint, 2 in the config"),
        (dict(n_layers=2), "model.n_layers: 2 in the checkpoint, 1 in the config"),
        (dict(n_heads=2), "model.n_heads: 2 in the checkpoint, 1 in the config"),
        (dict(dtype="float64"), "model.dtype: 'float64' in the checkpoint, 'float32' in the config"),
    ],
)
def test_a_checkpoint_of_another_size_in_a_run_is_refused(paused, tmp_path, edit, needle):
    run = _copy(paused, tmp_path)
    other = LinearTransformer(dataclasses.replace(CFG.model, **edit))
    run.save_checkpoint(other, 99)
    with pytest.raises(CheckpointError, match=needle):
        resolve_model(run.path)
    loose = tmp_path / "loose.safetensors"
    loose.write_bytes(run.checkpoint_path(99).read_bytes())  # outside any run: its own metadata is all there is
    assert resolve_model(loose).model.cfg == other.cfg


def test_the_digest_is_of_the_bytes_read_and_only_of_a_valid_checkpoint(paused, tmp_path):
    import hashlib

    run = _copy(paused, tmp_path)
    path = run.last_checkpoint()
    assert checkpoint_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest() == resolve_model(path).sha256
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(CheckpointError):
        checkpoint_sha256(bad)
    assert json.loads(read_regular_file(run.config_path))["steps"] == CFG.steps
