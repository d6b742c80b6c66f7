"""The CPU kernel's builds against the torch backend (and torch.compile), in one process, on this CPU.

    OMP_NUM_THREADS=1 python experiments/bench_kernel.py --threads 1 --out experiments/results/bench_kernel.md

For each architecture at L = 7 (batch 2048, d = 10, n = 20, one head): the trainer's step (a fresh draw, the loss's
forward and backward, Adam) on every kernel build this CPU runs (interp.kernel.runnable(): AVX-512, AVX2, portable)
and on the torch backend (INTERP's batched torch products); the models' hook-free forward + backward on one fixed
batch on the same paths; for FULL, the recursion differentiated by autograd, plain and under torch.compile
(inductor, CPU), and the explicit-score formulation. All steps interleave in rounds, so load changes hit them
alike; reported are medians, ratios to the torch backend, and for FULL the fraction of this CPU's float32 matmul
peak. Every record names the CPU model and torch's CPU capability. The record is appended to --out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from bench_train import AutogradMoments, ExplicitAttention, matmul_peak_gflops, step_flops

from interp import kernel, moments
from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.tasks import draw_tasks
from interp.train import adam

ARCHS = {"full": "FULL", "diag": "DIAG", "gdpp": "GD++"}
# Environment variables that cap torch's (ATen's), MKL's and oneDNN's ISA below the CPU's: an AVX-512 CPU run with
# ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 runs AVX2 code only.
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def cpu_flags_isa() -> str:
    """The widest x86 vector ISA in /proc/cpuinfo's flags (what the silicon has, whatever torch is told)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    except (OSError, IndexError):
        return "unknown ISA"
    return next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), "no AVX2")


def trainer_step(model, build: str | None, batch: int, d: int, n: int, gen):
    """One step as interp.train takes it: the fused pass on `build`, or (build None) the torch backend."""
    opt = adam(model.parameters(), 1e-5)

    def step():
        draw = draw_tasks(batch, d, n, "uniform:5", gen)
        if build is None:
            data = draw.batch()
            y = moments.predict(model, data.tokens, backend="torch")
            loss = 0.5 * ((y - data.target) ** 2).mean()
        else:
            kind, W1, W2 = moments.layer_maps(model)
            with kernel.use(build):
                c, _ = moments.FusedHalfSE.apply(
                    W1, W2, draw.x, draw.x_query, draw.w, draw.sigma, draw.xi, None, kind, None
                )
                loss = c.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def forward_backward(model, build: str | None, tokens):
    """model(tokens)'s hook-free forward and backward on `build` (None: the torch backend)."""

    def run():
        if build is None:
            moments.predict(model, tokens, backend="torch").square().sum().backward()
        else:
            with kernel.use(build):
                moments.predict(model, tokens, backend="kernel").square().sum().backward()

    return run


def plain_step(module, tokens, target):
    def run():
        loss = 0.5 * ((module(tokens) - target) ** 2).mean()
        loss.backward()

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per row")
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d, n, L, B = 10, 20, args.layers, args.batch
    info = kernel.info()
    builds = [b for b in kernel.runnable() if b in info["built"]]
    models = {
        p: LinearTransformer(ModelConfig(d=d, n_layers=L, param=p), generator=torch.Generator().manual_seed(0))
        for p in ARCHS
    }
    fixed = draw_tasks(B, d, n, "uniform:5", torch.Generator().manual_seed(4)).batch()
    rows: dict[str, callable] = {}
    for p, label in ARCHS.items():
        for build in [*builds, None]:
            name = f"{build} kernel" if build else "torch backend"
            rows[f"{label} trainer step, {name}"] = trainer_step(
                models[p], build, B, d, n, torch.Generator().manual_seed(2)
            )
        for build in [*builds, None]:
            name = f"{build} kernel" if build else "torch backend"
            rows[f"{label} forward + backward, {name}"] = forward_backward(models[p], build, fixed.tokens)
    P, Q = models["full"].P.detach(), models["full"].Q.detach()
    rows["FULL forward + backward, autograd recursion"] = plain_step(AutogradMoments(P, Q), fixed.tokens, fixed.target)
    compile_s = None
    if not args.no_compile:
        compiled = torch.compile(AutogradMoments(P, Q))
        t = time.perf_counter()
        plain_step(compiled, fixed.tokens, fixed.target)()
        compile_s = time.perf_counter() - t
        rows["FULL forward + backward, autograd recursion under torch.compile"] = plain_step(
            compiled, fixed.tokens, fixed.target
        )
    rows["FULL forward + backward, explicit scores"] = plain_step(ExplicitAttention(P, Q), fixed.tokens, fixed.target)
    for fn in rows.values():  # warm up
        fn()
    times = {k: [] for k in rows}
    load_before = os.getloadavg()
    for _ in range(args.steps):
        for k, fn in rows.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = matmul_peak_gflops()
    flops = step_flops(L, B, d, n)[0]

    def ratio(k: str) -> str:
        base = k.split(", ")[0] + ", torch backend"
        return f"{med[base] / med[k]:.2f}x" if base in med else ""

    caps = {k: os.environ[k] for k in ISA_CAPS if k in os.environ}  # an ISA capped below the CPU's own
    cmd = " ".join([*(f"{k}={v}" for k, v in caps.items()), f"OMP_NUM_THREADS={args.threads}"])
    cmd += f" python experiments/bench_kernel.py --threads {args.threads}"
    cmd += f" --steps {args.steps}" + (" --no-compile" if args.no_compile else "")
    lines = [
        f"### {time.strftime('%Y-%m-%d')}: {info['cpu']}, torch CPU capability {info['cpu_capability']}"
        + (f" (capped: the CPU has {cpu_flags_isa()})" if caps else ""),
        "",
        f"Command: `{cmd}`",
        "",
        f"L={L}, batch {B}, d={d}, n={n}, one head; torch {torch.__version__}, {args.threads} thread(s), "
        f"{os.cpu_count()} cores; kernel builds run: {', '.join(builds)} (default here: {info['isa']}); median of "
        f"{args.steps} interleaved rounds. Load average (1 min) {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after. "
        f"Measured float32 matmul peak (1024² sgemm): {peak:.1f} GFLOP/s."
        + (f" torch.compile took {compile_s:.0f} s to compile." if compile_s is not None else ""),
        "",
        "| path | median (ms) | vs the torch backend | FULL: % of matmul peak |",
        "|---|---|---|---|",
    ]
    for k, v in med.items():
        share = f"{100 * flops / v / 1e9 / peak:.0f}%" if k.startswith("FULL trainer") else ""
        lines.append(f"| {k} | {1e3 * v:.1f} | {ratio(k)} | {share} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
