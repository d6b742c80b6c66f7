"""Ship the Table 1 grid's best seed of every cell as one standalone file: experiments/zoo/best/<prior>/<arch><L>.

The file name ends in .safetensors.

    OMP_NUM_THREADS=1 python experiments/zoo_table1.py                      # after `interp table ... --json`

Reads the per-run evaluations `interp table` recorded (--table, its --json output: every complete run's adjusted loss
on 100 000 sequences of evaluation seed 0, and its best seed per (architecture, depth, prior) cell, as the paper
reports the best of 5 seeds: Vladymyrov et al. 2024, Table 1), and writes that run's final checkpoint with its
training config embedded (interp.run.Run.export: no trajectory, no resume state). Each file's adjusted loss goes into
the zoo's evaluation cache (best/evals.json; keyed by the file's bytes, so the report and `interp table` read it
back without evaluating), and best/README.md lists every cell with its seed, loss and the command that trains it.
A cell whose best run changed is rewritten; files of cells no longer in the table are left alone and listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from interp.evalcache import EvalCache, run_loss
from interp.evaluate import paper_value
from interp.files import atomic_write_text
from interp.params import of
from interp.render import loss as loss_text
from interp.run import Run, resolve_model
from interp.table import paper_order
from interp.tasks import prior_slug

HERE = Path(__file__).resolve().parent
N_SEQ, EVAL_SEED = 100_000, 0  # the table's sequences: the cache entries the grid's evaluation already holds


def cells_of(table: dict) -> list[dict]:
    """The table's best-of-seeds cells (`interp table --json`'s "cells", keyed "{arch}{L}|{prior}": the best seed's
    run, the complete seeds), each with its architecture, depth and prior, in Table 1's order."""
    rows = []
    for key, c in table["cells"].items():
        arch_depth, noise = key.split("|", 1)
        arch = arch_depth.rstrip("0123456789")
        rows.append(dict(c, arch=arch, layers=int(arch_depth[len(arch) :]), noise=noise, seed=c["best_seed"]))
    return sorted(rows, key=lambda r: paper_order((r["arch"], r["layers"], r["noise"])))


def target(out: Path, arch: str, L: int, noise: str) -> Path:
    return out / prior_slug(noise) / f"{arch}{L}.safetensors"


def export(cells: list[dict], out: Path, cache: EvalCache) -> list[dict]:
    """Write every cell's file (when its content would differ) and its loss into the cache; one row per cell."""
    rows = []
    for c in cells:
        arch, L, noise = c["arch"], c["layers"], c["noise"]
        dest = target(out, arch, L, noise)
        dest.parent.mkdir(parents=True, exist_ok=True)
        run = resolve_model(_path(c["run"]))  # the run's last checkpoint and config
        fresh = not _holds(dest, run)
        if fresh:
            Run(run.path).export(dest)
        est = run_loss(dest, N_SEQ, EVAL_SEED, cache)
        rows.append(
            dict(
                arch=arch,
                layers=L,
                noise=noise,
                file=dest,
                seed=c["seed"],
                seeds=len(c["seeds"]),
                est=est,
                cfg=run.config,
                paper=paper_value(arch, noise, L),
            )
        )
        print(
            f"{dest.relative_to(out)}: seed {c['seed']}, {loss_text(est.mean, est.stderr, est.n_seq)}"
            + (" (written)" if fresh else ""),
            file=sys.stderr,
        )
    return rows


def _path(run: str) -> Path:
    """A run of the table's JSON: its paths are relative to the directory `interp table` ran in (the repository)."""
    path = Path(run)
    return path if path.is_absolute() or path.exists() else HERE.parent / path


def _holds(dest: Path, run) -> bool:
    """Whether `dest` already is the export of `run` (a resolved run): the same config, step and weights."""
    if not dest.exists():
        return False
    have = resolve_model(dest)
    return (have.config, have.step) == (run.config, run.step) and all(
        torch.equal(x, y) for x, y in zip(have.model.state_dict().values(), run.model.state_dict().values())
    )


def command(cfg) -> str:
    """The `interp train` line that trains the cell's run (the preset resolves the rest from the prior)."""
    c = cfg.model
    return (
        f"interp train --arch {c.param} --layers {c.n_layers} --noise {cfg.noise} --seed {cfg.seed} --threads 1 "
        f"--no-progress --out runs/{c.param}{c.n_layers}_{prior_slug(cfg.noise)}_s{cfg.seed}"
    )


HEADER = """# Table 1 zoo: the best seed of every cell

One standalone checkpoint per (prior, architecture, depth) of the Table 1 grid (`experiments/table1_grid.toml`):
the seed with the lowest adjusted loss among those complete, as the paper reports the best of 5 seeds (Vladymyrov
et al. 2024, Table 1). Each file holds the final weights and the whole training config (`interp.run.Run.export`);
`interp eval FILE`, `interp probe FILE` and `interp report FILE` read it as they read a run. The trajectories of the
drift study's runs stay in `experiments/table1_grid/`. `evals.json` is the evaluation cache of these files (100 000
sequences of evaluation seed 0, keyed by each file's bytes).

Written by `OMP_NUM_THREADS=1 python experiments/zoo_table1.py` from `experiments/results/table1_grid.json`
(`interp table`'s --json output). The command column retrains a cell (the grid ran the same config through
`interp sweep`; its `--checkpoints` only thins the trajectory).
"""


def readme(rows: list[dict], out: Path) -> str:
    lines = [
        *HEADER.splitlines(),
        "",
        "| file | arch | L | prior | seed (of) | adjusted loss | median / worst sequence | paper | ratio | command |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        est, paper = r["est"], r["paper"]
        ratio = "–" if not paper else f"{est.mean / paper:.2f}x"
        lines.append(
            f"| `{r['file'].relative_to(out)}` | {of(r['arch']).label} | {r['layers']} | `{r['noise']}` | "
            f"{r['seed']} ({r['seeds']}) | {loss_text(est.mean, est.stderr)} | {est.median:.3g} / {est.worst:.4g} | "
            f"{'–' if paper is None else f'{paper:g}'} | {ratio} | `{command(r['cfg'])}` |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", type=Path, default=HERE / "results" / "table1_grid.json", help="interp table --json")
    ap.add_argument("--out", type=Path, default=HERE / "zoo" / "best", help="the zoo directory to write")
    args = ap.parse_args(argv)
    try:
        table = json.loads(args.table.read_text())
    except (OSError, ValueError) as err:
        print(f"zoo_table1: --table {args.table}: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = export(cells_of(table), args.out, EvalCache(args.out / "evals.json"))
    shipped = {r["file"] for r in rows}
    for stale in sorted(set(args.out.rglob("*.safetensors")) - shipped):
        print(f"note: {stale} is no cell of the table; left alone", file=sys.stderr)
    atomic_write_text(args.out / "README.md", readme(rows, args.out))
    print(f"{len(rows)} cells in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
