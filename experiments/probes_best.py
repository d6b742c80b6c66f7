"""The probes of the Table 1 zoo's best models (issue 49): what interp finds inside every depth of GD++, DIAG and FULL
on uniform:5 and {1,3}, and inside the 4- and 7-layer models of the other eight priors.

Reads the probe JSON that `interp probe` writes (the commands are in experiments/results/probes_best.md) and prints
markdown: one row per model with its adjusted loss on the ablation sequences, how closely Theorem 4.1 holds (least
squares against the Lemma 4.3 recursion, ⟨w^l, x⟩ against the prediction), how closely Lemma 4.4 rebuilds it from
its ω's, and how far its final implicit w^L is from OLS and the oracle ridge; then, per FULL model and layer, the DIAG
fit's R², the share of ‖K‖² outside DIAG and the change in adjusted loss when that layer alone is replaced by its DIAG
projection (Vladymyrov et al. 2024, Theorem 4.1, Lemmas 4.3 and 4.4, §4.2).

    python experiments/probes_best.py [PROBE_JSON ...] > /tmp/tables.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp.evaluate import TABLE1_COLUMNS
from interp.render import markdown

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULTS = [RESULTS / "probes_best.json", RESULTS / "probes_best_priors.json"]
ARCH_ORDER = {"gdpp": 0, "diag": 1, "full": 2}
LABEL = {"gdpp": "GD++", "diag": "DIAG", "full": "FULL"}


def fmt(x, spec: str = ".3g") -> str:
    return "–" if x is None else format(x, spec)


def worst(values) -> float | None:
    """The largest of the finite values (None entries, e.g. layer 0's, left out)."""
    vals = [abs(v) for v in values or [] if v is not None]
    return max(vals) if vals else None


def name(m: dict) -> str:
    return f"{LABEL.get(m['param'], m['param'])}-{m['n_layers']}"


def key(m: dict) -> tuple:
    order = {p: i for i, p in enumerate(TABLE1_COLUMNS)}
    return (order.get(m["trained_noise"], len(order)), ARCH_ORDER.get(m["param"], 3), m["n_layers"])


def overview(models: list[dict]) -> str:
    rows = []
    for m in models:
        imp, sol, abl = m["implicit"], m.get("solvers") or {}, m.get("ablation") or {}
        lemma = m.get("lemma44") or {}
        rows.append(
            [
                m["trained_noise"],
                name(m),
                f"{fmt(abl.get('base'), '.4g')} ± {fmt(abl.get('base_stderr'), '.2g')}",
                fmt(worst(imp["lstsq_vs_recursion"]), ".1e"),
                fmt(worst(imp["prediction_error"]), ".1e"),
                fmt(worst(lemma.get("recursion_error")), ".2g") + ("" if lemma.get("exact") else " (projection)"),
                fmt((sol.get("relerr_ols") or [None])[-1], ".3f"),
                fmt((sol.get("relerr_ridge_oracle") or [None])[-1], ".3f"),
                fmt(abl.get("all"), ".4g") if m["param"] == "full" else "",
            ]
        )
    header = [
        "prior",
        "model",
        "adjusted loss",
        "Thm 4.1: lstsq vs recursion",
        "⟨w^l,x⟩ vs prediction",
        "Lemma 4.4 from ω's",
        "‖w^L − OLS‖ rel.",
        "‖w^L − ridge*‖ rel.",
        "DIAG projection's loss",
    ]
    return markdown(header, rows)


def full_layers(models: list[dict]) -> str:
    rows = []
    for m in models:
        if m["param"] != "full":
            continue
        r2 = m["fits"]["diag"]["r2"]
        share = (m.get("projection") or {}).get("share_outside") or [None] * len(r2)
        delta = (m.get("ablation") or {}).get("delta_per_layer") or [None] * len(r2)
        cells = [f"{fmt(r, '.3f')} / {fmt(s, '.2g')} / {fmt(d, '+.2g')}" for r, s, d in zip(r2, share, delta)]
        rows.append([m["trained_noise"], name(m), *cells, *[""] * (7 - len(cells))])
    header = ["prior", "model", *[f"layer {l}" for l in range(1, 8)]]
    return markdown(header, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="*", type=Path, default=DEFAULTS, help="probe JSON files (default: %(default)s)")
    args = ap.parse_args()
    models = sorted((m for p in args.json if p.is_file() for m in json.loads(p.read_text())["models"]), key=key)
    if not models:
        raise SystemExit(f"no probe JSON among {', '.join(map(str, args.json))}: run the commands in probes_best.md")
    print(f"### Every model ({len(models)}): Theorem 4.1, Lemma 4.4 and the final implicit w\n")
    print(overview(models))
    print("\n### FULL, per layer: DIAG-fit R² / share of ‖K‖² outside DIAG / Δ adjusted loss, that layer → DIAG\n")
    print(full_layers(models))


if __name__ == "__main__":
    main()
