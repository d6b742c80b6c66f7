"""interp's compiled CPU kernels, loaded through ctypes: the fused moment recursion (interp/csrc/moments.cpp) and
torch's standard normal draws made faster (interp/csrc/normal.cpp).

`pip install` compiles them into interp/_moments_cpu (setup.py; an optional build: without a C++17 compiler interp
installs and runs on torch alone). `available()` says whether it loaded; the environment variable INTERP_KERNEL=0
turns it off. `call` runs the recursion on contiguous CPU tensors, splitting the batch over
torch.get_num_threads() Python threads (ctypes releases the GIL during each call); interp.moments is its one user.
`randn` is torch.randn for the task draws (interp.tasks).
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
    lib.interp_randn_f32.restype = ctypes.c_int
    lib.interp_randn_f32.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
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


def randn(*shape: int, generator: torch.Generator, dtype=torch.float32, device="cpu") -> Tensor:
    """torch.randn(*shape, generator=generator, dtype=dtype, device=device), on the kernel where it can make it.

    For a float32 CPU draw of at least 16 numbers (interp/csrc/normal.cpp, 3-5x faster than torch): the same
    Mersenne Twister numbers as torch.randn, and the generator left in the same state, so every later draw is
    unchanged; the same Box-Muller pairing; the transform computed in float32 like torch's, with its own log and
    sincos, so each number equals torch's to a few float32 ulps (88% of them bit for bit; at most 4 ulps in 10^7
    draws). Anything else (another dtype or device, fewer numbers, a torch whose generator layout this build does not
    know: checked once against torch.randn), or the environment variable INTERP_RANDN=0, is torch.randn itself.
    """
    numel = 1
    for s in shape:
        numel *= s
    if (
        dtype != torch.float32
        or torch.device(device).type != "cpu"
        or generator.device.type != "cpu"
        or numel < 16
        or os.environ.get("INTERP_RANDN", "1") == "0"
        or not _randn_agrees()
    ):
        return torch.randn(*shape, generator=generator, dtype=dtype, device=device)
    return _randn(shape, generator)


def _randn(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
    state = generator.get_state()
    out = torch.empty(shape, dtype=torch.float32)
    if _library().interp_randn_f32(out.data_ptr(), out.numel(), state.data_ptr()) != 0:
        raise RuntimeError("interp kernel: randn needs at least 16 numbers")
    generator.set_state(state)
    return out


# torch.randn's float32 draws agree with the kernel's to this many ulps (`randn`; at most 4 seen in 10^7 draws).
RANDN_ULPS = 8


@cache
def _randn_agrees() -> bool:
    """Whether the kernel's randn reproduces torch.randn here: the same generator state after 1000 + 7 draws and the
    same numbers to RANDN_ULPS (False without the kernel, or for a torch whose generator state it does not know)."""
    if not available() or torch.Generator().get_state().numel() != _STATE_BYTES:
        return False
    ours, theirs = torch.Generator().manual_seed(20261130), torch.Generator().manual_seed(20261130)
    for g in (ours, theirs):
        torch.rand(5, generator=g)  # start mid-block
    a, b = _randn((1007,), ours), torch.randn(1007, generator=theirs)
    return torch.equal(ours.get_state(), theirs.get_state()) and bool((_ulps(a, b) <= RANDN_ULPS).all())


_STATE_BYTES = 5056  # torch's CPUGeneratorImplState, the layout normal.cpp reads


def _ulps(a: Tensor, b: Tensor) -> Tensor:
    """|a - b| in float32 ulps of |b| (of 1e-6 at least, for numbers near zero)."""
    a, b = a.float(), b.float()
    mag = b.abs().clamp_min(1e-6)
    return (a - b).abs() / (torch.nextafter(mag, torch.tensor(float("inf"))) - mag)


__all__ = ["available", "call", "randn", "row_length", "supports", "threads", "ROW_LENGTHS"]
