"""All probes of one model over many fresh sequences, in chunks, as a JSON-ready dict (docs/probe_schema.md).

Per-sequence probes run on every chunk; the few quantities shared by all sequences (the tuned GD
steps, the constant ridge λ's that match the model, the FULL-form fits) are fitted once on `fit_seq` other sequences
of the same prior (seed + TUNE_OFFSET), disjoint from the probe sequences they are evaluated on. ConstRR's λ is not
refitted here: it is interp.tuning's (`constrr_lambda`), the one interp eval and interp table print.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from interp.config import Matrix
from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_losses
from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer
from interp.probes.forms import (
    EQUIVARIANT_NAMES,
    OMEGA_NAMES,
    Ablation,
    const_ridge_fit,
    const_ridge_mismatch,
    diag_projection,
    effective_step,
    fit_layer_maps,
    layer_omegas,
    lemma44,
    momentum,
    rescaling_factor,
    with_diag_layers,
)
from interp.probes.implicit import as_float64, compare_solvers, gd_iterates, implicit_model, rel_error, tune_gd_steps
from interp.probes.preconditioning import Theorem51, is_gdpp, is_noise_free, theorem51
from interp.probes.schedule import Schedule, block_ablation, block_sizes
from interp.records import Record
from interp.tasks import NoisePrior, as_prior, sigma_groups
from interp.tuning import TuningSet, is_cached, tune_constrr, tuned

SCHEMA_VERSION = 1
TUNE_OFFSET = 1_000_003  # seed offset of the tuning sequences
TOP_SV = 8  # remainder singular values kept per layer (probe and drift JSON)
TOP_BLOCK_SV = 4  # singular values kept per layer and block of the remainder

Vec = Tensor | list  # [layers] or [layers, ...]: a tensor when computed, a list when read back from JSON


# ---------------------------------------------------------------------- the probe JSON, as records
@dataclass
class ImplicitChecks(Record):
    """Theorem 4.1 checks, max over sequences (relative): all vanish up to rounding."""

    lstsq_vs_recursion: Vec
    lstsq_residual: Vec
    prediction_error: Vec
    lemma44_recursion_error: Vec
    note: str = "max over sequences, relative; Theorem 4.1 says all vanish up to rounding"


@dataclass
class Solvers(Record):
    """Mean cos / relative error of w^l [L+1] against OLS, oracle ridge and GD-l; the tuned GD steps [L+1]."""

    cos_ols: Vec
    relerr_ols: Vec
    cos_ridge_oracle: Vec
    relerr_ridge_oracle: Vec
    cos_gd: Vec
    relerr_gd: Vec
    relerr_gd_match: Vec
    gd_eta_tuned: Vec
    gd_eta_match: Vec


@dataclass
class ImpliedLambda(Record):
    """The λ whose ridge solution is nearest to w^l: medians [L+1], by σ group [L+1, groups]."""

    median: Vec
    median_relerr: Vec
    spearman_sigma: Vec
    sigma: Vec
    median_by_sigma: Vec
    oracle_by_sigma: Vec

    @classmethod
    def of(cls, lam: Tensor, relerr: Tensor, sigma: Tensor, sigma_bins: int) -> "ImpliedLambda":
        """From each layer's and sequence's implied λ and its relative error [L+1, batch] (SpectralContext.
        implied_lambda) and each sequence's σ [batch]: the oracle is the Bayes ridge of the prior w ~ N(0, I),
        λ = σ² (Vladymyrov et al. 2024, §5; no 1/n)."""
        sigma = sigma.double()
        centers, masks = sigma_groups(sigma, sigma_bins)
        return cls(
            median=lam.nanmedian(-1).values,
            median_relerr=relerr.nanmedian(-1).values,
            spearman_sigma=spearman(lam, sigma),
            sigma=centers,
            median_by_sigma=by_sigma(lam, masks),
            oracle_by_sigma=centers**2,
        )


@dataclass
class LayerOmegas(Record):
    source: str
    names: list
    omega: Vec  # [L, 4]


@dataclass
class Lemma44Check(Record):
    recursion_error: Vec
    exact: bool


@dataclass
class MomentumSummary(Record):
    u_norm: Vec
    align: Vec
    align_next: Vec


@dataclass
class SigmaCurve(Record):
    """Per layer, the median over the sequences of each σ group: median_by_sigma [L, groups]."""

    sigma: Vec
    median_by_sigma: Vec


@dataclass
class FormFit(Record):
    names: list
    coef: Vec
    r2: Vec


@dataclass
class FitsSummary(Record):
    n_seq: int
    diag: FormFit
    equivariant: FormFit


@dataclass
class ProjectionSummary(Record):
    omega: Vec
    share_outside: Vec
    norm: Vec
    remainder_sv: Vec  # [L, TOP_SV]
    block_sv: dict  # block name -> [L, TOP_BLOCK_SV]


@dataclass
class ConstRidge(Record):
    """Is the model a constant-λ ridge? Per layer, the λ whose ridge predictions best match the model's (`lambda_match`,
    the model's own λ) and how far apart they stay; beside it ConstRR's λ, the loss-optimal constant λ of the prior as
    interp.tuning tunes it (`lambda_constrr`, the value interp eval and interp table print)."""

    lambda_match: Vec
    relative_mismatch: Vec
    half_msd: Vec
    lambda_constrr: float | Tensor


@dataclass
class DiagAblation(Ablation):
    """interp.probes.forms.Ablation with the standard errors: of the model's adjusted loss (`base`) and of the all-DIAG
    one (`all`), and of the paired differences (`delta_*`), on the `n_seq` sequences of seed `seed`."""

    base_stderr: float | None = None
    all_stderr: float | None = None
    delta_per_layer_stderr: list | None = None
    delta_all_stderr: float | None = None
    seed: int | None = None


def diag_ablation_estimates(model: LinearTransformer, data: EvalSet, omega: Tensor) -> DiagAblation:
    """interp.probes.forms.diag_ablation (each layer, then all layers, replaced by its DIAG projection `omega`, on the
    same sequences) with the standard errors of the losses and of the paired differences."""
    model = as_float64(model)
    L, d = model.cfg.n_layers, model.cfg.d
    preds = {"base": with_diag_layers(model, omega, []), "all": LinearTransformer.from_omegas(omega, d)}
    preds |= {f"layer{l}": with_diag_layers(model, omega, [l]) for l in range(L)}
    diffs = adjusted_losses(preds, data)
    est = {k: LossEstimate.of(v) for k, v in diffs.items()}
    paired = {k: LossEstimate.of(v - diffs["base"]).stderr for k, v in diffs.items() if k != "base"}
    base, per_layer = est["base"].mean, [est[f"layer{l}"].mean for l in range(L)]
    return DiagAblation(
        base,
        per_layer,
        est["all"].mean,
        [x - base for x in per_layer],
        est["all"].mean - base,
        data.n_seq,
        base_stderr=est["base"].stderr,
        all_stderr=est["all"].stderr,
        delta_per_layer_stderr=[paired[f"layer{l}"] for l in range(L)],
        delta_all_stderr=paired["all"],
        seed=data.seed,
    )


@lru_cache(maxsize=64)
def _constrr_lambda(spec: str, d: int, n: int, x_cov: Matrix | None) -> float:
    if is_cached(spec, d, n, (), x_cov):
        return tuned(spec, d, n, (), x_cov)["constrr"]["lam"]
    return tune_constrr(TuningSet(spec, d, n, x_cov=x_cov))["lam"]


def constrr_lambda(prior: "str | NoisePrior", d: int, n: int, x_cov: Matrix | None = None) -> float:
    """ConstRR's λ on a prior (inputs x ~ N(0, x_cov)) as interp.tuning tunes it: the tuned record's when it is shipped
    or tuned in this process, else ConstRR alone tuned now on the same tuning set (the value `tuned` would record,
    without tuning the other baselines)."""
    return _constrr_lambda(as_prior(prior).spec, d, n, x_cov)


@dataclass
class ProbeResult(Record):
    """Every probe of one model (docs/probe_schema.md); `to_json()` is the CLI's per-model record."""

    n_seq: int
    noise: str
    n: int
    d: int
    seed: int
    param: str
    n_layers: int
    n_heads: int
    implicit: ImplicitChecks
    solvers: Solvers
    implied_lambda: ImpliedLambda
    omegas: LayerOmegas
    lemma44: Lemma44Check
    momentum: MomentumSummary
    rescaling: SigmaCurve
    effective_step: SigmaCurve
    fits: FitsSummary
    projection: ProjectionSummary
    const_ridge: ConstRidge
    ablation: DiagAblation | None = None
    schedule: Schedule | None = None  # §5.3's layer schedule (interp.probes.schedule)
    theorem51: Theorem51 | None = None  # GD++ on noise-free sequences only (interp.probes.theorem51)


def by_sigma(values: Tensor, masks: list[Tensor]) -> Tensor:
    """Median of values [layers, batch] within each σ group -> [layers, groups]."""
    return torch.stack(
        [
            v.nanmedian(-1).values if (v := values[:, m]).shape[-1] else values.new_full(values.shape[:1], float("nan"))
            for m in masks
        ],
        dim=-1,
    )


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


def probe_model(
    model: LinearTransformer,
    data: EvalSet,
    fit_seq: int = 4_096,
    ablation_seq: int = 20_000,
    sigma_bins: int = 8,
    schedule_seq: int | None = None,
) -> ProbeResult:
    """Every probe on the sequences of `data` (in chunks of data.chunk); the shared fits and tunings on `fit_seq`
    other sequences (seed + TUNE_OFFSET), the DIAG ablation on `ablation_seq` more (seed + 1; 0 skips it). The layer
    schedule's block sizes use the probe sequences, its single-block ablation `schedule_seq` sequences of seed + 1
    (default: `ablation_seq`, the DIAG ablation's very sequences; 0 skips it). A GD++ model on noise-free sequences
    also gets Theorem 5.1's record (interp.probes.theorem51) on the probe sequences."""
    model = as_float64(model)  # InvalidType for anything but a LinearTransformer
    if not isinstance(data, EvalSet):
        raise InvalidType(f"data must be an interp.EvalSet, got {type(data).__name__}")
    if data.d != model.cfg.d:
        raise InvalidArgument(f"the evaluation set has d = {data.d} but the model d = {model.cfg.d}")
    for name, value, low in (("fit_seq", fit_seq, 1), ("ablation_seq", ablation_seq, 0), ("sigma_bins", sigma_bins, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgument(f"{name} must be an int >= {low}, got {value!r:.60}")
    if schedule_seq is not None and (
        isinstance(schedule_seq, bool) or not isinstance(schedule_seq, int) or schedule_seq < 0
    ):
        raise InvalidArgument(f"schedule_seq must be an int >= 0 or None, got {schedule_seq!r:.60}")
    L, d = model.cfg.n_layers, model.cfg.d
    omega, omega_source = layer_omegas(model)
    proj = diag_projection(model.P.detach(), model.Q.detach())
    worst = {
        "lstsq_vs_recursion": torch.zeros(L + 1),
        "lstsq_residual": torch.zeros(L + 1),
        "prediction_error": torch.zeros(L + 1),
        "lemma44_recursion_error": torch.zeros(L),
    }
    cols: dict[str, list[Tensor]] = {}
    sizes: list[Tensor] = []  # block_sizes per chunk, [L, chunk, 4]
    tune = data.replace(n_seq=fit_seq, seed=data.seed + TUNE_OFFSET, sigma=None).draw()
    imp_t = implicit_model(model, tune.tokens)
    ctx_t = imp_t.context()
    shared = {
        "gd_eta_tuned": tune_gd_steps(ctx_t, L, target=tune.target),
        "gd_eta_match": tune_gd_steps(ctx_t, L, reference=imp_t.w),
        "ridge": const_ridge_fit(ctx_t, imp_t.pred),  # the λ's matching the model; ConstRR's is interp.tuning's
        "fits": fit_layer_maps(model, imp_t.S),
    }
    del tune, imp_t, ctx_t
    for batch in data.batches():
        imp = implicit_model(model, batch.tokens)
        ctx = imp.context()
        lm = lemma44(imp, omega, ctx)
        for key, val in (
            ("lstsq_vs_recursion", imp.disagreement),
            ("lstsq_residual", imp.residual),
            ("prediction_error", imp.prediction_error),
            ("lemma44_recursion_error", lm.recursion_error),
        ):
            worst[key] = torch.maximum(worst[key], val)
        sizes.append(block_sizes(model, batch.tokens))
        lam, lam_err = ctx.implied_lambda(imp.w)
        per_seq = {
            **compare_solvers(imp.w, ctx, batch.sigma, shared["gd_eta_tuned"]),
            "relerr_gd_match": rel_error(imp.w, gd_iterates(ctx, shared["gd_eta_match"])),
            "implied_lambda": lam,
            "implied_lambda_relerr": lam_err,
            **momentum(imp, lm.grad),
            "rescaling": rescaling_factor(imp.S, omega),
            "effective_step": effective_step(imp.S, omega),
            "ridge_diff2": const_ridge_mismatch(ctx, imp.pred, shared["ridge"]["lambda_match"]) ** 2,
            "pred2": imp.pred**2,
            "sigma": batch.sigma.double()[None],
        }
        for key, val in per_seq.items():
            cols.setdefault(key, []).append(val)
    c = {k: torch.cat(v, dim=-1) for k, v in cols.items()}
    sigma = c.pop("sigma")[0]
    centers, masks = sigma_groups(sigma, sigma_bins)
    mean = lambda key: c[key].nanmean(-1)  # noqa: E731
    fits = shared["fits"]
    result = ProbeResult(
        n_seq=data.n_seq,
        noise=data.noise.spec,
        n=data.n,
        d=d,
        seed=data.seed,
        param=model.cfg.param,
        n_layers=L,
        n_heads=model.cfg.n_heads,
        implicit=ImplicitChecks(**worst),
        solvers=Solvers(
            **{
                key: mean(key)
                for key in (
                    "cos_ols",
                    "relerr_ols",
                    "cos_ridge_oracle",
                    "relerr_ridge_oracle",
                    "cos_gd",
                    "relerr_gd",
                    "relerr_gd_match",
                )
            },
            gd_eta_tuned=shared["gd_eta_tuned"],
            gd_eta_match=shared["gd_eta_match"],
        ),
        implied_lambda=ImpliedLambda.of(c["implied_lambda"], c["implied_lambda_relerr"], sigma, sigma_bins),
        omegas=LayerOmegas(omega_source, list(OMEGA_NAMES), omega),
        lemma44=Lemma44Check(worst["lemma44_recursion_error"], model.arch.has_omegas),
        momentum=MomentumSummary(mean("u_norm"), mean("align"), mean("align_next")),
        rescaling=SigmaCurve(centers, by_sigma(c["rescaling"], masks)),
        effective_step=SigmaCurve(centers, by_sigma(c["effective_step"], masks)),
        fits=FitsSummary(
            fit_seq,
            FormFit(list(OMEGA_NAMES), fits.diag, fits.diag_r2),
            FormFit(list(EQUIVARIANT_NAMES), fits.equivariant, fits.equivariant_r2),
        ),
        projection=ProjectionSummary(
            proj.omega,
            proj.share_outside,
            proj.norm,
            proj.remainder_sv[:, :TOP_SV],
            {k: v[:, :TOP_BLOCK_SV] for k, v in proj.block_sv.items()},
        ),
        const_ridge=ConstRidge(
            shared["ridge"]["lambda_match"],
            c["ridge_diff2"].mean(-1) / c["pred2"].mean(-1),
            0.5 * c["ridge_diff2"].mean(-1),
            constrr_lambda(data.noise, d, data.n, data.x_cov),
        ),
    )
    if ablation_seq > 0:
        result.ablation = diag_ablation_estimates(
            model, data.replace(n_seq=ablation_seq, seed=data.seed + 1, sigma=None), proj.omega
        )
    schedule_seq = ablation_seq if schedule_seq is None else schedule_seq
    blocks = (
        block_ablation(model, data.replace(n_seq=schedule_seq, seed=data.seed + 1, sigma=None))
        if schedule_seq > 0
        else None
    )
    result.schedule = Schedule.of(torch.cat(sizes, dim=1), blocks)
    if is_gdpp(model) and is_noise_free(data):  # Theorem 5.1 on the probe sequences: loss and spectra of every one
        result.theorem51 = theorem51(model, data)
    return ProbeResult.from_json(result.to_json())  # tensors to lists, non-finite floats to None: as written
