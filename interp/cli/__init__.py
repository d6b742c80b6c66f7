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


def positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        return value
    return parse


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


def existing_path(text: str) -> str:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


COMMANDS = ["train", "sweep", "table", "eval", "probe", "drift", "report"]  # each: interp/cli/{name}.py with add(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="interp", description="Train and probe linear transformers that learn linear regression in context.")
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
    except (ValueError, OSError) as err:  # CheckpointError is a ValueError
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
