"""Other codebases' linear transformers as interp checkpoints (`interp import`): pure weight conversions, as
TransformerLens's, from another codebase's saved parameters to interp's P, Q [L, H, d+1, d+1].

interp's layer (README, Conventions): e_i ← e_i + Σ_k P_k S Q_k e_i, S = Σ_{j≤n} e_j e_jᵀ over the context only (the
query masked as a key), no 1/n, tokens e = (x, y), prediction ŷ = −y of the query. Each format maps its source's
conventions onto this one exactly, or refuses the file in one line saying which convention interp cannot represent:

- `ahn`: Ahn, Cheng, Daneshmand and Sra 2023 (*Transformers learn to implement preconditioned gradient descent for
  in-context learning*), PyTorch `Transformer_F`: one parameter `allparam` [L, H, 2, d, d], per layer and head the
  value matrix P = allparam[l, h, 0] and the merged key-query Q = allparam[l, h, 1] on the x-block. Their layer pads
  them to P̄ = [[P, 0], [0, 1]], Q̄ = [[Q, 0], [0, 0]] and computes Z + (1/N) Σ_{j≤N} (z_iᵀ Q̄ z_j) P̄ z_j: the query is
  masked as a key, and the prediction is −Z[N, d]. As interp's layer that is P_k = P̄ / N, Q_k = Q̄ᵀ (the score
  z_iᵀ Q̄ z_j = z_jᵀ Q̄ᵀ z_i), so N (`n`) is required. Their unconstrained variant stores P̄, Q̄ [d+1, d+1] whole.
- `oswald`: von Oswald et al. 2023 (*Transformers learn in-context by gradient descent*), the Haiku parameter tree of
  their linear-attention `Transformer` saved as .npz with '/'-joined names: per layer `.../layer_{l}/{query, key,
  value, linear}/w` (or one `.../multi_head_attention/...` block applied L times, their `deq` option), each a `w` in
  Haiku's x @ w convention. Keys and values come from the context only, and the prediction is −h[-1, -1], so head k
  is P_k = (W_V,k W_O,k)ᵀ, Q_k = W_K,k W_Q,kᵀ (no 1/n). The tree records neither the head count nor, for `deq`, the
  depth: both are arguments.
- `matrices`: per-layer, per-head P and Q, or W_Q, W_K, W_V, W_O, in a .safetensors or .npz file, with the source's
  conventions given: a 1/n scale, the readout's sign, the token layout (x then y, or y then x), the weights' vector
  convention.

Every source file is read through interp.files' bounded, regular-file-only reads, never unpickled beyond
`torch.load(weights_only=True)`, and `numpy.load(allow_pickle=False)`; a missing key, a wrong shape, a non-finite
value or a snapshot out of range is a CheckpointError naming the file. Nothing here writes but `write`, atomically.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from torch import Tensor

from interp.checkpoints import save_checkpoint
from interp.config import ModelConfig
from interp.files import CheckpointError, InvalidArgument, InvalidType, as_path, read_regular_file
from interp.limits import MAX_CHECKPOINT_BYTES, MAX_LAYERS, MAX_N
from interp.model import LinearTransformer
from interp.tasks import NoisePrior

FORMATS = ("ahn", "oswald", "matrices")
# Ahn et al. and von Oswald et al. train on noise-free regression, y = ⟨w, x⟩ with x, w ~ N(0, I): the paper's
# σ_max = 0 column. A file records no prior, so this is the one assumed unless the user gives another (the
# metadata says which).
DEFAULT_NOISE = "uniform:0"
SCALES = ("1", "1/n")
READOUTS = ("-y", "+y")
LAYOUTS = ("xy", "yx")
VECTORS = ("column", "row")


# ---------------------------------------------------------------------- pure conversions: source weights -> P, Q
def ahn_matrices(allparam: Tensor, n: int, unconstrained: bool = False) -> tuple[Tensor, Tensor]:
    """interp's (P, Q) [L, H, d+1, d+1], float64, of Ahn et al.'s `allparam` [L, H, 2, d, d] (`unconstrained`:
    [L, H, 2, d+1, d+1], their P̄ and Q̄ whole) for context length n (their N)."""
    a = allparam.detach().to(torch.float64)
    if unconstrained:
        P_bar, Q_bar = a[:, :, 0], a[:, :, 1]
    else:
        L, H, _, d, _ = a.shape
        P_bar = torch.zeros(L, H, d + 1, d + 1, dtype=torch.float64)
        Q_bar = torch.zeros_like(P_bar)
        P_bar[..., :d, :d], P_bar[..., d, d] = a[:, :, 0], 1.0  # P̄ = [[P, 0], [0, 1]]
        Q_bar[..., :d, :d] = a[:, :, 1]  # Q̄ = [[Q, 0], [0, 0]]
    # (1/N) Σ_j (z_iᵀ Q̄ z_j) P̄ z_j = (P̄ / N) S Q̄ᵀ z_i
    return P_bar / n, Q_bar.transpose(-1, -2).contiguous()


def heads_matrices(W_Q: Tensor, W_K: Tensor, W_V: Tensor, W_O: Tensor) -> tuple[Tensor, Tensor]:
    """(P, Q) [L, H, D, D] of per-head projections in the column-vector convention q = W_Q e, k = W_K e, v = W_V e,
    out = W_O o: W_Q, W_K [L, H, K, D], W_V [L, H, V, D], W_O [L, H, D, V]. The head's update
    W_O Σ_j v_j (k_jᵀ q_i) = (W_O W_V) S (W_Kᵀ W_Q) e_i, so P = W_O W_V, Q = W_Kᵀ W_Q."""
    f = lambda t: t.detach().to(torch.float64)
    return f(W_O) @ f(W_V), f(W_K).transpose(-1, -2) @ f(W_Q)


def oswald_heads(w: dict[str, Tensor], heads: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Column-convention (W_Q, W_K, W_V, W_O) [L, H, ·, ·] of von Oswald et al.'s Haiku projections, stacked over
    layers: query/key w [L, D, H·K], value w [L, D, H·V], linear w [L, H·V, D] (Haiku: y = x @ w, heads contiguous
    in the columns, out = concat_k(o_k) @ w)."""
    split = lambda t, H: t.reshape(t.shape[0], t.shape[1], H, -1).permute(0, 2, 3, 1)  # [L, D, H*K] -> [L, H, K, D]
    W_Q, W_K, W_V = split(w["query"], heads), split(w["key"], heads), split(w["value"], heads)
    L, HV, D = w["linear"].shape
    W_O = w["linear"].reshape(L, heads, HV // heads, D).transpose(-1, -2)  # [L, H, D, V]
    return W_Q, W_K, W_V, W_O


def permute_tokens(P: Tensor, Q: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """(P, Q) of a source whose tokens are (y, x) (`layout` "yx") in interp's (x, y) order: P' = Π P Πᵀ, Q' = Π Q Πᵀ
    with Π the permutation e = Π e_src; unchanged for "xy"."""
    if layout == "xy":
        return P, Q
    D = P.shape[-1]
    order = [*range(1, D), 0]  # interp's coordinate i is the source's order[i]: x_1..x_d, then y (the source's 0)
    return P[..., order, :][..., order], Q[..., order, :][..., order]


# ---------------------------------------------------------------------- what an import holds
@dataclass
class Imported:
    """A source file read and converted: every model it holds (a snapshot list is a trajectory) and what was mapped.

    `snapshots`: (step, model) in the file's order, step = the snapshot's index (0 for a single model); `picked`: the
    index of the model `model` returns (the last snapshot unless one was asked for). Every model is FULL, float64.
    """

    format: str
    source: Path
    sha256: str  # of the source file's bytes
    snapshots: list[tuple[int, LinearTransformer]]
    picked: int
    conventions: dict[str, Any]  # the source's conventions and how each was mapped
    noise: str  # the training prior recorded (DEFAULT_NOISE unless given)
    noise_given: bool
    n: int | None  # the source's context length (required where it scales by 1/n)
    container: dict[str, Any] = field(default_factory=dict)  # where in the file the weights were (key, list, ...)

    @property
    def model(self) -> LinearTransformer:
        return self.snapshots[self.picked][1]

    @property
    def step(self) -> int:
        return self.snapshots[self.picked][0]

    @property
    def trajectory(self) -> list[tuple[int, LinearTransformer]]:
        """Every snapshot as (step, model): what interp.probes.drift_trajectory takes."""
        return list(self.snapshots)

    @property
    def d(self) -> int:
        return self.model.cfg.d

    def meta(self, step: int | None = None) -> dict[str, Any]:
        """The checkpoint metadata of the snapshot at `step` (default: the picked one): the training prior, n and
        input covariance that interp's commands read, and `imported`, which records where the weights came from."""
        step = self.step if step is None else step
        return {
            "noise": self.noise,
            "n": self.n,
            "x_cov": None,  # x ~ N(0, I), as both sources train
            "imported": {
                "format": self.format,
                "source": str(self.source),
                "source_sha256": self.sha256,
                "snapshot": step,
                "snapshots": len(self.snapshots),
                **self.container,
                "d": self.d,
                "n": self.n,
                "noise": self.noise if self.noise_given else f"{self.noise} (assumed: the file records no prior)",
                "conventions": self.conventions,
            },
        }


# ---------------------------------------------------------------------- reading
def _read(path: Path) -> tuple[bytes, str]:
    data = read_regular_file(path, MAX_CHECKPOINT_BYTES, "source checkpoint")
    return data, hashlib.sha256(data).hexdigest()


def _first_line(err: BaseException) -> str:
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    return text[:160]


def _torch_load(path: Path, data: bytes) -> Any:
    """torch.load(weights_only=True) of the bytes: tensors, dicts, lists and numbers only, never code."""
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure of an untrusted file is the file's, in one line
        if "weights_only" in str(err) or "Unsupported global" in str(err):
            raise CheckpointError(
                f"{path}: a pickle that needs code to load, which torch.load(weights_only=True) refuses "
                f"({_first_line(err)}); save the tensors alone (model.state_dict())"
            ) from None
        raise CheckpointError(
            f"{path}: not a file torch.load reads ({type(err).__name__}: {_first_line(err)})"
        ) from None


def _npz_arrays(path: Path, data: bytes) -> dict[str, Tensor]:
    """The arrays of an .npz file, no pickles, each declared size bounded before it is decompressed."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            declared = sum(info.file_size for info in zf.infolist())
        if declared > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{path}: its arrays declare {declared} bytes, more than {MAX_CHECKPOINT_BYTES}")
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - a corrupt or truncated zip, an object array (a pickle), ...
        raise CheckpointError(
            f"{path}: not an .npz file numpy reads ({type(err).__name__}: {_first_line(err)})"
        ) from None
    out = {}
    for name, a in arrays.items():
        if a.dtype.kind not in "fiu":
            raise CheckpointError(f"{path}: array {name!r:.60} holds {a.dtype}, not numbers")
        out[name] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))
    return out


def _tensor_file(path: Path, data: bytes) -> dict[str, Tensor]:
    """The tensors of a .safetensors or .npz file (told apart by their bytes: an .npz is a zip)."""
    if data[:4] == b"PK\x03\x04":
        return _npz_arrays(path, data)
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, TypeError, RuntimeError, OverflowError) as err:
        raise CheckpointError(
            f"{path}: neither a .safetensors nor an .npz file ({type(err).__name__}: {_first_line(err)})"
        ) from None
    for name, t in tensors.items():
        if not (t.is_floating_point() or t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)):
            raise CheckpointError(f"{path}: tensor {name!r:.60} holds {t.dtype}, not real numbers")
    return {name: t.to(torch.float64) for name, t in tensors.items()}


def _check_finite(path: Path, name: str, t: Tensor) -> None:
    if not bool(torch.isfinite(t).all()):
        raise CheckpointError(f"{path}: {name} holds non-finite values (NaN or inf)")


def _model(path: Path, P: Tensor, Q: Tensor) -> LinearTransformer:
    """A float64 FULL model of (P, Q), refused (naming the file) when it overflows or exceeds interp's limits."""
    _check_finite(path, "the converted P, Q", torch.cat([P.flatten(), Q.flatten()]))
    L, H, D, _ = P.shape
    try:
        ModelConfig(d=D - 1, n_layers=L, n_heads=H, param="full", dtype="float64")  # limits, before allocating
        return LinearTransformer.from_matrices(P, Q, dtype="float64")
    except (ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: {err}") from None


def _pick(path: Path, count: int, snapshot: int | None) -> int:
    if snapshot is None:
        return count - 1
    if isinstance(snapshot, bool) or not isinstance(snapshot, int):
        raise InvalidType(f"snapshot must be an int, got {type(snapshot).__name__}")
    if not -count <= snapshot < count:
        raise CheckpointError(
            f"{path}: snapshot {snapshot} is out of range: the file holds {count} snapshot{'s' * (count != 1)} "
            f"(0..{count - 1})"
        )
    return snapshot % count


# ---------------------------------------------------------------------- ahn
def _allparam_keys(obj: dict, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """(key path, value) of every `allparam` entry of a state dict, also one or two dicts down (a checkpoint that
    wraps its state_dict, a module prefix such as `module.allparam`)."""
    found = []
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(key, str) and (key == "allparam" or key.endswith(".allparam")):
            found.append((name, value))
        elif isinstance(value, dict) and depth < 2:
            found += _allparam_keys(value, f"{name}/", depth + 1)
    return found


def _ahn_snapshots(path: Path, obj: Any, key: str | None) -> tuple[list[Any], dict[str, Any]]:
    """The allparam snapshots of a file Ahn et al.'s code writes, and where they were."""
    if isinstance(obj, dict) and "hist_dict" in obj:
        hist = obj["hist_dict"]
        if not isinstance(hist, dict) or not hist:
            raise CheckpointError(f"{path}: 'hist_dict' must be a non-empty dict of snapshot lists")
        names = {str(k): k for k in hist}
        if key is None:
            if len(hist) > 1:
                shown = ", ".join(sorted(names)[:8])
                raise CheckpointError(f"{path}: 'hist_dict' holds {len(hist)} runs ({shown}); pick one with --key")
            key = next(iter(names))
        if key not in names:
            raise CheckpointError(f"{path}: 'hist_dict' has no key {key!r:.60} (it has {', '.join(sorted(names)[:8])})")
        snaps = hist[names[key]]
        where = {"container": "hist_dict", "key": key}
    elif isinstance(obj, dict) and "hist_list" in obj:
        snaps, where = obj["hist_list"], {"container": "hist_list"}
    elif isinstance(obj, Tensor):
        snaps, where = [obj], {"container": "tensor"}
    elif isinstance(obj, (list, tuple)):
        snaps, where = obj, {"container": "list"}
    elif isinstance(obj, dict):
        found = _allparam_keys(obj)
        if not found:
            keys = ", ".join(str(k)[:40] for k in list(obj)[:8])
            raise CheckpointError(f"{path}: no 'allparam' tensor, 'hist_dict' or 'hist_list' (keys: {keys or 'none'})")
        if len(found) > 1:
            raise CheckpointError(f"{path}: {len(found)} 'allparam' tensors ({', '.join(k for k, _ in found[:4])})")
        snaps, where = [found[0][1]], {"container": "state_dict", "key": found[0][0]}
    else:
        raise CheckpointError(f"{path}: holds a {type(obj).__name__}, not a state dict or snapshot list")
    if not isinstance(snaps, (list, tuple)) or not snaps:
        raise CheckpointError(f"{path}: the snapshot list ({where['container']}) must be a non-empty list")
    return list(snaps), where


def _check_allparam(path: Path, i: int, count: int, t: Any, unconstrained: bool) -> Tensor:
    what = "allparam" if count == 1 else f"snapshot {i}"
    if not isinstance(t, Tensor):
        raise CheckpointError(f"{path}: {what} is a {type(t).__name__}, not a tensor")
    if not t.is_floating_point():
        raise CheckpointError(f"{path}: {what} holds {str(t.dtype).removeprefix('torch.')}, not floating point")
    side = "d+1" if unconstrained else "d"
    if t.ndim != 5 or t.shape[2] != 2 or t.shape[3] != t.shape[4] or 0 in t.shape:
        raise CheckpointError(f"{path}: {what} has shape {list(t.shape)}, not [L, H, 2, {side}, {side}]")
    if unconstrained and t.shape[3] < 2:
        raise CheckpointError(f"{path}: {what} has shape {list(t.shape)}: d+1 must be >= 2")
    _check_finite(path, what, t)
    return t


def read_ahn(
    file: str | Path,
    n: int,
    snapshot: int | None = None,
    key: str | None = None,
    unconstrained: bool = False,
    noise: str | None = None,
) -> Imported:
    """Ahn et al.'s saved state dict (`allparam`, any module prefix), or a notebook's snapshot file
    ({'hist_dict': {key: [allparam, ...]}} or {'hist_list': [...]}), as interp models; `n` is their N."""
    path = as_path(file, "source checkpoint")
    n = _check_n(n, required="ahn")
    data, digest = _read(path)
    snaps, where = _ahn_snapshots(path, _torch_load(path, data), key)
    tensors = [_check_allparam(path, i, len(snaps), t, unconstrained) for i, t in enumerate(snaps)]
    if len({tuple(t.shape) for t in tensors}) > 1:
        raise CheckpointError(
            f"{path}: its snapshots differ in shape ({', '.join(str(list(t.shape)) for t in tensors[:3])})"
        )
    picked = _pick(path, len(tensors), snapshot)
    models = [(i, _model(path, *ahn_matrices(t, n, unconstrained))) for i, t in enumerate(tensors)]
    conventions = {
        "source_layer": "Z + (1/N) sum_{j<=N} (z_i^T Qbar z_j) Pbar z_j; query masked as a key; prediction -Z[N, d]",
        "padding": "Pbar = allparam[l,h,0] whole" if unconstrained else "Pbar = [[allparam[l,h,0], 0], [0, 1]]",
        "padding_q": "Qbar = allparam[l,h,1] whole" if unconstrained else "Qbar = [[allparam[l,h,1], 0], [0, 0]]",
        "mapped": "P = Pbar / N, Q = Qbar^T",
        "scale": "1/n",
        "readout": "-y",
        "layout": "xy",
        "query_as_key": False,
    }
    return _imported("ahn", path, digest, models, picked, conventions, noise, n, where)


# ---------------------------------------------------------------------- oswald
_OSWALD = re.compile(
    r"^(?:(?P<scope>.*)/)?(?:(?P<layer>layer_(?P<l>\d{1,4}))|multi_head_attention)/(?P<proj>query|key|value|linear)/(?P<param>w|b)$"
)


def _oswald_refusal(name: str) -> str:
    """Why a parameter of von Oswald et al.'s tree has no place in interp's layer."""
    low = name.lower()
    if low.endswith("/b") or low.endswith("/bias"):
        return "a bias (use_bias_p=True): interp's layer has no bias"
    if "norm" in low or low.endswith(("/scale", "/offset")):
        return "a LayerNorm (use_layer_norm=True): interp's layer has none"
    if "non_lin_mix" in low:
        return "a softmax-linear mix (use_non_lin_mix=True): interp's attention is linear"
    if "emb" in low or "vocab" in low or "input_mlp" in low:
        return "an input embedding (input_mapping / input_mlp / vocab): interp's tokens are the raw (x, y)"
    if "mlp" in low or re.search(r"/linear(_\d+)?/w$", low):
        return "an MLP or output mapping (only_attention=False / output_mapping=True): interp's model is attention only"
    return "not a parameter of a linear self-attention layer"


def read_oswald(
    file: str | Path,
    heads: int,
    layers: int | None = None,
    n: int | None = None,
    noise: str | None = None,
) -> Imported:
    """von Oswald et al.'s Haiku parameter tree (.npz, '/'-joined names) of a linear-attention-only Transformer
    (use_softmax, use_bias_p, use_layer_norm, input_mapping, output_mapping, use_pe all off; include_query off: the
    query is masked as a key; y_update off, dampening 1, clip 0). `heads`: their num_heads; `layers`: L for one
    shared block (deq), optional for separate layer_{l} blocks (checked when given)."""
    path = as_path(file, "source checkpoint")
    heads = _count("heads", heads)
    layers = None if layers is None else _count("layers", layers, MAX_LAYERS)
    n = _check_n(n)
    data, digest = _read(path)
    arrays = _npz_arrays(path, data)
    blocks: dict[int | None, dict[str, Tensor]] = {}
    for name, a in arrays.items():
        m = _OSWALD.match(name)
        if m is None or m["param"] == "b":
            raise CheckpointError(f"{path}: parameter {name!r:.80} is {_oswald_refusal(name)}")
        blocks.setdefault(None if m["layer"] is None else int(m["l"]), {})[m["proj"]] = a
    if not blocks:
        raise CheckpointError(
            f"{path}: no parameters (expected .../layer_0/query/w, ... or .../multi_head_attention/...)"
        )
    if None in blocks and len(blocks) > 1:
        raise CheckpointError(f"{path}: holds both a shared (deq) multi_head_attention block and layer_{{l}} blocks")
    if None in blocks:
        if layers is None:
            raise CheckpointError(
                f"{path}: one shared block (deq) applied L times: the file does not record L; give --layers"
            )
        order, deq = [None] * layers, True
    else:
        order, deq = sorted(blocks), False
        if order != list(range(len(order))):
            raise CheckpointError(f"{path}: layers {order[:8]} are not layer_0..layer_{len(order) - 1}")
        if layers is not None and layers != len(order):
            raise CheckpointError(f"{path}: holds {len(order)} layers, --layers says {layers}")
    for l in sorted(blocks, key=lambda k: -1 if k is None else k):
        where = "multi_head_attention" if l is None else f"layer_{l}"
        missing = [p for p in ("query", "key", "value", "linear") if p not in blocks[l]]
        if missing:
            raise CheckpointError(f"{path}: {where} has no {'/w, '.join(missing)}/w")
        b = blocks[l]
        D = b["query"].shape[0] if b["query"].ndim == 2 else -1
        ok = all(b[p].ndim == 2 for p in b) and D >= 2
        ok = ok and b["key"].shape == b["query"].shape and b["value"].shape[0] == D and b["linear"].shape[1] == D
        ok = ok and b["linear"].shape[0] == b["value"].shape[1]
        if not ok:
            shapes = ", ".join(f"{p} {list(b[p].shape)}" for p in ("query", "key", "value", "linear"))
            raise CheckpointError(
                f"{path}: {where} has shapes {shapes}; expected query/key [D, H*K], value [D, H*V], linear [H*V, D]"
            )
        if b["query"].shape[1] % heads or b["value"].shape[1] % heads:
            raise CheckpointError(
                f"{path}: {where}'s {b['query'].shape[1]} key and {b['value'].shape[1]} value columns do not split "
                f"into {heads} heads"
            )
        for p, t in b.items():
            _check_finite(path, f"{where}/{p}/w", t)
    shapes = {tuple((p, tuple(t.shape)) for p, t in sorted(b.items())) for b in blocks.values()}
    if len(shapes) > 1:
        raise CheckpointError(f"{path}: its layers differ in shape")
    stacked = {p: torch.stack([blocks[l][p] for l in order]) for p in ("query", "key", "value", "linear")}
    P, Q = heads_matrices(*oswald_heads(stacked, heads))
    conventions = {
        "source_layer": "h + concat_k((h W_Q,k)(h_ctx W_K,k)^T (h_ctx W_V,k)) W_O; keys and values from the context "
        "only; prediction -h[-1, -1]",
        "mapped": "P_k = (W_V,k W_O,k)^T, Q_k = W_K,k W_Q,k^T (Haiku's x @ w, heads contiguous in the columns)",
        "deq": deq,
        "heads": heads,
        "scale": "1",
        "readout": "-y",
        "layout": "xy",
        "query_as_key": False,
    }
    return _imported("oswald", path, digest, [(0, _model(path, P, Q))], 0, conventions, noise, n, {"deq": deq})


# ---------------------------------------------------------------------- matrices
_PQ = ("P", "Q")
_W = ("W_Q", "W_K", "W_V", "W_O")


def _matrices_refusal(name: str) -> str:
    low = name.lower()
    if low.startswith("b_") or "bias" in low or low.endswith(".b"):
        return "a bias: interp's layer e ← e + Σ_k P_k S Q_k e has none"
    if "ln" in low.split("_") or "norm" in low:
        return "a LayerNorm: interp's layer has none"
    return f"not one of {', '.join(_PQ)} or {', '.join(_W)}"


def check_conventions(scale: str, readout: str, layout: str, vectors: str, query_as_key: bool) -> None:
    """InvalidArgument, in one line saying which and why, for a convention interp's layer cannot represent exactly."""
    for name, value, allowed in (
        ("scale", scale, SCALES),
        ("readout", readout, READOUTS),
        ("layout", layout, LAYOUTS),
        ("vectors", vectors, VECTORS),
    ):
        if value not in allowed:
            raise InvalidArgument(f"{name} must be one of {', '.join(allowed)}, got {value!r:.60}")
    if query_as_key:
        raise InvalidArgument(
            "query_as_key: a source whose query is also a key cannot be represented: interp's S = Σ_{j≤n} e_j e_jᵀ "
            "masks the query, and no P, Q make the query's own term e_q e_qᵀ appear"
        )
    if readout == "+y":
        raise InvalidArgument(
            "readout +y: interp reads ŷ = −y of the query after a residual e ← e + Σ_k P_k S Q_k e; flipping the "
            "readout's sign would need −2·y in the residual, which no P, Q give (S depends on the data)"
        )


def read_matrices(
    file: str | Path,
    scale: str = "1",
    readout: str = "-y",
    layout: str = "xy",
    vectors: str = "column",
    query_as_key: bool = False,
    n: int | None = None,
    noise: str | None = None,
) -> Imported:
    """Per-layer, per-head P and Q [L, H, D, D] (or [L, D, D]: one head), or W_Q, W_K [L, H, K, D], W_V [L, H, V, D],
    W_O [L, H, D, V] in the column convention q = W_Q e (`vectors` "row": q = e W_Q, each stored transposed, as
    TransformerLens stores them), from a .safetensors or .npz file, with the source's conventions: `scale` "1/n"
    (the source divides each update by n: P ← P / n, so n is required), `readout` (only −y is representable),
    `layout` "yx" (tokens (y, x): permuted to interp's (x, y)), `query_as_key` (refused)."""
    check_conventions(scale, readout, layout, vectors, query_as_key)
    path = as_path(file, "source checkpoint")
    n = _check_n(n, required="matrices with scale 1/n" if scale == "1/n" else None)
    data, digest = _read(path)
    tensors = _tensor_file(path, data)
    for name in tensors:
        if name not in (*_PQ, *_W):
            raise CheckpointError(f"{path}: tensor {name!r:.60} is {_matrices_refusal(name)}")
    if set(tensors) == set(_PQ):
        names = _PQ
    elif set(tensors) == set(_W):
        names = _W
    else:
        have = ", ".join(sorted(tensors)) or "none"
        raise CheckpointError(f"{path}: needs tensors P and Q, or W_Q, W_K, W_V and W_O; it has {have}")
    ts = {}
    for name in names:
        t = tensors[name]
        if t.ndim == 3:
            t = t[:, None]  # [L, ·, ·]: one head
        if t.ndim != 4 or 0 in t.shape:
            raise CheckpointError(f"{path}: tensor {name} has shape {list(tensors[name].shape)}, not [L, H, ·, ·]")
        _check_finite(path, f"tensor {name}", t)
        ts[name] = t.transpose(-1, -2) if vectors == "row" else t
    if names == _PQ:
        P, Q = ts["P"], ts["Q"]
        if P.shape != Q.shape or P.shape[-1] != P.shape[-2] or P.shape[-1] < 2:
            raise CheckpointError(
                f"{path}: P and Q must both be [L, H, d+1, d+1], got {list(P.shape)} and {list(Q.shape)}"
            )
    else:
        Wq, Wk, Wv, Wo = (ts[k] for k in _W)
        L, H, K, D = Wq.shape
        V = Wv.shape[2]
        want = {"W_Q": (L, H, K, D), "W_K": (L, H, K, D), "W_V": (L, H, V, D), "W_O": (L, H, D, V)}
        for name, shape in want.items():
            if tuple(ts[name].shape) != shape or D < 2:
                stored = "[L, H, D, K] (row vectors)" if vectors == "row" else "[L, H, K, D] (column vectors)"
                raise CheckpointError(
                    f"{path}: tensor {name} has shape {list(tensors[name].shape)}; with W_Q {stored} it must be "
                    f"{list(shape) if vectors == 'column' else [*shape[:2], shape[3], shape[2]]}"
                )
        P, Q = heads_matrices(Wq, Wk, Wv, Wo)
    P, Q = permute_tokens(P.to(torch.float64), Q.to(torch.float64), layout)
    if scale == "1/n":
        P = P / n  # the source's (1/n) Σ_j: absorbed into P
    conventions = {
        "weights": "P, Q" if names == _PQ else "W_Q, W_K, W_V, W_O -> P = W_O W_V, Q = W_K^T W_Q",
        "vectors": vectors,
        "scale": scale,
        "readout": readout,
        "layout": layout,
        "query_as_key": query_as_key,
        "mapped": ("P / n" if scale == "1/n" else "P")
        + (", tokens permuted (y, x) -> (x, y)" if layout == "yx" else ""),
    }
    return _imported("matrices", path, digest, [(0, _model(path, P, Q))], 0, conventions, noise, n, {})


# ---------------------------------------------------------------------- common
def _count(name: str, value: Any, maximum: int = 1 << 30) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
    if not 1 <= value <= maximum:
        raise InvalidArgument(f"{name} must be in [1, {maximum}], got {value}")
    return value


def _check_n(n: Any, required: str | None = None) -> int | None:
    if n is None:
        if required:
            raise InvalidArgument(f"n: the context length is required for {required} (the source divides by n)")
        return None
    return _count("n", n, MAX_N)


def _imported(fmt, path, digest, models, picked, conventions, noise, n, where) -> Imported:
    given = noise is not None
    try:
        spec = NoisePrior.parse(DEFAULT_NOISE if noise is None else noise).spec
    except ValueError as err:
        raise InvalidArgument(f"noise: {err}") from None
    return Imported(fmt, path, digest, models, picked, conventions, spec, given, n, where)


READERS = {"ahn": read_ahn, "oswald": read_oswald, "matrices": read_matrices}


def read(format: str, file: str | Path, **options: Any) -> Imported:
    """The source file `file` in `format` (FORMATS) as interp models; `options` are the reader's (read_ahn,
    read_oswald, read_matrices)."""
    if format not in READERS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {format!r:.60}")
    return READERS[format](file, **options)


def write(imported: Imported, out: str | Path) -> Path:
    """The picked model as one standalone interp checkpoint (atomic: nothing is left at `out` on failure)."""
    out = as_path(out, "output checkpoint")
    save_checkpoint(out, imported.model, imported.step, **imported.meta())
    return out


def import_checkpoint(format: str, file: str | Path, out: str | Path, **options: Any) -> Imported:
    """Read `file` in `format` and write its model to `out` (read, then write): what `interp import` does."""
    imported = read(format, file, **options)
    write(imported, out)
    return imported


__all__ = [
    "DEFAULT_NOISE",
    "FORMATS",
    "Imported",
    "ahn_matrices",
    "check_conventions",
    "heads_matrices",
    "import_checkpoint",
    "oswald_heads",
    "permute_tokens",
    "read",
    "read_ahn",
    "read_matrices",
    "read_oswald",
    "write",
]
