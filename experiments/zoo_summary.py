"""Write experiments/zoo/README.md: every zoo model, the command that trained it, its adjusted loss.

    OMP_NUM_THREADS=1 python experiments/zoo_summary.py            # 100 000 evaluation sequences (seed 0)

Adjusted loss = ½·MSE minus the oracle ridge's on the same sequences (README, Conventions: adjusted loss), evaluated on
the model's own training prior, beside the paper's Table 1 cell (best of 5 seeds, 200 000 steps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from studies import tail_check  # experiments/studies/tail_check.py (this script's folder is on sys.path)

from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_losses, paper_value
from interp.run import Run, load

ZOO = Path(__file__).resolve().parent / "zoo"
TRIM = 10  # the mean without this many worst sequences is printed beside the mean


def _num(v: float, spec: str = ".4f") -> str:
    """Fixed point for ordinary values, 3 significant digits for a blown-up model's (8.56e+23, not 24 digits)."""
    return f"{v:{spec}}" if abs(v) < 1e4 else f"{v:.3g}"


def _tail(run: Path, cfg, n_seq: int) -> dict | None:
    """The tail check of experiments/studies/tail_check.py: worst and blow-ups on `n_seq` further sequences."""
    return tail_check.tail(load(run), cfg, n_seq) if n_seq > 0 else None


def _tail_cell(tail: dict | None) -> str:
    return "–" if tail is None else f"{tail['worst']:.4g} ({tail['blowups']})"


def runs(root: Path) -> list[Path]:
    return [r.config_path for r in Run.find(root, recursive=True) if r.checkpoint_dir.is_dir()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-seq", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tail-seq", type=int, default=1_000_000, help="sequences of the tail check (0: skip it)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows, records = [], []
    for cfg_path in runs(ZOO):
        run = cfg_path.parent
        cfg = Run(run).config()
        name = str(run.relative_to(ZOO))
        done = Run(run).is_complete()
        step = Run(run).checkpoints()[-1][0]
        command = (run / "COMMAND").read_text().strip() if (run / "COMMAND").exists() else "(training)"
        if not done:
            rows.append(
                f"| `{name}` | {cfg.model.param.upper()} | {cfg.model.n_layers} | `{cfg.noise}` | {step} (running) | "
                f"| | | | | | `{command}` |"
            )
            continue
        data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=args.n_seq, seed=args.seed, x_cov=cfg.x_cov)
        diff = adjusted_losses({"m": load(run)}, data)["m"]  # per sequence
        est = LossEstimate.of(diff)
        trimmed = diff.sort().values[:-TRIM].mean().item()  # is the mean carried by a handful of sequences?
        tail = _tail(run, cfg, args.tail_seq)
        paper = paper_value(cfg.model.param, cfg.noise, cfg.model.n_layers, cfg.model.d, cfg.n, cfg.x_cov)
        ratio = f" ({_num(est.mean / paper, '.2f')}x)" if paper else ""
        rows.append(
            f"| `{name}` | {cfg.model.param.upper()} | {cfg.model.n_layers} | `{cfg.noise}` | {step} | "
            f"{_num(est.mean)} ± {_num(est.stderr)}{' (*)' if est.dominated else ''} | {est.median:.4f} | "
            f"{est.worst:.4g} | {trimmed:.4f} | {_tail_cell(tail)} | "
            f"{paper if paper is not None else '–'}{ratio} | `{command}` |"
        )
        records.append(
            dict(
                run=name,
                arch=cfg.model.param,
                layers=cfg.model.n_layers,
                noise=cfg.noise,
                seed=cfg.seed,
                steps=step,
                adjusted=est.to_dict() | {f"mean_without_{TRIM}_worst": trimmed},
                tail=tail,
                paper=paper,
                command=command,
            )
        )
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            "# Model zoo",
            "",
            "Trained with `interp train` (fast preset: Adam, batch 2048, 2000×L steps, one-cycle lr, clip 1.0; "
            "FULL from 5 layers with the stressed proposal, `--stress`, README 'Tails'; one CPU thread). Each "
            f"directory holds `{Run.CONFIG_FILE}`, `COMMAND`, `{Run.METRICS_FILE}`, the geometric trajectory "
            f"`{Run.CKPT_DIR}/step_*.safetensors` and `{Run.RESUME_FILE}`. The top level is the default report's "
            "(`interp report`): one model per cell, the best seed. `seeds/` holds runs trained before the stressed "
            "proposal existed: the former top-level FULL-5, -6 and -7 models (the 7-layer probes and drift study of "
            "`experiments/results/` read them), the best preset seed where it differs from those, and the 7-layer FULL "
            "seeds of the drift study. `drift/` holds the extra FULL seeds and DIAG-started runs of the drift study; "
            "`long/` the 7-layer FULL runs trained longer (`--steps`, `experiments/results/presets.md`); `failures/` "
            "a blown-up run kept out of the default report. `table1/` holds one standalone file per Table 1 cell of "
            "every prior of the grid (the best seed so far of `experiments/table1_grid/`, written by "
            "`experiments/zoo_table1.py`, listed in its README). Runs of `seeds/` and `long/` and the FULL-5 and "
            "FULL-6 models were trained by `interp sweep` (`experiments/results/table1_cpu.md`), with the same "
            "config as the `interp train` command shown.",
            "",
            f"Adjusted loss: ½·MSE minus the oracle ridge's, {args.n_seq:,} sequences of the training prior, "
            f"evaluation seed {args.seed}, ± one standard error; paper: Table 1 (best of 5 seeds, 200 000 steps). "
            f"Regenerate with `OMP_NUM_THREADS=1 python experiments/zoo_summary.py`.",
            "",
            f"| run | arch | L | prior | steps | adjusted loss | median per sequence | worst sequence "
            f"| mean without the {TRIM} worst | {args.tail_seq:,} more: worst (blow-ups) | paper | command |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Tail check: the worst adjusted loss over {args.tail_seq:,} further sequences (evaluation seed "
            f"{tail_check.TAIL_SEED}) and, in brackets, how many of them exceed 100·d (a blow-up: 1 000 for d = 10; "
            "trained models' ordinary worst sequences stay below 150).",
            "",
            "(*) the mean is dominated by a few sequences on which the model blows up (its single worst "
            "sequence carries more than half the mean): a 4-layer linear transformer is a polynomial of degree "
            "81 in its inputs, and these short-trained models have not tamed its tails on rare contexts. The "
            "median shows how the model does on a typical sequence. See experiments/results/table1_cpu.md.",
            "",
        ]
    )
    (ZOO / "README.md").write_text(text)
    (ZOO / "summary.json").write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
