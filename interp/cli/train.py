"""`interp train`: train a model into a run directory."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from interp.cli import ArgError, device, existing_path, noise_spec, positive_float, positive_int, x_cov_spec
from interp.limits import MAX_BATCH_ELEMENTS, MAX_D, MAX_HEADS, MAX_LAYERS, MAX_N, MAX_STEPS


def add(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a linear transformer",
        allow_abbrev=False,
        description=(
            "Train a FULL, DIAG or GD++ linear transformer on noisy in-context linear regression; writes the config, "
            "a metrics log, a geometric trajectory of checkpoints and a resume state to --out "
            "(docs/training.md, 'Run directories'). "
            "One process writes a run at a time; --resume continues it, and any option given with --resume must "
            "match the run."
        ),
    )
    p.add_argument("--out", help="run directory to create")
    p.add_argument(
        "--resume", type=existing_path, metavar="RUN_DIR", help="continue this run from its last saved state"
    )
    add_run_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def add_run_options(p, many: bool = False) -> None:
    """The settings of one run; with `many` (interp sweep) each takes a list of values, --seed is also --seeds,
    and an option not given is absent from the namespace (so a grid file can supply it)."""

    def opt(*names, **kw):
        if many:
            if names[0] == "--seed":
                names, kw["dest"] = ("--seeds", "--seed"), "seed"
            if names[0] != "--threads":
                kw["nargs"] = "+"
                kw["default"] = argparse.SUPPRESS
        p.add_argument(*names, **kw)

    opt("--arch", choices=["full", "diag", "gdpp"], default="full", help="parameterization (default full)")
    opt("--layers", type=positive_int("--layers", MAX_LAYERS), default=4, help="number of layers L (default 4)")
    opt("--heads", type=positive_int("--heads", MAX_HEADS), default=1, help="heads per layer (default 1, as the paper)")
    opt("--d", type=positive_int("--d", MAX_D), default=10, help="input dimension d (default 10)")
    opt("--n", type=positive_int("--n", MAX_N), default=20, help="context length n (default 20)")
    opt(
        "--noise",
        type=noise_spec,
        default="uniform:5",
        help="noise prior: fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2] (default uniform:5)",
    )
    opt(
        "--x-cov",
        type=x_cov_spec,
        metavar="SPEC",
        help="covariance Λ of the inputs, x ~ N(0, Λ) (Zhang, Frei & Bartlett 2024): diag:λ1,...,λd or a .json "
        "file holding a d×d matrix (default I)",
    )
    opt("--seed", type=int, default=0, help="seed of init and data (default 0)")
    opt(
        "--preset",
        choices=["fast", "paper"],
        default="fast",
        help="fast: one-cycle schedule tuned here (default); paper: Adam 1e-4, 200 000 steps",
    )
    opt("--steps", type=positive_int("--steps", MAX_STEPS), help="training steps (default from --preset)")
    opt(
        "--batch",
        type=positive_int("--batch", MAX_BATCH_ELEMENTS),
        default=2048,
        help="sequences per step (default 2048)",
    )
    opt("--lr", type=positive_float("--lr"), help="(peak) learning rate (default from --preset)")
    opt("--schedule", choices=["onecycle", "constant"], help="lr schedule (default from --preset)")
    opt(
        "--clip",
        type=positive_float("--clip", allow_zero=True),
        default=1.0,
        help="gradient-norm clip, 0 for none (default 1.0)",
    )
    opt(
        "--guard",
        choices=["robust", "none"],
        default="robust",
        help="robust (default): a sequence whose prediction blows up is left out of its batch when its loss "
        "overflows, and log-compressed above 100·d; none: plain ½·MSE, stop on overflow",
    )
    opt(
        "--stress",
        type=positive_float("--stress", allow_zero=True),
        metavar="FRAC",
        help="fraction of each batch drawn with x, x_t and the noise --stress-scale times larger, importance-"
        "weighted so the loss is unchanged in expectation: deep FULL models meet the rare large contexts they "
        "diverge on (default from --preset)",
    )
    opt(
        "--stress-scale",
        type=positive_float("--stress-scale"),
        metavar="C",
        help="scale of the stressed sequences (default from --preset: 1.4, FULL-7 1.25)",
    )
    opt(
        "--checkpoints",
        type=positive_int("--checkpoints"),
        default=30,
        help="checkpoints on a geometric schedule from step 0 to the end (default 30)",
    )
    opt(
        "--save-every",
        type=positive_int("--save-every", MAX_STEPS),
        default=500,
        help="steps between saves of the resume state (default 500)",
    )
    opt("--init", type=existing_path, metavar="CKPT", help="start from this checkpoint or run directory")
    opt(
        "--init-noise",
        type=positive_float("--init-noise", allow_zero=True),
        default=0.0,
        help="std of a Gaussian perturbation added to --init weights (default 0)",
    )
    opt("--dtype", choices=["float32", "float64"], default="float32")
    opt("--device", type=device, default="cpu", help="torch device (default cpu; cuda on a GPU machine)")
    opt(
        "--threads",
        type=positive_int("--threads", 1024),
        default=1,
        help="torch CPU threads (default 1: one thread per concurrent run measured fastest here)",
    )


# Options that define a run: with --resume, each one given must match the run (its resolved config).
RUN_OPTIONS = {
    "arch": lambda c: c.model.param,
    "layers": lambda c: c.model.n_layers,
    "heads": lambda c: c.model.n_heads,
    "d": lambda c: c.model.d,
    "n": lambda c: c.n,
    "noise": lambda c: c.noise,
    "seed": lambda c: c.seed,
    "preset": lambda c: c.preset,
    "steps": lambda c: c.steps,
    "batch": lambda c: c.batch,
    "lr": lambda c: c.lr,
    "schedule": lambda c: c.schedule,
    "clip": lambda c: c.clip or 0.0,
    "checkpoints": lambda c: c.n_checkpoints,
    "save-every": lambda c: c.resume_every,
    "init": lambda c: c.init,
    "init-noise": lambda c: c.init_noise,
    "dtype": lambda c: c.model.dtype,
    "device": lambda c: c.device,
    "guard": lambda c: c.guard,
    "x-cov": lambda c: c.x_cov,
    "stress": lambda c: c.stress,
    "stress-scale": lambda c: c.stress_scale,
}


def cmd_train(args) -> int:
    import torch

    from interp.config import covariance_spec, describe_covariance
    from interp.presets import resolve
    from interp.run import Run
    from interp.sweep import OPTIONS, config_from_options
    from interp.train import TrainingDiverged, train

    torch.set_num_threads(args.threads)
    if args.resume:
        run = Run(args.resume)
        cfg = resolve(run.config())
        for name, value_of in RUN_OPTIONS.items():
            given = getattr(args, name.replace("-", "_"), None)
            if _given(args, name) and hasattr(args, name.replace("-", "_")) and not _same(name, given, value_of(cfg)):
                stored = describe_covariance(value_of(cfg)) if name == "x-cov" else value_of(cfg)
                raise ArgError(
                    f"--{name}: {given} does not match the run being resumed "
                    f"({args.resume} has {stored}); --resume continues a run unchanged"
                )
        if args.out and os.path.realpath(args.out) != os.path.realpath(args.resume):
            raise ArgError(f"--out: {args.out} is not the run being resumed ({args.resume}); drop --out")
        run_dir = run.path
    else:
        if not args.out:
            raise ArgError("--out: required (or --resume RUN_DIR)")
        run_dir = _check_out_dir(args.out)
        if args.init:
            from interp.run import load

            src = load(args.init)
            if src.cfg.d != args.d:
                raise ArgError(f"--d: {args.d} does not match --init {args.init} (d={src.cfg.d})")
            if src.cfg.n_layers != args.layers:
                raise ArgError(f"--layers: {args.layers} does not match --init {args.init} ({src.cfg.n_layers} layers)")
        dims = len(covariance_spec(args.x_cov)) if args.x_cov else args.d
        if dims != args.d:
            raise ArgError(f"--x-cov: {args.x_cov} is {dims}×{dims} but --d is {args.d}")
        cfg = config_from_options({k: v for k, v in vars(args).items() if k in OPTIONS})
    try:
        result = train(cfg, run_dir, resume=bool(args.resume), progress=not args.no_progress)
    except TrainingDiverged as err:
        print(f"interp train: {err}", file=sys.stderr)
        return 1
    if result.already_finished:  # nothing was trained: say so, recompute nothing
        print(
            f"run {result.run_dir}: already finished at step {result.step} "
            f"(recorded final train ½·MSE {result.loss:.4f}); nothing to resume"
        )
        return 0
    _print_train_summary(result)
    return 0


def _same(name: str, given, stored) -> bool:
    if name == "noise":
        from interp.tasks import as_prior

        return as_prior(given) == as_prior(stored)
    if name == "init":
        return stored is not None and os.path.realpath(given) == os.path.realpath(stored)
    if name == "x-cov":
        from interp.config import covariance_spec

        return covariance_spec(given) == stored
    return given == stored


def _check_out_dir(out: str) -> Path:
    """--out before any work: not a file, not a run already (nor being written), creatable and writable."""
    from interp.run import Run

    run = Run(out)
    if run.path.exists() and not run.path.is_dir():
        raise ArgError(f"--out: {out} exists and is not a directory")
    pid = run.writer()
    if pid is not None:
        raise ArgError(f"--out: another process (PID {pid if pid > 0 else 'unknown'}) is writing {out}")
    if run.path.is_dir() and any(p.name != Run.LOCK_FILE for p in run.path.iterdir()):
        raise ArgError(f"--out: {out} already holds files; use --resume {out} or another directory")
    existing = run.path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ArgError(f"--out: {existing} is not a writable directory")
    return run.path


def _given(args, name: str) -> bool:
    """Whether --name was on the command line (not just its default); the parser takes no abbreviations."""
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args.argv)


SUMMARY_SEED = 12_345  # the end-of-run evaluation sequences (fresh: training never draws this seed's stream)


def _print_train_summary(result) -> None:
    from interp.config import inputs_suffix
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.run import Run

    cfg = Run(result.run_dir).config()
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=SUMMARY_SEED, x_cov=cfg.x_cov)
    est = adjusted_loss(result.model.cpu(), data)
    inputs = inputs_suffix(cfg.x_cov)
    print(
        f"run {result.run_dir}: {cfg.model.param.upper()} L={cfg.model.n_layers} on {cfg.noise}{inputs}, "
        f"{result.step} steps, final train ½·MSE {result.loss:.4f}"
    )
    print(f"eval on {data.n_seq:,} fresh sequences (seed {data.seed}): adjusted loss {est.mean:.4f} ± {est.stderr:.4f}")
    if cfg.device == "cpu":
        from interp.moments import kernel_choice

        print(f"training path: {kernel_choice().describe()}")
