import json
import os

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save_file

import interp
from interp import checkpoints as ck
from interp.files import CheckpointError
from interp.run import Run, load_with_meta
from tests.helpers import random_diag, random_full, small_batch


def test_round_trip_file_and_run_dir(tmp_path):
    model = random_diag(d=3, n_layers=2, n_heads=2, param="gdpp")
    ck.save_checkpoint(Run(tmp_path).checkpoint_path(5), model, 5)
    ck.save_checkpoint(Run(tmp_path).checkpoint_path(12), random_full(d=3, n_layers=2), 12)
    loaded, meta = load_with_meta(Run(tmp_path).checkpoint_path(5))
    assert meta["step"] == 5 and loaded.cfg == model.cfg
    batch = small_batch(batch=3, d=3, n=5)
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch.tokens), model(batch.tokens), rtol=0, atol=0)
    assert load_with_meta(tmp_path)[1]["step"] == 12  # a run directory gives its last checkpoint
    assert [s for s, _ in Run(tmp_path).checkpoints()] == [5, 12]
    assert not [p for p in Run(tmp_path).checkpoint_dir.iterdir() if p.name.endswith(".tmp")]


def _write(tmp_path, model, mutate_tensors=None, mutate_header=None):
    path = tmp_path / "bad.safetensors"
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    header = {
        "format": ck.FORMAT,
        "format_version": str(ck.FORMAT_VERSION),
        "meta": json.dumps({"model_config": model.cfg.to_dict(), "step": 0}),
    }
    if mutate_tensors:
        tensors = mutate_tensors(tensors)
    if mutate_header:
        header = mutate_header(header)
    save_file(tensors, path, metadata=header)
    return path


@pytest.mark.parametrize(
    "tensors,header,match",
    [
        (lambda t: {k: v for k, v in t.items() if "P" not in k}, None, "missing tensors blocks.0.attn.P"),
        (lambda t: {**t, "extra": torch.zeros(2)}, None, "unexpected tensors extra"),
        (lambda t: {**t, "blocks.0.attn.P": torch.zeros(1, 3, 3, dtype=torch.float64)}, None, "has shape"),
        (
            lambda t: {**t, "blocks.0.attn.P": torch.full((1, 4, 4), float("nan"), dtype=torch.float64)},
            None,
            "non-finite",
        ),
        (None, lambda h: {**h, "format_version": "99"}, "unknown checkpoint format version '99'"),
        (None, lambda h: {**h, "format": "other"}, "not an interp checkpoint"),
        (None, lambda h: {k: v for k, v in h.items() if k != "meta"}, "no readable 'meta'"),
    ],
)
def test_bad_checkpoints_name_file_and_problem(tmp_path, tensors, header, match):
    path = _write(tmp_path, random_full(d=3, n_layers=2, n_heads=1), tensors, header)
    with pytest.raises(CheckpointError, match=match) as err:
        interp.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_truncated_and_missing_files(tmp_path):
    model = random_full(d=3, n_layers=1)
    path = tmp_path / "m.safetensors"
    ck.save_checkpoint(path, model, 0)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        interp.load(path)
    with pytest.raises(CheckpointError, match="no such file"):
        interp.load(tmp_path / "nope.safetensors")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoints"):
        interp.load(tmp_path / "empty")
    (tmp_path / "pickle.pt").write_bytes(b"\x80\x04not safetensors")
    with pytest.raises(CheckpointError, match="not a valid safetensors"):
        interp.load(tmp_path / "pickle.pt")


def test_atomic_write_keeps_old_file_when_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    ck.save_checkpoint(path, random_full(d=3, n_layers=1, seed=1), 1)
    before = path.read_bytes()

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        ck.save_checkpoint(path, random_full(d=3, n_layers=1, seed=2), 2)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]  # no temp file left behind


def test_written_files_get_the_usual_mode(tmp_path):
    path = tmp_path / "m.safetensors"
    ck.save_checkpoint(path, random_full(d=3, n_layers=1), 0)
    mask = os.umask(0)
    os.umask(mask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~mask)


def test_the_same_model_is_written_byte_for_byte_the_same(tmp_path):
    """safetensors orders its header from hash maps; interp sorts it, so a re-export of an unchanged model (the zoo)
    changes no byte, and the file still reads through safetensors itself and interp."""
    model = random_full(d=3, n_layers=2, n_heads=2)
    files = [tmp_path / f"{i}.safetensors" for i in range(6)]
    for path in files:
        ck.save_checkpoint(path, model, 7, note={"b": 1, "a": [2, 3]})
    assert len({p.read_bytes() for p in files}) == 1
    data = files[0].read_bytes()
    size = int.from_bytes(data[:8], "little")
    assert size % 8 == 0 and list(json.loads(data[8 : 8 + size])) == sorted(json.loads(data[8 : 8 + size]))
    assert all(torch.equal(st_load(data)[k], v) for k, v in model.state_dict().items())
    loaded, meta = load_with_meta(files[0])
    assert meta["step"] == 7 and meta["note"] == {"a": [2, 3], "b": 1}
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
