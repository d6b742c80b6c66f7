"""`interp train`: train a model into a run directory."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from interp.cli import ArgError, device, existing_path, noise_spec, positive_float, positive_int, x_cov_spec

HELP = "train a linear transformer"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "train",
        help=HELP,
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
    """The settings of one run, one flag per training option of interp.config.OPTIONS (its help and default are
    declared there), then --threads. An option not given is absent from the namespace, so that `interp train --resume`
    knows which were given and a sweep's grid file can supply the others. With `many` (interp sweep) each takes a list
    of values and its aliases too (--seeds)."""
    from interp.config import OPTIONS

    for opt in OPTIONS.values():
        kw = dict(dest=opt.key, help=opt.help, default=argparse.SUPPRESS, metavar=opt.metavar)
        if opt.kind == "choice":
            kw["choices"] = opt.choices
        else:
            kw["type"] = _parser(opt)
        if many:
            kw["nargs"] = "+"
        p.add_argument(*(opt.aliases if many else ()), opt.flag, **kw)
    p.add_argument(
        "--threads",
        type=positive_int("--threads", 1024),
        default=1,
        help="torch CPU threads (default 1: one thread per concurrent run measured fastest here)",
    )


def _parser(opt):
    """The argparse type reading `opt`'s flag (interp.config.Option.kind)."""
    if opt.kind == "count":
        return positive_int(opt.flag, opt.maximum) if opt.maximum else positive_int(opt.flag)
    if opt.kind == "number":
        return positive_float(opt.flag, allow_zero=opt.zero)
    kinds = {"int": int, "noise": noise_spec, "x_cov": x_cov_spec, "path": existing_path, "device": device}
    return kinds[opt.kind]


def cmd_train(args) -> int:
    import torch

    from interp.config import OPTIONS, config_from_options, covariance_spec
    from interp.presets import resolve
    from interp.run import Run, load
    from interp.train import TrainingDiverged, train

    torch.set_num_threads(args.threads)
    given = {k: v for k, v in vars(args).items() if k in OPTIONS}  # the parser leaves out an option not given
    if args.resume:
        run = Run(args.resume)
        cfg = resolve(run.config())
        for key, opt in OPTIONS.items():  # each option given must ask for what the run has
            if key in given and not opt.agrees(given[key], opt.of(cfg)):
                raise ArgError(
                    f"{opt.flag}: {given[key]} does not match the run being resumed "
                    f"({args.resume} has {opt.describe(opt.of(cfg))}); --resume continues a run unchanged"
                )
        if args.out and os.path.realpath(args.out) != os.path.realpath(args.resume):
            raise ArgError(f"--out: {args.out} is not the run being resumed ({args.resume}); drop --out")
        run_dir = run.path
    else:
        if not args.out:
            raise ArgError("--out: required (or --resume RUN_DIR)")
        run_dir = _check_out_dir(args.out)
        d, layers = (given.get(k, OPTIONS[k].default) for k in ("d", "layers"))
        if given.get("init"):
            src = load(given["init"])
            if src.cfg.d != d:
                raise ArgError(f"--d: {d} does not match --init {given['init']} (d={src.cfg.d})")
            if src.cfg.n_layers != layers:
                raise ArgError(f"--layers: {layers} does not match --init {given['init']} ({src.cfg.n_layers} layers)")
        x_cov = given.get("x_cov")
        dims = len(covariance_spec(x_cov)) if x_cov else d
        if dims != d:
            raise ArgError(f"--x-cov: {x_cov} is {dims}×{dims} but --d is {d}")
        cfg = config_from_options(given)
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


SUMMARY_SEED = 12_345  # the end-of-run evaluation sequences (fresh: training never draws this seed's stream)


def _print_train_summary(result) -> None:
    from interp.config import inputs_suffix
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.render import loss
    from interp.run import Run

    cfg = Run(result.run_dir).config()
    data = EvalSet(  # on the task it trained on: its prior, d, n, Λ and quadratic term
        cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=SUMMARY_SEED, x_cov=cfg.x_cov, quad=cfg.quad
    )
    est = adjusted_loss(result.model.cpu(), data)
    inputs = inputs_suffix(cfg.x_cov) + (f", quadratic task (--quad {cfg.quad:g})" if cfg.quad else "")
    print(
        f"run {result.run_dir}: {cfg.model.family_label} L={cfg.model.n_layers} on {cfg.noise}{inputs}, "
        f"{result.step} steps, final train ½·MSE {result.loss:.4f}"
    )
    where = f"seed {data.seed}, not interp eval's seed 0"
    print(f"eval on fresh sequences: adjusted loss {loss(est.mean, est.stderr, data.n_seq, where)}")
    if cfg.device == "cpu":
        from interp.moments import kernel_choice
        from interp.train import kernel_takes

        if kernel_takes(cfg):  # the paper's models and qkv (FULL's function): the fused pass where it measured faster
            print(f"training path: {kernel_choice().describe()}")
        else:  # the rest of the family: autograd through the hook-free forward (interp.variants)
            print(f"training path: torch (autograd, the {cfg.model.family_label} model's hook-free forward)")
