"""All probes of one model over many fresh sequences, in chunks, as a JSON-ready dict (README: Probe JSON schema).

Per-sequence probes run on every chunk; the few quantities shared by all sequences (the tuned GD
steps, the constant ridge λ's, the FULL-form fits) are fitted once on `fit_seq` other sequences of the
same prior (seed + TUNE_OFFSET), disjoint from the probe sequences they are evaluated on.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from interp.model import LinearTransformer
from interp.probes.forms import (
    EQUIVARIANT_NAMES, OMEGA_NAMES, const_ridge_fit, const_ridge_mismatch, diag_ablation, diag_projection,
    effective_step, fit_layer_maps, layer_omegas, lemma44, momentum, rescaling_factor,
)
from interp.probes.implicit import Context, as_float64, compare_solvers, gd_iterates, implicit_model, implied_lambda, rel_error, tune_gd_steps
from interp.tasks import as_prior, sample_tasks

SCHEMA_VERSION = 1
TUNE_OFFSET = 1_000_003  # seed offset of the tuning sequences


def jsonable(x):
    """Tensors to (nested) lists; non-finite floats to None."""
    if isinstance(x, Tensor):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def sigma_groups(sigma: Tensor, n_bins: int) -> tuple[Tensor, list[Tensor]]:
    """Centers and member masks: each distinct σ when there are at most n_bins, else equal-width bins."""
    uniq = sigma.unique()
    if len(uniq) <= n_bins:
        return uniq, [sigma == v for v in uniq]
    edges = torch.linspace(sigma.min().item(), sigma.max().item(), n_bins + 1, dtype=sigma.dtype)
    idx = torch.bucketize(sigma, edges[1:-1])
    return (edges[:-1] + edges[1:]) / 2, [idx == i for i in range(n_bins)]


def by_sigma(values: Tensor, masks: list[Tensor]) -> Tensor:
    """Median of values [layers, batch] within each σ group -> [layers, groups]."""
    return torch.stack([v.nanmedian(-1).values if (v := values[:, m]).shape[-1] else values.new_full(values.shape[:1], float("nan"))
                        for m in masks], dim=-1)


def spearman(a: Tensor, b: Tensor) -> Tensor:
    """Rank correlation of each row of a [rows, batch] with b [batch] (inf allowed; nan rows give nan)."""
    rb = b.argsort().argsort().double()
    out = []
    for row in a:
        ok = ~row.isnan()
        if ok.sum() < 3 or row[ok].unique().numel() < 2:
            out.append(float("nan"))
            continue
        ra, rbb = row[ok].argsort().argsort().double(), rb[ok].argsort().argsort().double()
        out.append(torch.corrcoef(torch.stack([ra, rbb]))[0, 1].item())
    return torch.tensor(out, dtype=torch.float64)


def probe_model(model: LinearTransformer, noise, n_seq: int = 10_000, n: int = 20, seed: int = 0,
                chunk: int = 1_000, fit_seq: int = 4_096, ablation_seq: int = 20_000, sigma_bins: int = 8) -> dict:
    """Every probe of issue 4 on `n_seq` fresh sequences of the noise prior; a JSON-ready dict."""
    prior = as_prior(noise)
    model = as_float64(model)
    L, d = model.cfg.n_layers, model.cfg.d
    omega, omega_source = layer_omegas(model)
    proj = diag_projection(model.P.detach(), model.Q.detach())
    gen = torch.Generator().manual_seed(seed)
    worst = {"lstsq_vs_recursion": torch.zeros(L + 1), "lstsq_residual": torch.zeros(L + 1),
             "prediction_error": torch.zeros(L + 1), "lemma44_recursion_error": torch.zeros(L)}
    cols: dict[str, list[Tensor]] = {}
    tune = sample_tasks(fit_seq, d, n, prior, torch.Generator().manual_seed(seed + TUNE_OFFSET), dtype=torch.float64)
    imp_t = implicit_model(model, tune.tokens)
    ctx_t = Context.from_stats(imp_t.S[0], tune.x_query)
    shared = {"gd_eta_tuned": tune_gd_steps(ctx_t, L, target=tune.target),
              "gd_eta_match": tune_gd_steps(ctx_t, L, reference=imp_t.w),
              "ridge": const_ridge_fit(ctx_t, imp_t.pred, tune.target),
              "fits": fit_layer_maps(model, imp_t.S)}
    del tune, imp_t, ctx_t
    for start in range(0, n_seq, chunk):
        batch = sample_tasks(min(chunk, n_seq - start), d, n, prior, gen, dtype=torch.float64)
        imp = implicit_model(model, batch.tokens)
        ctx = Context.from_stats(imp.S[0], batch.x_query)
        lm = lemma44(imp, omega, ctx)
        for key, val in (("lstsq_vs_recursion", imp.disagreement), ("lstsq_residual", imp.residual),
                         ("prediction_error", imp.prediction_error), ("lemma44_recursion_error", lm.recursion_error)):
            worst[key] = torch.maximum(worst[key], val)
        lam, lam_err = implied_lambda(ctx, imp.w)
        per_seq = {
            **compare_solvers(imp.w, ctx, batch.sigma, shared["gd_eta_tuned"]),
            "relerr_gd_match": rel_error(imp.w, gd_iterates(ctx, shared["gd_eta_match"])),
            "implied_lambda": lam, "implied_lambda_relerr": lam_err,
            **momentum(imp, lm.grad),
            "rescaling": rescaling_factor(imp.S, omega), "effective_step": effective_step(imp.S, omega),
            "ridge_diff2": const_ridge_mismatch(ctx, imp.pred, shared["ridge"]["lambda_match"]) ** 2,
            "pred2": imp.pred**2, "sigma": batch.sigma.double()[None],
        }
        for key, val in per_seq.items():
            cols.setdefault(key, []).append(val)
    c = {k: torch.cat(v, dim=-1) for k, v in cols.items()}
    sigma = c.pop("sigma")[0]
    centers, masks = sigma_groups(sigma, sigma_bins)
    mean = lambda key: c[key].nanmean(-1)
    fits = shared["fits"]
    out = {
        "n_seq": n_seq, "noise": prior.spec, "n": n, "d": d, "seed": seed,
        "param": model.cfg.param, "n_layers": L, "n_heads": model.cfg.n_heads,
        "implicit": worst | {"note": "max over sequences, relative; Theorem 4.1 says all vanish up to rounding"},
        "solvers": {key: mean(key) for key in ("cos_ols", "relerr_ols", "cos_ridge_oracle", "relerr_ridge_oracle",
                                               "cos_gd", "relerr_gd", "relerr_gd_match")}
        | {"gd_eta_tuned": shared["gd_eta_tuned"], "gd_eta_match": shared["gd_eta_match"]},
        "implied_lambda": {
            "median": c["implied_lambda"].nanmedian(-1).values,
            "median_relerr": c["implied_lambda_relerr"].nanmedian(-1).values,
            "spearman_sigma": spearman(c["implied_lambda"], sigma),
            "sigma": centers, "median_by_sigma": by_sigma(c["implied_lambda"], masks),
            "oracle_by_sigma": centers**2,
        },
        "omegas": {"source": omega_source, "names": list(OMEGA_NAMES), "omega": omega},
        "lemma44": {"recursion_error": worst["lemma44_recursion_error"], "exact": model.cfg.param != "full"},
        "momentum": {"u_norm": mean("u_norm"), "align": mean("align"), "align_next": mean("align_next")},
        "rescaling": {"sigma": centers, "median_by_sigma": by_sigma(c["rescaling"], masks)},
        "effective_step": {"sigma": centers, "median_by_sigma": by_sigma(c["effective_step"], masks)},
        "fits": {"n_seq": fit_seq,
                 "diag": {"names": list(OMEGA_NAMES), "coef": fits.diag, "r2": fits.diag_r2},
                 "equivariant": {"names": list(EQUIVARIANT_NAMES), "coef": fits.equivariant, "r2": fits.equivariant_r2}},
        "projection": {"omega": proj.omega, "share_outside": proj.share_outside, "norm": proj.norm,
                       "remainder_sv": proj.remainder_sv[:, :8],
                       "block_sv": {k: v[:, :4] for k, v in proj.block_sv.items()}},
        "const_ridge": {"lambda_match": shared["ridge"]["lambda_match"],
                        "relative_mismatch": c["ridge_diff2"].mean(-1) / c["pred2"].mean(-1),
                        "half_msd": 0.5 * c["ridge_diff2"].mean(-1),
                        "lambda_constrr": shared["ridge"]["lambda_constrr"]},
    }
    if ablation_seq > 0:
        out["ablation"] = diag_ablation(model, prior, n_seq=ablation_seq, n=n, seed=seed + 1, omega=proj.omega)
    return jsonable(out)
