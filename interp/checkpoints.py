"""Checkpoints: safetensors tensors with a JSON config in the header; atomic writes; never unpickles.

Run directory layout (written by interp.train):
  config.json                      the TrainConfig, with "format_version"
  checkpoints/step_{step:07d}.safetensors   the geometric trajectory (model weights only)
  resume.safetensors               the latest full state: weights, Adam state, data RNG
  metrics.jsonl                    one JSON line per logged step
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from interp.config import ModelConfig
from interp.model import LinearTransformer

FORMAT = "interp-checkpoint"
FORMAT_VERSION = 1
CKPT_DIR = "checkpoints"
CKPT_RE = re.compile(r"^step_(\d+)\.safetensors$")
RESUME_FILE = "resume.safetensors"
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"


class CheckpointError(ValueError):
    """A checkpoint or run directory that cannot be used; the message names the file and the problem."""


def checkpoint_name(step: int) -> str:
    return f"step_{step:07d}.safetensors"


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Atomically write tensors with `meta` (JSON) in the safetensors header."""
    header = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "meta": json.dumps(meta, sort_keys=True)}
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    atomic_write_bytes(path, st_save(tensors, metadata=header))


def read_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and validate a file written by save_tensors; CheckpointError names the file and the problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a directory, not a checkpoint file") from None
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read ({err.strerror})") from None
    try:
        tensors = st_load(data)
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    except (SafetensorError, ValueError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: not a valid safetensors file (truncated or corrupt: {err})") from None
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an interp checkpoint (header format {header.get('format')!r})")
    version = header.get("format_version")
    if version != str(FORMAT_VERSION):
        raise CheckpointError(f"{path}: unknown checkpoint format version {version!r} (this interp reads {FORMAT_VERSION})")
    try:
        meta = json.loads(header["meta"])
    except (KeyError, json.JSONDecodeError):
        raise CheckpointError(f"{path}: checkpoint header has no readable 'meta' JSON") from None
    return tensors, meta


def model_tensors(model: LinearTransformer) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items()}


def save_checkpoint(path: str | Path, model: LinearTransformer, step: int, **extra: Any) -> None:
    """Atomically save the model's weights, its config and the training step."""
    meta = {"model_config": model.cfg.to_dict(), "step": int(step), **extra}
    save_tensors(path, model_tensors(model), meta)


def model_from_tensors(path: Path, tensors: dict[str, torch.Tensor], cfg_dict: Any) -> LinearTransformer:
    try:
        cfg = ModelConfig.from_dict(cfg_dict)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: bad model config ({err})") from None
    model = LinearTransformer(cfg, init=False)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing:
        raise CheckpointError(f"{path}: missing tensors {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    if unexpected:
        raise CheckpointError(f"{path}: unexpected tensors {', '.join(unexpected[:4])}{' ...' if len(unexpected) > 4 else ''}")
    for key, ref in expected.items():
        if tuple(tensors[key].shape) != tuple(ref.shape):
            raise CheckpointError(
                f"{path}: tensor {key} has shape {list(tensors[key].shape)}, config implies {list(ref.shape)}"
            )
        if not torch.isfinite(tensors[key]).all():
            raise CheckpointError(f"{path}: tensor {key} holds non-finite values")
    model.load_state_dict({k: v.to(ref.dtype) for k, v in tensors.items() for ref in [expected[k]]})
    return model


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """The trajectory of a run directory as (step, path), sorted by step."""
    ckdir = Path(run_dir) / CKPT_DIR
    if not ckdir.is_dir():
        return []
    found = []
    for entry in ckdir.iterdir():
        m = CKPT_RE.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry))
    return sorted(found)


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file as given, or the last checkpoint of a run directory."""
    path = Path(path)
    if path.is_dir():
        ckpts = list_checkpoints(path)
        if not ckpts:
            raise CheckpointError(f"{path}: directory holds no checkpoints ({CKPT_DIR}/step_*.safetensors)")
        return ckpts[-1][1]
    if not path.exists():
        raise CheckpointError(f"{path}: no such file or directory")
    return path


def load_with_meta(path: str | Path) -> tuple[LinearTransformer, dict[str, Any]]:
    """(model, metadata) from a checkpoint file or a run directory (its last checkpoint)."""
    file = resolve_checkpoint(path)
    tensors, meta = read_tensors(file)
    if "model_config" not in meta:
        raise CheckpointError(f"{file}: checkpoint metadata has no model_config")
    tensors = {k[len("model."):] if k.startswith("model.") else k: v for k, v in tensors.items() if not k.startswith(("opt.", "rng."))}
    model = model_from_tensors(file, tensors, meta["model_config"])
    model.eval()
    return model, meta


def load(path: str | Path) -> LinearTransformer:
    """The model of a checkpoint file or of a run directory (its last checkpoint)."""
    return load_with_meta(path)[0]


def load_trajectory(run_dir: str | Path) -> list[tuple[int, LinearTransformer]]:
    """Every checkpoint of a run directory, as (step, model), sorted by step."""
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise CheckpointError(f"{run_dir}: no checkpoints found under {CKPT_DIR}/")
    return [(step, load(p)) for step, p in ckpts]
