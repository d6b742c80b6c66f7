"""Variants of the linear transformer, answered with numbers (docs/variants.md): trains a small zoo of FFN, softmax and
kernel-attention models on uniform:5 (d = 10, n = 20, seed 0, 2-4 layers) with interp.variants.train_variant, then
measures each one's adjusted loss (Table 1's metric, 100 000 sequences) and per-layer linearity residual
(interp.probes.linearity) beside the Table 1 zoo's FULL and DIAG models of the same depths, and writes
experiments/results/variants.md and .json.

    OMP_NUM_THREADS=1 nice -n 5 python experiments/variants.py              # train what is missing, then measure
    OMP_NUM_THREADS=1 nice -n 5 python experiments/variants.py --train-only

Resumable: a run whose file exists is not trained again. One training process at a time, one thread.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from interp import kernel
from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_loss, adjusted_losses
from interp.files import atomic_write_text
from interp.presets import FAST_PEAK_LR
from interp.probes.linearity import StudyRow, VariantStudy, layer_linearity
from interp.render import loss as fmt_loss
from interp.render import markdown, number
from interp.run import load
from interp.variants import VariantConfig, VariantTrainConfig, load_variant_with_meta, predictor, train_variant

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "experiments" / "zoo" / "variants"
TABLE1 = ROOT / "experiments" / "zoo" / "best" / "uniform5"
RESULTS = ROOT / "experiments" / "results"
INTERPRETATION = RESULTS / "variants_interpretation.md"  # written by hand for the numbers of variants.md
NOISE, D, N, SEED = "uniform:5", 10, 20, 0
DEPTHS = (2, 3, 4)
STEPS, BATCH = 5000, 512  # about 1-3 min a run on one thread
EVAL_SEQ, PIN_SEQ = 100_000, 10_000  # the adjusted loss (Table 1's count), and its pin (tests/test_variants_zoo.py)
PROBE = EvalSet(NOISE, d=D, n=N, n_seq=2_000, seed=1)  # the linearity probe's sequences
# name -> the variant (FULL trained the same way is the same-budget control)
VARIANTS = {
    "full_ctrl": dict(attention="linear", mlp="none"),
    "ffn_linear": dict(attention="linear", mlp="linear"),
    "ffn_relu": dict(attention="linear", mlp="relu"),
    "softmax": dict(attention="softmax"),
    "kernel": dict(attention="kernel", feature_map="elu1"),
}
CONTROL = "full_ctrl"  # the paired differences are taken against it
COMMAND = "OMP_NUM_THREADS=1 nice -n 5 python experiments/variants.py"


def train_config(name: str, layers: int) -> VariantTrainConfig:
    model = VariantConfig(d=D, n_layers=layers, **VARIANTS[name])
    lr = FAST_PEAK_LR[layers]  # the fast preset's peak lr of FULL at this depth
    return VariantTrainConfig(model=model, noise=NOISE, n=N, seed=SEED, steps=STEPS, batch=BATCH, lr=lr)


def path_of(name: str, layers: int) -> Path:
    return ZOO / f"{name}{layers}.safetensors"


def train_missing() -> None:
    ZOO.mkdir(parents=True, exist_ok=True)
    for layers in DEPTHS:
        for name in VARIANTS:
            path = path_of(name, layers)
            if path.is_file():
                continue
            cfg = train_config(name, layers)
            print(f"training {path.name}: {cfg.model.label}, {layers} layers", flush=True)
            result = train_variant(cfg, path)
            print(f"  {result.wall_s:.0f} s, loss {result.loss:.4g}, rollbacks {result.rollbacks}", flush=True)


def measure() -> list[StudyRow]:
    data = EvalSet(NOISE, d=D, n=N, n_seq=EVAL_SEQ, seed=0)
    pin = data.replace(n_seq=PIN_SEQ)
    probe = PROBE.draw().tokens
    rows = []
    for layers in DEPTHS:
        models = []
        for arch in ("full", "diag"):
            path = TABLE1 / f"{arch}{layers}.safetensors"
            if path.is_file():
                models.append((arch, arch.upper(), path, load(path), None))
        for name in VARIANTS:
            path = path_of(name, layers)
            if path.is_file():
                model, meta = load_variant_with_meta(path)
                models.append((name, model.cfg.label, path, model, meta))
        measured = {name: model if meta is None else predictor(model) for name, _, _, model, meta in models}
        per_seq = adjusted_losses(measured, data)  # one draw, the oracle once: paired differences between models
        control = per_seq.get(CONTROL)
        for name, label, path, model, meta in models:
            est = LossEstimate.of(per_seq[name])
            row = StudyRow(
                name=name,
                label=label,
                layers=layers,
                file=str(path.relative_to(ROOT)),
                loss=est,
                linearity=layer_linearity(model, probe).summary(),
                steps=None if meta is None else meta["train_config"].steps,
                train_wall_s=None if meta is None else meta["wall_s"],
                sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                pin_loss=adjusted_loss(measured[name], pin),
                vs_control=None if control is None else LossEstimate.of(per_seq[name] - control),
            )
            print(f"{path.name}: {est.mean:.4g} ± {est.stderr:.2g}", flush=True)
            rows.append(row)
    return rows


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), "unknown")
    return {
        "cpu": model,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "kernel_isa": kernel.info().get("isa"),
    }


def label(row: StudyRow) -> str:
    return (
        f"{row.label} (zoo)"
        if row.steps is None
        else row.label.replace("FULL", "FULL (same budget)", row.name == "full_ctrl")
    )


def write_markdown(study: VariantStudy, interpretation: str) -> str:
    table = []
    for r in study.rows:
        lin = r.linearity
        table.append(
            [
                str(r.layers),
                label(r),
                fmt_loss(r.loss.mean, r.loss.stderr),
                "" if r.vs_control is None or r.name == CONTROL else fmt_loss(r.vs_control.mean, r.vs_control.stderr),
                " / ".join(number(v, 2) for v in lin.context_median[1:]),
                " / ".join(number(v, 2) for v in lin.query_median[1:]),
                " / ".join(number(v, 2) for v in lin.gap_median[1:]),
                "" if r.train_wall_s is None else f"{r.train_wall_s:.0f}",
            ]
        )
    header = [
        "L",
        "model",
        "adjusted loss",
        "− FULL (same budget), paired",
        "context residual, layers 1..L (median)",
        "query residual (median)",
        "prediction gap from ⟨wˡ, x_t⟩ (median)",
        "train s",
    ]
    m = study.machine
    return "\n".join(
        [
            "# Variants of the linear transformer: FFN, softmax and kernel attention",
            "",
            "Written by `experiments/variants.py` (docs/variants.md). Every model: uniform:5, d = 10, n = 20, seed 0. "
            f"Variants trained with `interp.variants.train_variant`: Adam, one-cycle to the fast preset's peak lr of "
            f"FULL at that depth, clip 1.0, the robust guard, {STEPS} steps of {BATCH} fresh sequences. "
            "`FULL`/`DIAG (zoo)` are the Table 1 zoo's files (`experiments/zoo/best/uniform5`, trained with the fast "
            "preset: 4 000 to 32 000 steps of 2 048); `FULL (same budget)` is the variants' control, FULL trained "
            "exactly as the variants.",
            "",
            f"Adjusted loss: ½·MSE minus the oracle ridge's, {EVAL_SEQ:,} sequences of uniform:5, seed 0 (Table 1's "
            f"metric). Linearity (interp.probes.linearity): per sequence and layer l the least-squares T^l with "
            "e_i^l ≈ T^l e_i over the n context tokens; the relative residual on the context and on the query, and "
            f"the gap of the prediction from Theorem 4.1's readout; medians over {PROBE.n_seq:,} sequences (seed 1), "
            "float64. The paired column: per sequence, the model's adjusted loss minus FULL (same budget)'s on the "
            "same sequences, mean ± standard error (negative: lower loss than FULL trained the same way).",
            "",
            markdown(header, table),
            "",
            "## Interpretation",
            "",
            interpretation,
            "",
            "## Reproduce",
            "",
            "```bash",
            COMMAND,
            "```",
            "",
            f"Machine: {m['cpu']}, torch {m['torch']} (CPU capability {m['cpu_capability']}), "
            f"{m['threads']} thread; {study.wall_s:.0f} s for the measurements (training: the table's last column).",
            "",
        ]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-only", action="store_true", help="train the missing runs, measure nothing")
    parser.add_argument(
        "--interpretation",
        type=Path,
        default=INTERPRETATION,
        help=f"the hand-written interpretation to include (default {INTERPRETATION.relative_to(ROOT)})",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    train_missing()
    if args.train_only:
        return 0
    t0 = time.perf_counter()
    rows = measure()
    data = EvalSet(NOISE, d=D, n=N, n_seq=EVAL_SEQ, seed=0)
    study = VariantStudy(rows, data.describe(), PROBE.describe(), machine(), COMMAND, time.perf_counter() - t0)
    text = args.interpretation.read_text().strip() if args.interpretation.is_file() else "(not written yet)"
    summary = json.dumps(study.to_json(), indent=1) + "\n"
    atomic_write_text(RESULTS / "variants.json", summary)
    atomic_write_text(ZOO / "summary.json", summary)  # beside the files: what the report's variants views read
    atomic_write_text(RESULTS / "variants.md", write_markdown(study, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
