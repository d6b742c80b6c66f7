"""Training-step speed of interp's FULL, DIAG and GD++ models against an explicit-attention baseline.

    OMP_NUM_THREADS=1 python experiments/bench_train.py --threads 1 --out experiments/results/bench_train.md

L = 7, batch 2048, d = 10, n = 20, one head, one Adam step each (fresh data sampled inside the step, and the
trainer's fused Adam, as in `interp train`). Implementations: interp's training step (on CPU the kernel's fused
training pass on the batch's draw, interp.moments.half_squared_errors, as the trainer takes it) for FULL, DIAG and
GD++; the model's forward on the kernel with its separate backward (the step before the fused pass) and on the
torch backend (batched torch products, the step before the kernel) for FULL and DIAG; the FULL
recursion differentiated by autograd (interp before the hand-written backward); and the explicit-score
formulation e_i += Σ_k P_k Σ_j e_j (e_jᵀ Q_k e_i), which forms the (n+1)×n score matrix of every head. All run
in one process, their steps interleaved, so load changes hit them alike; reported are medians, ratios, and the
fraction of this CPU's measured float32 matmul peak.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from interp import kernel, moments
from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.tasks import draw_tasks, sample_tasks
from interp.train import adam

WIDTHS = {1: (3, 4, 8), 5: (7, 8), 10: (12, 16), 15: (17, 20, 24)}  # d → widths of Ŝ to try (d + 2 first)


class ExplicitAttention(nn.Module):
    """Baseline: softmax-free attention with explicit scores, one (P_k, Q_k) per head."""

    def __init__(self, P: torch.Tensor, Q: torch.Tensor):
        super().__init__()
        self.P, self.Q = nn.Parameter(P.clone()), nn.Parameter(Q.clone())  # [L, H, D, D]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        Z = tokens
        for P, Q in zip(self.P, self.Q):
            ctx = Z[:, :-1]
            scores = torch.einsum("bjd,hde,bie->bhij", ctx, Q, Z)  # e_jᵀ Q_k e_i, [batch, head, n+1, n]
            values = torch.einsum("hde,bje->bhjd", P, ctx)  # P_k e_j
            Z = Z + torch.einsum("bhij,bhjd->bid", scores, values)
        return -Z[:, -1, -1]


class Backend(nn.Module):
    """interp's model through its forward on one backend of interp.moments, differentiated by its own backward:
    "kernel" (the fused CPU kernel's separate forward and backward, which recomputes the forward: the step before
    the fused training pass) or "torch" (batched torch products: the step before the kernel)."""

    def __init__(self, model: LinearTransformer, backend: str):
        super().__init__()
        self.model, self.backend = copy.deepcopy(model), backend

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return moments.predict(self.model, tokens, backend=self.backend)


class AutogradMoments(nn.Module):
    """interp's previous hook-free FULL path: S^{l+1} = (I+A) S (I+A)ᵀ at width d + 1, differentiated by autograd."""

    def __init__(self, P: torch.Tensor, Q: torch.Tensor):
        super().__init__()
        self.P, self.Q = nn.Parameter(P.clone()), nn.Parameter(Q.clone())  # [L, H, D, D]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        ctx, query = tokens[:, :-1], tokens[:, -1]
        S = ctx.transpose(1, 2) @ ctx
        B, D, _ = S.shape
        for l, (P, Q) in enumerate(zip(self.P, self.Q)):
            H = P.shape[0]
            SQ = (S.reshape(B * D, D) @ Q.permute(1, 0, 2).reshape(D, H * D)).reshape(B, D, H, D)
            SQ = SQ.permute(2, 1, 0, 3).reshape(H, D, B * D)
            A = (P @ SQ).reshape(H, D, B, D).permute(2, 0, 1, 3).sum(1)  # Σ_k P_k S Q_k
            if l == len(self.P) - 1:
                return -(query[:, -1] + (A[:, -1, :] * query).sum(-1))
            query = query + (A * query[:, None, :]).sum(-1)
            M = A + torch.eye(D, dtype=A.dtype, device=A.device)
            S = M @ S @ M.transpose(1, 2)
        raise AssertionError("unreachable")


def step_fn(model: nn.Module, gen: torch.Generator, batch: int, d: int, n: int):
    """One Adam step on a fresh batch. interp's models take the trainer's path: the kernel's fused training pass on
    the batch's draw (interp.moments.half_squared_errors, as interp.train uses it) where it runs, else the model's
    forward on the batch's tokens."""
    opt = adam(model.parameters(), 1e-5)  # as interp.train runs it

    def step():
        draw = draw_tasks(batch, d, n, "uniform:5", gen)
        if isinstance(model, LinearTransformer) and moments.fused_supported(model, draw.x):
            loss = moments.half_squared_errors(model, draw)[0].mean()
        else:
            data = draw.batch()
            loss = 0.5 * ((model(data.tokens) - data.target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def matmul_peak_gflops(size: int = 1024, reps: int = 20) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * size**3 / min(times) / 1e9


def step_flops(L: int, batch: int, d: int, n: int) -> tuple[float, float]:
    """(moments, explicit) FLOPs of one FULL training step: forward multiply-adds ×2, ×3 for forward + backward.

    Moments: S^0 = Σ_j e_j e_jᵀ once (n D²), then per layer A = P S Q (2 D³), S ← M S Mᵀ (2 D³) and the
    query (D²), at the true D = d + 1 (padding not counted). Explicit: Q e_i (T D²), scores (T n D),
    P e_j (n D²), scores · values (T n D) per layer.
    """
    D, T = d + 1, n + 1
    ours = n * D * D + L * (4 * D**3 + D * D)
    explicit = L * (T * D * D + 2 * T * n * D + n * D * D)
    return 3 * 2 * batch * ours, 3 * 2 * batch * explicit


def width_sweep(layers: int, batch: int, steps: int) -> list[str]:
    """Forward + backward of interp.moments at every candidate width of Ŝ (zero padding), FULL and DIAG."""
    n, lines = 20, ["| d | param | " + " | ".join(["width: ms"] * 3) + " |", "|---|---|---|---|---|"]
    for d, widths in WIDTHS.items():
        data = sample_tasks(batch, d, n, "uniform:5", torch.Generator().manual_seed(3))
        runs = {}
        for param in ("full", "diag"):
            model = LinearTransformer(
                ModelConfig(d=d, n_layers=layers, param=param), generator=torch.Generator().manual_seed(0)
            )
            for w in widths:
                runs[param, w] = lambda m=model, w=w: moments.predict(m, data.tokens, width=w).square().sum().backward()
        times = {k: [] for k in runs}
        for fn in runs.values():
            fn()
        for _ in range(steps):
            for k, fn in runs.items():
                t = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t)
        for param in ("full", "diag"):
            cells = [f"{w}: {1e3 * statistics.median(times[param, w]):.1f}" for w in widths]
            lines.append(f"| {d} | {param} | " + " | ".join(cells + [""] * (3 - len(cells))) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per implementation")
    ap.add_argument("--block", type=int, default=5, help="consecutive timed steps of one implementation per round")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--widths", action="store_true", help="instead: time every candidate padded width of Ŝ")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.widths:
        print("\n".join(width_sweep(args.layers, args.batch, args.steps)))
        return
    d, n, L, dev = 10, 20, args.layers, args.device
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    models = {
        p: LinearTransformer(ModelConfig(d=d, n_layers=L, param=p), generator=torch.Generator().manual_seed(0)).to(dev)
        for p in ("full", "diag", "gdpp")
    }
    P, Q = models["full"].P.detach(), models["full"].Q.detach()
    impls = {
        "interp FULL": models["full"],
        "interp DIAG": models["diag"],
        "interp GD++": models["gdpp"],
        "interp FULL, kernel forward + backward (before)": Backend(models["full"], "kernel"),
        "interp DIAG, kernel forward + backward (before)": Backend(models["diag"], "kernel"),
        "interp FULL, torch backend (earlier)": Backend(models["full"], "torch"),
        "interp DIAG, torch backend (earlier)": Backend(models["diag"], "torch"),
        "FULL, autograd moments (earlier)": AutogradMoments(P, Q),
        "FULL, explicit scores": ExplicitAttention(P, Q),
    }
    probe = sample_tasks(64, d, n, "uniform:5", torch.Generator(device=dev).manual_seed(1), device=dev)
    with torch.no_grad():
        for name, impl in impls.items():  # every implementation computes the same function
            ref = models["diag" if "DIAG" in name else "gdpp" if "GD++" in name else "full"]
            assert torch.allclose(ref(probe.tokens), impl(probe.tokens), rtol=1e-4, atol=1e-6), name
    runs = {name: step_fn(m, torch.Generator(device=dev).manual_seed(2), args.batch, d, n) for name, m in impls.items()}
    gen = torch.Generator(device=dev).manual_seed(3)
    runs["data sampling alone"] = lambda: draw_tasks(args.batch, d, n, "uniform:5", gen, device=dev)
    runs["tokens too"] = lambda: sample_tasks(args.batch, d, n, "uniform:5", gen, device=dev)
    fixed_draw = draw_tasks(args.batch, d, n, "uniform:5", torch.Generator(device=dev).manual_seed(4), device=dev)
    fixed = fixed_draw.batch().tokens
    model_only = {  # the loss's forward + backward on one fixed batch: no sampling, no optimizer
        f"{p} model alone": (
            (lambda m=models[p]: moments.half_squared_errors(m, fixed_draw)[0].sum().backward())
            if moments.fused_supported(models[p], fixed_draw.x)
            else (lambda m=models[p]: m(fixed).square().sum().backward())
        )
        for p in ("full", "diag")
    }
    runs.update(model_only)
    ctx = fixed[:, :-1]
    S0, q0 = ctx.mT @ ctx, fixed[:, -1]
    recursion_only = {}  # MomentRecursion alone (the kernel on CPU): S^0, the query and the weights given
    for p in ("full", "diag"):
        kind, *maps = moments.layer_maps(models[p])
        W1, W2 = (None if w is None else w.detach().requires_grad_(True) for w in maps)
        width = None if kernel.supports(fixed, d + 2) else moments.padded_width(d + 2)
        recursion_only[f"{p} recursion alone"] = lambda W1=W1, W2=W2, k=kind, w=width: (
            moments.MomentRecursion.apply(S0, q0, W1, W2, k, w, True).sum().backward()
        )
    runs.update(recursion_only)
    kernel_only = {}  # the kernel's fused pass alone: the call interp.moments.FusedHalfSE makes, inputs prepared
    if moments.fused_supported(models["full"], fixed_draw.x):
        for p in ("full", "diag"):
            kind, *maps = moments.layer_maps(models[p])
            W1, W2 = (None if w is None else w.detach() for w in maps)
            dr = fixed_draw
            fused = moments._fused_args(W1, W2, kind, dr.x, dr.x_query, dr.w, dr.sigma, dr.xi, None)
            kernel_only[f"{p} kernel alone"] = lambda a=fused, k=kind: kernel.call("fused", k == "full", *a)
    runs.update(kernel_only)
    adam_only = {}  # one optimizer step on DIAG's 28 small tensors: the trainer's fused Adam and torch's default
    for label, fused in (("fused", True), ("for-loop", False)):
        params = [p.detach().clone().requires_grad_(True) for p in models["diag"].parameters()]
        for p in params:
            p.grad = torch.randn_like(p)
        adam_only[f"DIAG: Adam step alone, {label}"] = torch.optim.Adam(params, lr=1e-5, fused=fused).step
    runs.update(adam_only)
    times = {name: [] for name in runs}
    load_before = os.getloadavg()
    for _ in range(3):
        for fn in runs.values():
            fn()
    # Interleaved in rounds so load changes hit all alike. With --block 1 every step follows other implementations'
    # steps (caches cold, the method of the records before session 7); with --block K each round runs one untimed
    # step and K timed steps of an implementation back to back, as a training loop runs them.
    for _ in range(-(-args.steps // args.block)):
        for name, fn in runs.items():
            if args.block > 1:
                fn()
            for _ in range(args.block):
                sync()
                t = time.perf_counter()
                fn()
                sync()
                times[name].append(time.perf_counter() - t)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = matmul_peak_gflops() if dev == "cpu" else float("nan")
    flops, flops_explicit = step_flops(L, args.batch, d, n)
    full, explicit = med["interp FULL"], med["FULL, explicit scores"]
    cmd = (
        f"OMP_NUM_THREADS={args.threads} "
        f"{'OMP_WAIT_POLICY=' + os.environ['OMP_WAIT_POLICY'] + ' ' if 'OMP_WAIT_POLICY' in os.environ else ''}"
        f"{f'nice -n {os.nice(0)} ' if os.nice(0) else ''}"
        f"python experiments/bench_train.py --threads {args.threads}"
        f"{'' if L == 7 else f' --layers {L}'} --steps {args.steps} --block {args.block}"
        f"{'' if dev == 'cpu' else f' --device {dev}'}"
    )
    lines = [
        f"Command: `{cmd}`",
        "",
        f"L={L}, one head, batch {args.batch}, d={d}, n={n}; torch {torch.__version__}, {args.threads} thread(s), "
        f"{dev} ({kernel.cpu_model()}, torch CPU capability {kernel.cpu_capability()}, kernel build "
        f"{kernel.info()['isa']}, {os.cpu_count()} cores); median of {args.steps} "
        f"Adam steps (each samples its own batch), interleaved in rounds of {args.block} consecutive steps"
        f"{' (each round after one untimed step)' if args.block > 1 else ''}. "
        f"Load average (1 min) {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after.",
        "",
        "| implementation | median step (ms) | steps/s | vs explicit scores | vs interp FULL |",
        "|---|---|---|---|---|",
        *(
            f"| {k} | {1e3 * v:.1f} | {1 / v:.1f} | {explicit / v:.2f}x | {full / v:.2f}x |"
            for k, v in med.items()
            if k not in ("data sampling alone", "tokens too")
            and k not in model_only
            and k not in adam_only
            and k not in recursion_only
            and k not in kernel_only
        ),
        f"| the batch draw alone (draw_tasks: the fused pass forms the tokens) | {1e3 * med['data sampling alone']:.1f}"
        " | | | |",
        f"| the draw and its tokens (sample_tasks: the other paths' batch) | {1e3 * med['tokens too']:.1f} | | | |",
        *(
            f"| {k.split()[0].upper()}: loss forward + backward alone (fixed batch, the fused pass) | "
            f"{1e3 * med[k]:.1f} | | | |"
            for k in model_only
        ),
        *(
            f"| {k.split()[0].upper()}: the moment recursion alone, separate forward + backward (MomentRecursion) | "
            f"{1e3 * med[k]:.1f} | | | |"
            for k in recursion_only
        ),
        *(
            f"| {k.split()[0].upper()}: of which the kernel's fused pass (interp.kernel.call) | "
            f"{1e3 * med[k]:.1f} | | | |"
            for k in kernel_only
        ),
        *(f"| {k} | {1e3 * med[k]:.2f} | | | |" for k in adam_only),
        "",
        f"interp FULL over the explicit-score formulation: **{explicit / full:.2f}x**; DIAG and GD++ over FULL: "
        f"**{full / med['interp DIAG']:.2f}x** and **{full / med['interp GD++']:.2f}x**. "
        f"The trainer's step over the kernel's separate forward and backward: FULL "
        f"{med['interp FULL, kernel forward + backward (before)'] / full:.2f}x, DIAG "
        f"{med['interp DIAG, kernel forward + backward (before)'] / med['interp DIAG']:.2f}x; over the torch "
        f"backend: FULL {med['interp FULL, torch backend (earlier)'] / full:.2f}x, DIAG "
        f"{med['interp DIAG, torch backend (earlier)'] / med['interp DIAG']:.2f}x. The loss alone, DIAG over "
        f"FULL: {med['full model alone'] / med['diag model alone']:.2f}x"
        + (
            f"; the kernel's fused pass alone: {med['full kernel alone'] / med['diag kernel alone']:.2f}x"
            if kernel_only
            else ""
        )
        + f"; the moment recursion alone: {med['full recursion alone'] / med['diag recursion alone']:.2f}x.",
    ]
    if dev == "cpu":
        achieved = flops / full / 1e9
        lines += [
            "",
            f"Measured float32 matmul peak (1024² sgemm, best of 20): {peak:.1f} GFLOP/s. A FULL step does "
            f"about {flops / 1e9:.2f} GFLOP of model arithmetic (forward ×3, true width d + 1), i.e. "
            f"{achieved:.1f} GFLOP/s = **{100 * achieved / peak:.0f}% of peak** "
            f"({100 * flops / (full - med['data sampling alone']) / 1e9 / peak:.0f}% without data sampling); "
            f"the explicit formulation does {flops_explicit / 1e9:.2f} GFLOP, "
            f"{flops_explicit / flops:.1f}x more.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
