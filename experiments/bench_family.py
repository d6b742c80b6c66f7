"""Training-step speed of the linear-attention family (interp.variants) against FULL's, as `interp train` runs them.

    OMP_NUM_THREADS=1 python experiments/bench_family.py [--layers 4] [--steps 12] [--batch 2048] [--device cuda]
        [--stream-width W] [--no-hooked]

`--stream-width` sets the width the hook-free path pads the stream to (INTERP_STREAM_WIDTH; 0: unpadded) for an A/B of
interp.variants.stream_width: one process per width, alternated.

On a GPU (issue 52's check: FULL-7 and every variant at batch 2048): `python experiments/bench_family.py --layers 7
--device cuda`; FULL then runs on the torch backend (the CPU kernel is the CPU's), and each step is synchronised.

One process, one thread; d = 10, n = 20, one head, the fast preset's batch. Each step is the trainer's: a fresh batch
(interp.train._loss: the guard, the draw), backward, the gradient clip and the fused Adam step. FULL takes the kernel's
fused pass where this CPU has it (as the trainer does), and so does qkv (FULL in other weights); the rest of the family
trains through autograd on its hook-free path (VariantTransformer._forward_fast). Each family model also steps through
its layer-by-layer hooked forward (a no-op hook on hook_embed: what every step took before the hook-free path), for the
ratio of the two. The steps are interleaved round by round so that load changes hit them alike; reported: the median
step and its ratio to FULL's. Prints a markdown table (appended by hand to experiments/results/bench_train.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from interp import kernel
from interp.config import ATTENTIONS, ModelConfig, TrainConfig
from interp.presets import resolve
from interp.render import markdown
from interp.train import _loss, adam, training_path
from interp.variants import STREAM_WIDTH_ENV, build

VARIANTS = [("lsa", "none")] + [(a, "none") for a in ATTENTIONS if a != "lsa"]
VARIANTS += [("lsa", "relu"), ("lsa", "quadratic")]


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--device", default="cpu", help="cuda: the GPU timing of the issue (FULL on the torch backend)")
    ap.add_argument(
        "--stream-width",
        type=int,
        help="run the family's hook-free path at this stream width (0: unpadded; default interp.variants.stream_width)",
    )
    ap.add_argument("--no-hooked", action="store_true", help="skip the layer-by-layer steps (their ratio column)")
    args = ap.parse_args(argv)
    if args.stream_width is not None:
        os.environ[STREAM_WIDTH_ENV] = str(args.stream_width)
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    setups = []
    for attention, mlp in VARIANTS:
        model_cfg = ModelConfig(n_layers=args.layers, attention=attention, mlp=mlp)
        cfg = resolve(TrainConfig(model=model_cfg, batch=args.batch, steps=1000, device=args.device))
        model = build(model_cfg, generator=torch.Generator().manual_seed(0)).to(dev)
        params = list(model.parameters())
        setups.append(
            (model_cfg.family_label, cfg, model, params, adam(params, 1e-4), torch.Generator(dev).manual_seed(1))
        )
    # every model on its own path; each family model also layer by layer (FULL's hooked path is not the trainer's)
    both = (False,) if args.no_hooked else (False, True)
    plan = [(hooked, *s) for i, s in enumerate(setups) for hooked in ((False,) if i == 0 else both)]
    times = {(label, hooked): [] for hooked, label, *_ in plan}
    for round_ in range(args.steps + 2):  # two warm-up rounds
        for hooked, label, cfg, model, params, opt, gen in plan:
            with model.hooks(fwd_hooks=[("hook_embed", lambda t, hook: t)] if hooked else []):
                sync(dev)
                t = time.perf_counter()
                loss, _ = _loss(model, cfg, gen)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sync(dev)  # a GPU step is timed to its end, not to its launch
                if round_ >= 2:
                    times[label, hooked].append(time.perf_counter() - t)
    full = statistics.median(times[setups[0][0], False])
    rows = []
    for label, cfg, *_ in setups:
        med = statistics.median(times[label, False])
        hooked = times.get((label, True))
        before = f"{1e3 * statistics.median(hooked):.1f}" if hooked else ""
        speedup = f"{statistics.median(hooked) / med:.2f}" if hooked else ""
        where = training_path(cfg)
        path = where["path"] if "stream_width" not in where else f"torch, hook-free, stream {where['stream_width']}"
        rows.append([label, path, f"{1e3 * med:.1f}", f"{med / full:.2f}", before, speedup])
    gpu = f"GPU: {torch.cuda.get_device_name(dev)}; " if dev.type == "cuda" else ""
    print(
        f"{gpu}CPU: {kernel.cpu_model()}; torch.backends.cpu.get_cpu_capability(): {kernel.cpu_capability()}; "
        f"torch {torch.__version__}, 1 thread; L = {args.layers}, batch {args.batch}, d = 10, n = 20, one head, "
        f"median of {args.steps} interleaved steps\n"
    )
    print(markdown(["model", "path", "step (ms)", "÷ FULL", "layer by layer (ms)", "hook-free speed-up"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
