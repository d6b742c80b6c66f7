"""Tuning the baselines' free parameters per noise prior (Vladymyrov et al. 2024, Table 1 baselines), on sequences
disjoint from evaluation.

ConstRR's λ, TunedRR's (multiplier, clip) and GD-k's step η minimise the ½·MSE on TUNE_SEQ sequences
drawn with TUNE_SEED (evaluation uses seed 0 by default, training streams use seed + 1): a coarse grid,
then a finer grid between the neighbours of the coarse optimum. Every result records its grids.

Results for the paper's priors ship as package data (interp/data/baselines_tuned.json, rebuilt by
experiments/tune_baselines.py); other priors, and inputs x ~ N(0, Λ) of a run trained with an `x_cov`, are tuned
on the fly (a few seconds) and memoised for the process.

That memo is not an evaluation cache, and it stays out of interp.evalcache on purpose: it holds a baseline's tuned
*parameters* (inputs of its predictor), never a loss. A tuned value has one source, this module (`tuned`, read out by
`parameters` and printed by `format_param`), so `interp eval`, `interp table` and the report print and use the same
λ; a cache file on disk could hold another one. The losses of the tuned baselines are evaluations, cached by
interp.evalcache under a key holding these parameters (evalcache.baseline_subject), so a retune misses the cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Callable

import numpy as np
import torch

from interp.baselines import AdaRR, Bayes, ConstRR, GDk, TunedRR, ols_predict, oracle_predict
from interp.config import Matrix, covariance
from interp.files import InvalidArgument, InvalidType
from interp.spectral import SpectralContext
from interp.tasks import NoisePrior, as_prior, sample_tasks

TUNE_SEED = 10_007
TUNE_SEQ = 50_000
CACHE_FILE = "baselines_tuned.json"


def _check_args(d: int, n: int, gd_steps=(1,)) -> tuple[int, ...]:
    """d and n: ints >= 1; gd_steps: an iterable (a list, a range) of ints >= 1, returned as a tuple (InvalidArgument /
    InvalidType)."""
    for name, value in (("d", d), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidType(f"{name} must be an int, got {value!r:.60}")
        if value < 1:
            raise InvalidArgument(f"{name} must be >= 1, got {value}")
    if isinstance(gd_steps, (str, bytes)) or not isinstance(gd_steps, Iterable):
        raise InvalidType(f"gd_steps must be a list of ints (GD step counts), got {gd_steps!r:.60}")
    gd_steps = tuple(gd_steps)
    for k in gd_steps:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise InvalidArgument(f"gd_steps must hold ints >= 1, got {k!r:.60}")
    return gd_steps


def cache_key(prior: "str | NoisePrior", d: int, n: int, x_cov: Matrix | None = None) -> str:
    _check_args(d, n)
    key = f"{as_prior(prior).spec}|d={d}|n={n}"
    if x_cov is None:
        return key
    matrix = json.dumps(covariance("x_cov", x_cov, d))  # validated, and the same key for a list or a tuple
    return key + "|x_cov=" + hashlib.sha256(matrix.encode()).hexdigest()[:16]


class TuningSet:
    """Spectral contexts and targets of the tuning sequences (float64), inputs x ~ N(0, x_cov) (I when None)."""

    def __init__(
        self,
        prior: "str | NoisePrior",
        d: int = 10,
        n: int = 20,
        n_seq: int = TUNE_SEQ,
        seed: int = TUNE_SEED,
        x_cov: Matrix | None = None,
    ):
        gen = torch.Generator().manual_seed(seed)
        parts, targets, oracle = [], [], []
        for start in range(0, n_seq, 10_000):
            batch = sample_tasks(min(10_000, n_seq - start), d, n, prior, gen, x_cov=x_cov, dtype=torch.float64)
            parts.append(SpectralContext.of(batch))
            targets.append(batch.target)
            oracle.append(oracle_predict(batch))
        self.sp = SpectralContext.cat(parts)
        self.target = torch.cat(targets)
        self.oracle_loss = 0.5 * ((torch.cat(oracle) - self.target) ** 2).mean().item()
        self.prior, self.d, self.n, self.n_seq, self.seed = as_prior(prior), d, n, n_seq, seed

    def loss(self, pred: torch.Tensor) -> float:
        """½·MSE; +inf when the prediction blew up (GD past its stable step)."""
        value = 0.5 * ((pred - self.target) ** 2).mean().item()
        return value if math.isfinite(value) else math.inf


def _refine(grid: np.ndarray, best: int, num: int, log: bool) -> np.ndarray:
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    if log and lo > 0:
        return np.geomspace(lo, hi, num)
    return np.linspace(lo, hi, num)


def _search_1d(f: Callable[[float], float], coarse: np.ndarray, fine_num: int = 41, log: bool = True) -> dict:
    losses = [f(v) for v in coarse]
    best = int(np.argmin(losses))
    fine = _refine(coarse, best, fine_num, log)
    fine_losses = [f(v) for v in fine]
    j = int(np.argmin(fine_losses))
    if fine_losses[j] <= losses[best]:
        return dict(value=float(fine[j]), loss=fine_losses[j], coarse=coarse.tolist(), fine=fine.tolist())
    return dict(value=float(coarse[best]), loss=losses[best], coarse=coarse.tolist(), fine=fine.tolist())


def tune_constrr(ts: TuningSet) -> dict:
    """ConstRR: one λ for the prior; coarse grid {0} ∪ 10^[-4, 3] (71 points), then 41 between neighbours."""
    coarse = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 71)])
    out = _search_1d(lambda lam: ts.loss(ts.sp.ridge(lam)), coarse)
    return dict(
        lam=out["value"],
        loss=out["loss"],
        adjusted=out["loss"] - ts.oracle_loss,
        grid=dict(lam_coarse=out["coarse"], lam_fine=out["fine"]),
    )


def tune_tunedrr(ts: TuningSet) -> dict:
    """TunedRR: λ = mult·min(σ̂², clip); coarse 2-D grid, then a finer 2-D grid around the optimum."""
    s2 = ts.sp.sigma2_hat()

    def search(mults: np.ndarray, clips: np.ndarray) -> tuple[float, float, float]:
        best = (math.inf, 1.0, math.inf)
        for c in clips:
            clipped = s2.clamp_max(float(c))
            for m in mults:
                loss = ts.loss(ts.sp.ridge(float(m) * clipped))
                if loss < best[0]:
                    best = (loss, float(m), float(c))
        return best

    mults = np.geomspace(0.1, 10, 41)
    clips = np.concatenate([np.geomspace(1e-2, 1e3, 51), [math.inf]])
    loss, m, c = search(mults, clips)
    im, ic = int(np.argmin(abs(mults - m))), int(np.argmin(abs(np.nan_to_num(clips, posinf=1e300) - min(c, 1e300))))
    fine_m = _refine(mults, im, 21, True)
    fine_c = clips[-1:] if math.isinf(c) else _refine(clips[:-1], ic, 21, True)
    loss2, m2, c2 = search(fine_m, fine_c)
    if loss2 <= loss:
        loss, m, c = loss2, m2, c2
    return dict(
        mult=m,
        clip=c,
        loss=loss,
        adjusted=loss - ts.oracle_loss,
        grid=dict(
            mult_coarse=mults.tolist(),
            clip_coarse=[_num(v) for v in clips],
            mult_fine=fine_m.tolist(),
            clip_fine=[_num(v) for v in fine_c],
        ),
    )


def tune_gd(ts: TuningSet, steps: int) -> dict:
    """GD-k: one step size η for k steps from w = 0; coarse grid 10^[-4, -0.5] (71 points), then 41."""
    coarse = np.geomspace(1e-4, 10**-0.5, 71)
    out = _search_1d(lambda eta: ts.loss(ts.sp.gd(steps, eta)), coarse)
    return dict(
        steps=steps,
        eta=out["value"],
        loss=out["loss"],
        adjusted=out["loss"] - ts.oracle_loss,
        grid=dict(eta_coarse=out["coarse"], eta_fine=out["fine"]),
    )


def _num(v: float):
    return "inf" if math.isinf(v) else float(v)


def _float(v) -> float:
    return math.inf if v == "inf" else float(v)


def tune_all(
    prior: "str | NoisePrior",
    d: int = 10,
    n: int = 20,
    gd_steps=range(1, 8),
    n_seq: int = TUNE_SEQ,
    seed: int = TUNE_SEED,
    x_cov: Matrix | None = None,
) -> dict:
    """Every tuned baseline of one prior (inputs x ~ N(0, x_cov)), with grids, tuning set and losses (a JSON-ready
    dict)."""
    ts = TuningSet(prior, d, n, n_seq, seed, x_cov)
    out = dict(
        prior=ts.prior.spec,
        d=d,
        n=n,
        n_seq=n_seq,
        seed=seed,
        **({} if x_cov is None else {"x_cov": [list(row) for row in x_cov]}),
        oracle_loss=ts.oracle_loss,
        constrr=tune_constrr(ts),
        gd={str(k): tune_gd(ts, k) for k in gd_steps},
    )
    if n > d:
        tr = tune_tunedrr(ts)
        tr["clip"] = _num(tr["clip"])
        out["tunedrr"] = tr
    return out


@lru_cache(maxsize=None)
def _shipped() -> dict:
    try:
        return json.loads(resources.files("interp").joinpath("data", CACHE_FILE).read_text())
    except (FileNotFoundError, OSError):
        return {}


_memo: dict[str, dict] = {}


def is_cached(prior: "str | NoisePrior", d: int = 10, n: int = 20, gd_steps=(1,), x_cov: Matrix | None = None) -> bool:
    """True when `tuned` will not need to tune (shipped or already tuned in this process)."""
    gd_steps = _check_args(d, n, gd_steps)
    key = cache_key(prior, d, n, x_cov)
    rec = _memo.get(key) or _shipped().get(key)
    return rec is not None and all(str(k) in rec["gd"] for k in gd_steps)


def tuned(prior: "str | NoisePrior", d: int = 10, n: int = 20, gd_steps=(1,), x_cov: Matrix | None = None) -> dict:
    """The tuning record of a prior (inputs x ~ N(0, x_cov)): the shipped one when present, else tuned now (and
    memoised)."""
    gd_steps = _check_args(d, n, gd_steps)
    key = cache_key(prior, d, n, x_cov)
    rec = _memo.get(key) or _shipped().get(key)
    if rec is None:
        rec = tune_all(prior, d, n, gd_steps=gd_steps, x_cov=x_cov)
    missing = [k for k in gd_steps if str(k) not in rec["gd"]]
    if missing:  # only the GD-k steps are new: tune them on the same tuning set
        ts = TuningSet(prior, d, n, rec["n_seq"], rec["seed"], x_cov)
        rec = {**rec, "gd": {**rec["gd"], **{str(k): tune_gd(ts, k) for k in missing}}}
    _memo[key] = rec
    return rec


def parameters(name: str, rec: dict) -> dict:
    """The parameters of the named baseline (ols, constrr, adarr, tunedrr, gd{k}, bayes) in a tuning record `rec`
    (`tuned(...)`): what `baselines` builds its predictor from, and what interp eval, interp table and the evaluation
    cache's keys show or use. JSON-ready; an infinite clip is "inf"."""
    if name == "constrr":
        return {"lam": rec["constrr"]["lam"]}
    if name == "tunedrr":
        return {"mult": rec["tunedrr"]["mult"], "clip": rec["tunedrr"]["clip"]}
    if name.startswith("gd") and name[2:].isdigit():
        return {"steps": int(name[2:]), "eta": rec["gd"][name[2:]]["eta"]}
    if name == "adarr":
        return {"divisor": f"n - d = {rec['n'] - rec['d']}"}
    if name == "bayes":
        return {"prior": rec["prior"]}
    if name == "ols":
        return {}
    raise InvalidArgument(f"unknown baseline {name!r}")


def format_param(value) -> str:
    """A tuned parameter as interp eval and interp table print it: 4 decimals, or 3 significant digits below 1e-3."""
    if isinstance(value, (str, bool, int)) or not isinstance(value, float):
        return str(value)
    if math.isinf(value):
        return "inf"
    return f"{value:.2e}" if value != 0 and abs(value) < 1e-3 else f"{value:.4f}"


def baselines(
    prior: "str | NoisePrior", d: int = 10, n: int = 20, gd_steps=(1,), names=None, x_cov: Matrix | None = None
) -> dict[str, Callable]:
    """Named predictors for a prior: ols, constrr, adarr, tunedrr, gd{k}, bayes (Vladymyrov et al. 2024, Table 1
    baselines), their free parameters tuned on inputs x ~ N(0, x_cov). OLS, AdaRR and Bayes have none to tune, and
    Bayes (like the oracle ridge) stays exact for any x_cov: with w ~ N(0, I) the posterior mean of w does not depend
    on the law of x.

    `names` selects (and orders) a subset; AdaRR and TunedRR need n > d and are left out otherwise.
    """
    prior = as_prior(prior)
    if names is not None and (isinstance(names, str) or not isinstance(names, Iterable)):
        raise InvalidType(f"names must be a list of baseline names, got {names!r:.60}")
    gd_steps = _check_args(d, n, gd_steps)
    if names is not None:  # before any tuning
        names = list(names)
        known = ["ols", "constrr", "adarr", "tunedrr", *(f"gd{k}" for k in gd_steps), "bayes"]
        unknown = [str(nm) for nm in names if nm not in known]
        if unknown:
            shown = [nm for nm in known if n > d or nm not in ("adarr", "tunedrr")]
            raise InvalidArgument(f"unknown baseline(s) {', '.join(unknown)} (known: {', '.join(shown)})")
    rec = tuned(prior, d, n, gd_steps, x_cov)
    out: dict[str, Callable] = {"ols": ols_predict, "constrr": ConstRR(rec["constrr"]["lam"])}
    if n > d:
        out["adarr"] = AdaRR()
        out["tunedrr"] = TunedRR(rec["tunedrr"]["mult"], _float(rec["tunedrr"]["clip"]))
    for k in gd_steps:
        out[f"gd{k}"] = GDk(k, rec["gd"][str(k)]["eta"])
    out["bayes"] = Bayes(prior)
    if names is not None:
        out = {nm: out[nm] for nm in names if nm in out}
    return out
