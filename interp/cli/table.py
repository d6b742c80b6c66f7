"""`interp table`: Table 1 (best of seeds beside the paper's values) from the runs under sweep roots."""

from __future__ import annotations

from pathlib import Path

from interp.cli import ArgError, check_output, noise_spec, positive_int
from interp.cli.flags import alias

HELP = "Table 1 from trained runs (e.g. an interp sweep root)"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "table",
        help=HELP,
        description=(
            "Discover the runs one level under each ROOT, evaluate the complete ones with the paper's setting "
            "(d=10, n=20, one head, x ~ N(0, I); cached by checkpoint content), take the best seed per cell and print "
            "Table 1 with the paper's value, the baseline rows and the Bayes floor on the models' own sequences, then "
            "every cell of the paper's table (run or pending) with its ratio to the paper, the spread of its seeds and "
            "its best seed's median and worst sequence (a blow-up above 100·d flagged), under a summary of the aims "
            "(cells within 10% of the paper or below it, 7-layer FULL at or below it, blow-ups), and the baselines' "
            "tuned parameters. A run whose config.json "
            "lacks a field the table reads, or whose final checkpoint disagrees with it, is skipped with a warning."
        ),
    )
    from interp.params import ARCHS  # here, not at the top: `interp --help` imports this module, not torch

    p.add_argument("roots", nargs="+", metavar="ROOT", help="directories holding run directories")
    p.add_argument("--arch", nargs="+", choices=list(ARCHS), help="subset of the grid (default all found)")
    p.add_argument("--layers", nargs="+", type=positive_int("--layers"))
    p.add_argument(
        "--noise", nargs="+", type=noise_spec, help="priors, e.g. uniform:5 categorical:1,3 (default all found)"
    )
    p.add_argument("--seeds", nargs="+", type=int, help="training seeds (default all found)")
    p.add_argument(
        "--eval-seq",
        type=positive_int("--eval-seq"),
        help="evaluation sequences per model and per baseline, the same for both (default 100000; --quick: 10000)",
    )
    alias(p, "--n-seq", "eval_seq", positive_int("--n-seq"))
    p.add_argument(
        "--baseline-seq",
        type=positive_int("--baseline-seq"),
        help="also show the baseline rows on this many sequences (labelled with the count; default: not shown)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a preview on 10000 sequences (marked as such; no mark against the paper where the noise is too large)",
    )
    p.add_argument("--eval-seed", type=int, default=0, help="seed of the evaluation sequences (default 0)")
    p.add_argument(
        "--confirm-seq",
        type=positive_int("--confirm-seq"),
        help="choose each cell's best seed on the --eval-seq sequences, then report it, the baselines and the aims on "
        "this many other sequences (e.g. 1000000; default: report on the choice's own sequences)",
    )
    p.add_argument(
        "--confirm-seed",
        type=int,
        help="seed of the --confirm-seq sequences (default: the evaluation seed + 1; must differ from it)",
    )
    p.add_argument("--cache", help="JSON cache of evaluations (default ROOT/table1_evals.json of the first root)")
    p.add_argument("--baselines-only", action="store_true", help="only the baseline rows and the Bayes floor")
    p.add_argument("--out", metavar="PATH", help="also write the markdown table to this file")
    p.add_argument(
        "--json", metavar="PATH", help="write every run's result, the baselines and the cells as JSON to this file"
    )
    p.set_defaults(func=cmd_table)


def command_line(args) -> str:
    """The command as typed ("interp table ROOT --cache ..."), quoted for a shell; "interp table" plus the parsed
    roots where the words typed are not known."""
    import shlex

    words = getattr(args, "argv", None) or ["table", *args.roots]
    return "interp " + shlex.join(str(w) for w in words)


def cmd_table(args) -> int:
    import torch

    from interp.cli.output import json_text, write
    from interp.table import table1

    torch.set_num_threads(1)
    for root in args.roots:
        if not Path(root).is_dir():
            raise ArgError(f"ROOT: {root} is not a directory")
    for flag in ("--out", "--json", "--cache"):  # before any evaluation
        if getattr(args, flag[2:]):
            check_output(getattr(args, flag[2:]), flag)
    text, data = table1(
        args.roots,
        args.arch,
        args.layers,
        args.noise,
        args.seeds,
        args.eval_seq,
        args.baseline_seq,
        args.eval_seed,
        args.cache,
        args.baselines_only,
        quick=args.quick,
        command=command_line(args),
        confirm_seq=args.confirm_seq,
        confirm_seed=args.confirm_seed,
    )
    if args.out:
        write(args.out, text)
    if args.json:
        write(args.json, json_text(data))
    print(text)
    return 0
