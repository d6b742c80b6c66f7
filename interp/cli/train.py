"""`interp train`: train a model into a run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interp.cli import ArgError, existing_path, noise_spec, positive_float, positive_int


def add(sub) -> None:
    p = sub.add_parser("train", help="train a linear transformer", description=(
        "Train a FULL, DIAG or GD++ linear transformer on noisy in-context linear regression; "
        "writes config.json, metrics.jsonl, a geometric trajectory of checkpoints and a resume state to --out."))
    p.add_argument("--out", help="run directory to create")
    p.add_argument("--resume", type=existing_path, metavar="RUN_DIR", help="continue this run from its last saved state")
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
    opt("--layers", type=positive_int("--layers"), default=4, help="number of layers L (default 4)")
    opt("--heads", type=positive_int("--heads"), default=1, help="heads per layer (default 1, as the paper)")
    opt("--d", type=positive_int("--d"), default=10, help="input dimension d (default 10)")
    opt("--n", type=positive_int("--n"), default=20, help="context length n (default 20)")
    opt("--noise", type=noise_spec, default="uniform:5",
        help="noise prior: fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2] (default uniform:5)")
    opt("--seed", type=int, default=0, help="seed of init and data (default 0)")
    opt("--preset", choices=["fast", "paper"], default="fast",
        help="fast: one-cycle schedule tuned here (default); paper: Adam 1e-4, 200 000 steps")
    opt("--steps", type=positive_int("--steps"), help="training steps (default from --preset)")
    opt("--batch", type=positive_int("--batch"), default=2048, help="sequences per step (default 2048)")
    opt("--lr", type=positive_float("--lr"), help="(peak) learning rate (default from --preset)")
    opt("--schedule", choices=["onecycle", "constant"], help="lr schedule (default from --preset)")
    opt("--clip", type=positive_float("--clip", allow_zero=True), default=1.0,
        help="gradient-norm clip, 0 for none (default 1.0)")
    opt("--checkpoints", type=positive_int("--checkpoints"), default=30,
        help="checkpoints on a geometric schedule from step 0 to the end (default 30)")
    opt("--save-every", type=positive_int("--save-every"), default=500,
        help="steps between saves of the resume state (default 500)")
    opt("--init", type=existing_path, metavar="CKPT", help="start from this checkpoint or run directory")
    opt("--init-noise", type=positive_float("--init-noise", allow_zero=True), default=0.0,
        help="std of a Gaussian perturbation added to --init weights (default 0)")
    opt("--dtype", choices=["float32", "float64"], default="float32")
    opt("--device", default="cpu", help="torch device (default cpu; cuda on a GPU machine)")
    opt("--threads", type=positive_int("--threads"), default=1,
        help="torch CPU threads (default 1: one thread per concurrent run measured fastest here)")


def cmd_train(args) -> int:
    import torch

    from interp import checkpoints as ck
    from interp.sweep import OPTIONS, config_from_options
    from interp.train import TrainingDiverged, load_run_config, train

    torch.set_num_threads(args.threads)
    if args.resume:
        cfg = load_run_config(args.resume)
        explicit = {a for a in ("arch", "layers", "heads", "d", "n", "noise", "seed", "steps", "lr") if _given(args, a)}
        given = {"arch": cfg.model.param, "layers": cfg.model.n_layers, "heads": cfg.model.n_heads, "d": cfg.model.d,
                 "n": cfg.n, "noise": cfg.noise, "seed": cfg.seed, "steps": cfg.steps, "lr": cfg.lr}
        for name in sorted(explicit):
            if getattr(args, name) != given[name] and given[name] is not None:
                raise ArgError(f"--{name}: {getattr(args, name)} does not match the run being resumed "
                               f"({args.resume} has {given[name]})")
        if not (Path(args.resume) / ck.RESUME_FILE).exists():
            raise ArgError(f"--resume: {args.resume} has no {ck.RESUME_FILE} to continue from")
        run_dir = Path(args.resume)
    else:
        if not args.out:
            raise ArgError("--out: required (or --resume RUN_DIR)")
        run_dir = Path(args.out)
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ArgError(f"--out: {run_dir} already holds files; use --resume {run_dir} or another directory")
        if args.init:
            from interp.checkpoints import load

            src = load(args.init)
            if src.cfg.d != args.d:
                raise ArgError(f"--d: {args.d} does not match --init {args.init} (d={src.cfg.d})")
            if src.cfg.n_layers != args.layers:
                raise ArgError(f"--layers: {args.layers} does not match --init {args.init} ({src.cfg.n_layers} layers)")
        cfg = config_from_options({k: v for k, v in vars(args).items() if k in OPTIONS})
    try:
        result = train(cfg, run_dir, resume=bool(args.resume), progress=not args.no_progress)
    except TrainingDiverged as err:
        print(f"interp train: {err}", file=sys.stderr)
        return 1
    _print_train_summary(result)
    return 0


def _given(args, name: str) -> bool:
    """Whether --name was on the command line (not just its default)."""
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args.argv)


def _print_train_summary(result) -> None:
    import torch

    from interp.baselines import oracle_predict
    from interp.tasks import sample_tasks
    from interp.train import load_run_config

    cfg = load_run_config(result.run_dir)
    gen = torch.Generator().manual_seed(12345)
    batch = sample_tasks(10_000, cfg.model.d, cfg.n, cfg.noise, gen, dtype=result.model.cfg.torch_dtype)
    with torch.no_grad():
        pred = result.model.cpu()(batch.tokens).double()
    mse = 0.5 * ((pred - batch.target.double()) ** 2).mean().item()
    oracle = 0.5 * ((oracle_predict(batch) - batch.target.double()) ** 2).mean().item()
    print(f"run {result.run_dir}: {cfg.model.param.upper()} L={cfg.model.n_layers} on {cfg.noise}, "
          f"{result.step} steps, final train ½·MSE {result.loss:.4f}")
    print(f"eval on 10 000 fresh sequences: ½·MSE {mse:.4f}, oracle ridge {oracle:.4f}, adjusted {mse - oracle:.4f}")


