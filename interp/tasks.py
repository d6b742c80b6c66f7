"""Noisy linear regression tasks with a per-sequence noise level (README, Conventions).

Noise priors are given as the CLI's string specs:
  fixed:σ                 every sequence has noise std σ
  uniform:σ_max           σ ~ U(0, σ_max)
  categorical:1,3[;p1,p2] σ uniform over the listed values, or with the given probabilities
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from interp.files import InvalidArgument, InvalidType
from interp.limits import MAX_BATCH_ELEMENTS, MAX_SIGMA

PRIOR_KINDS = ("fixed", "uniform", "categorical")


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class NoisePrior:
    """A distribution over the per-sequence noise std σ_τ."""

    kind: str  # "fixed" | "uniform" | "categorical"
    values: tuple[float, ...]  # fixed: (σ,); uniform: (σ_max,); categorical: the σ's
    probs: tuple[float, ...] = ()  # categorical only; uniform over values when empty

    def __post_init__(self) -> None:
        """Checked as parse checks a spec (a prior built by hand too): InvalidArgument / InvalidType naming it."""
        if self.kind not in PRIOR_KINDS:
            raise InvalidArgument(f"NoisePrior.kind must be one of {', '.join(PRIOR_KINDS)}, got {self.kind!r:.60}")
        for name in ("values", "probs"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)) or not all(_is_real(v) for v in value):
                raise InvalidType(f"NoisePrior.{name} must be a tuple of numbers, got {value!r:.60}")
            object.__setattr__(self, name, tuple(float(v) for v in value))
        values, probs = self.values, self.probs
        if len(values) != 1 and self.kind != "categorical" or not values:
            raise InvalidArgument(f"a {self.kind} prior has one noise std, got {len(values)}")
        if not all(math.isfinite(v) and 0 <= v <= MAX_SIGMA for v in values + probs):
            raise InvalidArgument(f"NoisePrior: noise stds must be finite, in [0, {MAX_SIGMA:g}], got {values}")
        if probs and (len(probs) != len(values) or self.kind != "categorical" or abs(sum(probs) - 1.0) > 1e-6):
            raise InvalidArgument(f"NoisePrior: {len(probs)} probabilities for {len(values)} values (they sum to 1)")

    @classmethod
    def parse(cls, spec: str) -> "NoisePrior":
        """Parse `fixed:σ`, `uniform:σ_max` or `categorical:1,3[;p1,p2]`; ValueError on bad input."""
        if not isinstance(spec, str):
            raise InvalidType(f"{spec!r:.60} is not a noise spec (fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2])")
        if ":" not in spec:
            raise InvalidArgument(f"{spec!r} is not a noise spec (fixed:σ, uniform:σ_max or categorical:1,3[;p1,p2])")
        kind, _, body = spec.partition(":")
        kind = kind.strip().lower()
        try:
            if kind in ("fixed", "uniform"):
                values = (float(body),)
                probs: tuple[float, ...] = ()
            elif kind == "categorical":
                vals, _, ps = body.partition(";")
                values = tuple(float(v) for v in vals.split(","))
                probs = tuple(float(p) for p in ps.split(",")) if ps else ()
            else:
                raise InvalidArgument(f"unknown noise prior {kind!r} in {spec!r} (fixed, uniform or categorical)")
        except ValueError as err:
            if "unknown noise prior" in str(err):
                raise
            raise InvalidArgument(f"{spec!r}: numbers expected after '{kind}:'") from None
        if any(not (v == v) or v in (float("inf"), float("-inf")) for v in values + probs):
            raise InvalidArgument(f"{spec!r}: values must be finite")
        if any(v < 0 for v in values):
            raise InvalidArgument(f"{spec!r}: noise std must be >= 0")
        if any(v > MAX_SIGMA for v in values):
            raise InvalidArgument(f"{spec!r}: noise std must be at most {MAX_SIGMA:g}")
        if probs:
            if len(probs) != len(values):
                raise InvalidArgument(f"{spec!r}: {len(values)} values but {len(probs)} probabilities")
            if any(p < 0 for p in probs) or abs(sum(probs) - 1.0) > 1e-6:
                raise InvalidArgument(f"{spec!r}: probabilities must be >= 0 and sum to 1")
        return cls(kind, values, probs)

    @property
    def spec(self) -> str:
        body = ",".join(f"{v:g}" for v in self.values)
        if self.probs:
            body += ";" + ",".join(f"{p:g}" for p in self.probs)
        return f"{self.kind}:{body}"

    def __str__(self) -> str:
        return self.spec

    @property
    def sigma_max(self) -> float:
        return max(self.values)

    @property
    def support(self) -> tuple[float, ...]:
        """The σ's with non-zero mass (categorical / fixed); for uniform, (0, σ_max) as an interval."""
        return self.values if self.kind != "uniform" else (0.0, self.values[0])

    def category_probs(self) -> tuple[float, ...]:
        if self.kind == "categorical":
            return self.probs or tuple(1.0 / len(self.values) for _ in self.values)
        return (1.0,)

    def mean_sigma2(self) -> float:
        """E[σ²] under the prior (σ_max²/3 for uniform)."""
        if self.kind == "fixed":
            return self.values[0] ** 2
        if self.kind == "uniform":
            return self.values[0] ** 2 / 3.0
        return sum(p * v**2 for p, v in zip(self.category_probs(), self.values))

    def sample(self, batch: int, generator: torch.Generator, dtype=torch.float32, device="cpu") -> Tensor:
        """σ_τ for `batch` sequences, shape [batch]."""
        if self.kind == "fixed":
            return torch.full((batch,), self.values[0], dtype=dtype, device=device)
        if self.kind == "uniform":
            return torch.rand(batch, generator=generator, dtype=dtype, device=device) * self.values[0]
        probs = torch.tensor(self.category_probs(), dtype=torch.float64, device=device)
        idx = torch.multinomial(probs, batch, replacement=True, generator=generator)
        return torch.tensor(self.values, dtype=dtype, device=device)[idx]


def as_prior(noise: "str | NoisePrior") -> NoisePrior:
    """A prior as given, or parsed from its spec (InvalidArgument / InvalidType naming a bad one)."""
    return noise if isinstance(noise, NoisePrior) else NoisePrior.parse(noise)


def sigma_groups(sigma: Tensor, n_bins: int) -> tuple[Tensor, list[Tensor]]:
    """Groups of sequences by their noise σ [batch]: (centres, member masks), each distinct σ when there are at most
    n_bins (a categorical prior: no empty group), else n_bins equal-width bins between the smallest and largest σ."""
    uniq = sigma.unique()
    if len(uniq) <= n_bins:
        return uniq, [sigma == v for v in uniq]
    edges = torch.linspace(sigma.min().item(), sigma.max().item(), n_bins + 1, dtype=sigma.dtype)
    idx = torch.bucketize(sigma, edges[1:-1])
    return (edges[:-1] + edges[1:]) / 2, [idx == i for i in range(n_bins)]


def prior_slug(noise: str) -> str:
    """A directory-friendly name for a noise spec: uniform:5 -> uniform5, categorical:1,3 -> cat13."""
    spec = as_prior(noise).spec
    kind, _, body = spec.partition(":")
    kind = {"categorical": "cat"}.get(kind, kind)
    return kind + body.replace(",", "").replace(";", "p").replace(".", "_")


@dataclass
class TaskBatch:
    """A batch of in-context regression problems.

    tokens: [batch, n+1, d+1], context (x_i, y_i) then the query (x_t, 0)
    target: [batch], the noise-free query label y_t = ⟨w, x_t⟩
    sigma: [batch], each sequence's noise std σ_τ
    w: [batch, d], the true weights
    """

    tokens: Tensor
    target: Tensor
    sigma: Tensor
    w: Tensor

    @property
    def x(self) -> Tensor:
        """Context inputs [batch, n, d]."""
        return self.tokens[:, :-1, :-1]

    @property
    def y(self) -> Tensor:
        """Context labels [batch, n]."""
        return self.tokens[:, :-1, -1]

    @property
    def x_query(self) -> Tensor:
        """Query input [batch, d]."""
        return self.tokens[:, -1, :-1]

    def to(self, *args, **kwargs) -> "TaskBatch":
        return TaskBatch(*(t.to(*args, **kwargs) for t in (self.tokens, self.target, self.sigma, self.w)))

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclass
class TaskDraw:
    """The random draw behind a TaskBatch, before its tokens are formed (interp.moments.half_squared_errors reads
    it directly: the trainer's fused pass forms each sequence's tokens in cache).

    x: [batch, n, d], x_query: [batch, d], w: [batch, d], sigma: [batch], xi: [batch, n] the standard normal
    noise, so that y_i = ⟨w, x_i⟩ + σ_τ ξ_i; with `quad` c ≠ 0 the task has a quadratic term (Theorem 4.2's target
    for a quadratic FFN), y_i = ⟨w, x_i⟩ + c·(x_i(1)² − 1) + σ_τ ξ_i and y_t = ⟨w, x_t⟩ + c·(x_t(1)² − 1).
    """

    x: Tensor
    x_query: Tensor
    w: Tensor
    sigma: Tensor
    xi: Tensor
    quad: float = 0.0

    def batch(self) -> TaskBatch:
        """The TaskBatch of this draw: tokens (x_i, y_i) then (x_t, 0), and the target ⟨w, x_t⟩."""
        x, x_t, w = self.x, self.x_query, self.w
        batch, n, d = x.shape
        y = torch.einsum("bnd,bd->bn", x, w) + self.sigma[:, None] * self.xi
        target = torch.einsum("bd,bd->b", x_t, w)
        if self.quad:  # c·(x(1)² − 1): mean zero, so the linear part's optimum is unchanged
            y = y + self.quad * (x[..., 0] ** 2 - 1)
            target = target + self.quad * (x_t[:, 0] ** 2 - 1)
        tokens = torch.empty(batch, n + 1, d + 1, dtype=x.dtype, device=x.device)  # every entry written below
        tokens[:, :n, :d] = x
        tokens[:, :n, d] = y
        tokens[:, n, :d] = x_t
        tokens[:, n, d] = 0.0  # the query's label is masked
        return TaskBatch(tokens, target, self.sigma, w)

    def __len__(self) -> int:
        return self.x.shape[0]


def _gaussian(shape: tuple[int, ...], cov: Tensor | None, generator, dtype, device, norm: bool = False):
    """(a draw of N(0, cov) of `shape`, with `norm` the squared norm [shape[0]] of its standard-normal source)."""
    z = torch.randn(*shape, generator=generator, dtype=dtype, device=device)
    z2 = _squared_norms(z) if norm else None
    if cov is None:
        return z, z2
    chol, info = torch.linalg.cholesky_ex(torch.as_tensor(cov, dtype=torch.float64))
    if int(info) != 0:
        raise InvalidArgument("a covariance (x_cov, query_cov or w_cov) must be symmetric positive definite")
    return z @ chol.to(dtype=dtype, device=device).T, z2


def _squared_norms(z: Tensor) -> Tensor:
    """|z_b|² [batch] of each row z_b of z [batch, ...], accumulated in float64 (without a float64 copy of z)."""
    return torch.linalg.vector_norm(z.flatten(1), dim=1, dtype=torch.float64).square()


def check_device(device: "str | torch.device") -> "str | torch.device":
    """`device` if torch can use it on this machine, else InvalidArgument naming it (no allocation is tried)."""
    if isinstance(device, str) and device == "cpu":  # the common case, on every training step: nothing to ask
        return device
    if not isinstance(device, (str, torch.device)):
        raise InvalidType(f"device must be a str or a torch.device, got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise InvalidArgument(f"device {device!r} is not a torch device ({err})") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (dev.index or 0) >= count:
            raise InvalidArgument(f"device {device!r}: this machine has {count} usable CUDA device(s)")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidArgument(f"device {device!r}: MPS is not available on this machine")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise InvalidArgument(f"device {device!r}: interp runs on cpu, cuda or mps")
    return device


def _check_draw(generator, dtype, device) -> None:
    """sample_tasks' generator (None or a torch.Generator), dtype (a floating torch.dtype) and device."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InvalidType(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point or dtype.is_complex:
        raise InvalidType(f"dtype must be a floating torch.dtype (torch.float32, torch.float64), got {dtype!r:.60}")
    check_device(device)


def _check_cov(name: str, cov, d: int) -> Tensor | None:
    """A covariance argument as a float64 [d, d] tensor: real, finite, symmetric (to rounding: 1e-12 of its largest
    entry, as interp.config.covariance) and positive definite (None stays None); one line naming it otherwise. A
    Cholesky factor reads one triangle only, so an asymmetric matrix would be sampled as another, silently."""
    if cov is None:
        return None
    if isinstance(cov, Tensor) and (cov.is_complex() or cov.dtype == torch.bool):
        raise InvalidType(f"{name} must be a real d×d matrix, got a {str(cov.dtype).removeprefix('torch.')} tensor")
    if isinstance(cov, Tensor) and cov.device.type == "meta":
        raise InvalidArgument(f"{name} is on the meta device: it holds no values")
    try:
        m = torch.as_tensor(cov, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidType(
            f"{name} must be a d×d matrix (a tensor or a list of rows), got {type(cov).__name__}"
        ) from None
    if tuple(m.shape) != (d, d):
        raise InvalidArgument(f"{name} must be {d}×{d} (d={d}), got shape {list(m.shape)}")
    if not bool(torch.isfinite(m).all()):
        raise InvalidArgument(f"{name} must have finite entries")
    asym = float((m - m.T).abs().max()) if d else 0.0
    if asym > 1e-12 * float(m.abs().max()):
        raise InvalidArgument(f"{name} must be symmetric (largest |Λ_ij − Λ_ji| is {asym:.3g})")
    m = (m + m.T) / 2
    if d and int(torch.linalg.cholesky_ex(m).info) != 0:
        low = float(torch.linalg.eigvalsh(m)[0])
        raise InvalidArgument(f"{name} must be positive definite (smallest eigenvalue {low:.3g})")
    return m


def _check_sigma(sigma, batch: int, dtype, device) -> Tensor:
    """Given per-sequence noise stds: one number or [batch] of them, finite and >= 0, as a tensor [batch]."""
    try:
        s = torch.as_tensor(sigma, dtype=dtype, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidType(f"sigma must be a number or a tensor [batch], got {type(sigma).__name__}") from None
    if s.ndim > 1 or s.numel() not in (1, batch):
        raise InvalidArgument(f"sigma must be one noise std or {batch} of them ([batch]), got shape {list(s.shape)}")
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()):
        raise InvalidArgument("sigma: noise stds must be finite and >= 0")
    return s.expand(batch).clone()


def check_tensor(name: str, value, ndim: int | None = None, floating: bool = True) -> Tensor:
    """`value` itself when it is a torch.Tensor (of `ndim` dimensions, floating point with `floating`); InvalidType
    for anything else (a list, an array, a string, None) or integer / bool / complex entries, InvalidArgument for the
    wrong number of dimensions, each naming `name`."""
    if not isinstance(value, Tensor):
        raise InvalidType(f"{name} must be a torch.Tensor, got {type(value).__name__} (use torch.as_tensor)")
    if floating and (not value.is_floating_point() or value.is_complex()):
        raise InvalidType(f"{name} must be floating point, got {str(value.dtype).removeprefix('torch.')}")
    if ndim is not None and value.ndim != ndim:
        raise InvalidArgument(f"{name} must have {ndim} dimensions, got shape {list(value.shape)}")
    return value


def check_batch(value, name: str = "batch") -> "TaskBatch":
    """`value` when it is a TaskBatch (interp.sample_tasks, EvalSet.draw), else InvalidType naming `name`."""
    if not isinstance(value, TaskBatch):
        hint = " (tokens alone: wrap them with their targets in a TaskBatch)" if isinstance(value, Tensor) else ""
        raise InvalidType(f"{name} must be a TaskBatch (interp.sample_tasks), got {type(value).__name__}{hint}")
    return value


def _check_sizes(batch: int, d: int, n: int) -> None:
    """batch, d, n: integers >= 1 whose token tensor stays under interp.limits.MAX_BATCH_ELEMENTS."""
    for name, value in (("batch", batch), ("d", d), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidType(f"{name} must be an int, got {value!r}")
        if value < 1:
            raise InvalidArgument(f"{name} must be >= 1, got {value}")
    if batch * (n + 1) * (d + 1) > MAX_BATCH_ELEMENTS:
        raise InvalidArgument(
            f"batch {batch} x (n+1) {n + 1} x (d+1) {d + 1} token entries exceed {MAX_BATCH_ELEMENTS}; sample in chunks"
        )


def sample_tasks(
    batch: int,
    d: int = 10,
    n: int = 20,
    noise: "str | NoisePrior" = "uniform:5",
    generator: torch.Generator | None = None,
    *,
    x_cov: Tensor | None = None,
    query_cov: Tensor | None = None,
    w_cov: Tensor | None = None,
    sigma: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    quad: float = 0.0,
) -> TaskBatch:
    """Sample `batch` sequences: w ~ N(0, w_cov), x_i ~ N(0, x_cov), y_i = ⟨w, x_i⟩ + σ_τ ξ_i (README, Conventions).

    Covariances default to I_d; `query_cov` defaults to `x_cov` (set it apart for query shift).
    `sigma` overrides the prior with given per-sequence stds [batch] (per-σ profiles). `quad` c adds the quadratic
    term c·(x(1)² − 1) to every label (TaskDraw), after the same random numbers.
    """
    options = dict(x_cov=x_cov, query_cov=query_cov, w_cov=w_cov, sigma=sigma, dtype=dtype, device=device)
    return with_quad(_sample(batch, d, n, noise, generator, **options)[0], quad).batch()


def with_quad(draw: TaskDraw, quad: float) -> TaskDraw:
    """The draw with the quadratic term c = `quad` in its labels (TaskDraw); the same draw for 0."""
    if not _is_real(quad) or not math.isfinite(quad):
        raise InvalidArgument(f"quad must be a finite number, got {quad!r:.60}")
    return draw if quad == 0 else dataclasses.replace(draw, quad=float(quad))


def draw_tasks(
    batch: int,
    d: int = 10,
    n: int = 20,
    noise: "str | NoisePrior" = "uniform:5",
    generator: torch.Generator | None = None,
    *,
    x_cov: Tensor | None = None,
    query_cov: Tensor | None = None,
    w_cov: Tensor | None = None,
    sigma: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> TaskDraw:
    """sample_tasks' draw, before its tokens are formed: the same arguments and the same random numbers;
    sample_tasks(...) is draw_tasks(...).batch()."""
    options = dict(x_cov=x_cov, query_cov=query_cov, w_cov=w_cov, sigma=sigma, dtype=dtype, device=device)
    return _sample(batch, d, n, noise, generator, **options)[0]


def _sample(
    batch, d, n, noise, generator, *, x_cov=None, query_cov=None, w_cov=None, sigma=None, _scale=None,
    dtype=torch.float32, device="cpu",
):  # fmt: skip
    """(draw_tasks' draw, None); with `_scale` [batch]: x_i, x_t and ξ_i multiplied by it, and the squared norm
    |z|² [batch] of the standard normals x, x_t and ξ were drawn from, before scaling, in place of None."""
    prior = as_prior(noise)
    _check_sizes(batch, d, n)
    _check_draw(generator, dtype, device)
    w_cov, x_cov = _check_cov("w_cov", w_cov, d), _check_cov("x_cov", x_cov, d)
    query_cov = _check_cov("query_cov", query_cov, d)
    if generator is None:
        generator = torch.Generator(device=device).manual_seed(0)
    w, _ = _gaussian((batch, d), w_cov, generator, dtype, device)
    scale, norm = _scale, _scale is not None
    x, zx2 = _gaussian((batch, n, d), x_cov, generator, dtype, device, norm)
    x_t, zt2 = _gaussian((batch, d), x_cov if query_cov is None else query_cov, generator, dtype, device, norm)
    if sigma is None:
        sigma = prior.sample(batch, generator, dtype=dtype, device=device)
    else:
        sigma = _check_sigma(sigma, batch, dtype, device)
    xi = torch.randn(batch, n, generator=generator, dtype=dtype, device=device)
    z2 = None
    if scale is not None:
        z2 = zx2 + zt2 + _squared_norms(xi)
        x, x_t, xi = x * scale[:, None, None], x_t * scale[:, None], xi * scale[:, None]
    return TaskDraw(x, x_t, w, sigma, xi), z2


def tail_tasks(
    batch: int,
    d: int,
    n: int,
    noise: "str | NoisePrior",
    generator: torch.Generator,
    *,
    scale: float,
    sigma_from: float,
    x_cov: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> TaskDraw:
    """`batch` sequences from the tail set of a noisy prior: σ_τ ~ U(sigma_from·σ_max, σ_max) and the labels at `scale`
    times their size (w and ξ multiplied by it, x_i and x_t as drawn), so Σ y² reaches past its 10⁻⁴ quantile at the
    prior's largest noise, where the y→y term of 3- and 4-layer DIAG compounds (interp.train.polish's tail term).
    A penalty set, unweighted: not an estimate of the prior's expectation (for that, stressed_tasks)."""
    if not (_is_real(scale) and 0 < scale < math.inf and _is_real(sigma_from) and 0 <= sigma_from <= 1):
        raise InvalidArgument(
            f"tail_tasks: scale must be finite and > 0 and sigma_from in [0, 1], got {scale!r}, {sigma_from!r}"
        )
    sigma_max = as_prior(noise).sigma_max
    if not sigma_max > 0:
        raise InvalidArgument(f"tail_tasks: the noise-free prior {as_prior(noise)} has no large-noise tail")
    _check_sizes(batch, d, n)
    _check_draw(generator, dtype, device)
    u = torch.rand(batch, generator=generator, dtype=torch.float64, device=device)
    sigma = (sigma_max * (sigma_from + (1 - sigma_from) * u)).to(dtype)
    draw, _ = _sample(batch, d, n, noise, generator, x_cov=x_cov, sigma=sigma, dtype=dtype, device=device)
    return replace(draw, w=draw.w * scale, xi=draw.xi * scale)


def stressed_tasks(
    batch: int,
    d: int,
    n: int,
    noise: "str | NoisePrior",
    generator: torch.Generator,
    *,
    frac: float,
    scale: float,
    x_cov: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> tuple[TaskDraw, Tensor]:
    """`batch` sequences from the stressed proposal q = (1 − frac)·p + frac·p_c (drawn: `.batch()` forms the
    TaskBatch), and their importance weights p/q.

    p is sample_tasks' distribution; p_c draws the same w and σ_τ but x_i, x_t and ξ_i at `scale` times their
    size, so XᵀX's spectrum reaches c² times further out (the rare contexts on which a deep model's
    iteration diverges). With z the (n+1)·d + n standard normals behind x, x_t and ξ (D of them),
    p_c(z)/p(z) = c^(−D)·exp(½|z|²(1 − 1/c²)); weights [batch] (float64) make E_q[weight·f] = E_p[f] for any f.
    """
    if not (_is_real(frac) and 0 <= frac <= 1 and _is_real(scale) and 0 < scale < math.inf):
        raise InvalidArgument(
            f"stressed_tasks: frac must be in [0, 1] and scale finite and > 0, got {frac!r}, {scale!r}"
        )
    _check_sizes(batch, d, n)
    _check_draw(generator, dtype, device)
    pick = torch.rand(batch, generator=generator, device=device) < frac
    one = torch.ones(batch, dtype=torch.float64, device=device)
    c = torch.where(pick, one * scale, one)
    tasks, z2 = _sample(batch, d, n, noise, generator, x_cov=x_cov, _scale=c.to(dtype), dtype=dtype, device=device)
    dims = (n + 1) * d + n
    z2 = z2 * c**2  # |z|² of the drawn (scaled) sequence
    log_ratio = -dims * math.log(scale) + 0.5 * z2 * (1 - 1 / scale**2)  # log p_c(z) / p(z)
    weight = 1.0 / ((1 - frac) + frac * torch.exp(log_ratio.clamp(max=700.0)))
    return tasks, weight
