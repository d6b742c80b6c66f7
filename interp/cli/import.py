"""`interp import`: another codebase's linear transformer (Ahn et al., von Oswald et al., plain matrices) as a
standalone interp checkpoint (interp.convert), or a snapshot list as a run directory that `interp drift` reads."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from interp.cli import ArgError, check_output, existing_path, noise_spec, positive_int
from interp.limits import MAX_LAYERS, MAX_N

HELP = "convert another codebase's checkpoint (Ahn et al., von Oswald et al., matrices) into an interp checkpoint"


def add(sub) -> None:
    p = sub.add_parser(
        "import",
        help=HELP,
        description=(
            "Reads FILE in FORMAT and writes one standalone interp checkpoint (what interp export writes) that every "
            "command reads: eval, probe, drift, report. ahn: Ahn et al. 2023's PyTorch Transformer_F (a state dict "
            "with 'allparam', or a notebook's {'hist_dict': ...} / {'hist_list': ...} snapshot file; needs --n, as "
            "their layer divides by N). oswald: von Oswald et al. 2023's Haiku parameter tree saved as .npz (needs "
            "--heads; --layers for one shared block). matrices: P and Q, or W_Q, W_K, W_V, W_O, per layer and head, "
            "in a .safetensors or .npz file, with the source's conventions as flags. The file records the source "
            "format, its SHA-256, the conventions mapped, d, n and the training prior (docs/import.md)."
        ),
    )
    p.add_argument("format", choices=("ahn", "oswald", "matrices"), metavar="FORMAT", help="ahn, oswald or matrices")
    p.add_argument("file", type=existing_path, metavar="FILE", help="the source file")
    p.add_argument(
        "--out",
        "-o",
        dest="out",
        required=True,
        metavar="OUT",
        help="the checkpoint to write (*.safetensors); with --trajectory, a new run directory",
    )
    p.add_argument("--n", type=positive_int("--n", MAX_N), help="the source's context length n (ahn: required)")
    p.add_argument(
        "--noise",
        type=noise_spec,
        help="the prior the source was trained on (default uniform:0: noise-free, as both papers train; recorded)",
    )
    p.add_argument("--snapshot", type=int, metavar="K", help="ahn: the snapshot to import (default: the last)")
    p.add_argument("--key", help="ahn: the run of a 'hist_dict' file with several runs")
    p.add_argument(
        "--trajectory",
        action="store_true",
        help="ahn: write every snapshot as a run directory OUT (checkpoints/step_K.safetensors) for interp drift",
    )
    p.add_argument("--unconstrained", action="store_true", help="ahn: allparam holds (d+1)x(d+1) P and Q whole")
    p.add_argument("--heads", type=positive_int("--heads", 256), help="oswald: num_heads (required)")
    p.add_argument("--layers", type=positive_int("--layers", MAX_LAYERS), help="oswald: L of one shared (deq) block")
    p.add_argument("--scale", choices=("1", "1/n"), default="1", help="matrices: the source divides by n (default 1)")
    p.add_argument(
        "--readout", choices=("-y", "+y"), default="-y", help="matrices: the source predicts −y or +y (default −y)"
    )
    p.add_argument("--layout", choices=("xy", "yx"), default="xy", help="matrices: token order (default xy)")
    p.add_argument(
        "--vectors",
        choices=("column", "row"),
        default="column",
        help="matrices: W_Q etc. act on column vectors (q = W_Q e, default) or rows (q = e W_Q)",
    )
    p.add_argument("--query-as-key", action="store_true", help="matrices: the source uses the query as a key")
    p.set_defaults(func=cmd_import)


ONLY = {  # option -> the formats it belongs to
    "snapshot": ("ahn",),
    "key": ("ahn",),
    "trajectory": ("ahn",),
    "unconstrained": ("ahn",),
    "heads": ("oswald",),
    "layers": ("oswald",),
}
MATRICES = {"scale": "1", "readout": "-y", "layout": "xy", "vectors": "column", "query_as_key": False}


def _options(args) -> dict:
    for name, formats in ONLY.items():
        if args.format not in formats and getattr(args, name) not in (None, False):
            raise ArgError(f"--{name.replace('_', '-')} is for {' and '.join(formats)} files, not {args.format}")
    if args.format != "matrices":
        for name, default in MATRICES.items():
            if getattr(args, name) != default:
                raise ArgError(f"--{name.replace('_', '-')} is for matrices files, not {args.format}")
    if args.trajectory and args.snapshot is not None:
        raise ArgError("--snapshot picks one model; --trajectory writes every snapshot")
    common = {"n": args.n, "noise": args.noise}
    if args.format == "ahn":
        if args.n is None:
            raise ArgError("--n: ahn files need the context length N (their layer divides by N)")
        return common | {"snapshot": args.snapshot, "key": args.key, "unconstrained": args.unconstrained}
    if args.format == "oswald":
        if args.heads is None:
            raise ArgError("--heads: the parameter tree does not record num_heads; give it")
        return common | {"heads": args.heads, "layers": args.layers}
    if args.scale == "1/n" and args.n is None:
        raise ArgError("--n: --scale 1/n needs the context length n")
    return common | {name: getattr(args, name) for name in MATRICES}


def cmd_import(args) -> int:
    from interp import convert

    options = _options(args)
    if args.trajectory:
        out = _check_new_dir(args.out, args.file)
    else:
        if not args.out.endswith(".safetensors"):
            raise ArgError(f"--out: {args.out} must end in .safetensors (a checkpoint file)")
        out = check_output(args.out, "--out", [args.file])
    imported = convert.read(args.format, args.file, **options)  # an InterpError: one line naming the file, exit 2
    if args.trajectory:
        write_trajectory(imported, out)
        what = f"{len(imported.snapshots)} snapshot(s) as a run directory (interp drift {out})"
    else:
        convert.write(imported, out)
        what = f"snapshot {imported.step} of {len(imported.snapshots)}" if len(imported.snapshots) > 1 else "its model"
    m = imported.model.cfg
    prior = imported.noise if imported.noise_given else f"{imported.noise} (assumed; --noise to say)"
    n = "n unknown (--n to say)" if imported.n is None else f"n={imported.n}"
    print(f"wrote {out}: {args.format} {what}, FULL d={m.d} L={m.n_layers} H={m.n_heads}, {n}, {prior}")
    return 0


def _check_new_dir(path: str, source: str) -> Path:
    out = Path(path)
    if os.path.lexists(out):
        raise ArgError(f"--out: {out} exists; --trajectory writes a new run directory")
    if not out.parent.is_dir():
        raise ArgError(f"--out: directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise ArgError(f"--out: directory {out.parent} is not writable")
    return out


def write_trajectory(imported, out: Path) -> Path:
    """Every snapshot of `imported` as a run directory: config.json (the model, prior and n; the training fields are
    interp's defaults, as the source's are not in its file) and checkpoints/step_{K}.safetensors, K the snapshot's
    index, each with the import's metadata. Built in a temporary directory beside `out`, then renamed: nothing is
    left at `out` on failure."""
    from interp.config import TrainConfig
    from interp.run import Run

    if imported.n is None:
        raise ArgError("--n: a run directory needs the context length n")
    last = imported.snapshots[-1][0]
    cfg = TrainConfig(model=imported.model.cfg, noise=imported.noise, n=imported.n, steps=max(last, 1))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        run = Run(tmp)
        run.write_config(cfg)
        for step, model in imported.snapshots:
            run.save_checkpoint(model, step, **imported.meta(step))
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
