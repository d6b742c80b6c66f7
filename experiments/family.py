"""The linear-attention family study (issue 52; docs/variants.md), measured from whatever runs of the grid are complete:

    OMP_NUM_THREADS=1 interp sweep --root experiments/family_grid --grid experiments/family_grid.toml --workers 2 \\
        --threads 1 --no-progress
    OMP_NUM_THREADS=1 nice -n 5 python experiments/family.py [--root experiments/family_grid] [--eval-seq 100000]

Per cell (prior, variant, depth): every finished seed's adjusted loss (Table 1's metric) on the same sequences, the best
seed and the spread, the best seed's loss paired per sequence against the Table 1 zoo's FULL and DIAG of that depth
and prior (TABLE1_ZOO; a missing file leaves the pair out), within σ groups and on the same sequences at σ = 0 (the
noise-free floor), and its ratio to the Bayes floor (interp.baselines.Bayes);
then on the best seed the per-layer linearity (interp.probes.linearity), the Jacobian readout's gap and, for decays and
gates, the token weights ω_j against position and σ (interp.probes.readout.token_weights) and the values the gates
take (gate_values), DeltaNet's w^l against LMS and RLS, and Theorem 4.2's cosine per layer; and on the first SKIP_SEQ
sequences, each layer of the best seed and of FULL skipped in turn (layer_skip), on the prior and at σ = 0. Writes
experiments/results/variants.md and .json, and exports each cell's best seed to
experiments/zoo/family/<prior>/<variant><L>.safetensors (Run.export) for the report.

This replaces the former experiments/variants.py, which trained a second way (its files in experiments/zoo/variants/
still load through interp.load, and tests/test_variants_zoo.py still pins them).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import platform
import time
from collections import defaultdict
from pathlib import Path

import torch

from interp import kernel
from interp.baselines import Bayes
from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_losses, skipped_layer_predictor
from interp.files import atomic_write_text
from interp.probes.readout import implied_ridge, jacobian_readout, readout_summary
from interp.records import rounded
from interp.render import markdown, number
from interp.report import data as report_data
from interp.run import Run, load
from interp.tasks import NoisePrior, prior_slug, sigma_groups
from interp.train import GUARD_CAP
from interp.variants import cell_name

ROOT = Path(__file__).resolve().parent.parent
GRID_ROOT = ROOT / "experiments" / "family_grid"
# <prior slug>/<arch><L>.safetensors; the folder's name is the report's one constant (interp.report.data.TABLE1_ZOO)
TABLE1_ZOO = ROOT / "experiments" / "zoo" / report_data.TABLE1_ZOO
FAMILY_ZOO = ROOT / "experiments" / "zoo" / "family"
# full<L>_<prior slug>_s<seed>: the Table 1 grid's runs, whose seed 0, 1, 2 give FULL of as many seeds as a cell has
TABLE1_GRID = ROOT / "experiments" / "table1_grid"
RESULTS = ROOT / "experiments" / "results"
JSON_DIGITS = 12  # variants.json's floats: the last bits differ between runs of the same code (interp.records.rounded)
PROBE_SEQ = 512  # sequences of the probes (linearity, readout, token weights, cosine)
SKIP_SEQ = 20_000  # the first sequences of the evaluation, on which each layer is skipped in turn (layer_skip)


def finished_runs(root: Path) -> dict[tuple[str, str, int], list[Run]]:
    """(prior, variant, L) -> the complete runs of the grid root."""
    cells = defaultdict(list)
    for path in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if not Run.is_run(path):
            continue
        run = Run(path)
        if not run.is_complete():
            continue
        cfg = run.config()
        cells[cfg.noise, cell_name(cfg.model, cfg.quad), cfg.model.n_layers].append(run)
    return cells


def _estimate(diff: torch.Tensor) -> dict:
    return LossEstimate.of(diff).to_dict()


def full_seeds(prior: str, L: int, k: int, grid: Path = TABLE1_GRID) -> list[Path]:
    """The Table 1 grid's FULL-L runs of seeds 0..k−1 on `prior`, or [] if any of them is missing or unfinished: the
    zoo's FULL is the best of 5 seeds, a cell's best seed the best of its k, and best-of-k against best-of-k is the
    even comparison."""
    paths = [grid / f"full{L}_{prior_slug(prior)}_s{s}" for s in range(k)]
    return paths if all(Run.is_run(p) and Run(p).is_complete() for p in paths) else []


def measure_cell(prior: str, runs: list[Run], eval_seq: int, zoo_out: Path = FAMILY_ZOO) -> dict:
    L, quad = runs[0].config().model.n_layers, runs[0].config().quad
    models = {run.path.name: load(run.path) for run in runs}
    zoo = {a: TABLE1_ZOO / prior_slug(prior) / f"{a}{L}.safetensors" for a in ("full", "diag")}
    same_seeds = {} if quad else {p.name: load(p) for p in full_seeds(prior, L, len(runs))}  # the paper's task only
    predictors = dict(models) | {a: load(p) for a, p in zoo.items() if p.is_file()} | same_seeds
    on_task = EvalSet(prior, n_seq=eval_seq, seed=0, quad=quad)  # a --quad run: its own task, no Bayes floor there
    diffs = adjusted_losses(predictors | ({} if quad else {"bayes": Bayes(prior)}), on_task)
    losses = {name: diffs[name].mean().item() for name in models}
    best = min(losses, key=losses.get)
    out = {
        "layers": L,
        "seeds": {name: _estimate(diffs[name]) for name in models},
        "best": best,
        "loss": _estimate(diffs[best]),
        "spread": max(losses.values()) - min(losses.values()),
        "quad": quad,
        "bayes": _estimate(diffs["bayes"]) if "bayes" in diffs else None,
        "ratio_to_bayes": losses[best] / diffs["bayes"].mean().item() if "bayes" in diffs else None,
    }
    for a in zoo:
        if a in diffs:
            out[f"vs_{a}"] = _estimate(diffs[best] - diffs[a])  # paired, per sequence
    if same_seeds:  # FULL's best of as many seeds, on the same sequences
        full_best = min(same_seeds, key=lambda name: diffs[name].mean().item())
        out["full_same_seeds"] = {"runs": sorted(same_seeds), "best": full_best, "loss": _estimate(diffs[full_best])}
        out["vs_full_same_seeds"] = _estimate(diffs[best] - diffs[full_best])
    if "full" in diffs:  # the same pairing within each σ group: where, in noise, a variant gains or loses on FULL
        sigma = torch.cat([b.sigma for b in on_task.batches()])  # the evaluation's sequences, in its order
        centres, masks = sigma_groups(sigma, SIGMA_GROUPS)
        gap = diffs[best] - diffs["full"]
        out["vs_full_by_sigma"] = {"sigma": centres.tolist(), "diff": [_estimate(gap[m]) for m in masks]}
    if "full" in diffs and not quad and reaches_noise_free(prior):  # the same sequences at σ = 0: the noise-free floor
        clean = adjusted_losses({"model": models[best], "full": predictors["full"]}, on_task.at_sigma(0.0))
        gap = clean["model"] - clean["full"]
        out["noise_free"] = {
            "loss": _estimate(clean["model"]),
            "full": _estimate(clean["full"]),
            "vs_full": _estimate(gap),
        }
    if not quad:  # each layer skipped in turn, on the prior and at σ = 0, the cell's best seed and FULL of its depth
        skip_on = {"prior": on_task.replace(n_seq=min(SKIP_SEQ, eval_seq))}
        if reaches_noise_free(prior):
            skip_on["noise_free"] = skip_on["prior"].at_sigma(0.0)
        out["layer_skip"] = {where: layer_skip(models[best], data) for where, data in skip_on.items()}
        if zoo["full"].is_file():  # FULL of this depth and prior: the same for every cell beside it, measured once
            out["layer_skip"] |= {
                f"full_{where}": full_layer_skip(zoo["full"], data) for where, data in skip_on.items()
            }
    model = models[best]
    batch = on_task.replace(n_seq=PROBE_SEQ, seed=1).draw()
    out |= readout_summary(model, batch.tokens, batch.sigma)
    if "full" in diffs:  # FULL's implied ridge λ on the same probe sequences, for the λ-against-σ table
        full_w = jacobian_readout(predictors["full"], batch.tokens)
        out["full_implied_lambda"] = implied_ridge(full_w, batch.tokens, batch.sigma).to_json()
    dest = zoo_out / prior_slug(prior) / f"{cell_name(runs[0].config().model, runs[0].config().quad)}{L}.safetensors"
    dest.parent.mkdir(parents=True, exist_ok=True)
    Run(runs[[r.path.name for r in runs].index(best)].path).export(dest)
    out["file"] = str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest)
    return out


def layer_skip(model, data: EvalSet) -> dict:
    """The model's adjusted loss on `data` and, per layer, its loss with that layer skipped (skipped_layer_predictor):
    the mean, or None where a sequence blows up (beyond GUARD_CAP · d, or not finite: the later layers depend on the
    scale the skipped one set), with how many of them do."""
    diffs = adjusted_losses({"model": model, "skip": skipped_layer_predictor(model)}, data)
    cap = GUARD_CAP * model.cfg.d
    blowups = [int((~(row <= cap)).sum()) for row in diffs["skip"]]
    skipped = [None if b else row.mean().item() for row, b in zip(diffs["skip"], blowups)]
    return {"loss": diffs["model"].mean().item(), "skipped": skipped, "blowups": blowups}


@functools.cache
def full_layer_skip(path: Path, data: EvalSet) -> dict:
    """layer_skip of the Table 1 zoo's FULL at `path` (every cell of its depth and prior reads the same one)."""
    return layer_skip(load(path), data)


def reaches_noise_free(prior: str) -> bool:
    """Whether the prior's σ comes down to 0, so that σ = 0 is within what its models trained on (on {1,3} it is not:
    a loss there would measure extrapolation below σ = 1, not how well the layers solve least squares)."""
    noise = NoisePrior.parse(prior)
    return noise.kind == "uniform" or min(noise.values) == 0


def in_table_order(cells: dict) -> list:
    """The cells' (key, cell) pairs by prior, depth, then variant: the row order of every table."""
    return sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1]))


def _layers(values, fmt: str) -> str:
    """Per-layer values in one table cell, separated by `/`."""
    return " / ".join(format(x, fmt) for x in values)


def render(cells: dict, meta: dict) -> str:
    head = ["prior", "variant", "L", "seeds", "best adjusted loss", "spread", "− FULL (paired)"]
    head += ["− FULL, as many seeds", "− DIAG (paired)"]
    head += ["÷ Bayes", "query linearity (last layer, median)", "readout gap", "Thm 4.2 cos"]
    rows = []
    for key, c in in_table_order(cells):
        prior, name, L = key
        pair = lambda a: f"{c[a]['mean']:+.4g} ± {c[a]['stderr']:.2g}" if a in c else "–"  # noqa: E731, B023
        rows.append([
            prior, name, str(L), str(len(c["seeds"])), f"{c['loss']['mean']:.4g} ± {c['loss']['stderr']:.2g}",
            f"{c['spread']:.3g}", pair("vs_full"), pair("vs_full_same_seeds"), pair("vs_diag"),
            "–" if c["ratio_to_bayes"] is None else f"{c['ratio_to_bayes']:.3g}",
            f"{c['linearity']['query_median'][-1]:.2g}", f"{c['readout_gap_median'][-1]:.2g}",
            f"{c['theorem42_cosine_median'][-1]:.3f}",
        ])  # fmt: skip
    text = ["# The linear-attention family on the paper's task", ""]
    text.append(
        f"Written by `python experiments/family.py` from the complete runs of `{meta['root']}` "
        f"({meta['runs']} runs; grid `experiments/family_grid.toml`), adjusted loss on {meta['eval_seq']} sequences "
        f"(seed 0; a _quad cell: its quadratic task, against the linear oracle ridge), probes on {PROBE_SEQ} "
        f"(seed 1). Machine: {meta['machine']['cpu']}, {meta['machine']['cpu_capability']}. "
        "Token weights, gate values and DeltaNet's LMS / RLS fits: variants.json. − FULL is against the Table 1 "
        "zoo's FULL of the cell's depth and prior, the best of 5 seeds; − FULL, as many seeds, against the best of the "
        "Table 1 grid's FULL seeds 0..k−1 for a cell of k seeds (the even comparison while a cell has fewer than 5)."
    )
    text += ["", markdown(head, rows) if rows else "No run of the grid is complete yet.", ""]
    if rows:
        text += ["## Per layer", "", PER_LAYER, "", markdown(*per_layer(cells)), ""]
    sigma_tables = by_sigma(cells)
    if sigma_tables:
        text += ["## Against FULL by σ", "", BY_SIGMA, "", *sigma_tables]
    lam_tables = implied_lambda_tables(cells)
    if lam_tables:
        text += ["## Implied ridge λ by σ", "", IMPLIED_LAMBDA, "", *lam_tables]
    skip_tables = layer_skip_tables(cells)
    if skip_tables:
        text += ["## Skipping a layer", "", SKIPPING, "", *skip_tables]
    gates = gate_rows(cells)
    if gates:
        text += ["## Gates by σ", "", GATES, "", markdown(*gates), ""]
    deep = near_full(cells, DEEPEST)
    if deep:
        text += [f"## Against FULL-{DEEPEST}", "", AGAINST_FULL, ""]
        head = ["prior", "variant", "seeds", "best adjusted loss", f"÷ FULL-{DEEPEST}", "÷ FULL, as many seeds"]
        text += [markdown(head + ["within 10%"], deep), ""]
    return "\n".join(text)


SIGMA_GROUPS = 4  # σ groups of the paired difference against FULL: each σ of a categorical prior, else equal bins


def by_sigma(cells: dict) -> list[str]:
    """Markdown: per prior, every cell's best seed minus FULL of its depth within each σ group (mean ± stderr), and
    on the same sequences at σ = 0 (the noise-free floor: the cell's loss, FULL's, the paired difference)."""
    pair = lambda e: f"{e['mean']:+.4f} ± {e['stderr']:.4f}"  # noqa: E731
    out = []
    for prior in sorted({k[0] for k in cells}):
        rows, centres = [], None
        for (p, name, L), c in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            if p != prior or "vs_full_by_sigma" not in c:
                continue
            centres = c["vs_full_by_sigma"]["sigma"]
            clean = c.get("noise_free")
            floor = (
                [f"{clean['loss']['mean']:.4f} / {clean['full']['mean']:.4f}", pair(clean["vs_full"])]
                if clean
                else ["–"] * 2
            )
            rows.append([name, str(L)] + [pair(e) for e in c["vs_full_by_sigma"]["diff"]] + floor)
        if rows:
            head = ["variant", "L"] + [f"σ ≈ {s:.2f}" for s in centres] + ["σ = 0: loss / FULL's", "σ = 0: − FULL"]
            out += [f"{prior}:", "", markdown(head, rows), ""]
    return out


IMPLIED_LAMBDA = (
    "The λ whose ridge solution (Σ + λI)⁻¹α on the raw context is nearest to the last layer's w^L = ∂ŷ/∂x_t "
    "(interp.probes.readout.implied_ridge), median within each σ group, on the probe sequences; FULL is the Table 1 "
    "zoo's of the same depth on the same sequences. The Bayes predictor of the prior w ~ N(0, I) is the ridge with "
    "λ = σ² (no 1/n): a model whose λ follows σ² shrinks as the posterior mean does, one whose λ stays flat takes one "
    "step whatever the noise. Also the rank correlation of λ with σ over the sequences, and how far w^L is from its "
    "nearest ridge solution (median relative error). The paper's task only (no _quad cell)."
)


def implied_lambda_tables(cells: dict) -> list[str]:
    """Markdown: per prior, the last layer's implied ridge λ by σ group of FULL (one row per depth) and of every cell
    of the paper's task, beside the Bayes ridge's σ²."""
    out = []

    def fmt(lam: dict) -> list[str]:  # the last layer's λ per σ group, rank correlation, distance from ridge
        by_group = [number(v, 3) for v in lam["median_by_sigma"][-1]]  # "–" where a σ group has none, or λ is not
        return by_group + [number(lam["spearman_sigma"][-1], 2), number(lam["median_relerr"][-1], 2)]  # defined

    for prior in sorted({k[0] for k in cells}):
        rows, fulls, centres = [], {}, None
        for (p, name, L), c in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            if p != prior or c["quad"] or "implied_lambda" not in c:
                continue
            centres = c["implied_lambda"]["sigma"]
            if "full_implied_lambda" in c and L not in fulls:
                fulls[L] = ["FULL (zoo)", str(L), *fmt(c["full_implied_lambda"])]
                rows.append(fulls[L])
            rows.append([name, str(L), *fmt(c["implied_lambda"])])
        if rows:
            head = ["variant", "L"] + [f"σ ≈ {s:.2f} (σ² = {s * s:.3g})" for s in centres]
            out += [f"{prior}:", "", markdown(head + ["rank corr. with σ", "ridge rel. error"], rows), ""]
    return out


SKIPPING = (
    "Each layer of a cell's best seed skipped in turn (its residual update removed, attention and FFN alike: "
    f"interp.evaluate.skipped_layer_predictor), on the first {SKIP_SEQ} sequences of the evaluation: the model's "
    "adjusted loss, then its loss with layer l skipped over that loss, l = 1..L separated by `/` (∞: some sequence "
    "blows up, beyond 100·d); on the prior and at σ = 0 (½ MSE; a prior whose σ reaches 0). FULL is the Table 1 "
    "zoo's of the same depth on the same sequences. A ratio near 1 is a layer the model does not use there; the "
    "paper's task only."
)


def layer_skip_tables(cells: dict) -> list[str]:
    """Markdown: per prior, FULL's rows (one per depth) and every cell's of the paper's task, the loss and each skipped
    layer's ratio to it, on the prior and at σ = 0."""

    def fmt(s: dict | None) -> list[str]:
        if s is None:
            return ["–", "–"]
        ratios = ["∞" if v is None else number(v / s["loss"], 2) for v in s["skipped"]]
        return [number(s["loss"], 3), " / ".join(ratios)]

    out = []
    for prior in sorted({k[0] for k in cells}):
        rows, fulls = [], set()
        for (p, name, L), c in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            skip = c.get("layer_skip")
            if p != prior or c["quad"] or not skip:
                continue
            if "full_prior" in skip and L not in fulls:
                fulls.add(L)
                rows.append(["FULL (zoo)", str(L), *fmt(skip["full_prior"]), *fmt(skip.get("full_noise_free"))])
            rows.append([name, str(L), *fmt(skip["prior"]), *fmt(skip.get("noise_free"))])
        if rows:
            head = ["variant", "L", "loss", "÷ it, layer l skipped", "σ = 0: loss", "σ = 0: ÷ it, layer l skipped"]
            out += [f"{prior}:", "", markdown(head, rows), ""]
    return out


DEEPEST = 7  # the grid's deepest models: one seed a cell, three where a variant comes within NEAR_FULL of FULL-7
NEAR_FULL = 0.10
BY_SIGMA = (
    "Each cell's best seed minus the Table 1 zoo's FULL of its depth, paired per sequence, within groups of the "
    "sequences' noise σ (each σ of a categorical prior; equal-width bins of uniform:5, by their centres): a variant "
    "that adapts to the noise better than FULL gains most where σ is large or small, one that only fits better gains "
    "alike. Negative: the variant's loss is lower. The last two columns put the same sequences at σ = 0, where the "
    "Bayes prediction (least squares on n > d tokens) is exact and the adjusted loss is ½ MSE: the noise-free floor, "
    "how well L layers solve the context's least squares (the cell's best seed and FULL's, then paired; the paper's "
    "task, on a prior whose σ reaches 0: {1,3}'s models never saw σ below 1)."
)
AGAINST_FULL = (
    f"Each {DEEPEST}-layer cell's best seed over the Table 1 zoo's FULL-{DEEPEST} (the best of 5 seeds) and over "
    "FULL's best of as many seeds as the cell has, on the same sequences (its loss over its loss minus the paired "
    "difference), best first. Where a variant comes within 10% of either it earns seeds 1 and 2 too: "
    "`experiments/family_grid.toml` skips them at 7 layers, so narrow that skip's `where` to leave the cells marked "
    "here out, and resume the sweep."
)


def near_full(cells: dict, layers: int) -> list[list[str]]:
    """Rows (prior, variant, seeds, loss, ratio to the zoo's FULL, ratio to FULL of as many seeds, within NEAR_FULL of
    either) of the paper's task's cells at `layers` paired against FULL, by prior and ratio to the zoo's FULL: which
    variants come near, or beat, FULL at that depth."""
    out = []
    for (prior, name, L), c in cells.items():
        if L != layers or "vs_full" not in c or c["quad"]:  # a _quad cell's loss is against the linear oracle ridge
            continue  # on its own task, where it goes negative: no ratio to FULL's
        loss = c["loss"]["mean"]
        ratio = lambda key: loss / (loss - c[key]["mean"]) if key in c else None  # noqa: E731, B023  ÷ FULL's loss
        out.append((prior, ratio("vs_full"), name, loss, ratio("vs_full_same_seeds"), len(c.get("seeds", ()))))
    return [
        [prior, name, str(k), f"{loss:.4g}", f"{ratio:.3f}", "–" if even is None else f"{even:.3f}",
         "yes" if min(ratio, even if even is not None else math.inf) <= 1 + NEAR_FULL else "no"]
        for prior, ratio, name, loss, even, k in sorted(out)
    ]  # fmt: skip


PER_LAYER = (
    "Each cell's best seed, layers 1..L separated by `/`, medians over the probe sequences: the query's distance from "
    "one linear token map (interp.probes.linearity), the readout gap |ŷ^l − ⟨w^l, x_t⟩| with w^l = ∂ŷ^l/∂x_t, "
    "Theorem 4.2's |cos| between the context's y slots and (x_i(1)²)_i (layer 0, the raw labels, first), and for "
    "decays and gates the residual of the weighted preconditioned-GD fit and ω_j of the first and last token "
    "(token_weights); for DeltaNet the relative error of the best LMS and RLS pass (delta_vs_online)."
)


def per_layer(cells: dict) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of the per-layer table: one row per cell."""
    head = ["prior", "variant", "L", "query linearity", "readout gap", "Thm 4.2 cos (l = 0..L)"]
    head += ["ω fit residual", "ω_1 / ω_n", "DeltaNet: LMS / RLS error"]
    rows = []
    for (prior, name, L), c in in_table_order(cells):
        tw, dv = c.get("token_weights"), c.get("delta_vs_online")
        rows.append([
            prior, name, str(L), _layers(c["linearity"]["query_median"][1:], ".2g"),
            _layers(c["readout_gap_median"][1:], ".2g"), _layers(c["theorem42_cosine_median"], ".3f"),
            _layers(tw["residual"], ".2g") if tw else "–",
            " ; ".join(f"{pos[0]:.2f} / {pos[-1]:.2f}" for pos in tw["by_position"]) if tw else "–",
            " ; ".join(f"{a:.2g} / {b:.2g}" for a, b in zip(dv["lms_error"], dv["rls_error"])) if dv else "–",
        ])  # fmt: skip
    return head, rows


GATES = (
    "What each layer's decay, gate or delta-rule step takes on the probe sequences, best seed, layers 1..L separated "
    "by `/` (interp.probes.readout.gate_values; variants.json holds them per head): RetNet's γ, the gated model's a_j, "
    "GLA's α_j (averaged over its key channels), DeltaNet's β_j. The mean over sequences, heads and tokens; the first "
    "context token's weight in the state S_n the query reads, ∏_{m=2..n} a_m (median; the last token's is 1, a gate "
    "left open keeps 1); and the mean over the sequences of the lowest and of the highest σ group (RetNet's γ does not "
    "read the data)."
)


def gate_rows(cells: dict) -> tuple[list[str], list[list[str]]] | None:
    """(head, rows) of the gates table, one row per cell with a decay, gate or delta rule; None without one."""
    head = ["prior", "variant", "L", "gate", "mean", "first token's weight in S_n", "mean: lowest σ → highest σ"]
    rows = []
    for (prior, name, L), c in in_table_order(cells):
        g = c.get("gates")
        if g is None:
            continue
        first = g.get("first_token_weight")
        rows.append([
            prior, name, str(L), g["gate"], _layers(g["mean"], ".3g"), _layers(first, ".2g") if first else "–",
            " ; ".join(f"{s[0]:.3g} → {s[-1]:.3g}" for s in g["by_sigma"]),
        ])  # fmt: skip
    return (head, rows) if rows else None


ANSWERS = "## Answers"  # variants.md from this heading on is written by hand, and kept when the tables are rewritten


def kept_answers(md: Path) -> str:
    """The hand-written part of an existing variants.md (from ANSWERS on), or nothing."""
    text = md.read_text() if md.is_file() else ""
    at = text.find("\n" + ANSWERS)
    return "" if at < 0 else "\n" + text[at + 1 :]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=GRID_ROOT)
    ap.add_argument("--eval-seq", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=RESULTS, help="where variants.md / .json go")
    ap.add_argument("--zoo", type=Path, default=FAMILY_ZOO, help="where each cell's best seed is exported")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    found = finished_runs(args.root)
    cells = {key: measure_cell(key[0], runs, args.eval_seq, args.zoo) for key, runs in found.items()}
    meta = {
        "root": str(args.root.resolve().relative_to(ROOT))
        if args.root.resolve().is_relative_to(ROOT)
        else str(args.root),
        "runs": sum(len(r) for r in found.values()),
        "eval_seq": args.eval_seq,
        "machine": {
            "cpu": kernel.cpu_model() or platform.processor(),
            "cpu_capability": kernel.cpu_capability(),
            "threads": torch.get_num_threads(),
        },
        "wall_s": None,
    }
    meta["wall_s"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, "cells": [{"prior": k[0], "variant": k[1], **v} for k, v in sorted(cells.items())]}
    doc = rounded(doc, JSON_DIGITS)
    atomic_write_text(args.out / "variants.json", json.dumps(doc, indent=1, default=_jsonable) + "\n")
    md = args.out / "variants.md"
    atomic_write_text(md, render(cells, meta) + kept_answers(md))
    args.zoo.mkdir(parents=True, exist_ok=True)  # beside the exported models: what interp report draws
    atomic_write_text(args.zoo / "summary.json", json.dumps(doc, indent=1, default=_jsonable) + "\n")
    print(f"{len(cells)} cells from {meta['runs']} runs in {meta['wall_s']:.0f} s: {args.out / 'variants.md'}")
    return 0


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
