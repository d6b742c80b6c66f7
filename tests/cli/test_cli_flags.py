"""Flags that mean the same thing are spelled the same in every command (interp.cli.flags), and a former spelling
still parses, to the same option, without being listed in --help."""

from __future__ import annotations

import argparse

import pytest

from interp.cli import build_parser
from interp.cli.flags import FORMER, SPELLINGS


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def listed(parser: argparse.ArgumentParser) -> dict[str, str]:
    """flag -> dest of every option --help lists."""
    return {s: a.dest for a in parser._actions if a.help is not argparse.SUPPRESS for s in a.option_strings}


def hidden(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {s: a.dest for a in parser._actions if a.help is argparse.SUPPRESS for s in a.option_strings}


# meaning (a key of SPELLINGS) -> the commands that have it; each spells it SPELLINGS[meaning]
HAVE = {
    "main output (run directory, HTML, markdown or probe JSON)": [
        "train",
        "table",
        "probe",
        "report",
        "export",
        "import",
    ],
    "results as JSON": ["table", "eval", "probe", "drift"],
    "sequences of the adjusted loss on the prior": ["sweep", "table", "eval", "drift"],
    "seed of the sequences a command measures on": ["table", "eval", "probe", "drift"],
    "sequences probed (interp probe)": ["probe"],
    "sequences of the form fits": ["probe", "drift"],
    "sequences per forward pass (memory only)": ["eval", "probe"],
    "training seed (interp train)": ["train"],
    "training seeds (interp sweep; interp table's filter)": ["sweep", "table"],
    "torch CPU threads": ["train", "sweep", "eval", "probe", "drift", "report"],
}


def test_every_meaning_is_surveyed():
    assert set(HAVE) == set(SPELLINGS)


@pytest.mark.parametrize("meaning", list(HAVE))
def test_one_spelling_per_meaning(meaning):
    cmds = commands()
    flag = SPELLINGS[meaning]
    missing = [c for c in HAVE[meaning] if flag not in listed(cmds[c])]
    assert not missing, f"{meaning}: {', '.join(missing)} do not spell it {flag}"


def test_the_spellings_chosen():
    """The survey as a table: each command's spelling of each meaning (a change here is a change users see)."""
    cmds = commands()
    seqs = {c: sorted(f for f in listed(p) if f.endswith("-seq")) for c, p in cmds.items()}
    assert seqs == {
        "train": [],
        "sweep": ["--eval-seq"],
        "table": ["--baseline-seq", "--confirm-seq", "--eval-seq"],
        "eval": ["--eval-seq", "--profile-seq"],
        "probe": ["--ablation-seq", "--fit-seq", "--probe-seq"],
        "drift": ["--eval-seq", "--fit-seq"],
        "report": [],
        "export": [],
        "import": [],
    }
    seeds = {c: sorted(f for f in listed(p) if "seed" in f) for c, p in cmds.items()}
    assert seeds == {
        "train": ["--seed"],
        "sweep": ["--seed", "--seeds"],  # a list of training seeds; --seed too, as in interp train
        "table": ["--confirm-seed", "--eval-seed", "--seeds"],
        "eval": ["--eval-seed"],
        "probe": ["--eval-seed"],
        "drift": ["--eval-seed"],
        "report": [],
        "export": [],
        "import": [],
    }
    assert {c for c, p in cmds.items() if "--chunk" in listed(p)} == {"eval", "probe"}
    assert {c for c, p in cmds.items() if "--n-seq" in listed(p)} == set()  # a former spelling only


@pytest.mark.parametrize("command", list(FORMER))
def test_former_spellings_still_parse_unlisted(command):
    parser = commands()[command]
    for old, new in FORMER[command].items():
        assert old in hidden(parser) and old not in listed(parser)
        assert hidden(parser)[old] == listed(parser)[new]  # the same option
        assert old not in parser.format_help()


@pytest.mark.parametrize(
    "argv, dest, value",
    [
        (["eval", "--n-seq", "123"], "eval_seq", 123),
        (["eval", "--seed", "4"], "eval_seed", 4),
        (["eval", "--eval-seq", "123", "--eval-seed", "4"], "eval_seq", 123),
        (["table", "R", "--n-seq", "77"], "eval_seq", 77),
        (["probe", "C", "--out", "p.json", "--n-seq", "9", "--seed", "2"], "probe_seq", 9),
        (["probe", "C", "--json", "p.json", "--seed", "2"], "eval_seed", 2),
        (["probe", "C", "--json", "p.json"], "out", "p.json"),
    ],
)
def test_old_and_new_spellings_give_the_same_namespace(argv, dest, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "C").write_text("")  # existing_path
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value


def test_defaults_survive_the_aliases():
    """A hidden alias adds no default of its own: the option's default stays."""
    parse = build_parser().parse_args
    assert parse(["eval"]).eval_seq == 100_000 and parse(["eval"]).eval_seed == 0
    assert parse(["table", "R"]).eval_seq is None


def test_a_bad_value_names_the_spelling_given(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--n-seq", "0"])
    assert "--n-seq must be >= 1" in capsys.readouterr().err
