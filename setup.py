"""Builds interp's one compiled piece, the fused moment kernel (interp/csrc/moments.cpp), once per instruction set.

x86-64 gets three builds of the same source, each with vectors of its ISA's width: AVX-512 (64-byte vectors, 32
registers), AVX2 + FMA (32 bytes, 16 registers) and the SSE2 baseline (16 bytes); other CPUs (aarch64: NEON) get
the portable build, with no -march flag, so no compiler refuses it. interp.kernel loads the widest build the CPU
runs (torch.backends.cpu.get_cpu_capability(); INTERP_KERNEL_ISA overrides it). No build carries debug info (-g0).

The build is optional: without a C++17 compiler interp installs and runs on the torch path (interp.kernel.info()
then says the kernel is not built). What it costs is measured in docs/kernel.md.
"""

import platform

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMMON = ["-O3", "-std=c++17", "-fno-math-errno", "-g0"]  # no errno: sqrt vectorizes; -g0 overrides Python's -g
X86 = {  # name: (vector bytes, vector registers, ISA flags)
    "avx512": (64, 32, ["-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma"]),
    "avx2": (32, 16, ["-mavx2", "-mfma"]),
    "portable": (16, 16, []),
}
OTHER = {"portable": (16, 32, [])}  # aarch64: NEON is the baseline, with 32 vector registers


def kernel(name: str, vector_bytes: int, registers: int, flags: list[str]) -> Extension:
    return Extension(
        f"interp._moments_{name}",
        [f"interp/csrc/moments_{name}.cpp"],  # one translation unit per build: one object file each
        language="c++",
        extra_compile_args=[
            *COMMON,
            *flags,
            f"-DINTERP_VECTOR_BYTES={vector_bytes}",
            f"-DINTERP_VECTOR_REGS={registers}",
            f'-DINTERP_ISA="{name}"',
        ],
        extra_link_args=["-s"],  # no symbol tables either: the file stays small
        optional=True,
    )


class ParallelBuild(build_ext):
    """The builds compile side by side, one per core."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = True


builds = X86 if platform.machine().lower() in ("x86_64", "amd64") else OTHER
setup(
    ext_modules=[kernel(name, *spec) for name, spec in builds.items()],
    cmdclass={"build_ext": ParallelBuild},
)
