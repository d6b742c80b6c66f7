"""`interp export`: a run's last checkpoint as one standalone file that embeds its training config (Run.export)."""

from __future__ import annotations

from interp.cli import ArgError, check_output, existing_path

HELP = "write a run's final model as one standalone checkpoint file with its training config"  # interp --help


def add(sub) -> None:
    p = sub.add_parser(
        "export",
        help=HELP,
        description=(
            "Writes the last checkpoint of RUN_DIR as one safetensors file that also embeds the run's whole training "
            "config (prior, seed, n, input covariance, steps, lr, schedule, stress), without the trajectory or the "
            "resume state: what a model zoo ships (experiments/zoo/best). Every interp command reads the file as "
            "it reads the run (docs/checkpoints.md, 'Standalone files')."
        ),
    )
    p.add_argument("run", type=existing_path, metavar="RUN_DIR", help="a run directory (interp train / sweep)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the file to write (*.safetensors)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from interp.run import Run, resolve_model

    if not Run.is_run(args.run):
        raise ArgError(f"{args.run}: not a run directory (no {Run.CONFIG_FILE}); a checkpoint file is already one file")
    if not args.out.endswith(".safetensors"):
        raise ArgError(f"--out: {args.out} must end in .safetensors (a checkpoint file)")
    out = check_output(args.out, "--out", [args.run])
    run = Run(args.run)
    note = run.training_note()
    m = resolve_model(run.export(out))  # a CheckpointError (an unreadable run) is one line, exit 2, as everywhere
    cfg = m.model.cfg
    print(f"wrote {out}: {cfg.family_label} L={cfg.n_layers}, step {m.step} of {m.config.steps}, {m.noise}")
    if note:
        print(f"interp export: note: {note}; exported the last checkpoint on disk")
    return 0
