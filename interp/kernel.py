"""interp's compiled CPU kernel, loaded through ctypes: the fused moment recursion (interp/csrc/moments.cpp).

`pip install` compiles them into interp/_moments_cpu (setup.py; an optional build: without a C++17 compiler interp
installs and runs on torch alone). `available()` says whether it loaded; the environment variable INTERP_KERNEL=0
turns it off. `call` runs the recursion on contiguous CPU tensors, splitting the batch over
torch.get_num_threads() Python threads (ctypes releases the GIL during each call); interp.moments is its one user.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import torch
from torch import Tensor

ROW_LENGTHS = (8, 16, 32, 64)  # compiled SIMD row lengths: Ŝ of width d + 2 runs in the smallest that holds it
ABI = 5  # moments.cpp's interp_moments_abi()
MODES = {"forward": 0, "backward": 1, "fused": 2}
_DTYPES = {torch.float32: 0, torch.float64: 1}
_POINTERS = ("S0", "q0", "P", "Q", "Pt", "y", "gy", "dP", "dQt", "G0", "x", "xq", "w", "sigma", "xi", "weight", "c")


@cache
def _library() -> ctypes.CDLL | None:
    if os.environ.get("INTERP_KERNEL", "1") == "0":
        return None
    spec = importlib.util.find_spec("interp._moments_cpu")  # the built file; it is loaded by ctypes, not imported
    if spec is None or spec.origin is None:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:  # e.g. a file left from another platform: run on torch
        return None
    abi = getattr(lib, "interp_moments_abi", None)
    if abi is None or abi() != ABI:  # built from an older moments.cpp: run on torch until pip install rebuilds it
        return None
    fn = lib.interp_moments
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int] * 3 + [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)]
    fn.argtypes += [ctypes.c_double, ctypes.c_int]
    return lib


def available() -> bool:
    """Whether the compiled kernel is importable (and not switched off with INTERP_KERNEL=0)."""
    return _library() is not None


def row_length(width: int) -> int | None:
    """The compiled row length for Ŝ of `width` = d + 2, or None when it is wider than the widest."""
    return next((ld for ld in ROW_LENGTHS if width <= ld), None)


def supports(t: Tensor, width: int) -> bool:
    """Whether the kernel runs Ŝ of `width` for tensors like `t` (CPU, float32 or float64)."""
    return available() and t.device.type == "cpu" and t.dtype in _DTYPES and row_length(width) is not None


def _ptr(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def call(
    mode: str,
    full: bool,
    ld: int,
    L: int,
    H: int,
    t: dict[str, Tensor],
    parts: list[dict[str, Tensor]] | None = None,
    cap: float = 0.0,
    robust: bool = False,
) -> None:
    """Run the kernel over the batch of `t`, contiguous tensors named as moments.cpp's Args: the layer maps (FULL:
    "P", "Q", "Pt"; DIAG: "P" = ω [L, 4], with parts' "dP" = ∂/∂ω [L, 4]) and, by `mode`:

    - "forward": reads "S0", "q0", writes "y" (the prediction);
    - "backward": reads "S0", "q0", "gy", adds thread i's parameter gradients into parts[i]["dP"] (and "dQt" for
      FULL), and writes G at the input into t["G0"] when given;
    - "fused": reads a task draw ("x", "xq", "w", "sigma", "xi", as interp.tasks.TaskDraw) and "weight" (or
      none), writes the half squared errors into "y" and the loss terms into "c" (plain, or the robust guard's
      with `cap`), adds their gradients into parts as "backward".

    One slice of the batch per thread: len(parts) threads with parts, `threads(B)` without.
    """
    fn = _library().interp_moments
    if "x" in t:  # a draw: x [B, n, d]
        x = t["x"]
        B, n, D = x.shape[0], x.shape[1], x.shape[2] + 1
    else:
        x = t["q0"]
        (B, D), n = x.shape, 0
    k = threads(B) if parts is None else len(parts)
    bounds = [B * i // k for i in range(k + 1)]
    dtype = _DTYPES[x.dtype]

    def one(i: int) -> int:
        g = t if parts is None else {**t, **parts[i]}
        dims = (ctypes.c_int64 * 7)(ld, D, L, H, bounds[i], bounds[i + 1], n)
        ptrs = (ctypes.c_void_p * len(_POINTERS))(*[_ptr(g.get(name)) for name in _POINTERS])
        return fn(dtype, MODES[mode], int(full), dims, ptrs, cap, int(robust))

    codes = [one(0)] if k == 1 else list(_pool(k).map(one, range(k)))
    if any(codes):
        raise RuntimeError(f"interp kernel: no compiled row length {ld}")


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    """n worker threads, started on the first multi-threaded call and kept (a pool per call costs ~0.1 ms)."""
    return ThreadPoolExecutor(n, thread_name_prefix="interp-kernel")


def threads(B: int) -> int:
    """Python threads a batch of B sequences is split over: torch's thread count, at least 64 sequences each."""
    return max(1, min(torch.get_num_threads(), B // 64))


__all__ = ["available", "call", "row_length", "supports", "threads", "ROW_LENGTHS"]
