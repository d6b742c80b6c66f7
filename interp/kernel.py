"""The fused CPU kernel of the moment recursion (interp/csrc/moments.cpp), loaded through ctypes.

`pip install` compiles it into interp/_moments_cpu (setup.py; an optional build: without a C++17 compiler interp
installs and runs on the torch backend). `available()` says whether it loaded; the environment variable
INTERP_KERNEL=0 turns it off. `call` runs it on contiguous CPU tensors, splitting the batch over
torch.get_num_threads() Python threads (ctypes releases the GIL during each call). interp.moments is its one user.
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
_DTYPES = {torch.float32: 0, torch.float64: 1}


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
    fn = lib.interp_moments
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int] * 3 + [ctypes.c_int64] * 7 + [ctypes.c_void_p] * 10
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


def call(full: bool, ld: int, L: int, H: int, t: dict[str, Tensor], parts: list[dict[str, Tensor]] | None) -> None:
    """Run the kernel over the batch of `t`: contiguous tensors "S0", "q0", "P", "Q", "Pt" (moments.cpp's Args).

    Forward (parts None) writes t["y"]. Backward reads t["gy"], adds thread i's parameter gradients into
    parts[i]["dP"] (and "dQt" for FULL), and writes G at the input into t["G0"] when given. One slice of the batch
    per thread: len(parts) threads for a backward, `threads(B)` for a forward.
    """
    fn = _library().interp_moments
    B, D = t["q0"].shape
    n = threads(B) if parts is None else len(parts)
    bounds = [B * i // n for i in range(n + 1)]
    dtype = _DTYPES[t["q0"].dtype]

    def one(i: int) -> int:
        g = {} if parts is None else parts[i]
        ptrs = [_ptr(t.get(k)) for k in ("S0", "q0", "P", "Q", "Pt", "y", "gy")]
        ptrs += [_ptr(g.get("dP")), _ptr(g.get("dQt")), _ptr(t.get("G0"))]
        return fn(dtype, int(full), int(parts is not None), ld, B, D, L, H, bounds[i], bounds[i + 1], *ptrs)

    codes = [one(0)] if n == 1 else list(_pool(n).map(one, range(n)))
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
