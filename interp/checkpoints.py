"""Checkpoint files: safetensors tensors with a JSON config in the header; atomic writes; never unpickles.

Reads are bounded: only regular files of at most MAX_CHECKPOINT_BYTES (interp.files), a capped header read and
checked before the body (its tensors must tile the body exactly), and every declared shape checked against the file
size and against ModelConfig's limits before anything is allocated. This module knows one file at a
time; the layout of a run directory (config, trajectory, resume state, metrics, lock) belongs to interp.run.Run
alone, and interp.run.load takes a checkpoint file or a run directory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import numbers
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from interp.config import ModelConfig, TrainConfig, covariance
from interp.files import CheckpointError, InvalidArgument, InvalidType, as_path, atomic_write_bytes, open_regular
from interp.limits import MAX_CHECKPOINT_BYTES, MAX_FILE_BYTES, MAX_N
from interp.model import LinearTransformer
from interp.tasks import as_prior
from interp.variants import LEGACY_FORMAT, MODELS, build, from_legacy

FORMAT = "interp-checkpoint"
FORMAT_VERSION = 1
MAX_HEADER_BYTES = 1 << 20  # a safetensors header above 1 MiB is not one of ours
ST_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
MODEL_DTYPES = {torch.float32: "float32", torch.float64: "float64"}


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Atomically write tensors with `meta` (JSON) in the safetensors header."""
    path = as_path(path)
    if not isinstance(tensors, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()
    ):
        raise InvalidType("tensors must be a dict of name -> torch.Tensor")
    header = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "meta": json.dumps(meta, sort_keys=True)}
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    atomic_write_bytes(path, canonical_bytes(st_save(tensors, metadata=header)))


def canonical_bytes(data: bytes) -> bytes:
    """A safetensors file with its JSON header's keys sorted, so the same tensors and metadata give the same bytes.

    safetensors writes the header from hash maps whose order changes from one call to the next: a zoo re-exported
    with nothing changed differed in every file. The tensor data and its offsets (relative to the data's start) stay;
    the header is padded with spaces to a multiple of 8 bytes, as safetensors pads it."""
    size = int.from_bytes(data[:8], "little")
    head = json.dumps(json.loads(data[8 : 8 + size]), sort_keys=True, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return len(head).to_bytes(8, "little") + head + data[8 + size :]


def _check_header(path: Path, head: bytes, body: int) -> dict:
    """The safetensors JSON header `head` of a file whose tensor data is `body` bytes, every tensor's dtype, shape
    and byte range checked: the tensors tile the body exactly, so the body holds nothing they do not declare."""
    try:
        header = json.loads(head)
    except (ValueError, RecursionError) as err:  # RecursionError: nested too deep
        raise CheckpointError(f"{path}: not a valid safetensors file (header is not JSON: {err})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a valid safetensors file (header is not a JSON object)")
    ranges = []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise CheckpointError(f"{path}: safetensors metadata must map names to strings")
            continue
        ok = isinstance(info, dict) and info.get("dtype") in ST_ITEMSIZE and isinstance(info.get("shape"), list)
        shape, offsets = (info.get("shape"), info.get("data_offsets")) if ok else (None, None)
        ok = ok and len(shape) <= 8 and all(type(n) is int and 0 <= n <= MAX_FILE_BYTES for n in shape)
        ok = ok and isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
        if not ok:
            raise CheckpointError(f"{path}: tensor {str(name)[:60]!r} has a malformed header entry")
        numel = 1
        for n in shape:
            numel *= n
        begin, end = offsets
        if not 0 <= begin <= end <= body or end - begin != numel * ST_ITEMSIZE[info["dtype"]]:
            raise CheckpointError(
                f"{path}: tensor {str(name)[:60]!r} declares shape {shape} ({info['dtype']}) but "
                f"bytes [{begin}, {end}) of a {body}-byte body (truncated or corrupt)"
            )
        ranges.append((begin, end))
    at = 0
    for begin, end in sorted(ranges):
        if begin != at:
            break
        at = end
    if at != body:
        raise CheckpointError(
            f"{path}: not a valid safetensors file (its tensors cover {at} of its {body} data bytes: "
            "overlapping, with gaps or with trailing bytes)"
        )
    return header


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], bytes]:
    """(tensors, meta, the file's bytes): the header is read and checked first, then the body it declares, once."""
    with open_regular(path, MAX_CHECKPOINT_BYTES, "checkpoint file") as f:
        if f.size < 8:
            raise CheckpointError(f"{path}: not a valid safetensors file ({f.size} bytes, too short)")
        size = int.from_bytes(f.read_at(0, 8), "little")
        if size > MAX_HEADER_BYTES or 8 + size > f.size:
            raise CheckpointError(
                f"{path}: not a valid safetensors file (header of {size} bytes in a file of {f.size})"
            )
        _check_header(path, f.read_at(8, size), f.size - 8 - size)  # before the body is read
        data = f.read_all()
    header = _check_header(path, data[8 : 8 + size], len(data) - 8 - size)  # the bytes used: checked again
    meta_header = header.get("__metadata__") or {}
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, TypeError, RuntimeError, OverflowError) as err:
        raise CheckpointError(f"{path}: not a valid safetensors file (truncated or corrupt: {err})") from None
    if meta_header.get("format") != FORMAT:
        raise CheckpointError(
            f"{path}: not an interp checkpoint (header format {str(meta_header.get('format'))[:60]!r})"
        )
    version = meta_header.get("format_version")
    if version != str(FORMAT_VERSION):
        raise CheckpointError(
            f"{path}: unknown checkpoint format version {version!r:.60} (this interp reads {FORMAT_VERSION})"
        )
    try:
        meta = json.loads(meta_header["meta"])
    except (KeyError, ValueError, RecursionError):
        raise CheckpointError(f"{path}: checkpoint header has no readable 'meta' JSON") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: checkpoint 'meta' must be a JSON object, got {meta!r:.60}")
    return tensors, meta, data


def read_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and validate a file written by save_tensors; CheckpointError names the file and the problem."""
    tensors, meta, _ = _read(as_path(path))
    return tensors, meta


def model_tensors(model: LinearTransformer) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items()}


def save_checkpoint(
    path: str | Path,
    model: LinearTransformer,
    step: int,
    trained_on: TrainConfig | None = None,
    embed_config: bool = False,
    **extra: Any,
) -> None:
    """Atomically save the model's weights, its config and the training step; with `trained_on`, also what the
    model was trained on (noise prior, seed, n, input covariance), so that a copy outside its run still says so, and
    with `embed_config` the whole training config (a standalone file that says how it was trained: `train_config`)."""
    if not isinstance(model, MODELS):
        raise InvalidType(
            f"model must be an interp.LinearTransformer or VariantTransformer, got {type(model).__name__}"
        )
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise InvalidArgument(f"step must be an int >= 0, got {step!r:.60}")
    meta = {"model_config": model.cfg.to_dict(), "step": int(step)}
    if trained_on is not None:
        meta |= {"noise": trained_on.noise, "seed": trained_on.seed, "n": trained_on.n, "x_cov": trained_on.x_cov}
        if embed_config:
            meta["train_config"] = trained_on.to_dict()
    elif embed_config:
        raise InvalidArgument("embed_config needs the training config (trained_on)")
    save_tensors(path, model_tensors(model), meta | extra)


@functools.lru_cache(maxsize=64)
def _expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The tensor names and shapes a model of `cfg` holds, built on the meta device (nothing allocated); cached per
    config, as a report reads hundreds of checkpoints of a few configs."""
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in build(cfg, init=False).state_dict().items()}


def model_from_tensors(path: Path, tensors: dict[str, torch.Tensor], cfg_dict: Any) -> LinearTransformer:
    """A model from its weights and config dict; sizes and dtypes are checked before the model is allocated."""
    try:
        cfg = ModelConfig.from_dict(cfg_dict)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: bad model config ({err})") from None
    expected = _expected_shapes(cfg)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing:
        raise CheckpointError(f"{path}: missing tensors {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    if unexpected:
        raise CheckpointError(
            f"{path}: unexpected tensors {', '.join(unexpected[:4])}{' ...' if len(unexpected) > 4 else ''}"
        )
    for key, ref in expected.items():
        if tuple(tensors[key].shape) != ref:
            raise CheckpointError(
                f"{path}: tensor {key} has shape {list(tensors[key].shape)}, config implies {list(ref)}"
            )
        if tensors[key].dtype != cfg.torch_dtype:
            raise CheckpointError(
                f"{path}: tensor {key} is {str(tensors[key].dtype).removeprefix('torch.')}, its config says {cfg.dtype}"
            )
        if not torch.isfinite(tensors[key]).all():
            raise CheckpointError(f"{path}: tensor {key} holds non-finite values")
    model = build(cfg, init=False)
    model.load_state_dict(tensors)
    return model


def _check_meta(path: Path, meta: dict[str, Any]) -> None:
    if "model_config" not in meta:
        raise CheckpointError(f"{path}: checkpoint metadata has no model_config")
    step = meta.get("step")
    if step is not None and (type(step) is not int or step < 0):
        raise CheckpointError(f"{path}: checkpoint step must be an integer >= 0, got {step!r:.60}")
    noise = meta.get("noise")
    if noise is not None and not isinstance(noise, str):
        raise CheckpointError(
            f"{path}: the metadata field noise (the training noise prior) must be a spec string, got "
            f"{type(noise).__name__} {noise!r:.60}"
        )
    if noise is not None:
        try:
            as_prior(noise)
        except (ValueError, TypeError) as err:
            raise CheckpointError(f"{path}: bad training noise prior in the metadata ({err})") from None
    n = meta.get("n")
    if n is not None and (type(n) is not int or not 1 <= n <= MAX_N):
        raise CheckpointError(
            f"{path}: training context length n in the metadata must be in [1, {MAX_N}], got {n!r:.60}"
        )
    if "train_config" in meta:
        meta["train_config"] = _embedded_config(path, meta)
    if meta.get("x_cov") is not None:
        d = meta["model_config"].get("d") if isinstance(meta["model_config"], dict) else None
        try:
            meta["x_cov"] = covariance("x_cov", meta["x_cov"], d if type(d) is int else None)
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{path}: bad input covariance in the metadata ({err})") from None


def _embedded_config(path: Path, meta: dict[str, Any]) -> TrainConfig:
    """The training config a standalone checkpoint embeds, validated, and agreeing with the file's own model config,
    prior, seed and context length (CheckpointError naming the file otherwise)."""
    try:
        cfg = TrainConfig.from_dict(meta["train_config"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: bad embedded training config ({err})") from None
    mine = {"model_config": cfg.model.to_dict(), "noise": cfg.noise, "seed": cfg.seed, "n": cfg.n}
    for key, value in mine.items():
        if key in meta and meta[key] != value:
            raise CheckpointError(f"{path}: the embedded training config's {key} {value!r:.60} is not the file's")
    return cfg


def load_file(file: str | Path) -> tuple[LinearTransformer, dict[str, Any]]:
    """(model, metadata) of one checkpoint file (a resume file's weights count as a model)."""
    model, meta, _ = load_file_digest(file)
    return model, meta


def load_file_digest(file: str | Path) -> tuple[LinearTransformer, dict[str, Any], str]:
    """(model, metadata, SHA-256 of the file) of one checkpoint file: the digest is of the bytes the model was read
    from, taken once they have passed every check (a file that is not a valid checkpoint has none)."""
    file = as_path(file, "checkpoint file")
    tensors, meta, data = _read(file)
    if meta.get("format") == LEGACY_FORMAT:  # a file of the former second trainer (interp.variants.from_legacy)
        try:
            tensors, meta = from_legacy(tensors, meta)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise CheckpointError(f"{file}: bad variant checkpoint ({err!s:.200})") from None
    _check_meta(file, meta)
    tensors = {k.removeprefix("model."): v for k, v in tensors.items() if not k.startswith(("opt.", "rng."))}
    model = model_from_tensors(file, tensors, meta["model_config"])
    model.eval()
    return model, meta, hashlib.sha256(data).hexdigest()
