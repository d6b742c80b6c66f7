"""Training-step speed of interp's model against a straightforward explicit-attention baseline.

    OMP_NUM_THREADS=1 python experiments/bench_train.py --threads 1 --out experiments/results/bench_train.md

FULL, L = 7, batch 2048, d = 10, n = 20, one head (the issue's setting). The baseline forms the
explicit (n+1)×n score matrix of every head, e_i += Σ_k P_k Σ_j e_j (e_jᵀ Q_k e_i); interp's model
goes through the per-sequence second moment S (PAPER.md §1). Both run in the same process, their
steps interleaved, so machine load hits them alike; reported are medians and their ratio, plus the
fraction of this CPU's measured float32 matmul peak that interp's step reaches.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from interp.config import ModelConfig
from interp.model import LinearTransformer
from interp.tasks import sample_tasks


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


def step_fn(model: nn.Module, opt, gen, batch: int, d: int, n: int):
    def step():
        data = sample_tasks(batch, d, n, "uniform:5", gen)
        loss = 0.5 * ((model(data.tokens) - data.target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def matmul_peak_gflops(threads: int, size: int = 1024, reps: int = 20) -> float:
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
    """(interp, explicit) FLOPs of one training step: forward multiply-adds ×2, ×3 for forward + backward.

    interp (hook-free path): S^0 = Σ_j e_j e_jᵀ once (n D²), then per layer A = P S Q (2 D³),
    S ← M S Mᵀ (2 D³) and the query (D²). Explicit: Q e_i (T D²), scores (T n D), P e_j (n D²),
    scores · values (T n D) per layer.
    """
    D, T = d + 1, n + 1
    ours = n * D * D + L * (4 * D**3 + D * D)
    explicit = L * (T * D * D + 2 * T * n * D + n * D * D)
    return 3 * 2 * batch * ours, 3 * 2 * batch * explicit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per implementation")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d, n, L = 10, 20, args.layers
    ours = LinearTransformer(ModelConfig(d=d, n_layers=L, param="full"), generator=torch.Generator().manual_seed(0))
    base = ExplicitAttention(ours.P.detach(), ours.Q.detach())
    probe = sample_tasks(64, d, n, "uniform:5", torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(ours(probe.tokens), base(probe.tokens), rtol=1e-4, atol=1e-6)
    runs = {}
    for name, model in (("interp", ours), ("explicit", base)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        runs[name] = step_fn(model, opt, torch.Generator().manual_seed(2), args.batch, d, n)
    data_only = lambda: sample_tasks(args.batch, d, n, "uniform:5", torch.Generator().manual_seed(3))  # noqa: E731
    times = {name: [] for name in (*runs, "data")}
    for _ in range(3):
        for fn in runs.values():
            fn()
    for _ in range(args.steps):  # interleaved so load changes hit both alike
        for name, fn in (*runs.items(), ("data", data_only)):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = matmul_peak_gflops(args.threads)
    flops, flops_explicit = step_flops(L, args.batch, d, n)
    achieved = flops / med["interp"] / 1e9
    lines = [
        f"# Training-step benchmark ({time.strftime('%Y-%m-%d')})",
        "",
        f"Command: `OMP_NUM_THREADS={args.threads} python experiments/bench_train.py --threads {args.threads}"
        f"{'' if args.layers == 7 else f' --layers {args.layers}'} --steps {args.steps}`",
        "",
        f"FULL, L={L}, one head, batch {args.batch}, d={d}, n={n}; torch {torch.__version__}, "
        f"{args.threads} thread(s), {platform.processor() or platform.machine()}; median of {args.steps} interleaved steps.",
        "",
        "| implementation | median step (ms) | steps/s |",
        "|---|---|---|",
        *(f"| {k} | {1e3 * med[k]:.1f} | {1 / med[k]:.1f} |" for k in runs),
        f"| data sampling alone (in both) | {1e3 * med['data']:.1f} | |",
        "",
        f"Speed-up of interp over the explicit-score baseline: **{med['explicit'] / med['interp']:.2f}x**.",
        "",
        f"Measured float32 matmul peak (1024² sgemm, best of 20): {peak:.1f} GFLOP/s. interp's step does about "
        f"{flops / 1e9:.2f} GFLOP (forward ×3), i.e. {achieved:.1f} GFLOP/s = **{100 * achieved / peak:.0f}% of peak**; "
        f"the explicit baseline does {flops_explicit / 1e9:.2f} GFLOP, {flops_explicit / flops:.1f}x more.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
