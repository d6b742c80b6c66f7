"""`interp train`: train a model into a run directory."""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import ArgError, existing_path, noise_spec, positive_float, positive_int


def add(sub) -> None:
    p = sub.add_parser("train", help="train a linear transformer", description=(
        "Train a FULL, DIAG or GD++ linear transformer on noisy in-context linear regression; "
        "writes config.json, metrics.jsonl, a geometric trajectory of checkpoints and a resume state to --out."))
    p.add_argument("--arch", choices=["full", "diag", "gdpp"], default="full", help="parameterization (default full)")
    p.add_argument("--layers", type=positive_int("--layers"), default=4, help="number of layers L (default 4)")
    p.add_argument("--heads", type=positive_int("--heads"), default=1, help="heads per layer (default 1, as the paper)")
    p.add_argument("--d", type=positive_int("--d"), default=10, help="input dimension d (default 10)")
    p.add_argument("--n", type=positive_int("--n"), default=20, help="context length n (default 20)")
    p.add_argument("--noise", type=noise_spec, default="uniform:5",
                   help="noise prior: fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2] (default uniform:5)")
    p.add_argument("--seed", type=int, default=0, help="seed of init and data (default 0)")
    p.add_argument("--out", help="run directory to create")
    p.add_argument("--resume", type=existing_path, metavar="RUN_DIR", help="continue this run from its last saved state")
    p.add_argument("--preset", choices=["fast", "paper"], default="fast",
                   help="fast: one-cycle schedule tuned here (default); paper: Adam 1e-4, 200 000 steps")
    p.add_argument("--steps", type=positive_int("--steps"), help="training steps (default from --preset)")
    p.add_argument("--batch", type=positive_int("--batch"), default=2048, help="sequences per step (default 2048)")
    p.add_argument("--lr", type=positive_float("--lr"), help="(peak) learning rate (default from --preset)")
    p.add_argument("--schedule", choices=["onecycle", "constant"], help="lr schedule (default from --preset)")
    p.add_argument("--clip", type=positive_float("--clip", allow_zero=True), default=1.0,
                   help="gradient-norm clip, 0 for none (default 1.0)")
    p.add_argument("--checkpoints", type=positive_int("--checkpoints"), default=30,
                   help="checkpoints on a geometric schedule from step 0 to the end (default 30)")
    p.add_argument("--save-every", type=positive_int("--save-every"), default=500,
                   help="steps between saves of the resume state (default 500)")
    p.add_argument("--init", type=existing_path, metavar="CKPT", help="start from this checkpoint or run directory")
    p.add_argument("--init-noise", type=positive_float("--init-noise", allow_zero=True), default=0.0,
                   help="std of a Gaussian perturbation added to --init weights (default 0)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--device", default="cpu", help="torch device (default cpu; cuda on a GPU machine)")
    p.add_argument("--threads", type=positive_int("--threads"), default=1,
                   help="torch CPU threads (default 1: one thread per concurrent run measured fastest here)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def cmd_train(args) -> int:
    import torch

    from interp import checkpoints as ck
    from interp.config import ModelConfig, TrainConfig
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
        model = ModelConfig(d=args.d, n_layers=args.layers, n_heads=args.heads, param=args.arch, dtype=args.dtype)
        cfg = TrainConfig(model=model, noise=args.noise, n=args.n, seed=args.seed, preset=args.preset,
                          steps=args.steps, batch=args.batch, lr=args.lr, schedule=args.schedule,
                          clip=args.clip or None, n_checkpoints=args.checkpoints, resume_every=args.save_every, init=args.init,
                          init_noise=args.init_noise, device=args.device)
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


SUMMARY_SEED = 12_345  # the end-of-run evaluation sequences (fresh: training never draws this seed's stream)


def _print_train_summary(result) -> None:
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss
    from interp.train import load_run_config

    cfg = load_run_config(result.run_dir)
    data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=10_000, seed=SUMMARY_SEED)
    est = adjusted_loss(result.model.cpu(), data)
    print(f"run {result.run_dir}: {cfg.model.param.upper()} L={cfg.model.n_layers} on {cfg.noise}, "
          f"{result.step} steps, final train ½·MSE {result.loss:.4f}")
    print(f"eval on {data.n_seq:,} fresh sequences (seed {data.seed}): adjusted loss {est.mean:.4f} ± {est.stderr:.4f}")
