"""What the FFN models of the family study compute (issue 52's second question; docs/variants.md):

    OMP_NUM_THREADS=1 python experiments/ffn_readout.py [--eval-seq 50000] [--distill-steps 4000] [--fresh]

For every FFN cell of experiments/zoo/family (FULL attention with a linear, ReLU or quadratic FFN after each layer, on
the paper's task and on the quadratic one; the best seed experiments/family.py exported): each FFN fitted by one linear
map of its input on the tokens it sees (interp.probes.readout.ffn_fit: residual at the query and over the context,
the y → y entry, how much it writes), then through TransformerLens hooks on the same sequences, paired per sequence:
the model with each FFN switched off at the query or at the context tokens (blocks.{l}.hook_mlp_out zeroed there),
and the model with every FFN replaced by its fitted linear maps (the query's map at the query, the context's at the
context). Beside them the Table 1 zoo's FULL of that depth, and FULL with its prediction rescaled by the one factor
that fits best (least squares on other sequences): a free output scale, which FULL's parameterization lacks; and
FULL distilled from the linear and ReLU FFN models of the paper's task (can FULL compute what they do?). Adjusted
loss as Table 1's (a _quad cell: on its own task against the linear oracle ridge), also by σ group. Writes
experiments/results/ffn_readout.md and .json. A cell whose model file and zoo FULL file (sha256) and settings are those
of the previous run's json is copied from it, not measured again (a full run takes about 35 minutes); --fresh
measures every cell.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch

from interp import kernel
from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_losses
from interp.files import atomic_write_text
from interp.model import LinearTransformer
from interp.probes.readout import ffn_fit
from interp.render import markdown
from interp.report.data import TABLE1_ZOO
from interp.run import load
from interp.tasks import prior_slug, sample_tasks, sigma_groups
from interp.train import GUARD_CAP, adam, autograd_half_squared_errors

ROOT = Path(__file__).resolve().parent.parent
FAMILY_ZOO = ROOT / "experiments" / "zoo" / "family"
RESULTS = ROOT / "experiments" / "results"
PRIORS = ("uniform:5", "categorical:1,3")
FFNS = ("linear", "relu", "quadratic")
FIT_SEQ = 4096  # sequences of the FFN fits and of FULL's output scale (seed 1)
SIGMA_GROUPS = 4


def hooked(model, hooks_for) -> Callable:
    """A predictor batch -> ŷ running `model` with the hooks `hooks_for(store)` returns (store: a dict the hooks
    share within one forward)."""

    def predict(batch):
        store = {}
        with torch.no_grad():
            return model.run_with_hooks(batch.tokens.to(model.cfg.torch_dtype), fwd_hooks=hooks_for(store))

    return predict


def ffn_off(model, layer: int, where: str):
    """The model with FFN `layer`'s update zeroed at the query ("query") or at the context tokens ("context")."""
    rows = slice(-1, None) if where == "query" else slice(None, -1)

    def off(act, hook):
        act = act.clone()
        act[:, rows] = 0
        return act

    return hooked(model, lambda store: [(f"blocks.{layer}.hook_mlp_out", off)])


def linearized(model, fit):
    """The model with every FFN replaced by its fitted linear maps: resid_mid @ M (the query's M at the query, the
    context's at the context tokens)."""
    dt = model.cfg.torch_dtype

    def hooks_for(store):
        hooks = []
        for l in range(model.cfg.n_layers):
            Mq, Mc = fit.query_map[l].to(dt), fit.context_map[l].to(dt)

            def grab(act, hook, l=l):
                store[l] = act
                return act

            def replace(act, hook, l=l, Mq=Mq, Mc=Mc):
                mid = store[l]
                return torch.cat([mid[:, :-1] @ Mc, mid[:, -1:] @ Mq], dim=1)

            hooks += [(f"blocks.{l}.hook_resid_mid", grab), (f"blocks.{l}.hook_mlp_out", replace)]
        return hooks

    return hooked(model, hooks_for)


def rescaled(model, fit_batch):
    """(c, predictor c·ŷ): the one output scale c of least squared error on `fit_batch`."""
    with torch.no_grad():
        pred = model(fit_batch.tokens.to(model.cfg.torch_dtype)).double()
    c = float(pred @ fit_batch.target.double() / (pred @ pred))
    return c, lambda batch: c * model(batch.tokens.to(model.cfg.torch_dtype)).detach()


DIVERGED = 1.0  # a mismatch above this (or nan) is a distillation that diverged, not a fit: ŷ itself is O(1)
DISTILL_LR = 1e-3  # peak; cosine decay to 0 (a constant 3e-4 left the mismatch noisier than its start on uniform:5)
DISTILL_WARMUP = 0.05  # of the steps: the lr rises linearly to its peak first, as in the trainer's one-cycle
DISTILL_CLIP = 1.0  # gradient-norm clip, the trainer's default (TrainConfig.clip)
DISTILL_BATCH = 2048


def distill_lr(step: int, steps: int) -> float:
    """The distillation's lr factor at `step` of `steps`: a linear warm-up over DISTILL_WARMUP of the steps, then a
    cosine decay to 0."""
    warm = max(1, round(DISTILL_WARMUP * steps))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


def distilled(
    teacher, start: LinearTransformer, prior: str, n: int, steps: int, seed: int = 7
) -> tuple[LinearTransformer, int]:
    """(FULL fitted to the teacher's predictions, the number of updates the guard skipped): Adam on ½ the squared
    difference of ŷ over fresh batches of the prior (n context tokens), from `start` (a copy is trained). Can FULL's
    parameterization compute what the FFN model computes?

    Guarded as the trainer's steps are (interp.train.autograd_half_squared_errors): a deep FULL is a polynomial of
    degree 3^L in its tokens, and a rare context blows its ŷ up; a sequence whose ½·difference² is not finite is left
    out, one above GUARD_CAP·d enters through `robust_half_se`, the gradient norm is clipped to DISTILL_CLIP, and an
    update whose gradient is still not finite is skipped. Unguarded at lr 1e-3, 3 of 6 distillations into FULL-4
    diverged (session 31)."""
    student = LinearTransformer.from_matrices(start.P.detach().clone(), start.Q.detach().clone())
    params = list(student.parameters())
    opt = adam(params, lr=DISTILL_LR)
    cap, skipped = GUARD_CAP * teacher.cfg.d, 0
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = DISTILL_LR * distill_lr(step, steps)
        batch = sample_tasks(DISTILL_BATCH, teacher.cfg.d, n, prior, g)
        with torch.no_grad():
            target = teacher(batch.tokens)
        terms, per_seq = autograd_half_squared_errors(student, replace(batch, target=target), None, cap)
        finite = bool(torch.isfinite(per_seq.detach()).any())
        opt.zero_grad()
        (terms.sum() / DISTILL_BATCH).backward()
        norm = torch.nn.utils.clip_grad_norm_(params, DISTILL_CLIP)
        if finite and bool(torch.isfinite(norm)):
            opt.step()
        else:
            skipped += 1
    return student.eval(), skipped


def zoo_full(prior: str, L: int) -> Path:
    """The Table 1 zoo's FULL of that prior and depth, the FFN cell's baseline."""
    return ROOT / "experiments" / "zoo" / TABLE1_ZOO / prior_slug(prior) / f"full{L}.safetensors"


def inputs(path: Path, prior: str) -> dict:
    """What a cell's numbers come from: the sha256 of its model file and of the zoo FULL it meets (None: none)."""
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None  # noqa: E731
    return {"model": digest(path), "zoo FULL": digest(zoo_full(prior, load(path).cfg.n_layers))}


def measure(path: Path, prior: str, eval_seq: int, distill_steps: int = 0) -> dict:
    model = load(path)
    L, quad = model.cfg.n_layers, 1.0 if "_quad1" in path.stem else 0.0
    on_task = EvalSet(prior, n_seq=eval_seq, seed=0, quad=quad)
    probe = on_task.replace(n_seq=FIT_SEQ, seed=1).draw()
    fit = ffn_fit(model, probe.tokens)
    predictors = {"model": model, "every FFN linearized": linearized(model, fit)}
    for l in range(L):
        for where in ("query", "context"):
            predictors[f"FFN {l + 1} off at the {where}"] = ffn_off(model, l, where)
    full_path = zoo_full(prior, L)
    scale = None
    if full_path.is_file():
        full = load(full_path)
        scale, predictors["zoo FULL × c"] = rescaled(full, probe)
        predictors["zoo FULL"] = full
    mismatch, skipped = {}, {}
    if distill_steps and not quad and model.cfg.mlp in ("linear", "relu"):  # can FULL compute what the FFN model does?
        P, Q = zip(*(b.attn.matrices() for b in model.blocks))  # each layer's (P, Q) [H, D, D], the FFNs left out
        own = LinearTransformer.from_matrices(torch.stack(P).detach(), torch.stack(Q).detach())
        starts = {"its attention": own} | ({"the zoo FULL": predictors["zoo FULL"]} if "zoo FULL" in predictors else {})
        for start_name, start in starts.items():
            student, skipped[start_name] = distilled(model, start, prior, on_task.n, distill_steps)
            predictors[f"FULL distilled from {start_name}"] = student
        with torch.no_grad():
            want = model(probe.tokens)
            for name in ["zoo FULL", *(f"FULL distilled from {k}" for k in starts)]:
                if name in predictors:
                    mismatch[name] = float(((predictors[name](probe.tokens) - want) ** 2).mean())
    diffs = adjusted_losses(predictors, on_task)
    sigma = torch.cat([b.sigma for b in on_task.batches()])
    centres, masks = sigma_groups(sigma, SIGMA_GROUPS)
    base = diffs["model"]
    rows = {
        name: {
            "loss": LossEstimate.of(d).to_dict(),
            "vs_model": LossEstimate.of(d - base).to_dict(),
            "by_sigma": [LossEstimate.of(d[m] - base[m]).to_dict() for m in masks],
        }
        for name, d in diffs.items()
    }
    return {
        "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "prior": prior,
        "layers": L,
        "quad": quad,
        "ffn_fit": {
            k: getattr(fit, k).tolist() for k in ("query_residual", "context_residual", "query_scale", "query_norm")
        },
        "full_scale": scale,
        "distill": {"steps": distill_steps, "mismatch": mismatch, "skipped": skipped} if mismatch else None,
        "sigma": centres.tolist(),
        "rows": rows,
    }


def reusable(path: Path, eval_seq: int, distill_steps: int) -> dict[tuple[str, str], dict]:
    """The cells of an earlier ffn_readout.json measured with the same settings, by (model file, prior); {} where there
    is none, it is unreadable, or its settings differ."""
    try:
        earlier = json.loads(path.read_text())
        if (earlier["meta"]["eval_seq"], earlier["meta"]["distill_steps"]) != (eval_seq, distill_steps):
            return {}
        return {(str((ROOT / c["file"]).resolve()), c["prior"]): c for c in earlier["cells"] if "inputs" in c}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def render(cells: list[dict], meta: dict) -> str:
    text = ["# What the FFN models compute", ""]
    text.append(
        "Written by `OMP_NUM_THREADS=1 python experiments/ffn_readout.py "
        f"--eval-seq {meta['eval_seq']} --distill-steps {meta['distill_steps']}` in "
        f"{meta['wall_s']:.0f} s on {meta['machine']['cpu']} ({meta['machine']['cpu_capability']}, one thread; "
        f"{meta.get('reused', 0)} of the {len(cells)} cells reused from the previous run: the same model and zoo FULL "
        "files, by sha256, and the same settings; `--fresh` measures all), from the best seed of each FFN cell in "
        "`experiments/zoo/family` (written by `experiments/family.py`). Adjusted "
        f"loss on {meta['eval_seq']} sequences (seed 0; a _quad cell on its quadratic task, against the linear oracle "
        f"ridge); the FFN fits and FULL's output scale on {FIT_SEQ} others (seed 1)."
    )
    text += ["", "## Each FFN against one linear map of its input", "", FIT_TEXT, ""]
    head = ["prior", "cell", "L", "layer", "query residual", "context residual", "y → y at the query", "writes"]
    rows = []
    for c in cells:
        f = c["ffn_fit"]
        for l in range(c["layers"]):
            rows.append([
                c["prior"], Path(c["file"]).stem, str(c["layers"]), str(l + 1), f"{f['query_residual'][l]:.3g}",
                f"{f['context_residual'][l]:.3g}", f"{f['query_scale'][l]:+.3f}", f"{f['query_norm'][l]:.3g}",
            ])  # fmt: skip
    text += [markdown(head, rows), ""]
    distils = [c for c in cells if c.get("distill")]
    if distils:
        steps = distils[0]["distill"]["steps"]
        text += [
            "## Can FULL compute it?",
            "",
            DISTILL_TEXT.format(steps=steps, lr=DISTILL_LR, warm=DISTILL_WARMUP, clip=DISTILL_CLIP),
            "",
        ]
        rows = [
            [c["prior"], Path(c["file"]).stem, name, f"{m:.4g}" if m <= DIVERGED else f"diverged ({m:.3g})",
             f"{c['rows'][name]['loss']['mean']:.4f}" if m <= DIVERGED else "–",
             f"{c['rows']['model']['loss']['mean']:.4f}",
             str(c["distill"].get("skipped", {}).get(name.removeprefix("FULL distilled from "), "–"))]
            for c in distils for name, m in c["distill"]["mismatch"].items()
        ]  # fmt: skip
        head = ["prior", "cell", "FULL", "mean (ŷ − ŷ_model)²", "its adjusted loss", "the model's", "updates skipped"]
        text += [markdown(head, rows), ""]
    text += ["## Switched off, linearized, and FULL with a free output scale", "", ABLATION_TEXT, ""]
    for c in cells:
        text.append(f"{c['prior']}, `{Path(c['file']).stem}`" + (f" (FULL's best scale c = {c['full_scale']:.4f})"
                    if c["full_scale"] is not None else "") + ":")  # fmt: skip
        text.append("")
        head = ["predictor", "adjusted loss", "− the model (paired)"]
        head += [f"σ ≈ {s:.2f}" for s in c["sigma"]] if not c["quad"] else []
        rows = []
        mismatch = (c.get("distill") or {}).get("mismatch", {})
        for name, r in c["rows"].items():
            if not mismatch.get(name, 0.0) <= DIVERGED:  # nan too
                rows.append([name, "diverged", "–"] + ["–" for _ in c["sigma"] if not c["quad"]])
                continue
            row = [name, f"{r['loss']['mean']:.4f} ± {r['loss']['stderr']:.4f}"]
            row.append("–" if name == "model" else f"{r['vs_model']['mean']:+.4f} ± {r['vs_model']['stderr']:.4f}")
            if not c["quad"]:
                row += ["–" if name == "model" else f"{e['mean']:+.4f}" for e in r["by_sigma"]]
            rows.append(row)
        text += [markdown(head, rows), ""]
    return "\n".join(text)


FIT_TEXT = (
    "`interp.probes.readout.ffn_fit`: each FFN's update fitted by least squares as resid_mid @ M, at the query and "
    "over the context tokens apart; the relative residual (0: the FFN is one linear map on the tokens it sees), M's "
    "y → y entry at the query (the FFN adds that multiple of the query's y slot, −ŷ, to it) and the median norm of "
    "the FFN's update at the query over that of its input (how much it writes)."
)
DISTILL_TEXT = (
    "Each FFN cell of the paper's task with a linear or ReLU FFN, distilled into FULL of its depth: {steps} Adam steps "
    "(lr {lr}, a linear warm-up over the first {warm:.0%} and a cosine decay to 0) on ½ the squared difference from "
    "the model's ŷ over fresh batches of the prior, starting from the model's own attention maps (its P, Q without "
    "the FFNs) or from the Table 1 zoo's FULL; the zoo's FULL itself, undistilled, for scale. The steps are guarded "
    "as the trainer's: a sequence whose difference is not finite is left out, one above 100·d is compressed "
    "logarithmically (interp.train.robust_half_se), the gradient norm is clipped to {clip}, and an update whose "
    "gradient is not finite is skipped (counted below). The mismatch is on the fit sequences (seed 1), the loss on "
    "the evaluation's. If FULL could compute the FFN model's function, distillation would drive the mismatch toward 0 "
    "and the loss to the model's. A distillation that still diverged (a mismatch above 1, or nan) is marked so."
)
ABLATION_TEXT = (
    "Each predictor minus the model, paired per sequence (and within σ groups on the paper's task): the FFN of layer l "
    "switched off at the query or at the context tokens (blocks.{l}.hook_mlp_out zeroed there); every FFN replaced "
    "by its fitted linear maps; the Table 1 zoo's FULL of that depth, and that FULL with its prediction multiplied by "
    "the one factor c of least squared error."
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval-seq", type=int, default=50_000)
    ap.add_argument(
        "--distill-steps", type=int, default=4000, help="Adam steps distilling each FFN model into FULL (0: none)"
    )
    ap.add_argument("--zoo", type=Path, default=FAMILY_ZOO)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--fresh", action="store_true", help="measure every cell again (default: reuse unchanged ones)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    earlier = {} if args.fresh else reusable(args.out / "ffn_readout.json", args.eval_seq, args.distill_steps)
    cells, reused = [], 0
    for prior in PRIORS:
        folder = args.zoo / prior_slug(prior)
        for path in sorted(folder.glob("lsa_*.safetensors")) if folder.is_dir() else []:
            if any(path.stem.startswith(f"lsa_{f}") for f in FFNS):
                cell, now = earlier.get((str(path.resolve()), prior)), inputs(path, prior)
                if cell is not None and cell.get("inputs") == now:
                    cells.append(cell)  # the same model and baseline files, the same settings: the same numbers
                    reused += 1
                else:
                    cells.append({**measure(path, prior, args.eval_seq, args.distill_steps), "inputs": now})
    meta = {
        "eval_seq": args.eval_seq,
        "distill_steps": args.distill_steps,
        "machine": {"cpu": kernel.cpu_model() or platform.processor(), "cpu_capability": kernel.cpu_capability()},
        "wall_s": time.perf_counter() - t0,
        "reused": reused,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "ffn_readout.json", json.dumps({"meta": meta, "cells": cells}, indent=1) + "\n")
    atomic_write_text(args.out / "ffn_readout.md", render(cells, meta) + "\n")
    print(f"{len(cells)} FFN cells ({reused} reused) in {meta['wall_s']:.0f} s: {args.out / 'ffn_readout.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
