"""Flags that mean the same thing in several commands are spelled the same (SPELLINGS), and a former spelling stays
accepted, hidden from --help, so that scripts written against it keep working (`alias`; FORMER lists them).

tests/cli/test_cli_flags.py checks every command's parser against these tables.
"""

from __future__ import annotations

import argparse

# meaning -> its spelling, in every command that has the meaning
SPELLINGS = {
    "main output (run directory, HTML, markdown or probe JSON)": "--out",
    "results as JSON": "--json",
    "sequences of the adjusted loss on the prior": "--eval-seq",
    "seed of the sequences a command measures on": "--eval-seed",
    "sequences probed (interp probe)": "--probe-seq",
    "sequences of the form fits": "--fit-seq",
    "sequences per forward pass (memory only)": "--chunk",
    "training seed (interp train)": "--seed",
    "training seeds (interp sweep; interp table's filter)": "--seeds",
    "torch CPU threads": "--threads",
}
# command -> {former spelling: the spelling that replaced it}
FORMER = {
    "eval": {"--n-seq": "--eval-seq", "--seed": "--eval-seed"},
    "table": {"--n-seq": "--eval-seq"},
    "probe": {"--n-seq": "--probe-seq", "--seed": "--eval-seed"},
}


def alias(parser: argparse.ArgumentParser, former: str, dest: str, type=None) -> None:
    """Accept `former` as another spelling of the option stored in `dest`, unlisted in --help (its value is checked by
    `type`, which names `former` in its messages)."""
    parser.add_argument(former, dest=dest, type=type, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
