"""interp's compiled CPU kernel, loaded through ctypes: the fused moment recursion (interp/csrc/moments.cpp).

`pip install` compiles it once per instruction set (setup.py): interp/_moments_avx512, _moments_avx2 and
_moments_portable on x86-64 (vectors of 64, 32 and 16 bytes), _moments_portable elsewhere (NEON on aarch64). The
widest build that the CPU runs is loaded: the build named by torch.backends.cpu.get_cpu_capability() (so
ATEN_CPU_CAPABILITY narrows both), or the one named by the environment variable INTERP_KERNEL_ISA, and never a
wider one. The build is optional: without a C++17 compiler interp installs and runs on torch alone.

`available()` says whether a build loaded (INTERP_KERNEL=0 turns it off); `info()` says which, on what CPU, and why.
Whether the trainer and the models' hook-free forward take it by default is decided in interp.moments
(`kernel_choice`: only where it measures faster than the torch backend). `call` runs the recursion on CPU tensors,
checked at this boundary, splitting the batch over torch.get_num_threads() Python threads (ctypes releases the GIL
during each call); interp.moments is its one user.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from typing import Any

import torch
from torch import Tensor

from interp.files import InvalidArgument

ROW_LENGTHS = (8, 16, 32, 64)  # compiled SIMD row lengths: Ŝ of width d + 2 runs in the smallest that holds it
ABI = 6  # moments.cpp's interp_moments_abi()
BUILDS = ("avx512", "avx2", "portable")  # widest first
_CAPABILITY = {"AVX512": "avx512", "AVX2": "avx2"}  # torch's CPU capability -> the widest build it runs
MODES = {"forward": 0, "backward": 1, "fused": 2}
_DTYPES = {torch.float32: 0, torch.float64: 1}
_POINTERS = ("S0", "q0", "P", "Q", "Pt", "y", "gy", "dP", "dQt", "G0", "x", "xq", "w", "sigma", "xi", "weight", "c")


class KernelError(InvalidArgument):
    """A tensor handed to the kernel has the wrong shape, dtype, device or layout (the message names it)."""


def cpu_capability() -> str:
    """torch's name for the CPU's vector ISA: "AVX512", "AVX2", "DEFAULT", ... (torch.backends.cpu)."""
    return torch.backends.cpu.get_cpu_capability()


@cache
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux; else what platform knows), read once: kernel_choice() asks on
    every training step."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for line in f.read(1 << 16).decode(errors="replace").splitlines():
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def runnable() -> list[str]:
    """The builds this CPU runs, widest first (whether or not they are installed)."""
    widest = _CAPABILITY.get(cpu_capability(), "portable")
    return list(BUILDS[BUILDS.index(widest) :])


def _wanted(forced: str | None) -> tuple[list[str], str]:
    """(the builds to try, widest first; why the first is the first)."""
    allowed = runnable()
    source = "use()" if forced else "INTERP_KERNEL_ISA"
    forced = forced or os.environ.get("INTERP_KERNEL_ISA")
    if forced:
        if forced not in allowed:
            return allowed, f"{source}={forced} ignored (this CPU runs {', '.join(allowed)})"
        return allowed[allowed.index(forced) :], f"{source}={forced}"
    return allowed, f"torch reports CPU capability {cpu_capability()}"


_ACTIVE: list[str | None] = [None]  # the build chosen with use(); None: the CPU's widest


@contextmanager
def use(isa: str | None):
    """Run the kernel's `isa` build (one that this CPU runs, see runnable()) inside the block, then the default
    again: benchmarks and tests compare the builds in one process."""
    if isa is not None and isa not in runnable():
        raise KernelError(f"interp kernel: this CPU does not run the {isa} build (it runs {', '.join(runnable())})")
    before, _ACTIVE[0] = _ACTIVE[0], isa
    try:
        yield
    finally:
        _ACTIVE[0] = before


def _load() -> tuple[ctypes.CDLL | None, dict[str, Any]]:
    """(the active build or None, what info() reports about it)."""
    return _load_build(_ACTIVE[0], os.environ.get("INTERP_KERNEL", "1"), os.environ.get("INTERP_KERNEL_ISA"))


@cache
def _load_build(forced: str | None, switch: str, _env_isa: str | None) -> tuple[ctypes.CDLL | None, dict[str, Any]]:
    builds, why = _wanted(forced)
    found = [b for b in BUILDS if _origin(b)]
    state: dict[str, Any] = {"built": found, "isa": None, "why": why}
    if switch == "0" and forced is None:
        state["why"] = "switched off with INTERP_KERNEL=0"
        return None, state
    for build in builds:
        origin = _origin(build)
        if origin is None:
            continue
        try:
            lib = ctypes.CDLL(origin)
        except OSError:  # e.g. a file left from another platform: try the next, else run on torch
            continue
        abi = getattr(lib, "interp_moments_abi", None)
        if abi is None or abi() != ABI:  # built from an older moments.cpp: run on torch until pip install rebuilds it
            state["why"] = f"{origin} is from another version of moments.cpp; reinstall (pip install -e .)"
            continue
        fn = lib.interp_moments
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int] * 3 + [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)]
        fn.argtypes += [ctypes.c_double, ctypes.c_int]
        lib.interp_moments_isa.restype = ctypes.c_char_p
        state.update(isa=lib.interp_moments_isa().decode(), vector_bytes=lib.interp_moments_vector_bytes())
        if build != builds[0]:
            state["why"] += f"; the {builds[0]} build is missing, so the next narrower one"
        return lib, state
    if not found:
        state["why"] = "not built (no C++17 compiler at install time?); pip install -e . builds it"
    elif state["isa"] is None and "another version" not in state["why"]:
        state["why"] = f"no build this CPU runs loaded (built: {', '.join(found)}; {why})"
    return None, state


def _origin(build: str) -> str | None:
    spec = importlib.util.find_spec(f"interp._moments_{build}")  # the built file; loaded by ctypes, not imported
    return None if spec is None else spec.origin


def _library() -> ctypes.CDLL | None:
    return _load()[0]


def info() -> dict[str, Any]:
    """Which build of the kernel runs here and why: {"available", "isa" (the loaded build or None), "vector_bytes",
    "built" (the builds installed), "why", "cpu" (model name), "cpu_capability" (torch's), "torch"}."""
    lib, state = _load()
    return {
        "available": lib is not None,
        **state,
        "cpu": cpu_model(),
        "cpu_capability": cpu_capability(),
        "torch": torch.__version__,
    }


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
    lib = _library()
    if lib is None:
        raise KernelError(f"interp kernel: not available ({info()['why']})")
    if mode not in MODES:
        raise KernelError(f"interp kernel: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if ld not in ROW_LENGTHS:
        raise KernelError(f"interp kernel: row length must be one of {ROW_LENGTHS}, got {ld}")
    fn = lib.interp_moments
    if "x" in t:  # a draw: x [B, n, d]
        x = t["x"]
        if x.dim() != 3:
            raise KernelError(f"interp kernel: x must be [B, n, d], got shape {tuple(x.shape)}")
        B, n, D = x.shape[0], x.shape[1], x.shape[2] + 1
    else:
        x = t["q0"]
        if x.dim() != 2:
            raise KernelError(f"interp kernel: q0 must be [B, D], got shape {tuple(x.shape)}")
        (B, D), n = x.shape, 0
    if x.dtype not in _DTYPES:
        raise KernelError(f"interp kernel: tensors must be float32 or float64, got {x.dtype}")
    if D + 1 > ld:
        raise KernelError(f"interp kernel: Ŝ of width {D + 1} does not fit rows of {ld} lanes")
    _check(mode, full, ld, L, H, B, D, n, t, parts, x.dtype)
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
        raise KernelError(f"interp kernel: no compiled row length {ld}")


def _check(mode, full, ld, L, H, B, D, n, t, parts, dtype) -> None:
    """Every tensor the C ABI will read or write: present where the mode needs it, of its shape, of the batch's
    dtype, contiguous and on the CPU (the 17 pointers carry no types; a wrong one would read out of bounds)."""
    W, d = D + 1, D - 1
    layer = (L, H, W, ld) if full else (L, 4)
    shapes = {"P": layer, "Q": layer if full else None, "Pt": layer if full else None}
    if mode == "fused":
        need = {"x": (B, n, d), "xq": (B, d), "w": (B, d), "sigma": (B,), "xi": (B, n), "y": (B,), "c": (B,)}
        optional = {"weight": (B,)}
    else:
        need = {"S0": (B, D, D), "q0": (B, D), "y": (B,)} if mode == "forward" else {"S0": (B, D, D), "q0": (B, D)}
        optional = {}
        if mode == "backward":
            need["gy"] = (B,)
            optional["G0"] = (B, W, ld)
    need.update({k: v for k, v in shapes.items() if v is not None})
    grads = {"dP": layer, "dQt": layer if full else None}
    groups = [t] if parts is None else [{**t, **p} for p in parts]
    if mode != "forward" and not parts:
        raise KernelError(f"interp kernel: mode {mode} needs per-thread gradient accumulators (parts)")
    for g in groups:
        wanted = {**need, **({k: v for k, v in grads.items() if v is not None} if mode != "forward" else {})}
        for name, shape in {**wanted, **optional}.items():
            tensor = g.get(name)
            if tensor is None:
                if name in wanted:
                    raise KernelError(f"interp kernel: mode {mode} needs {name!r}")
                continue
            if not isinstance(tensor, Tensor):
                raise KernelError(f"interp kernel: {name!r} must be a tensor, got {type(tensor).__name__}")
            if tuple(tensor.shape) != shape:
                raise KernelError(f"interp kernel: {name!r} must have shape {shape}, got {tuple(tensor.shape)}")
            if tensor.dtype != dtype:
                raise KernelError(f"interp kernel: {name!r} must be {dtype}, got {tensor.dtype}")
            if tensor.device.type != "cpu" or not tensor.is_contiguous():
                raise KernelError(f"interp kernel: {name!r} must be a contiguous CPU tensor")


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    """n worker threads, started on the first multi-threaded call and kept (a pool per call costs ~0.1 ms)."""
    return ThreadPoolExecutor(n, thread_name_prefix="interp-kernel")


def threads(B: int) -> int:
    """Python threads a batch of B sequences is split over: torch's thread count, at least 64 sequences each."""
    return max(1, min(torch.get_num_threads(), B // 64))


__all__ = [
    "available",
    "call",
    "cpu_capability",
    "cpu_model",
    "info",
    "row_length",
    "supports",
    "threads",
    "KernelError",
    "BUILDS",
    "ROW_LENGTHS",
]
