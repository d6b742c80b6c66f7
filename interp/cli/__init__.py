"""`interp` command line: a thin shell over the library. Bad input: one line on stderr, exit status 2.

Each subcommand lives in its own module here with `add(subparsers)`; COMMANDS lists them in order.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path


class ArgError(Exception):
    """A bad command-line argument; the message names it."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


MAX_SEQ = 10**8  # sequences of one evaluation (their per-sequence losses are kept for the median)


def positive_int(name: str, maximum: int = MAX_SEQ):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{name} must be <= {maximum}, got {value}")
        return value

    return parse


def device(text: str) -> str:
    from interp.config import check_device

    try:
        return check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_float(name: str, allow_zero: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (value > 0 or (allow_zero and value == 0)) or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {text}")
        return value

    return parse


def noise_spec(text: str) -> str:
    from interp.tasks import NoisePrior

    try:
        return NoisePrior.parse(text).spec
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def x_cov_spec(text: str) -> str:
    """`diag:λ1,...,λd` or a .json file holding a d×d matrix, checked here and kept as given (interp.config)."""
    from interp.config import covariance_spec

    try:
        covariance_spec(text)
    except (ValueError, TypeError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def existing_path(text: str) -> str:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def check_output(path: str, flag: str, inputs: list[str] = ()) -> Path:
    """Refuse an output path before any work: a directory, a missing or read-only directory, a read-only
    file, one of the command's inputs (or a file inside an input run), or one of any run's own files."""
    from interp.run import Run

    out = Path(path)
    parent = out.parent
    if out.is_dir():
        raise ArgError(f"{flag}: {out} is a directory")
    if not parent.is_dir():
        raise ArgError(f"{flag}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArgError(f"{flag}: directory {parent} is not writable")
    if out.exists() and not os.access(out, os.W_OK):
        raise ArgError(f"{flag}: {out} is not writable")
    real = os.path.realpath(out)
    for inp in inputs:
        src = os.path.realpath(inp)
        inside = Path(inp).is_dir() and real.startswith(os.path.join(src, Run.CKPT_DIR) + os.sep)
        if real == src or inside or (out.exists() and os.path.samefile(out, inp)):
            raise ArgError(f"{flag}: {out} is one of this command's inputs ({inp}); write elsewhere")
    for candidate in (out, Path(real)):
        run = Run.owns(candidate)
        if run is not None:
            raise ArgError(f"{flag}: {out} is a file of the run {run.path}; write elsewhere")
    return out


def note_training(paths, prog: str) -> None:
    """Say on stderr which of the given runs (or checkpoints of runs) a training process is still writing."""
    from interp.run import Run

    seen = set()
    for path in paths:
        run = Run.of(path)
        if run is None or str(run.path) in seen:
            continue
        seen.add(str(run.path))
        note = run.training_note()
        if note:
            print(f"{prog}: note: {note}; reading what is on disk now", file=sys.stderr)


COMMANDS = [
    "train",
    "sweep",
    "table",
    "eval",
    "probe",
    "drift",
    "report",
]  # each: interp/cli/{name}.py with add(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="interp", description="Train and probe linear transformers that learn linear regression in context."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"interp.cli.{name}").add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.argv = argv
    prog = f"interp {args.command}"
    try:
        return args.func(args)
    except ArgError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError) as err:  # CheckpointError is a ValueError
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
