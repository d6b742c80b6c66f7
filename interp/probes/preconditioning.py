"""GD++'s preconditioning step and its second-order convergence (Vladymyrov et al. 2024, Theorem 5.1), read off a
trained model through its hooks.

A GD++ layer moves every x-token by x_i ← (I + ω_xx^l Σ^l) x_i (q_y = 0, so no y enters the x's), hence the context's
Σ^{l+1} = (I − γ_l Σ^l) Σ^l (I − γ_l Σ^l) with γ_l = −ω_xx^l: each eigenvalue s of Σ^l maps to s (1 − γ_l s)². With
γ_l s_max = 1/3 the largest eigenvalues shrink by 4/9 per layer while the smallest stay, so the condition number κ
falls geometrically (the O(log κ) part of the theorem) and the y-steps then converge second order: the error after
K layers squares per layer, ε_{K+1} ≈ C ε_K², so log(1/ε) doubles (the O(log log 1/ε) part).

`preconditioning` measures the eigenvalues of Σ^l = Σ_i x_i^l x_i^lᵀ from the residual stream at every layer (the
hooks, not the ω's), and sets beside them what the map predicts from the layer below, γ_l s_max^l, and κ^l.
`theorem51` adds, on noise-free sequences, the loss after K layers (interp.evaluate.per_layer_loss: at σ = 0 the
oracle is exact, so it is ½·MSE), its order of convergence, and a few sequences' eigenvalues before and after each
layer; `theorem51_depths` compares the final losses of GD++ models of several depths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, per_layer_loss
from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer
from interp.probes.implicit import as_float64, probe_cache
from interp.records import Record

SAMPLE = 16  # sequences whose paired eigenvalues before / after every layer Theorem51 keeps (the report's scatter)


@dataclass
class Preconditioning(Record):
    """Per layer of a GD++ model, over a batch of contexts (l = 0 is the raw context, l = L after the last layer).

    gamma[l]: γ_l = −ω_xx^l of layer l+1 (summed over heads), l = 0..L−1;
    map_error[l]: max over sequences and eigenvalues of |s^{l+1} − s^l (1 − γ_l s^l)²| / s_max^{l+1};
    gamma_smax[l]: median over sequences of γ_l · s_max(Σ^l) (Theorem 5.1's choice: 1/3);
    kappa[l]: median condition number s_max / s_min of Σ^l, l = 0..L; kappa_q90[l] its 90th percentile;
    smax[l], smin[l]: median largest and smallest eigenvalue of Σ^l.
    """

    gamma: Float[Tensor, "L"]
    map_error: Float[Tensor, "L"]
    gamma_smax: Float[Tensor, "L"]
    kappa: Float[Tensor, "L1"]
    kappa_q90: Float[Tensor, "L1"]
    smax: Float[Tensor, "L1"]
    smin: Float[Tensor, "L1"]


def is_gdpp(model: LinearTransformer) -> bool:
    """Whether the model is GD++ (Vladymyrov et al. 2024, §4): trained as one, or a DIAG one whose ω_xy and ω_yy are
    exactly 0 in every layer (LinearTransformer.from_omegas of GD++ ω's), so that no y ever enters the x's."""
    if not isinstance(model, LinearTransformer):
        raise InvalidType(f"model must be an interp.LinearTransformer, got {type(model).__name__}")
    if model.cfg.param == "gdpp":
        return True
    if not model.arch.has_omegas:
        return False
    try:
        model.gdpp_omegas()  # the one test of ω_xy = ω_yy = 0
    except InvalidArgument:
        return False
    return True


def check_gdpp(model: LinearTransformer) -> None:
    """InvalidArgument, in one line naming the architecture, unless the model is GD++ (`is_gdpp`)."""
    if not is_gdpp(model):
        what = "with ω_xy or ω_yy ≠ 0" if model.arch.has_omegas else "(no ω's)"
        raise InvalidArgument(
            f"model: a {model.cfg.param.upper()} model {what}; Theorem 5.1's preconditioning is GD++'s "
            "(ω_xy = ω_yy = 0: no y enters the x's)"
        )


def context_gram(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch d d"]:
    """Σ^l = Σ_{i≤n} x_i^l x_i^lᵀ of the residual stream before layer l+1 (l = 0..L−1) and after the last layer
    (l = L), float64, read through the hooks."""
    resid, _ = probe_cache(model, tokens)  # [L+1, batch, pos, D]
    x = resid[:, :, :-1, :-1]  # the context tokens' x-part (the query is no key)
    return x.transpose(-1, -2) @ x


def context_spectra(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Float[Tensor, "L1 batch d"]:
    """Eigenvalues (ascending) of Σ^l (`context_gram`), l = 0..L."""
    return torch.linalg.eigvalsh(context_gram(model, tokens))


def layer_gammas(model: LinearTransformer) -> Float[Tensor, "L"]:
    """γ_l = −ω_xx^l per layer (summed over heads), float64, as the hooks compute them."""
    return -as_float64(model).omegas().omega_xx.detach().reshape(model.cfg.n_layers)


def spectra_preconditioning(s: Float[Tensor, "L1 batch d"], gamma: Float[Tensor, "L"]) -> Preconditioning:
    """The Preconditioning record of measured spectra `s` (ascending, per layer and sequence) and the layers' γ."""
    predicted = s[:-1] * (1 - gamma[:, None, None] * s[:-1]) ** 2  # s ↦ s (1 − γ s)² (Theorem 5.1)
    # the map is monotone only on γ s < 1/3; sorting compares the same multiset of eigenvalues either way
    predicted = predicted.sort(dim=-1).values
    top = s[1:, :, -1:].clamp_min(torch.finfo(s.dtype).tiny)
    map_error = ((s[1:] - predicted).abs() / top).amax(dim=(1, 2))
    kappa = s[..., -1] / s[..., 0].clamp_min(torch.finfo(s.dtype).tiny)
    return Preconditioning(
        gamma=gamma,
        map_error=map_error,
        gamma_smax=(gamma[:, None] * s[:-1, :, -1]).median(dim=1).values,
        kappa=kappa.median(dim=1).values,
        kappa_q90=kappa.quantile(0.9, dim=1),
        smax=s[..., -1].median(dim=1).values,
        smin=s[..., 0].median(dim=1).values,
    )


def preconditioning(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> Preconditioning:
    """The preconditioning step of a GD++ model on a batch of contexts (module docstring); InvalidArgument (a
    ValueError) for another architecture (DIAG's ω_xy moves the x's by y, FULL has no ω's)."""
    check_gdpp(model)
    return spectra_preconditioning(context_spectra(model, tokens), layer_gammas(model))


def paired_spectra(gram: Float[Tensor, "L1 batch d d"]) -> tuple[Tensor, Tensor]:
    """(before [L, batch, d], after [L, batch, d]): the eigenvalues s_j of Σ^l and, for each eigenvector v_j, the
    measured v_jᵀ Σ^{l+1} v_j, its eigenvalue after the layer (a GD++ layer keeps Σ's eigenvectors: Σ^{l+1} is a
    polynomial in Σ^l), so the pairs lie on s ↦ s (1 − γ_l s)² whether or not the map is monotone."""
    s, v = torch.linalg.eigh(gram[:-1])  # [L, batch, d], [L, batch, d, d]
    after = torch.einsum("lbij,lbik,lbkj->lbj", v, gram[1:], v)  # v_jᵀ Σ^{l+1} v_j
    return s, after


# ---------------------------------------------------------------------------- the order of convergence
def convergence_order(eps: Sequence[float]) -> list[float | None]:
    """[len − 1]: log ε_{k+1} / log ε_k of consecutive errors (2 for second order, 1 for linear); None where either
    error is not in (0, 1), where the ratio says nothing about the order."""
    out: list[float | None] = []
    for prev, cur in zip(eps[:-1], eps[1:]):
        ok = prev is not None and cur is not None and 0 < prev < 1 and 0 < cur < 1
        out.append(math.log(cur) / math.log(prev) if ok else None)
    return out


@dataclass
class OrderFit(Record):
    """The least-squares slope of log(−log ε_k) against the step k over the final run of steps where the error is in
    (0, 1) and falls: ε_k = C^{−r^k} gives slope log r, log 2 ≈ 0.69 for second order (r = 2); for linear
    convergence (ε_k = C q^k) log(−log ε_k) grows like log k, a slope that falls to 0 as 1/k.

    start: the first step of the fit (None: fewer than two such steps); slope: per step; order: exp(slope) = r."""

    start: int | None = None
    slope: float | None = None
    order: float | None = None


def order_fit(steps: Sequence[int], eps: Sequence[float]) -> OrderFit:
    """OrderFit of errors `eps` at `steps` (layers K, or depths L; ascending)."""
    i = len(eps) - 1
    while i >= 0 and eps[i] is not None and 0 < eps[i] < 1 and (i == len(eps) - 1 or eps[i] > eps[i + 1]):
        i -= 1
    first = i + 1
    if len(eps) - first < 2:
        return OrderFit()
    k = torch.tensor([float(s) for s in steps[first:]], dtype=torch.float64)
    t = torch.tensor([math.log(-math.log(e)) for e in eps[first:]], dtype=torch.float64)
    slope = (((k - k.mean()) * (t - t.mean())).sum() / ((k - k.mean()) ** 2).sum()).item()
    return OrderFit(int(steps[first]), slope, math.exp(slope))


# ---------------------------------------------------------------------------- Theorem 5.1 on one model
@dataclass
class Theorem51(Record):
    """Theorem 5.1 measured on one GD++ model and noise-free sequences (docs/probe_schema.md, "theorem51").

    loss[K], K = 0..L: adjusted loss after K layers (= ½·MSE at σ = 0) over n_seq sequences, its standard error,
    median and worst sequence (loss_stderr, loss_median, loss_worst);
    order[l], l = 0..L−1: log ε_{l+1} / log ε_l, the order of layer l+1's step (convergence_order);
    order_median[l]: the same of the median sequence's loss (the mean of a deep model is carried by a few contexts);
    fit: the fitted order over the final layers whose loss falls below 1 (OrderFit);
    preconditioning: the map of every layer on probe_seq of the sequences (Preconditioning);
    before[l], after[l]: [L][sample][d], the paired eigenvalues of Σ^l and of Σ^{l+1} of the first `sample`
    sequences (paired_spectra): the measured points of s ↦ s (1 − γ_l s)².
    """

    n_seq: int
    probe_seq: int
    loss: list
    loss_stderr: list
    loss_median: list
    loss_worst: list
    order: list
    order_median: list
    fit: OrderFit
    preconditioning: Preconditioning
    before: list
    after: list


def is_noise_free(data: "EvalSet | ScoredSet") -> bool:
    """Whether every sequence of `data` has σ = 0 (a uniform:0 or fixed:0 prior, or an EvalSet at σ = 0)."""
    if isinstance(data, EvalSet):
        return data.sigma == 0 if data.sigma is not None else data.noise.sigma_max == 0
    if isinstance(data, ScoredSet):
        return all(bool((b.sigma == 0).all()) for b in data.batches)
    raise InvalidType(f"data must be an interp.EvalSet (or a ScoredSet), got {type(data).__name__}")


def theorem51(
    model: LinearTransformer, data: "EvalSet | ScoredSet", probe_seq: int | None = None, sample: int = SAMPLE
) -> Theorem51:
    """Theorem 5.1 on a GD++ model: the loss after K layers on all sequences of `data` (noise-free), the
    preconditioning on the first `probe_seq` of them (EvalSet: data.replace(n_seq=probe_seq)'s; None: all), the
    paired eigenvalues of `sample` of those. InvalidArgument for a model that is not GD++ (`is_gdpp`) or data with
    noise (the theorem and the loss's ½·MSE reading are noise-free)."""
    check_gdpp(model)
    if not is_noise_free(data):
        what = data.noise.spec if isinstance(data, EvalSet) and data.sigma is None else "σ > 0"
        raise InvalidArgument(f"data: Theorem 5.1 is about noise-free regression; these sequences have {what}")
    for name, value, low in (("probe_seq", probe_seq, 1), ("sample", sample, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise InvalidArgument(f"{name} must be an int >= {low}, got {value!r:.60}")
    model = as_float64(model)
    curve = per_layer_loss(model, data)
    if isinstance(data, EvalSet):
        batches = data.replace(n_seq=min(probe_seq or data.n_seq, data.n_seq)).batches()
    else:
        batches = iter(data.batches)
    spectra, grams, n_probe = [], [], 0
    for b in batches:
        if probe_seq is not None and n_probe >= probe_seq:
            break
        tokens = b.tokens[: None if probe_seq is None else probe_seq - n_probe]
        gram = context_gram(model, tokens)  # [L+1, chunk, d, d]
        spectra.append(torch.linalg.eigvalsh(gram))
        if sum(g.shape[1] for g in grams) < sample:  # the first `sample` sequences' Σ^l, for the paired spectra
            grams.append(gram[:, :sample])
        n_probe += tokens.shape[0]
    s = torch.cat(spectra, dim=1)
    before, after = paired_spectra(torch.cat(grams, dim=1)[:, :sample]) if sample else (torch.empty(0),) * 2
    loss = [e.mean for e in curve]
    return Theorem51(
        n_seq=curve[0].n_seq,
        probe_seq=n_probe,
        loss=loss,
        loss_stderr=[e.stderr for e in curve],
        loss_median=[e.median for e in curve],
        loss_worst=[e.worst for e in curve],
        order=convergence_order(loss),
        order_median=convergence_order([e.median for e in curve]),
        fit=order_fit(range(len(loss)), loss),
        preconditioning=spectra_preconditioning(s, layer_gammas(model)),
        before=before.tolist(),
        after=after.tolist(),
    )


# ---------------------------------------------------------------------------- across depths
@dataclass
class Theorem51Depths(Record):
    """Theorem 5.1 across GD++ models of several depths L on the same sequences: the final loss ε_L of each (`loss`;
    `loss_median` of its median sequence), log ε_{L'} / log ε_L between consecutive depths (`order`, `order_median`;
    None unless L' = L + 1 and both in (0, 1)), the fitted order over the final depths (`fit`, slope per layer), and
    the median κ of the context entering each model's last layer (`kappa_last`: Theorem 5.1 predicts the doubling of
    log(1/ε) once κ is near 1)."""

    depth: list
    loss: list
    loss_stderr: list
    loss_median: list
    order: list
    order_median: list
    fit: OrderFit
    kappa_last: list


def theorem51_depths(records: Sequence[Theorem51]) -> Theorem51Depths:
    """Theorem51Depths of one Theorem51 per depth (any order; one per depth)."""
    recs = sorted(records, key=lambda r: len(r.loss))
    depth = [len(r.loss) - 1 for r in recs]
    if len(set(depth)) != len(depth):
        raise InvalidArgument(f"records: one per depth, got depths {depth}")
    loss, median = [r.loss[-1] for r in recs], [r.loss_median[-1] for r in recs]

    def consecutive(eps: list) -> list:
        return [o if b == a + 1 else None for o, a, b in zip(convergence_order(eps), depth[:-1], depth[1:])]

    kappa = [float(r.preconditioning.kappa[len(r.loss) - 2]) for r in recs]  # Σ^{L−1}, entering layer L
    stderr = [r.loss_stderr[-1] for r in recs]
    return Theorem51Depths(
        depth, loss, stderr, median, consecutive(loss), consecutive(median), order_fit(depth, loss), kappa
    )
