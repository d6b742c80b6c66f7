"""`interp` command line: a thin shell over the library.

Errors: interp's own (InterpError: a bad argument, file, run or config; ArgError is one), argparse's, and an OSError
that names its file each print one line on stderr and exit with status 2 (--debug adds the traceback). Anything else
is a bug in interp: its traceback, then a line saying so, exit status 1. Ctrl-C at any moment, the imports at start-up
included, prints "interp: interrupted" and exits with status 130, without a traceback.

Each subcommand lives in its own module here with `add(subparsers)`; COMMANDS lists them in order. Only the command
being run has its parser built (and its module's dependencies imported): `interp --help` imports no torch.
"""

from __future__ import annotations

import _signal  # signal's C core: importing it runs no Python code an interrupt could land in
import os
import sys


def _interrupted(signum, frame) -> None:
    """SIGINT before the command runs: one line, exit 130 (no Python code of an import in between to unwind)."""
    os.write(2, b"interp: interrupted\n")
    os._exit(130)


# The console script (`interp`, whose sys.argv[0] ends in it; interp/__init__.py, lazy, ran just before) or `python -m
# interp.cli` (argv[0] is "-m" while the package is imported): from here on an interrupt exits 130 at once, never a
# traceback in the middle of an import; main() hands Ctrl-C back to the command as a KeyboardInterrupt once the command
# runs. Imported by anything else (a test calling main()), or with SIGINT ignored, the process's SIGINT is left alone.
_COMMAND = bool(sys.argv) and os.path.basename(sys.argv[0]) in ("interp", "interp.exe", "interp-script.py", "-m")
if _COMMAND and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted)

import argparse  # noqa: E402
import importlib  # noqa: E402
import signal  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

from interp.files import InterpError  # noqa: E402


class ArgError(InterpError):
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
    "export",
    "import",
]  # each: interp/cli/{name}.py with add(subparsers)


DEBUG_HELP = "on an error, print its traceback too (for reporting a problem)"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of `interp`; given the command line, only the command it runs gets its options (the others are
    listed by name and help). Without `argv`, every command's parser is built."""
    parser = Parser(
        prog="interp", description="Train and probe linear transformers that learn linear regression in context."
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    running = _command(argv) if argv is not None else None
    for name in COMMANDS:
        module = importlib.import_module(f"interp.cli.{name}")
        if argv is None or name == running:
            module.add(sub)
            continue
        sub.add_parser(name, help=module.HELP)  # listed, not built: train's options import torch (interp.config)
    for command in sub.choices.values():  # --debug after the command as well (`interp train ... --debug`)
        if not any("--debug" in a.option_strings for a in command._actions):
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command a command line runs: its first word that is not an option (`interp --debug train ...`)."""
    return next((a for a in argv if not a.startswith("-")), None)


# What every command imports (torch, numpy, TransformerLens through interp.run): loaded before the command runs, while
# an interrupt still exits at once. An interrupt inside an extension module's import can leave it half-initialised
# for code that catches ImportError and carries on (torch's import of numpy does), so none is raised there.
PRELOAD = ("numpy", "torch", "interp.run")


def main(argv: list[str] | None = None) -> int:
    """Run `interp ARGV` and return its exit status (0; 1 for a failed run or a bug; 2 for bad input; 130 when
    interrupted). With `argv` None (the console script, `python -m interp.cli`) it takes sys.argv and owns the
    process's SIGINT, unless the process was started with it ignored: until the command starts (argument parsing,
    the imports of PRELOAD) and after it returns, an interrupt exits 130 at once; while it runs, it raises
    KeyboardInterrupt, so that the command's cleanup runs (a training run's files and lock, a sweep's workers)."""
    own_process = argv is None and signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _interrupted)
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    prog = "interp"
    if own_process:
        signal.signal(signal.SIGINT, _interrupted)
    try:
        debug = "--debug" in argv  # also before the parser exists (a bug while building it)
        try:
            parser = build_parser(argv)
            args = parser.parse_args(argv)
            debug = bool(getattr(args, "debug", False))
            args.argv = argv
            prog = f"interp {args.command}"
            if own_process:
                for name in PRELOAD:
                    importlib.import_module(name)
                signal.signal(signal.SIGINT, signal.default_int_handler)
            return args.func(args)
        except InterpError as err:  # ArgError, CheckpointError, InvalidArgument, ...
            if debug:
                traceback.print_exc()
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        except OSError as err:
            if err.filename is None:  # an OSError naming no file is not a user's mistake interp can point at
                return _bug(prog)
            if debug:
                traceback.print_exc()
            where = err.filename if err.filename2 is None else f"{err.filename} -> {err.filename2}"
            print(f"{prog}: error: {where}: {err.strerror or err}", file=sys.stderr)
            return 2
        except Exception:  # noqa: BLE001  anything else is a bug in interp: say so, with its traceback
            return _bug(prog)
    except KeyboardInterrupt:
        if own_process:
            signal.signal(signal.SIGINT, _interrupted)  # a second Ctrl-C while this prints: exit at once
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        if own_process:
            signal.signal(signal.SIGINT, _interrupted)


def _bug(prog: str) -> int:
    traceback.print_exc()
    print(f"{prog}: internal error (a bug in interp; please report it with the traceback above)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
