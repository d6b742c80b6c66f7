"""Trainer: Adam on fresh data each step, geometric checkpoint trajectory, exact resume (Vladymyrov et al. 2024,
training setup), and an optional full-batch L-BFGS polish after Adam (`polish`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from interp import checkpoints as ck
from interp import kernel, moments, presets
from interp.config import TrainConfig, check_device
from interp.files import (
    CheckpointError,
    InterpError,
    InvalidArgument,
    InvalidType,
    atomic_write_text,
    available_memory,
)
from interp.model import LinearTransformer
from interp.noise_free import EigenSample, gdpp_log_residual, robust_half_square, spectral_proposal
from interp.params import FULL, nests
from interp.params import of as arch_of
from interp.run import Run, load
from interp.tasks import draw_tasks, stressed_tasks, tail_tasks, with_quad
from interp.variants import build, stream_width


class TrainingDiverged(InterpError, RuntimeError):
    """The loss became non-finite; the message names the step and the last good checkpoint. An InterpError: a run that
    diverges is not a bug in interp (a RuntimeError too, as before)."""


@dataclass
class TrainResult:
    model: LinearTransformer
    run_dir: Path
    step: int
    loss: float  # mean training ½·MSE over the last logging window; after a polish, on its last check batch
    already_finished: bool = False  # a resumed run that had finished: nothing was trained, `loss` is the recorded one


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """lr for the update that takes the model from `step` to `step + 1`."""
    if cfg.schedule == "constant":
        return cfg.lr
    warm = max(1, int(cfg.warmup * cfg.steps))
    if step < warm:  # linear warm-up from lr/25
        return cfg.lr * (0.04 + 0.96 * step / warm)
    frac = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (1e-3 + (1 - 1e-3) * 0.5 * (1 + math.cos(math.pi * frac)))  # cosine to lr/1000


def checkpoint_steps(total: int, count: int) -> list[int]:
    """About `count` steps from 0 to `total`, geometrically spaced (dense early, sparse late)."""
    if count < 2:
        return [0, total]
    steps = np.unique(np.round(np.geomspace(1, total, count - 1)).astype(int))
    return sorted({0, total, *steps.tolist()})


# Per-sequence losses above GUARD_CAP · d are compressed logarithmically (see _loss). The zero predictor's
# ½·y_t² has mean d/2, and trained models' worst sequences out of 100 000 stay below 150 for d = 10
# (experiments/zoo/README.md), so only blown-up predictions are ever compressed.
GUARD_CAP = 100.0


def robust_half_se(per_seq: torch.Tensor, cap: float) -> torch.Tensor:
    """ℓ below `cap`, cap·(1 + log(ℓ / cap)) above: continuous with a continuous slope at the cap.

    A blown-up sequence then pulls with the gradient of cap·log ℓ, i.e. ∇ℓ / ℓ: bounded relative to
    the prediction it corrects, instead of ∇ℓ, which overflows float32 through a degree-3^L polynomial.
    The kernel's fused training pass computes the same function (interp/csrc/moments.cpp, fused()).
    """
    compressed = cap * (1 + torch.log(per_seq.clamp_min(cap) / cap))  # clamped: no log(0) in the unused branch
    return torch.where(per_seq > cap, compressed, per_seq)


def _loss(model: LinearTransformer, cfg: TrainConfig, gen: torch.Generator) -> tuple[torch.Tensor, int]:
    """(training loss of one fresh batch, number of sequences dropped by the guard).

    The loss is the ½·MSE of Vladymyrov et al. 2024 (README, Conventions). A deep model is a polynomial of degree 3^L in
    its inputs, and early in training rare contexts blow up: in float32 a single one turns the batch's
    loss, or its gradient, into inf. With `cfg.guard == "robust"` (the default) a sequence whose ½·error²
    is not finite is left out of that batch (the loss is still divided by the full batch size), and one
    above GUARD_CAP·d enters through `robust_half_se`; every other sequence keeps exactly its ½·error².
    On the CPU kernel the same loss and its gradients come from one fused pass (interp.moments.half_squared_errors).
    """
    dtype, weight = cfg.model.torch_dtype, None
    if cfg.stress:
        draw, weight = stressed_tasks(
            cfg.batch,
            cfg.model.d,
            cfg.n,
            cfg.noise,
            gen,
            frac=cfg.stress,
            scale=cfg.stress_scale,
            x_cov=cfg.x_cov,
            dtype=dtype,
            device=cfg.device,
        )
        weight = weight.to(dtype)
    else:
        draw = draw_tasks(
            cfg.batch, cfg.model.d, cfg.n, cfg.noise, gen, x_cov=cfg.x_cov, dtype=dtype, device=cfg.device
        )
    draw = with_quad(draw, cfg.quad)  # the paper's task unless --quad
    cap = None if cfg.guard == "none" else GUARD_CAP * cfg.model.d
    terms, per_seq = _loss_terms(model, draw, weight, cap)
    if cap is None:
        return terms.mean(), 0
    kept = int(torch.isfinite(per_seq).sum())
    if kept == 0:
        return per_seq.mean(), cfg.batch
    return terms.sum() / cfg.batch, cfg.batch - kept


def _loss_terms(model: LinearTransformer, draw, weight, cap: float | None) -> tuple[torch.Tensor, ...]:
    """(loss terms, ℓ) of a task draw: the kernel's fused training pass where it takes the model (the same loss, one
    pass), else the model's forward and autograd (`autograd_half_squared_errors`)."""
    if moments.fused_supported(model, draw.x) and not draw.quad:  # the kernel forms the paper's labels only
        return moments.half_squared_errors(model, draw, weight, cap)
    return autograd_half_squared_errors(model, draw.batch(), weight, cap)


def autograd_half_squared_errors(
    model: LinearTransformer, batch, weight, cap: float | None
) -> tuple[torch.Tensor, ...]:
    """(loss terms, ℓ) as interp.moments.half_squared_errors gives them, from the model's forward and autograd:
    ℓ = ½·v·error² per sequence; the terms are ℓ, or with `cap` robust_half_se of the finite ℓ only (the model is
    run again on those, so that no non-finite sequence enters the graph)."""

    def half_se(keep=slice(None)):
        per = 0.5 * (model(batch.tokens[keep]) - batch.target[keep]) ** 2
        return per if weight is None else per * weight[keep]  # p/q: the batch still estimates E_p[½·error²]

    per_seq = half_se()
    if cap is None:
        return per_seq, per_seq
    finite = torch.isfinite(per_seq.detach())
    kept = per_seq if bool(finite.all()) or not bool(finite.any()) else half_se(finite)
    return robust_half_se(kept, cap), per_seq


def adam(params, lr: float) -> torch.optim.Adam:
    """Adam as the trainer runs it: torch's fused implementation on CPU and CUDA.

    The default one loops over the parameter tensors in Python: on a 7-layer DIAG model's 28 small tensors it
    takes twice as long, 0.94 ms against 0.47 ms a step, a tenth of the whole step on the kernel
    (experiments/results/bench_train.md).
    """
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, fused=fused)


# The polish phase (TrainConfig.polish): after Adam, rounds of full-batch L-BFGS, each on a fresh fixed batch of
# POLISH_BATCH sequences, at most POLISH_ITERS iterations (strong-Wolfe line search) on log ½·MSE, whose gradient is
# ∇ℓ / ℓ: scale-free, so the 1e-4 … 1e-12 losses of the noise-free prior take the same steps.
POLISH_BATCH = 65_536
POLISH_ITERS = 100
# Its batches come from the stressed proposal (interp.tasks.stressed_tasks, importance-weighted): a batch of plain
# draws sets no bound on the rare large-λ_max(XᵀX) contexts, and the polished steps diverged on one beyond the batch's
# largest (½·error² 2·10⁶ on one of 20 000 sequences, GD++-3, d = 3, n = 8). At the training stress's 1.4× GD++-5
# stopped at 3.7e-6 (a quarter of each batch at twice the λ_max), at 1.15× it reached 2.2e-7 (presets.md, session 10).
POLISH_STRESS, POLISH_STRESS_SCALE = 0.25, 1.15
# The tail term (TrainConfig.polish_tail = κ): each round's loss adds κ × ½·MSE on POLISH_TAIL_BATCH contexts of
# interp.tasks.tail_tasks (σ from POLISH_TAIL_SIGMA_FROM·σ_max to σ_max, labels POLISH_TAIL_SCALE× their size), and
# its check batch the same on a second draw. 3-layer DIAG on uniform:6 blew up (½·error² above 100·d) 2.0 times in 10⁶
# plain sequences after the plain polish; with κ = 1e-3 none in 5·10⁶, worst 264, for 5% on the mean of a sample
# without blow-ups (presets.md, session 17): the blow-ups' share of the expectation, which a batch of 65 536 cannot see.
POLISH_TAIL_BATCH = POLISH_BATCH // 4
POLISH_TAIL_SCALE, POLISH_TAIL_SIGMA_FROM = 1.35, 0.85


def _batch_half_se(model: LinearTransformer, draw, weight: torch.Tensor) -> torch.Tensor:
    """Mean importance-weighted ½·error² [] of `model` on a task draw with weights [batch], unguarded."""
    return _loss_terms(model, draw, weight.to(draw.x.dtype), None)[0].mean()


def polish(model: LinearTransformer, cfg: TrainConfig, gen: torch.Generator, rounds: int) -> list[tuple[float, float]]:
    """`rounds` rounds of full-batch L-BFGS on `model` (in place), each on a fresh fixed draw of POLISH_BATCH sequences
    from `gen` (cfg's prior through the stressed proposal POLISH_STRESS), plus cfg.polish_tail × ½·MSE on a fresh tail
    draw (POLISH_TAIL_BATCH, interp.tasks.tail_tasks) where cfg.polish_tail > 0; [(loss before, after)] per round, both
    on a second fresh draw of each, the round's check batches (with no tail term: their ½·MSE).

    Always in float64: a float32 model is polished as a float64 copy and rounded back at the end (in float32 the
    stressed batch's blown-up sequences overflow and no round lowers the loss: presets.md, session 13). A round whose
    result is not finite or not lower on its check batch is undone (the mean is carried by rare ill-conditioned
    contexts, and a fixed batch's tail can be over-fitted). Deterministic given the weights and `gen`'s state: a run
    killed during the phase restarts it from the resume state of its last Adam step and ends the same.
    """
    if model.cfg.dtype != "float64":
        wide = build(dataclasses.replace(model.cfg, dtype="float64"), init=False).to(cfg.device)
        wide.load_state_dict(model.state_dict())
        out = polish(wide, cfg, gen, rounds)
        with torch.no_grad():
            for p, q in zip(model.parameters(), wide.parameters()):
                p.copy_(q)
        return out
    params = list(model.parameters())
    kappa = cfg.polish_tail or 0.0
    size = dict(  # every draw of the phase: the stressed batches and the tail set
        d=cfg.model.d, n=cfg.n, noise=cfg.noise, generator=gen, x_cov=cfg.x_cov, dtype=torch.float64, device=cfg.device
    )

    def tail_draw():
        tail = tail_tasks(POLISH_TAIL_BATCH, scale=POLISH_TAIL_SCALE, sigma_from=POLISH_TAIL_SIGMA_FROM, **size)
        return with_quad(tail, cfg.quad), torch.ones(POLISH_TAIL_BATCH, dtype=torch.float64, device=cfg.device)

    def loss(main, tail) -> torch.Tensor:  # the round's objective: ½·MSE of the stressed batch, plus the tail term
        value = _batch_half_se(model, *main)
        return value if tail is None else value + kappa * _batch_half_se(model, *tail)

    out = []
    for _ in range(rounds):
        draw, check = (
            (with_quad(t, cfg.quad), w)
            for t, w in (
                stressed_tasks(POLISH_BATCH, frac=POLISH_STRESS, scale=POLISH_STRESS_SCALE, **size) for _ in range(2)
            )
        )
        tail, tail_check = (tail_draw(), tail_draw()) if kappa > 0 else (None, None)  # none drawn: κ = 0 as before
        saved = [p.detach().clone() for p in params]
        with torch.no_grad():
            before = float(loss(check, tail_check))
        opt = torch.optim.LBFGS(
            params, lr=1.0, max_iter=POLISH_ITERS, history_size=30, tolerance_grad=0.0, tolerance_change=0.0,
            line_search_fn="strong_wolfe",
        )  # fmt: skip

        def closure():
            opt.zero_grad(set_to_none=True)
            value = loss(draw, tail).log()
            if torch.isfinite(value):
                value.backward()
            else:  # a line-search trial that blew up: report it as very bad, with no gradient to follow
                value = value.detach().nan_to_num(nan=1e30, posinf=1e30).clamp_min(1e30).requires_grad_()
                for p in params:
                    p.grad = torch.zeros_like(p)
            return value

        opt.step(closure)
        with torch.no_grad():
            after = float(loss(check, tail_check))
            if not (math.isfinite(after) and after < before) or not _all_finite(model):
                for p, v in zip(params, saved):
                    p.copy_(v)
                after = before
        out.append((before, after))
    return out


# The spectral polish (TrainConfig.spectral_polish), after the polish, on a GD++ Adam phase at σ = 0: rounds of L-BFGS
# on GD++'s exact loss per eigenvalue (interp.noise_free), each over SPECTRAL_CONTEXTS fresh contexts taken at every
# scale of one of SPECTRAL_SCALES (the rounds alternate) and importance-weighted, binned to SPECTRAL_BINS points, each
# eigenvalue's term log-compressed (robust_half_square) above the round's cap of SPECTRAL_CAPS; a round is kept only
# where it lowers the exact mean ½·error² over SPECTRAL_CHECK_CONTEXTS fresh plain contexts, drawn once. Its own data
# stream, torch.Generator(seed + SPECTRAL_SEED_OFFSET), so that the phase added to a finished run (`extend`) ends as a
# fresh run of the same config would. The tries behind these settings: presets.md, session 26.
SPECTRAL_CONTEXTS = 131_072
SPECTRAL_SCALES = ((0.7, 0.85, 1.0, 1.15, 1.3), (0.6, 0.8, 1.0, 1.2, 1.45))
SPECTRAL_CAPS = (1.0, 100.0, 1e4)
SPECTRAL_CHECK_CONTEXTS = 1_048_576
SPECTRAL_BINS = 200_000
SPECTRAL_ITERS = 500
SPECTRAL_SEED_OFFSET = 26_000_026
SPECTRAL_START = "spectral_start.safetensors"  # `extend`: the finished model the phase starts from


def spectral_objective(omegas: Float[Tensor, "L 2"], sample: EigenSample, cap: float) -> Tensor:
    """The spectral polish's loss: E over contexts of Σ_j ½ f(s_j)², each term log-compressed above `cap`, estimated on
    `sample` (interp.noise_free), for a GD++ with ω_xx, ω_yx = omegas[:, 0], omegas[:, 1]."""
    log_f = gdpp_log_residual(omegas[:, 0], omegas[:, 1], sample.s)
    return sample.mean(robust_half_square(log_f, cap))


def spectral_polish(
    omegas: Float[Tensor, "L 2"], cfg: TrainConfig, rounds: int
) -> tuple[Float[Tensor, "L 2"], list[tuple[float, float]]]:
    """`rounds` rounds of the spectral polish (SPECTRAL_*) from a GD++'s (ω_xx, ω_yx) per layer: the polished ω's and
    [(loss before, after)] per round, both the exact mean ½·error² over the phase's plain check contexts.
    Deterministic given the ω's and cfg.seed."""
    gen = torch.Generator().manual_seed(cfg.seed + SPECTRAL_SEED_OFFSET)
    d, n = cfg.model.d, cfg.n
    check = spectral_proposal(SPECTRAL_CHECK_CONTEXTS, d, n, (1.0,), gen)  # plain, not binned: exact
    exact = lambda om: float(check.mean(0.5 * gdpp_log_residual(om[:, 0], om[:, 1], check.s).mul(2).exp()))  # noqa: E731
    current = omegas.detach().to(torch.float64).clone()
    best = exact(current)
    out = []
    for r in range(rounds):
        scales, cap = SPECTRAL_SCALES[r % len(SPECTRAL_SCALES)], SPECTRAL_CAPS[r % len(SPECTRAL_CAPS)]
        fit = spectral_proposal(SPECTRAL_CONTEXTS, d, n, scales, gen).binned(SPECTRAL_BINS)
        trial = current.clone().requires_grad_(True)
        opt = torch.optim.LBFGS(
            [trial], lr=1.0, max_iter=SPECTRAL_ITERS, history_size=50, tolerance_grad=0.0, tolerance_change=0.0,
            line_search_fn="strong_wolfe",
        )  # fmt: skip

        def closure():
            opt.zero_grad(set_to_none=True)
            value = spectral_objective(trial, fit, cap).log()
            value.backward()
            return value

        opt.step(closure)
        with torch.no_grad():
            after = exact(trial.detach())
        before = best
        if math.isfinite(after) and after < best and bool(torch.isfinite(trial).all()):
            current, best = trial.detach().clone(), after
        out.append((before, best))
    return current, out


def _init_model(cfg: TrainConfig) -> LinearTransformer:
    """The model the Adam phase starts from (of cfg.adam_model): drawn from torch.Generator(seed), or --init's
    weights, embedded where the run's parameterization holds theirs, plus --init-noise."""
    want = cfg.adam_model
    gen = torch.Generator().manual_seed(cfg.seed)
    if cfg.init is None:
        return build(want, generator=gen)  # the paper's LinearTransformer, or the family's VariantTransformer
    src = load(cfg.init)
    if not want.is_lsa or not src.cfg.is_lsa:  # the family starts from a model of its own config only
        if dataclasses.replace(src.cfg, dtype=want.dtype) != want:
            raise InvalidArgument(
                f"--init: {cfg.init} is a {src.cfg.family_label} model, the run a {want.family_label}"
            )
        src = build(want, init=False)
        src.load_state_dict({k: v.to(want.torch_dtype) for k, v in load(cfg.init).state_dict().items()})
        with torch.no_grad():
            for p in src.parameters():
                p.add_(cfg.init_noise * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))
        return src
    if src.cfg.d != want.d:
        raise InvalidArgument(f"--init: {cfg.init} has d={src.cfg.d} but the run asks for d={want.d}")
    if src.cfg.n_layers != want.n_layers:
        raise InvalidArgument(f"--init: {cfg.init} has {src.cfg.n_layers} layers but the run asks for {want.n_layers}")
    if src.cfg.n_heads != want.n_heads:
        raise InvalidArgument(f"--init: {cfg.init} has {src.cfg.n_heads} heads but the run asks for {want.n_heads}")
    if arch_of(want.param) is FULL:  # P, Q perturbed as two [L, H, D, D] draws (the order runs were trained with)
        P, Q = src.P.detach(), src.Q.detach()
        P = P + cfg.init_noise * torch.randn(P.shape, generator=gen, dtype=torch.float64).to(P.dtype)
        Q = Q + cfg.init_noise * torch.randn(Q.shape, generator=gen, dtype=torch.float64).to(Q.dtype)
        return LinearTransformer.from_matrices(P, Q).embed(want)
    if src.cfg != want:
        if not nests(want.param, src.cfg.param):
            raise InvalidArgument(
                f"--init: {cfg.init} is a {src.cfg.param} model, which a {want.param} run does not hold "
                "(gdpp ⊂ diag ⊂ full)"
            )
        src = src.embed(want)
    with torch.no_grad():
        for p in src.parameters():
            p.add_(cfg.init_noise * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))
    return src


# torch.optim.Adam's state of one parameter (amsgrad off, as adam() runs it), saved as opt.{i}.{name} for the i-th
# parameter of model.parameters(); the step count is a float scalar (float32 for the fused implementation).
ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")
STEP_DTYPES = (torch.float32, torch.float64)
# Adam's settings that pick an implementation, not the update: a resumed run keeps the one it was trained with (runs
# written before adam() went fused hold None: torch's default loop), which is what keeps it exact.
IMPLEMENTATION = ("fused", "foreach")


def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    """Adam's state as tensors, every parameter's: one Adam has not stepped yet (every update so far skipped by the
    guard) gets the zeros Adam would start it from, so that a reader can require the state of every parameter."""
    sd = opt.state_dict()
    tensors = {}
    for idx, p in enumerate(opt.param_groups[0]["params"]):
        state = sd["state"].get(idx) or {
            "step": torch.zeros((), dtype=torch.float32),
            "exp_avg": torch.zeros_like(p),
            "exp_avg_sq": torch.zeros_like(p),
        }
        for key, val in state.items():
            tensors[f"opt.{idx}.{key}"] = torch.as_tensor(val)
    return tensors, sd["param_groups"]


def _some(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" ... ({len(names)} in all)" if len(names) > 4 else "")


def _optimizer_state(
    path: Path, model: LinearTransformer, tensors: dict[str, torch.Tensor], step: int
) -> dict[int, dict[str, torch.Tensor]]:
    """Adam's per-parameter state from the resume tensors, every tensor checked against its parameter before torch
    sees it: names (none missing, none extra), shapes, dtypes, finiteness, and the step count a whole number in
    0..`step` (Adam counts only the updates the guard did not skip)."""
    named = list(model.named_parameters())
    found = {k for k in tensors if k.startswith("opt.")}
    want = {f"opt.{i}.{key}" for i in range(len(named)) for key in ADAM_STATE}
    order = lambda k: (int(k.split(".")[1]) if k.split(".")[1].isdigit() else math.inf, k)  # noqa: E731  2 < 10
    missing, extra = sorted(want - found, key=order), sorted(found - want, key=order)
    if missing:
        raise CheckpointError(
            f"{path}: optimizer state lacks {_some(missing)}; resuming would restart Adam and the run would no "
            "longer be exact"
        )
    if extra:
        raise CheckpointError(
            f"{path}: optimizer state holds unknown tensors {_some(extra)} (the model has {len(named)} parameters, "
            f"Adam keeps {', '.join(ADAM_STATE)} of each)"
        )
    state = {}
    for i, (name, p) in enumerate(named):
        for key in ("exp_avg", "exp_avg_sq"):
            t, what = tensors[f"opt.{i}.{key}"], f"opt.{i}.{key} (Adam's {key} of {name})"
            if tuple(t.shape) != tuple(p.shape):
                raise CheckpointError(f"{path}: {what} has shape {list(t.shape)}, the parameter {list(p.shape)}")
            if t.dtype != p.dtype:
                raise CheckpointError(
                    f"{path}: {what} is {str(t.dtype).removeprefix('torch.')}, the parameter "
                    f"{str(p.dtype).removeprefix('torch.')}"
                )
            if not bool(torch.isfinite(t).all()):
                raise CheckpointError(f"{path}: {what} holds non-finite values")
        if bool((tensors[f"opt.{i}.exp_avg_sq"] < 0).any()):
            raise CheckpointError(f"{path}: opt.{i}.exp_avg_sq (Adam's exp_avg_sq of {name}) holds negative values")
        t, what = tensors[f"opt.{i}.step"], f"opt.{i}.step (Adam's step count of {name})"
        if t.ndim != 0 or t.dtype not in STEP_DTYPES:
            raise CheckpointError(
                f"{path}: {what} must be a float scalar, got {str(t.dtype).removeprefix('torch.')} of shape "
                f"{list(t.shape)}"
            )
        value = float(t)
        if not (math.isfinite(value) and value == int(value) and 0 <= value <= step):
            raise CheckpointError(f"{path}: {what} is {value:g}; it must be a whole number in 0..{step} (resume step)")
        state[i] = {key: tensors[f"opt.{i}.{key}"] for key in ADAM_STATE}
    return state


def _same(a, b) -> bool:
    """JSON value `a` (a resume file's) equals `b` (the trainer's): lists as tuples, numbers to 1e-9 relative, bools
    and None exactly."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def _number(v, low: float, high: float = math.inf, closed: bool = True) -> bool:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return ok and (low <= v if closed else low < v) and v < high


def _param_groups(
    path: Path, opt: torch.optim.Optimizer, groups: list, cfg: TrainConfig, step: int, lr_scale: float = 1.0
) -> list[dict]:
    """The resume file's optimizer settings checked against the trainer's Adam for `cfg` (a fresh `opt`): each
    finite and in range, and equal to what the config implies (lr: the schedule's at the last update, times the
    rollbacks' `lr_scale`), no unknown
    one; the trainer's own values are what is loaded, but for the implementation the run was trained with
    (IMPLEMENTATION: true, false or null)."""
    ref = opt.state_dict()["param_groups"]
    if len(groups) != len(ref) or not all(isinstance(g, dict) for g in groups):
        raise CheckpointError(
            f"{path}: resume state has {len(groups)} optimizer parameter groups; the trainer's Adam has 1"
        )
    lr = learning_rate(cfg, step - 1) * lr_scale if step > 0 else cfg.lr
    out = []
    for saved, want in zip(groups, ref):
        want = {**want, "lr": lr}
        unknown = sorted(str(k)[:40] for k in set(saved) - set(want))
        if unknown:
            raise CheckpointError(f"{path}: unknown optimizer settings {_some(unknown)}")
        ranges = {
            "lr": (_number(saved.get("lr"), 0, closed=False), "a finite number > 0"),
            "betas": (
                isinstance(saved.get("betas"), list)
                and len(saved["betas"]) == 2
                and all(_number(b, 0, 1) for b in saved["betas"]),
                "two finite numbers in [0, 1)",
            ),
            "eps": (_number(saved.get("eps"), 0, closed=False), "a finite number > 0"),
            "weight_decay": (_number(saved.get("weight_decay"), 0), "a finite number >= 0"),
            "params": (
                saved.get("params") == list(range(len(want["params"])))
                and all(type(i) is int for i in saved.get("params")),
                f"[0, ..., {len(want['params']) - 1}]",
            ),
        }
        for key, (ok, rule) in ranges.items():
            if key not in saved:
                raise CheckpointError(f"{path}: resume state has no optimizer {key}")
            if not ok:
                raise CheckpointError(f"{path}: optimizer {key} is {saved[key]!r:.60}; it must be {rule}")
        for key in IMPLEMENTATION:
            if saved.get(key) not in (True, False, None) or type(saved.get(key)) not in (bool, type(None)):
                raise CheckpointError(f"{path}: optimizer {key} is {saved[key]!r:.60}; it must be true, false or null")
        if saved.get("fused") and saved.get("foreach"):
            raise CheckpointError(f"{path}: optimizer fused and foreach are both true; torch's Adam runs one of them")
        for key, value in want.items():
            if key in saved and key not in IMPLEMENTATION and not _same(saved[key], value):
                raise CheckpointError(
                    f"{path}: optimizer {key} is {saved[key]!r:.60}, the run's config implies {value!r:.60}"
                )
        out.append({**want, **{key: saved[key] for key in IMPLEMENTATION if key in saved}})
    return out


def _load_optimizer(
    opt: torch.optim.Optimizer,
    model: LinearTransformer,
    tensors: dict,
    meta: dict,
    cfg: TrainConfig,
    path: Path,
    lr_scale: float = 1.0,
) -> None:
    """Load the resume file's Adam state into the fresh `opt` of `model`, every part checked first (a tensor of the
    wrong shape reaches the fused kernel's raw pointers, and a missing one restarts Adam silently)."""
    state = _optimizer_state(path, model, tensors, meta["step"])
    groups = _param_groups(path, opt, meta["param_groups"], cfg, meta["step"], lr_scale)
    try:
        opt.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as err:
        raise CheckpointError(f"{path}: unusable optimizer state ({err})") from None


def _save_resume(
    run: Run, cfg: TrainConfig, model, opt, gen: torch.Generator, step: int, window: list[float], lr_scale: float = 1.0
) -> None:
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    opt_t, groups = _optimizer_tensors(opt)
    tensors.update(opt_t)
    tensors["rng.data"] = gen.get_state()
    meta = {
        "model_config": model.cfg.to_dict(),
        "step": step,
        "param_groups": groups,
        "window": window,
        "train_config": cfg.to_dict(),
    }
    if lr_scale != 1.0:  # after a rollback (MAX_ROLLBACKS); runs that never rolled back keep their files as before
        meta["lr_scale"] = lr_scale
    run.write_resume(tensors, meta)


def _all_finite(model: LinearTransformer) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def train(cfg: TrainConfig, run_dir: str | Path, resume: bool = False, progress: bool = True) -> TrainResult:
    """Train `cfg` into `run_dir`; with `resume`, continue that run from its resume state.

    The data stream is torch.Generator(seed + 1); the init uses torch.Generator(seed). A resumed run
    ends with the same weights as an uninterrupted one (same thread count, same device). The run's
    writer lock is held throughout (interp.run.RunLocked names the PID of another writer). `resume`
    trusts the resume file over the run config (a disagreement is refused, naming what differs); a run
    killed before its first resume state restarts from step 0.
    """
    if not isinstance(cfg, TrainConfig):
        raise InvalidType(f"cfg must be an interp.TrainConfig, got {type(cfg).__name__}")
    run = Run(run_dir)  # InvalidType / InvalidArgument for what is no path
    if not resume:
        cfg = presets.resolve(cfg)  # bad configs fail before anything is created
        check_device(cfg.device)
        check_memory(cfg)
    if not cfg.model.is_lsa:  # a bad INTERP_STREAM_WIDTH fails here, before any file is written
        stream_width(cfg.model.d_model, cfg.device)
    with run.lock():
        return _train(cfg, run, resume, progress)


def extendable(have: TrainConfig, want: TrainConfig) -> bool:
    """Whether a finished run of resolved config `have` becomes `want`'s by `extend`: they differ only in the spectral
    polish, which `have` has not had."""
    return (
        have.spectral_polish == 0 and want.spectral_polish > 0 and have == dataclasses.replace(want, spectral_polish=0)
    )


def extend(cfg: TrainConfig, run_dir: str | Path) -> TrainResult | None:
    """Give a finished run the phase its preset added after it was trained, when that is all that differs: today the
    spectral polish (`spectral_polish`) of a GD++ Adam phase at σ = 0, from the run's final model (its GD++ ω's, which
    the embedding keeps exactly); the result is the final checkpoint a fresh run of `cfg` would write, as the phase has
    its own data stream. None when the run already is `cfg`'s; CheckpointError when it holds another run or is not
    finished. Resumable: the model it starts from is kept as SPECTRAL_START until the new config is written."""
    if not isinstance(cfg, TrainConfig):
        raise InvalidType(f"cfg must be an interp.TrainConfig, got {type(cfg).__name__}")
    run = Run(run_dir)
    want = presets.resolve(cfg)
    with run.lock():
        start = run.path / SPECTRAL_START
        have = presets.resolve(run.config())
        if have == want:
            return None
        if not extendable(have, want):
            raise CheckpointError(
                f"{run.path}: holds another run than the one asked; only a spectral polish can be added"
            )
        if not (run.is_complete() or start.exists()):
            raise CheckpointError(f"{run.path}: not finished; resume it with interp train --resume before extending it")
        if start.exists():  # an extension killed after its checkpoint: the model it started from
            model = run.load_checkpoint(start, have)[0]
        else:  # the model the phase starts from, kept until the new config says it is done
            model = run.load_checkpoint(run.checkpoints()[-1][1], have)[0]
            ck.save_checkpoint(start, model, have.steps, have)
        run.record_trained_on(want.steps, "spectral_polish", training_path(want))
        omegas, rounds = spectral_polish(model.gdpp_omegas(), want, want.spectral_polish)
        model = LinearTransformer.from_gdpp_omegas(omegas, want.model).to(want.device)
        run.save_checkpoint(model, want.steps, want)
        run.write_config(want)
        start.unlink()
    return TrainResult(model=model, run_dir=run.path, step=want.steps, loss=rounds[-1][1])


def recursion_bytes(cfg: TrainConfig) -> int:
    """Bytes a torch-backend training step holds: about 6L + 8 matrices [B, d + 2, d + 2] (Ŝ^l, N^l, their gradients
    and autograd's copies; interp.moments.MomentRecursion), plus the batch's tokens. Calibrated on FULL-32, d = 63,
    batch 512: 1.73 GB estimated, 1.63 GB peak resident measured (the process's torch included)."""
    itemsize = 8 if cfg.model.dtype == "float64" else 4
    W = cfg.model.d + 2
    layers = 6 * cfg.model.n_layers + 8
    return itemsize * cfg.batch * (layers * W * W + (cfg.n + 1) * (cfg.model.d + 1))


def _available_memory() -> int | None:
    """Bytes this process can still use: MemAvailable or its cgroup's headroom, the smaller (files.available_memory)."""
    return available_memory()


def check_memory(cfg: TrainConfig) -> None:
    """ValueError naming the flags when a CPU step of `cfg` would not fit in this machine's available memory, before
    anything is allocated or written (the kernel's fused pass needs far less, but the torch backend, which any run
    may fall back to, needs this much)."""
    if cfg.device != "cpu" or kernel_takes(cfg):
        return
    need, have = recursion_bytes(cfg), _available_memory()
    if have is not None and need > 0.8 * have:
        raise InvalidArgument(
            f"--batch {cfg.batch} x --layers {cfg.model.n_layers} x (--d {cfg.model.d} + 2)² needs about "
            f"{need / 2**30:.1f} GiB per step, more than the {have / 2**30:.1f} GiB free here (MemAvailable, or the "
            "memory cgroup's limit less its usage); "
            "lower --batch, --layers or --d"
        )


def kernel_takes(cfg: TrainConfig) -> bool:
    """Whether the kernel's fused pass can run `cfg`'s steps (CPU, its dtype, d + 2 within the widest row)."""
    # the family (interp.variants) trains through autograd, but for qkv: FULL's function (ModelConfig.merges_to_full)
    on_cpu = cfg.device == "cpu" and (cfg.model.is_lsa or cfg.model.merges_to_full)
    return on_cpu and kernel.available() and kernel.row_length(cfg.model.d + 2) is not None


def training_path(cfg: TrainConfig) -> dict:
    """What trains `cfg`'s steps here: the path ("kernel <build>" or "torch"), the device (and GPU), CPU model and
    torch's CPU capability, torch's version and thread count, and on the torch path a family model's stream width
    (interp.variants.stream_width). Each build sums in its own vector width, so two paths give the same losses to a
    few ulps but not the same bits, and Adam amplifies the difference over a run."""
    on_kernel = kernel_takes(cfg) and moments.kernel_choice().train
    out = {
        "path": f"kernel {kernel.info()['isa']}" if on_kernel else "torch",
        "device": cfg.device,
        "cpu": kernel.cpu_model(),
        "cpu_capability": kernel.cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if not on_kernel and not cfg.model.is_lsa:  # the family's hook-free path: its stream's width, padded or not
        out["stream_width"] = stream_width(cfg.model.d_model, cfg.device)
    if cfg.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(torch.device(cfg.device))
    return out


@dataclass
class _AdamState:
    """Where the Adam phase stands: its model (of cfg.adam_model), optimizer, data stream, step, the losses since the
    last log line and the factor on the schedule's lr (halved by each rollback, MAX_ROLLBACKS)."""

    model: LinearTransformer
    opt: torch.optim.Optimizer
    gen: torch.Generator
    step: int
    window: list[float]
    lr_scale: float


class _Diverged(Exception):
    """The Adam phase's loss or weights stopped being finite at a step (message: what, at which step)."""


# A diverged Adam phase goes back to its last resume state (or its init) with half the learning rate, at most this many
# times before it stops: DIAG-7 on uniform:1 (seed 1, the preset's peak 8e-3) overflowed on 1 748 of 2 048 sequences at
# step 3 679 of 14 000 where seeds 0 trained (experiments/results/presets.md, session 11). The factor is in the resume
# state, so a resumed run replays the same rollbacks.
MAX_ROLLBACKS = 3


def _fresh_state(cfg: TrainConfig, run: Run, lr_scale: float, init: LinearTransformer | None = None) -> _AdamState:
    """Step 0: the init (`init`, else _init_model's), a fresh Adam, the data stream torch.Generator(seed + 1), an empty
    metrics log."""
    model = (_init_model(cfg) if init is None else init).to(cfg.device)
    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed + 1)
    atomic_write_text(run.metrics_path, "")
    return _AdamState(model, adam(model.parameters(), cfg.lr), gen, 0, [], lr_scale)


def _resumed_state(cfg: TrainConfig, run: Run, lr_scale: float | None = None) -> _AdamState:
    """The run's resume state, every part checked (`lr_scale` replaces the saved factor: a rollback)."""
    tensors, meta = run.read_resume(cfg)
    saved_scale = meta.get("lr_scale", 1.0)
    if not _number(saved_scale, 0, 1 + 1e-12, closed=False):
        raise CheckpointError(f"{run.resume_path}: lr_scale is {saved_scale!r:.60}; it must be a number in (0, 1]")
    weights = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    model = ck.model_from_tensors(run.resume_path, weights, meta["model_config"]).to(cfg.device)
    opt = adam(model.parameters(), cfg.lr)
    _load_optimizer(opt, model, tensors, meta, cfg, run.resume_path, saved_scale)
    gen = torch.Generator(device=cfg.device)
    try:
        gen.set_state(tensors["rng.data"])
    except RuntimeError as err:
        raise CheckpointError(f"{run.resume_path}: unusable data RNG state ({err})") from None
    step, window = int(meta["step"]), [float(v) for v in meta.get("window", [])]
    run.truncate_metrics(step)
    return _AdamState(model, opt, gen, step, window, saved_scale if lr_scale is None else lr_scale)


def _as_run_model(model: LinearTransformer, cfg: TrainConfig) -> LinearTransformer:
    """The Adam phase's model as the run's own (embedded when it started as a nested parameterization)."""
    return model if model.cfg == cfg.model else model.embed(cfg.model)


def _train(cfg: TrainConfig, run: Run, resume: bool, progress: bool) -> TrainResult:
    run_dir = run.path
    if resume:
        cfg = run.config()
        if run.is_complete():  # finished: never retrain, whether or not the resume state is still there
            model = run.load()[0]
            rows = run.read_metrics()
            loss = float(rows[-1]["loss"]) if rows and "loss" in rows[-1] else float("nan")
            return TrainResult(model, run_dir, presets.resolve(cfg).steps, loss, already_finished=True)
        resume = run.has_resume()  # no resume state yet: start again from step 0
    elif run.is_run(run_dir) or any(p.name != run.LOCK_FILE for p in run_dir.iterdir()):
        raise CheckpointError(f"{run_dir}: already holds files; resume that run or choose another directory")
    cfg = presets.resolve(cfg)
    check_device(cfg.device)
    if not resume:  # a refused --init (another model, another shape) fails before the run's config is written
        init = _init_model(cfg)
        run.write_config(cfg)
    state = _resumed_state(cfg, run) if resume else _fresh_state(cfg, run, 1.0, init)
    machine = training_path(cfg)
    # Adam finished, yet no final checkpoint (deleted): where the last phase writes it (a polish, an embedding) it is
    # written again below; else it is the resume state's model itself, restored bit for bit.
    restore = state.step == cfg.steps and not (cfg.polish or cfg.spectral_polish or state.model.cfg != cfg.model)
    while True:
        if state.step < cfg.steps:
            run.record_trained_on(state.step, "adam", machine, fresh=state.step == 0)
        try:
            model, mean = _adam_phase(cfg, run, state, progress)
            break
        except _Diverged as err:
            scale = state.lr_scale / 2
            last_good = _last_good(run)
            if cfg.guard == "none" or scale < 0.5**MAX_ROLLBACKS:
                tried = f" (after {MAX_ROLLBACKS} rollbacks, each at half the lr)" if cfg.guard != "none" else ""
                raise TrainingDiverged(f"{err}{tried}; training stopped, last good checkpoint: {last_good}") from None
            state = _resumed_state(cfg, run, scale) if run.has_resume() else _fresh_state(cfg, run, scale)
            _note(f"{run_dir}: {err}; rolled back to step {state.step}, at {scale:g}× the schedule's learning rate")
    if cfg.polish:  # from the resume state of the last Adam step: a run killed here restarts the phase, ends the same
        run.record_trained_on(cfg.steps, "polish", machine)
        rounds = polish(model, cfg, state.gen, cfg.polish)  # Adam's model, before it is embedded (NOISE_FREE_NEST)
        mean = rounds[-1][1]
    if cfg.spectral_polish:  # GD++'s ω's, after the polish: the same phase `extend` adds to a finished run
        run.record_trained_on(cfg.steps, "spectral_polish", machine)
        omegas, rounds = spectral_polish(model.gdpp_omegas(), cfg, cfg.spectral_polish)
        model, mean = LinearTransformer.from_gdpp_omegas(omegas, cfg.model).to(cfg.device), rounds[-1][1]
    model = _as_run_model(model, cfg)
    if cfg.polish or cfg.spectral_polish or model is not state.model or restore:  # the polished (or embedded) model
        path = run.save_checkpoint(model, cfg.steps, cfg)
        if state.step == cfg.steps:
            _note(f"{run_dir}: its final checkpoint was missing; {path.name} written again from the resume state")
    if restore:  # the loss of the last logging window, as the run recorded it
        rows = run.read_metrics()
        mean = float(rows[-1]["loss"]) if rows and "loss" in rows[-1] else mean
    return TrainResult(model=model, run_dir=run_dir, step=cfg.steps, loss=mean)


def _note(text: str) -> None:
    print(f"interp: {text}", file=sys.stderr, flush=True)


def _last_good(run: Run) -> Path | None:
    """The latest trajectory checkpoint (every one is finite: checked before it is written)."""
    good = run.checkpoints()
    return good[-1][1] if good else None


def _adam_phase(cfg: TrainConfig, run: Run, state: _AdamState, progress: bool) -> tuple[LinearTransformer, float]:
    """Adam from `state` to cfg.steps, saving the trajectory and the resume state on the way; (the phase's model, the
    last logging window's mean loss). _Diverged when the loss or the weights stop being finite."""
    model, opt, gen, start = state.model, state.opt, state.gen, state.step
    run.drop_checkpoints_after(start)  # written after the resume state by a killed process
    save_at = set(checkpoint_steps(cfg.steps, cfg.n_checkpoints))
    if start == 0 and 0 in save_at:
        run.save_checkpoint(_as_run_model(model, cfg), 0, cfg)
    bar = tqdm(total=cfg.steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True)
    t0, t_log, s_log = time.perf_counter(), time.perf_counter(), start
    mean, window = float("nan"), state.window
    dropped = skipped = 0  # sequences left out and updates skipped by the guard in this logging window
    params = list(model.parameters())  # once: a walk of the module tree costs ~50 µs, a 7-layer step 5-10 ms
    with open(run.metrics_path, "a") as log, bar:
        for step in range(start, cfg.steps):
            lr = learning_rate(cfg, step) * state.lr_scale
            for group in opt.param_groups:
                group["lr"] = lr
            loss, n_dropped = _loss(model, cfg, gen)
            value = loss.item()
            if not math.isfinite(value) or n_dropped > cfg.batch // 2:
                what = (
                    f"loss is {value}"
                    if n_dropped <= cfg.batch // 2
                    else f"{n_dropped} of {cfg.batch} sequences overflow"
                )
                raise _Diverged(f"step {step + 1}: {what}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.clip if cfg.clip else float("inf"))
            if cfg.guard != "none" and not bool(torch.isfinite(grad_norm)):
                skipped += 1  # the backward pass overflowed: no update from this batch
            else:
                opt.step()
            dropped += n_dropped
            window.append(value)
            done = step + 1
            if done % cfg.log_every == 0 or done == cfg.steps:
                mean = float(np.mean(window))
                now = time.perf_counter()
                rate = (done - s_log) / max(now - t_log, 1e-9)
                record = {
                    "step": done,
                    "loss": mean,
                    "lr": lr,
                    "grad_norm": float(grad_norm),
                    "steps_per_s": rate,
                    "elapsed_s": now - t0,
                }
                if dropped or skipped:  # the guard acted in this window
                    record.update(dropped=dropped, skipped=skipped)
                log.write(json.dumps(record) + "\n")
                log.flush()
                bar.set_postfix(loss=f"{mean:.4g}", lr=f"{lr:.2g}")
                t_log, s_log, window, dropped, skipped = now, done, [], 0, 0
            bar.update(1)
            if done in save_at or done % cfg.resume_every == 0:
                if not _all_finite(model):
                    raise _Diverged(f"step {done}: weights are non-finite")
                log.flush()
                os.fsync(log.fileno())  # the metrics a checkpoint describes are on disk before it
                if done in save_at and not (done == cfg.steps and (cfg.polish or model.cfg != cfg.model)):
                    run.save_checkpoint(_as_run_model(model, cfg), done, cfg)  # the polished last: _train
                _save_resume(run, cfg, model, opt, gen, done, window, state.lr_scale)
    return model, mean
