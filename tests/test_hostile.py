"""Hostile input: outputs over inputs, FIFOs and devices, oversized declarations, bad values, random bytes.

Every case ends in one line naming the file or argument (exit status 2 from the CLI) or a ValueError /
TypeError subclass in Python, never a traceback, a hang, an unbounded allocation or a lost file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as st_save

import interp
from interp import checkpoints as ck
from interp.config import ModelConfig, TrainConfig
from interp.files import CheckpointError
from interp.model import LinearTransformer
from interp.run import Run
from interp.tasks import sample_tasks
from interp.train import train
from tests.helpers import random_full, run_cli

CFG = TrainConfig(
    model=ModelConfig(d=2, n_layers=1, param="full"),
    noise="uniform:1",
    n=4,
    batch=16,
    steps=10,
    log_every=5,
    resume_every=5,
    n_checkpoints=3,
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return train(CFG, tmp_path_factory.mktemp("hostile") / "run", progress=False).run_dir


def _snapshot(path):
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _one_line(code, err, *needles):
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in err, (needle, err)


# ---------------------------------------------------------------------------- outputs over inputs
def test_outputs_never_overwrite_inputs_or_run_files(tmp_path, run_dir, capsys):
    before = _snapshot(run_dir)
    ckpt = Run(run_dir).last_checkpoint()
    loose = tmp_path / "loose.safetensors"
    loose.write_bytes(ckpt.read_bytes())
    cases = [
        (["probe", loose, "--out", loose], "--out"),
        (["probe", run_dir, "--out", ckpt], "--out"),
        (["drift", run_dir, "--json", Run(run_dir).config_path], "--json"),
        (["drift", run_dir, "--json", Run(run_dir).metrics_path], "--json"),
        (["eval", loose, "--json", loose, "--no-baselines"], "--json"),
        (["eval", loose, "--csv", Run(run_dir).resume_path, "--no-baselines"], "--csv"),
        (["eval", loose, "--csv", tmp_path / "a.csv", "--json", tmp_path / "a.csv", "--no-baselines"], "both name"),
        (["report", run_dir, "--out", Run(run_dir).config_path], "--out"),
    ]
    for argv, needle in cases:
        code, _, err = run_cli(capsys, *argv)
        _one_line(code, err, needle)
    assert _snapshot(run_dir) == before and loose.read_bytes() == ckpt.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(Run(run_dir).config_path)
    code, _, err = run_cli(capsys, "drift", run_dir, "--json", link)
    _one_line(code, err, "--json", link)
    assert _snapshot(run_dir) == before


def test_output_in_a_missing_or_read_only_place_fails_before_work(tmp_path, run_dir, capsys):
    code, _, err = run_cli(capsys, "probe", run_dir, "--out", tmp_path / "no" / "such" / "p.json")
    _one_line(code, err, "--out", tmp_path / "no" / "such")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "old.json").write_text("{}")
    with _read_only(ro / "old.json"):
        code, _, err = run_cli(capsys, "probe", run_dir, "--out", ro / "old.json")
        _one_line(code, err, "--out", ro / "old.json")
    with _read_only(ro):
        code, _, err = run_cli(capsys, "eval", run_dir, "--json", ro / "new.json", "--no-baselines")
        _one_line(code, err, "--json", ro)
    assert not (ro / "new.json").exists()


@contextlib.contextmanager
def _read_only(path):
    """`path` unwritable for this process, root included: mode bits for an ordinary user; for root (as CI runs),
    which writes through mode bits, the immutable attribute (chattr +i), which binds root too."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            os.chmod(path, mode)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:  # a file system without the attribute: say why, do not pass silently
        pytest.skip(f"running as root and chattr +i failed on {path}: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


# ---------------------------------------------------------------------------- FIFOs, devices, oversized declarations
def test_fifo_named_like_a_checkpoint_is_refused_without_hanging(tmp_path, capsys):
    run = Run(tmp_path / "run")
    run.checkpoint_dir.mkdir(parents=True)
    os.mkfifo(run.checkpoint_path(5))

    def hung(*_):
        raise TimeoutError("reading a FIFO hung")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)  # a hang fails the test instead of stalling the suite
    try:
        code, _, err = run_cli(capsys, "eval", run.path, "--no-baselines")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    _one_line(code, err, "not a regular file", run.checkpoint_path(5))


def test_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "zero.safetensors"
    link.symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="not a regular file"):
        interp.load(link)


def _file(tmp_path, tensors, meta, name="bad.safetensors"):
    header = {"format": ck.FORMAT, "format_version": str(ck.FORMAT_VERSION), "meta": json.dumps(meta)}
    path = tmp_path / name
    path.write_bytes(st_save(tensors, metadata=header))
    return path


def test_oversized_declarations_are_refused_before_allocation(tmp_path):
    cfg = ModelConfig(d=2, n_layers=1).to_dict()
    small = {"blocks.0.attn.P": torch.zeros(1, 3, 3), "blocks.0.attn.Q": torch.zeros(1, 3, 3)}
    for key, value, needle in (
        ("n_heads", 10**12, "n_heads must be in"),
        ("d", 10**9, "d must be in"),
        ("n_layers", 10**6, "n_layers must be in"),
    ):
        path = _file(tmp_path, small, {"model_config": {**cfg, key: value}, "step": 0})
        assert path.stat().st_size < 1000
        with pytest.raises(CheckpointError, match=needle):
            interp.load(path)
    # within each limit, but too many weights together
    path = _file(tmp_path, small, {"model_config": {**cfg, "d": 4000, "n_layers": 256, "n_heads": 256}, "step": 0})
    with pytest.raises(CheckpointError, match="exceed the limit"):
        interp.load(path)
    # a header declaring more bytes than the file holds, and a header length of 2^60
    data = bytearray((tmp_path / "bad.safetensors").read_bytes())
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    header["blocks.0.attn.P"]["shape"] = [2**20, 3, 3]
    blob = json.dumps(header).encode()
    (tmp_path / "huge.safetensors").write_bytes(len(blob).to_bytes(8, "little") + blob + bytes(72))
    with pytest.raises(CheckpointError, match=r"declares shape \[1048576, 3, 3\]"):
        interp.load(tmp_path / "huge.safetensors")
    deep = b"[" * 200_000  # nested past Python's recursion limit
    (tmp_path / "deep.safetensors").write_bytes(len(deep).to_bytes(8, "little") + deep)
    with pytest.raises(CheckpointError, match="header is not JSON"):
        interp.load(tmp_path / "deep.safetensors")
    (tmp_path / "len.safetensors").write_bytes((2**60).to_bytes(8, "little") + b"{}")
    with pytest.raises(CheckpointError, match="header of 1152921504606846976 bytes"):
        interp.load(tmp_path / "len.safetensors")


def test_integer_and_bool_checkpoints_are_refused(tmp_path):
    cfg = ModelConfig(d=2, n_layers=1).to_dict()
    for dtype in (torch.int64, torch.bool):
        t = {"blocks.0.attn.P": torch.zeros(1, 3, 3, dtype=dtype), "blocks.0.attn.Q": torch.zeros(1, 3, 3, dtype=dtype)}
        name = str(dtype).removeprefix("torch.")
        with pytest.raises(CheckpointError, match=f"is {name}, its config says float32"):
            interp.load(_file(tmp_path, t, {"model_config": cfg, "step": 0}))


@pytest.mark.parametrize(
    "meta,needle",
    [
        (5, "must be a JSON object"),
        (None, "must be a JSON object"),
        ([], "must be a JSON object"),
        ({"step": 0}, "no model_config"),
        ({"model_config": None, "step": 0}, "bad model config"),
        ({"model_config": {"d": 10.5}, "step": 0}, "d must be int"),
        ({"model_config": {"d": True}, "step": 0}, "d must be int"),
        ({"model_config": {}, "step": -1}, "step must be an integer"),
        ({"model_config": {}, "step": 0, "noise": "gauss:1"}, "noise prior"),
    ],
)
def test_bad_metadata_is_one_checkpoint_error(tmp_path, meta, needle):
    path = _file(tmp_path, {"x": torch.zeros(1)}, meta)
    with pytest.raises(CheckpointError, match=needle) as err:
        interp.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------- bad run configs and resume states
@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda c: None, "must be a JSON object"),
        (lambda c: [c], "must be a JSON object"),
        (lambda c: {**c, "model": {**c["model"], "d": 10.5}}, "d must be int"),
        (lambda c: {**c, "model": {**c["model"], "d": True}}, "d must be int"),
        (lambda c: {**c, "model": None}, "model config must be a JSON object"),
        (lambda c: {**c, "batch": "many"}, "batch must be int"),
        (lambda c: {**c, "batch": 10**10}, "batch must be in"),
        (lambda c: {**c, "lr": -1}, "lr must be in"),
        (lambda c: {**c, "noise": "gauss:1"}, "unknown noise prior"),
        (lambda c: {k: v for k, v in c.items() if k != "format_version"}, "format version"),
    ],
)
def test_bad_config_is_one_line(tmp_path, run_dir, capsys, edit, needle):
    run = Run(tmp_path / "run")
    run.path.mkdir()
    run.config_path.write_text(json.dumps(edit(json.loads(Run(run_dir).config_path.read_text()))))
    with pytest.raises(CheckpointError, match=needle):
        run.config()
    code, _, err = run_cli(capsys, "train", "--resume", run.path)
    _one_line(code, err, run.config_path, needle)


def test_deeply_nested_config_and_metrics_are_one_error(tmp_path):
    run = Run(tmp_path / "run")
    run.path.mkdir()
    run.config_path.write_text("[" * 200_000)
    with pytest.raises(CheckpointError, match="unreadable run config"):
        run.config()
    run.metrics_path.write_text("[" * 200_000 + "\n" + '{"step": 5}\n')
    with pytest.raises(CheckpointError, match="line 1 is not a metrics row"):
        run.read_metrics()


@pytest.mark.parametrize("drop", ["rng.data", "param_groups", "step", "model_config"])
def test_resume_state_missing_a_part_is_one_line(tmp_path, drop, capsys):
    run = train(CFG, tmp_path / "run", progress=False).run_dir
    Run(run).last_checkpoint().unlink()  # unfinished (a finished run is never resumed: its resume state is not read)
    tensors, meta = ck.read_tensors(Run(run).resume_path)
    tensors.pop(drop, None)
    meta.pop(drop, None)
    Run(run).write_resume(tensors, meta)
    code, _, err = run_cli(capsys, "train", "--resume", run)
    _one_line(code, err, Run(run).resume_path)


# ---------------------------------------------------------------------------- bad values on the command line
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "--batch", "1e10"], "--batch"),
        (["train", "--batch", "10000000000"], "--batch"),
        (["train", "--heads", "1000000000000"], "--heads"),
        (["train", "--d", "100000"], "--d"),
        (["train", "--steps", "10000000000"], "--steps"),
        (["train", "--batch", "100000", "--n", "1000"], "batch"),
        (["train", "--device", "bogus"], "--device"),
        (["train", "--device", "cuda:99"], "--device"),
        (["eval", "--sigmas", "0:1e12:1", "--no-baselines"], "--sigmas"),
        (["eval", "--sigmas", ",".join(["1"] * 2000)], "--sigmas"),
        (["eval", "--sigmas", "0:inf:1"], "--sigmas"),
        (["eval", "--n-seq", "1000000000000"], "--n-seq"),
        (["eval", "--chunk", "10000000", "--n", "1000"], "--chunk"),
        (["probe", "--n-seq", "1000000000000"], "--n-seq"),
        (["drift", "--eval-seq", "1000000000000"], "--eval-seq"),
    ],
)
def test_bad_counts_and_devices_are_one_line(tmp_path, run_dir, capsys, argv, needle):
    extra = {
        "train": ["--out", tmp_path / "r"],
        "eval": [run_dir],
        "probe": [run_dir, "--out", tmp_path / "p.json"],
        "drift": [run_dir],
    }[argv[0]]
    code, _, err = run_cli(capsys, *argv, *extra)
    _one_line(code, err, needle)
    assert not (tmp_path / "r").exists()


def test_cuda_on_a_machine_without_it(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the refusal is for machines without it")
    code, _, err = run_cli(capsys, "train", "--device", "cuda", "--out", tmp_path / "r")
    _one_line(code, err, "--device", "0 usable CUDA device")


# ---------------------------------------------------------------------------- bad values in Python
def test_model_inputs():
    model = LinearTransformer(ModelConfig(d=2, n_layers=2), generator=torch.Generator().manual_seed(0))
    batch = sample_tasks(8, 2, 5, "uniform:1", torch.Generator().manual_seed(1), dtype=torch.float64)
    # float64 tokens into a float32 model are cast (documented in _check_tokens): the same ŷ as cast by hand
    assert torch.equal(model(batch.tokens), model(batch.tokens.float()))
    with pytest.raises(TypeError, match="floating point, got int64"):
        model(batch.tokens.long())
    for bad, err in (
        (batch.tokens.long(), TypeError),
        (batch.tokens.bool(), TypeError),
        (batch.tokens.tolist(), TypeError),
        (batch.tokens.numpy(), TypeError),
        (batch.tokens.float()[:0], ValueError),
        (batch.tokens.float()[:, :, :2], ValueError),
    ):
        with pytest.raises(err):
            model(bad)
    with pytest.raises(ValueError, match="finite"):
        LinearTransformer.from_matrices(torch.full((1, 1, 3, 3), float("nan")), torch.zeros(1, 1, 3, 3))
    with pytest.raises(TypeError, match="floating point"):
        LinearTransformer.from_matrices(torch.zeros(1, 1, 3, 3, dtype=torch.long), torch.zeros(1, 1, 3, 3))
    with pytest.raises(ValueError, match="finite"):
        LinearTransformer.from_omegas(torch.tensor([[1.0, 0.0, float("inf"), 0.0]]), d=2)


@pytest.mark.parametrize(
    "kwargs,err",
    [
        (dict(batch=-1), ValueError),
        (dict(batch=0), ValueError),
        (dict(d=0), ValueError),
        (dict(n=0), ValueError),
        (dict(d=2.5), TypeError),
        (dict(batch=True), TypeError),
        (dict(batch=10**6, n=1000, d=1000), ValueError),
    ],
)
def test_sample_tasks_sizes(kwargs, err):
    args = dict(batch=4, d=2, n=3) | kwargs
    with pytest.raises(err):
        sample_tasks(args.pop("batch"), **args)


def test_config_types():
    for kwargs in (dict(d=10.5), dict(d=True), dict(n_layers="4"), dict(n_heads=10**12), dict(param=None)):
        with pytest.raises((TypeError, ValueError)):
            ModelConfig(**kwargs)
    assert ModelConfig(d=np.int64(3)).d == 3 and type(ModelConfig(d=np.int64(3)).d) is int
    for kwargs in (dict(batch=1.5), dict(lr=float("nan")), dict(steps=0), dict(clip=-1.0), dict(noise="x")):
        with pytest.raises((TypeError, ValueError)):
            TrainConfig(**kwargs)
    with pytest.raises(ValueError, match="not a torch device"):
        train(TrainConfig(device="bogus"), "/nonexistent/never/created", progress=False)
    assert not os.path.exists("/nonexistent/never/created")


# ---------------------------------------------------------------------------- property: only the loader's error
_HEADER_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_MODEL_CONFIG = st.fixed_dictionaries(
    {},
    optional={
        "d": st.one_of(st.integers(-3, 10**13), st.floats(), st.booleans(), st.none()),
        "n_layers": st.one_of(st.integers(-3, 10**13), st.text(max_size=3)),
        "n_heads": st.one_of(st.integers(-3, 10**13), st.floats()),
        "param": st.sampled_from(["full", "diag", "gdpp", "sparse", ""]),
        "dtype": st.sampled_from(["float32", "float64", "int64", "bool"]),
        "init_scale": st.floats(),
        "extra": _HEADER_VALUES,
    },
)
_META = st.one_of(
    _HEADER_VALUES,
    st.fixed_dictionaries(
        {"model_config": st.one_of(_MODEL_CONFIG, _HEADER_VALUES)},
        optional={"step": _HEADER_VALUES | st.integers(), "noise": st.text(max_size=12)},
    ),
)
_TENSORS = st.dictionaries(
    st.sampled_from(["blocks.0.attn.P", "blocks.0.attn.Q", "blocks.0.attn.p_x", "model.blocks.0.attn.P", "x"]),
    st.tuples(
        st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.uint8]),
        st.lists(st.integers(0, 4), max_size=4),
    ),
    max_size=4,
)


def _expect_checkpoint_error(path):
    try:
        interp.load(path)
    except CheckpointError as err:
        assert "\n" not in str(err)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600))
def test_random_bytes_only_raise_checkpoint_error(tmp_path, data):
    path = tmp_path / "random.safetensors"
    path.write_bytes(data)
    _expect_checkpoint_error(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(meta=_META, tensors=_TENSORS, flip=st.integers(0, 2000), cut=st.integers(0, 5))
def test_random_metadata_only_raises_checkpoint_error(tmp_path, meta, tensors, flip, cut):
    tens = {k: torch.zeros(shape, dtype=dtype) for k, (dtype, shape) in tensors.items()}
    header = {
        "format": ck.FORMAT,
        "format_version": str(ck.FORMAT_VERSION),
        "meta": json.dumps(meta) if cut != 1 else "{",
    }
    data = bytearray(st_save(tens, metadata=header))
    if cut == 2 and data:  # flip one byte anywhere
        data[flip % len(data)] ^= 0xFF
    if cut == 3:  # truncate
        data = data[: flip % (len(data) + 1)]
    path = tmp_path / "meta.safetensors"
    path.write_bytes(bytes(data))
    _expect_checkpoint_error(path)


def test_a_valid_checkpoint_still_loads(tmp_path):
    model = random_full(d=2, n_layers=1, n_heads=1)
    ck.save_checkpoint(tmp_path / "ok.safetensors", model, 3)
    assert torch.equal(interp.load(tmp_path / "ok.safetensors").P, model.P)


# ---------------------------------------------------------------------------- the writer lock
@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_lock_that_is_not_a_regular_file_is_refused_and_nothing_outside_is_touched(tmp_path, kind):
    """The lock is opened without following symlinks and must be a regular file: a .lock linked to an outside file
    never overwrites it with a PID, a FIFO never hangs, a directory is one error naming the lock."""
    run = Run(tmp_path / "run")
    run.path.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    if kind == "symlink":
        run.lock_path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(run.lock_path)
    else:
        run.lock_path.mkdir()
    with pytest.raises(CheckpointError, match=r"\.lock") as err:
        with run.lock():
            pass
    assert "\n" not in str(err.value)
    assert outside.read_text() == "keep me\n"
    assert run.writer() is None


# ---------------------------------------------------------------------------- bounded work from any input
@pytest.mark.parametrize("spec", ["uniform:1e39", "categorical:0,1e200", "fixed:1e308", "uniform:1001"])
def test_a_noise_std_beyond_the_limit_is_refused_before_any_grid_is_built(spec):
    """σ's above interp.limits.MAX_SIGMA are one ValueError naming the spec (they built unbounded σ grids)."""
    from interp.tasks import as_prior

    with pytest.raises(ValueError, match="at most 1000") as err:
        as_prior(spec)
    assert spec in str(err.value) and "\n" not in str(err.value)


def test_a_step_that_cannot_fit_in_memory_is_refused_before_the_run_exists(tmp_path, capsys):
    code, _, err = run_cli(capsys, "train", "--d", "4096", "--steps", "1", "--no-progress", "--out", tmp_path / "r")
    _one_line(code, err, "--batch", "--d 4096")
    assert not (tmp_path / "r").exists()


def test_very_long_contexts_are_drawn_in_smaller_blocks():
    """An EvalSet whose BLOCK sequences would exceed the token limit draws fewer at a time (it failed after training
    before); the usual sizes keep BLOCK, so their sequences are unchanged."""
    from interp.evalset import BLOCK, EvalSet
    from interp.limits import MAX_BATCH_ELEMENTS

    assert EvalSet("uniform:5").block == BLOCK
    long = EvalSet("uniform:5", d=10, n=3000, n_seq=20)
    assert long.block * 3001 * 11 <= MAX_BATCH_ELEMENTS < BLOCK * 3001 * 11
    assert long.draw().tokens.shape == (20, 3001, 11)


def test_sigma_grids_that_overflow_are_one_line(tmp_path, capsys):
    ckpt = tmp_path / "m.safetensors"
    ck.save_checkpoint(ckpt, interp.LinearTransformer(ModelConfig(d=2, n_layers=1, param="diag")), 0)
    code, _, err = run_cli(capsys, "eval", ckpt, "--sigmas", "0:1e300:1e-300", "--no-baselines")
    _one_line(code, err, "--sigmas")
