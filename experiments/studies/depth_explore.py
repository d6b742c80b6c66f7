"""Exploration of what makes deep (5-8 layer) linear transformers train: one short run per call.

Not the trainer: a small loop with the knobs under test (init, learning rate, warm-up, Adam eps,
dtype, and a guard against single exploding sequences), so that each try is one command. The
tries and their outcomes are recorded in experiments/results/presets.md.

    OMP_NUM_THREADS=1 python experiments/studies/depth_explore.py --arch full --layers 7 --init gd --steps 1500
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from interp.config import ModelConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.model import LinearTransformer
from interp.tasks import as_prior, sample_tasks


def gd_init(model: LinearTransformer, eta: float, noise: float, gen: torch.Generator) -> None:
    """Every layer one GD step of size eta (von Oswald et al. 2023): ω_yx = −eta, the rest ~0."""
    cfg = model.cfg
    with torch.no_grad():
        for block in model.blocks:
            a = block.attn
            if cfg.param == "full":
                D = cfg.d_model
                P = torch.zeros(cfg.n_heads, D, D, dtype=torch.float64)
                Q = torch.zeros(cfg.n_heads, D, D, dtype=torch.float64)
                P[0, -1, -1] = -math.sqrt(eta)
                Q[0, : cfg.d, : cfg.d] = math.sqrt(eta) * torch.eye(cfg.d, dtype=torch.float64)
                a.P.copy_(P + noise * torch.randn(P.shape, generator=gen, dtype=torch.float64))
                a.Q.copy_(Q + noise * torch.randn(Q.shape, generator=gen, dtype=torch.float64))
            else:
                for p in a.parameters():
                    p.copy_(noise * torch.randn(p.shape, generator=gen, dtype=torch.float64))
                a.p_y[0] = -math.sqrt(eta)
                a.q_x[0] = math.sqrt(eta)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="full")
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--noise", default="uniform:5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--schedule", default="onecycle")
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--init", default="small")  # small | gd
    ap.add_argument("--eta", type=float, default=None)  # gd init step; default 1/(n + d + 1 + E σ²)
    ap.add_argument("--init-noise", type=float, default=1e-3)
    ap.add_argument("--guard", default="none")  # none | drop: drop non-finite sequences, recompute
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--eval", type=int, default=10_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    prior = as_prior(args.noise)
    cfg = ModelConfig(d=10, n_layers=args.layers, param=args.arch, dtype=args.dtype)
    gen = torch.Generator().manual_seed(args.seed)
    model = LinearTransformer(cfg, generator=gen)
    if args.init == "gd":
        eta = args.eta or 1.0 / (20 + 10 + 1 + prior.mean_sigma2())
        gd_init(model, eta, args.init_noise, gen)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=args.eps)
    data = torch.Generator().manual_seed(args.seed + 1)
    t0, window, dropped = time.perf_counter(), [], 0
    for step in range(args.steps):
        if step < args.warmup:
            lr = args.lr * (0.04 + 0.96 * step / args.warmup)
        elif args.schedule == "onecycle":
            frac = (step - args.warmup) / max(1, args.steps - args.warmup)
            lr = args.lr * (1e-3 + (1 - 1e-3) * 0.5 * (1 + math.cos(math.pi * frac)))
        else:
            lr = args.lr
        for g in opt.param_groups:
            g["lr"] = lr
        batch = sample_tasks(args.batch, 10, 20, prior, data, dtype=cfg.torch_dtype)
        per_seq = 0.5 * (model(batch.tokens) - batch.target) ** 2
        loss = per_seq.mean()
        if not torch.isfinite(loss):
            if args.guard != "drop":
                print(json.dumps({"step": step, "diverged": True}))
                break
            with torch.no_grad():
                keep = torch.isfinite(per_seq)
            dropped += int((~keep).sum())
            per_seq = 0.5 * (model(batch.tokens[keep]) - batch.target[keep]) ** 2
            loss = per_seq.sum() / args.batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        if not torch.isfinite(gn):
            opt.zero_grad(set_to_none=True)
            dropped += args.batch
            continue
        opt.step()
        window.append(loss.item())
        if (step + 1) % 100 == 0:
            med = sorted(window)[len(window) // 2]
            print(
                json.dumps(
                    {
                        "step": step + 1,
                        "median_loss": round(med, 4),
                        "max_loss": float(f"{max(window):.3g}"),
                        "lr": float(f"{lr:.3g}"),
                        "dropped": dropped,
                        "s": round(time.perf_counter() - t0, 1),
                    }
                ),
                flush=True,
            )
            window = []
    est = adjusted_loss(model, EvalSet(args.noise, d=model.cfg.d, n=20, n_seq=args.eval, seed=0))
    print(
        json.dumps(
            {
                "final": True,
                "args": vars(args),
                "adjusted": est.mean,
                "stderr": est.stderr,
                "median": est.median,
                "worst": est.worst,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
