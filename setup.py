"""Builds interp's one compiled piece, its CPU kernels: the fused moment recursion (interp/csrc/moments.cpp) and the
task draws' standard normals (interp/csrc/normal.cpp).

The build is optional: without a C++17 compiler interp installs and runs on the torch path (interp.kernel.available()
is then False). The kernel is compiled for the installing machine's CPU (-march=native), as a source install is.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "interp._moments_cpu",
            ["interp/csrc/moments.cpp"],
            language="c++",
            extra_compile_args=["-O3", "-march=native", "-std=c++17", "-fno-math-errno"],  # no errno: sqrt vectorizes
            optional=True,
        )
    ]
)
