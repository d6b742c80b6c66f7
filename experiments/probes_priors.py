"""§5.2's rescaling and §5.3's effective step of the 7-layer DIAG and FULL models across noise priors (issue 25).

Reads the probe JSON of the Table 1 zoo's 7-layer models (`interp probe ... --out
experiments/results/probes_priors.json`, the command is in probes_zoo.md, "Across priors (issue 25)") and prints
markdown tables: per layer and prior, the median over each σ group of

- the §5.2 rescaling factor 1 + ω_yy^l λ^l (`rescaling.median_by_sigma`), and its product over the layers;
- the §5.3 effective step −ω_yx^l (1 + ω_xy^{l−1} Σ_i (y_i^{l−1})²) (`effective_step.median_by_sigma`);

(Vladymyrov et al. 2024, §5.2 and §5.3) at a low, a middle and a high σ: for a uniform prior the σ bins 1, 4 and 8 of
8 (centres σ_max/16, 7σ_max/16, 15σ_max/16; the bins probes_zoo.md quoted for uniform:5), for a categorical prior
its smallest, middle and largest σ. DIAG-7's ω's are its weights'; FULL-7's are those of its DIAG projection, so
beside every FULL-7 table its DIAG-fit R² per layer says where the projection describes the layer (R² ≥ 0.9) and
where it does not (cells marked †). Products over layers are products of the per-layer medians.

    python experiments/probes_priors.py [PROBE_JSON ...] > /tmp/tables.md
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from interp.evaluate import TABLE1_COLUMNS
from interp.render import markdown

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULTS = [RESULTS / "probes_priors.json", RESULTS / "probes_priors_cat135.json"]  # the {1,3,5} cells came later
R2_OK = 0.9  # a layer whose DIAG-fit R² is below this is not described by its DIAG projection
ORDER = list(TABLE1_COLUMNS)  # the paper's columns


def prior_key(spec: str) -> tuple:
    return (0, ORDER.index(spec), "") if spec in ORDER else (1, 0, spec)


def short(spec: str) -> str:
    kind, _, vals = spec.partition(":")
    return f"σ_max={vals}" if kind == "uniform" else "{" + vals + "}"


def picks(sigma: list[float], noise: str) -> list[int | None]:
    """Indices of the low / mid / high σ groups (None: the prior has no middle value)."""
    if noise.startswith("uniform") and len(sigma) == 8:
        return [0, 3, 7]
    n = len(sigma)
    return [0, n // 2 if n % 2 else None, n - 1]


def fmt(x, spec=".3f") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if spec.endswith("f") and x != 0 and abs(x) < 10 ** -int(spec[-2]):
        return format(x, ".1e")
    return format(x, spec)


def curve(model: dict, key: str, layer: int) -> list:
    sigma = model[key]["sigma"]
    row = model[key]["median_by_sigma"][layer]
    return [None if i is None else row[i] for i in picks(sigma, model["noise"])]


def three(vals: list, spec: str) -> str:
    return " / ".join(fmt(v, spec) for v in vals)


def product(model: dict, layers: range) -> list:
    out = []
    for j in range(3):
        vals = [curve(model, "rescaling", l)[j] for l in layers]
        out.append(None if any(v is None for v in vals) else math.prod(vals))
    return out


def sigma_note(models: dict) -> str:
    parts = []
    for prior, m in models.items():
        sig = m["rescaling"]["sigma"]
        parts.append(f"{short(prior)}: " + " / ".join("–" if i is None else f"{sig[i]:.2g}" for i in picks(sig, prior)))
    return "σ of the low / mid / high groups: " + "; ".join(parts)


def r2(model: dict, layer: int) -> float:
    return model["fits"]["diag"]["r2"][layer]


def per_layer(models: dict, cell) -> list[str]:
    """Markdown lines of a table with one row per layer and one column per prior: `cell(model, l)` in each."""
    L = next(iter(models.values()))["n_layers"]
    rows = [[str(l + 1), *(cell(m, l) for m in models.values())] for l in range(L)]
    return markdown(["layer", *(short(p) for p in models)], rows).splitlines()


def layer_table(models: dict, key: str, spec: str, full: bool) -> list[str]:
    def cell(m: dict, l: int) -> str:
        return three(curve(m, key, l), spec) + (" †" if full and r2(m, l) < R2_OK else "")

    out = per_layer(models, cell)
    L = next(iter(models.values()))["n_layers"]
    if key == "rescaling":
        for name, layers in (("product 1–2", range(2)), ("product 1–6", range(L - 1)), (f"product 1–{L}", range(L))):
            out.append(f"| {name} | " + " | ".join(three(product(m, layers), ".3f") for m in models.values()) + " |")
    return out


def omega_table(models: dict, full: bool) -> list[str]:
    priors = list(models)
    src = "DIAG projection's" if full else "weights'"
    out = [
        f"ω_xy / ω_yy per layer ({src}, ×10³), then the model's adjusted loss on the probe's ablation sequences"
        + (" and that of its DIAG projection (every layer replaced)" if full else "")
        + ":",
        "",
    ]
    out += per_layer(models, lambda m, l: "{:+.2f} / {:+.2f}".format(*(1e3 * w for w in m["omegas"]["omega"][l][1::2])))
    cells = []
    for p in priors:
        a = models[p].get("ablation") or {}
        c = f"{fmt(a.get('base'), '.4f')} ± {fmt(a.get('base_stderr'), '.4f')}"
        if full:
            c += f" (proj. {fmt(a.get('all'), '.4g')})"
        cells.append(c)
    out.append("| adjusted loss | " + " | ".join(cells) + " |")
    return out


def r2_table(models: dict) -> list[str]:
    def cell(m: dict, l: int) -> str:
        dl = (m.get("ablation") or {}).get("delta_per_layer")
        d = dl[l] if dl else None
        dtxt = "–" if d is None else (f"{d:+.3g}" if abs(d) < 1e3 else "blow-up")
        return f"{r2(m, l):.3f} ({dtxt})"

    return per_layer(models, cell)


def summary(models: dict, full: bool) -> list[str]:
    """Per prior: the shrink at high σ relative to low σ, the layers doing it, the final step's σ-dependence."""
    out = [
        "| prior | product 1–7, low → high σ (high/low) | layers with factor < 0.95 at high σ | "
        "middle-layer step falling with σ (layer: low → high) | final step low → high (ω_xy^6) | "
        "implied λ low / high (oracle σ²) |",
        "|---|---|---|---|---|---|",
    ]
    for p, m in models.items():
        L = m["n_layers"]
        prod = product(m, range(L))
        ratio = prod[2] / prod[0] if None not in (prod[0], prod[2]) else None
        shrink = [l + 1 for l in range(L) if (v := curve(m, "rescaling", l)[2]) is not None and v < 0.95]
        mark = lambda ls: ", ".join(f"{x}{' †' if full and r2(m, x - 1) < R2_OK else ''}" for x in ls)  # noqa: E731
        steps = []
        for l in range(L - 1):
            lo, _, hi = curve(m, "effective_step", l)
            if lo is not None and hi is not None and abs(lo) > 0.01 and (hi - lo) / abs(lo) < -0.05:
                steps.append(f"{l + 1}{' †' if full and r2(m, l) < R2_OK else ''}: {lo:.3g} → {hi:.3g}")
        lo, _, hi = curve(m, "effective_step", L - 1)
        wxy = m["omegas"]["omega"][L - 2][1]
        lam = m["implied_lambda"]
        idx = picks(lam["sigma"], p)
        lam_lo, lam_hi = lam["median_by_sigma"][-1][idx[0]], lam["median_by_sigma"][-1][idx[2]]
        ora = lam["oracle_by_sigma"]
        out.append(
            f"| {short(p)} | {fmt(prod[0])} → {fmt(prod[2])} ({fmt(ratio, '.2f')}) | {mark(shrink) or 'none'} | "
            f"{'; '.join(steps) or 'none'} | {fmt(lo, '.3g')} → {fmt(hi, '.3g')} ({wxy:+.4f}"
            f"{' †' if full and r2(m, L - 1) < R2_OK else ''}) | "
            f"{fmt(lam_lo, '.3g')} / {fmt(lam_hi, '.3g')} ({ora[idx[0]]:.3g} / {ora[idx[2]]:.3g}) |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "json",
        nargs="*",
        default=[str(p) for p in DEFAULTS if p.exists()],
        help="probe JSON files, later ones adding priors (default: results/probes_priors.json and, where it exists, "
        "results/probes_priors_cat135.json)",
    )
    args = ap.parse_args()
    models = [m for path in args.json for m in json.loads(Path(path).read_text())["models"]]
    by_arch: dict[str, dict] = {"diag": {}, "full": {}}
    for m in models:
        if m["n_layers"] != 7 or m["param"] not in by_arch or m["noise"] != m["trained_noise"]:
            continue
        by_arch[m["param"]][m["noise"]] = m
    for arch in by_arch:
        by_arch[arch] = dict(sorted(by_arch[arch].items(), key=lambda kv: prior_key(kv[0])))
    print("Models: " + "; ".join(f"{m['path']} ({m['param'].upper()}, step {m['step']})" for m in models))
    print()
    for arch, full in (("diag", False), ("full", True)):
        models = by_arch[arch]
        if not models:
            continue
        name = "FULL-7 (DIAG projection)" if full else "DIAG-7"
        print(f"### {name}: §5.2 rescaling 1 + ω_yy^l λ^l, median per σ group, low / mid / high σ\n")
        print(sigma_note(models) + "." + (" †: DIAG-fit R² of that layer < 0.9." if full else "") + "\n")
        print("\n".join(layer_table(models, "rescaling", ".3f", full)))
        print(f"\n### {name}: §5.3 effective step −ω_yx^l (1 + ω_xy^(l−1) Σ_i (y_i^(l−1))²), low / mid / high σ\n")
        print("\n".join(layer_table(models, "effective_step", ".4f", full)))
        print()
        print("\n".join(omega_table(models, full)))
        if full:
            print(
                "\n### FULL-7: DIAG-fit R² per layer (`fits.diag.r2`) and, in parentheses, the paired change of the "
                "adjusted loss when only that layer is replaced by its DIAG projection (`ablation.delta_per_layer`)\n"
            )
            print("\n".join(r2_table(models)))
        print(f"\n### {name}: summary per prior\n")
        print("\n".join(summary(models, full)))
        print()


if __name__ == "__main__":
    main()
