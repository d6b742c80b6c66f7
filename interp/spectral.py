"""Closed forms on the raw context, in the eigenbasis of Σ = XᵀX = V diag(s) Vᵀ (float64).

With α = Σ_i y_i x_i, a = Vᵀα and b = Vᵀx_t, every solver of the ridge family is a per-eigenvalue
coefficient c_k on a: w = V diag(c) a and ŷ = Σ_k c_k a_k b_k, so sweeping λ or η costs O(d) per
sequence and value. Used by the baselines (interp.baselines) and the probes (interp.probes).

- ridge with any λ:  c_k = 1 / (s_k + λ); λ = 0 is OLS (pseudo-inverse where Σ is singular);
- GD-k from w = 0 with step η on ½Σ_i(y_i − ⟨w, x_i⟩)²:  c_k = η Σ_{j<k} (1 − η s_k)^j;
- the implied λ of any w: the ridge solution nearest to it;
- σ̂² = ρ / (n − d), ρ the OLS residual sum of squares, and the Bayes evidence log N(y; 0, XXᵀ + σ²I).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from interp.files import InvalidArgument, InvalidType
from interp.tasks import check_batch

SIGMA2_FLOOR = 1e-20  # σ = 0 atoms: far below float64 residuals of noisy data, far above those of exact data


def _rank_tol(s: Tensor) -> Tensor:
    return s.amax(-1, keepdim=True) * 1e-12


@dataclass
class SpectralContext:
    """One batch of contexts in the eigenbasis of Σ.

    s [batch, d]: eigenvalues of Σ (clamped at 0); V [batch, d, d]: eigenvectors (columns);
    a [batch, d] = Vᵀα; x_t [batch, d]: the query; b [batch, d] = Vᵀx_t;
    rss [batch]: ρ = Σ_i (y_i − ⟨w_ols, x_i⟩)²; n, d: context length and dimension.
    """

    s: Tensor
    V: Tensor
    a: Tensor
    x_t: Tensor
    b: Tensor
    rss: Tensor
    n: int
    d: int

    # ------------------------------------------------------------------ construction
    @classmethod
    def of(cls, batch) -> "SpectralContext":
        """The context of a TaskBatch, memoised on it (several baselines read the same batch)."""
        check_batch(batch)
        memo = getattr(batch, "_spectral", None)
        if memo is not None and memo[0] is batch.tokens:
            return memo[1]
        sc = cls.from_batch(batch)
        batch._spectral = (batch.tokens, sc)
        return sc

    @classmethod
    def from_batch(cls, batch) -> "SpectralContext":
        """From the raw tokens; ρ from the explicit residuals (no cancellation for nearly noiseless sequences)."""
        check_batch(batch)
        x, y, xt = batch.x.double(), batch.y.double(), batch.x_query.double()
        s, V = torch.linalg.eigh(x.transpose(1, 2) @ x)
        s = s.clamp_min(0.0)
        a = torch.einsum("bkd,bk->bd", V, (x * y[..., None]).sum(1))  # Vᵀα
        b = torch.einsum("bkd,bk->bd", V, xt)  # Vᵀx_t
        w_ols = torch.einsum("bkd,bd->bk", V, a * _pinv(s))
        rss = ((y - torch.einsum("bnk,bk->bn", x, w_ols)) ** 2).sum(-1)
        return cls(s, V, a, xt, b, rss, x.shape[1], x.shape[2])

    @classmethod
    def from_stats(cls, S0: Float[Tensor, "batch D D"], x_t: Float[Tensor, "batch d"], n: int) -> "SpectralContext":
        """From the layer-0 statistics S⁰ = Σ_{i≤n} e_i e_iᵀ = [[Σ, α], [αᵀ, Σ y_i²]] (what a model's hook sees);
        ρ = Σ y_i² − αᵀ Σ⁺ α, which cancels for nearly noiseless sequences."""
        d = S0.shape[-1] - 1
        s, V = torch.linalg.eigh(S0[:, :d, :d].double())
        s = s.clamp_min(0.0)
        a = einsum(V, S0[:, :d, d].double(), "b i j, b i -> b j")
        x_t = x_t.double()
        b = einsum(V, x_t, "b i j, b i -> b j")
        rss = S0[:, d, d].double() - (a**2 * _pinv(s)).sum(-1)
        return cls(s, V, a, x_t, b, rss, n, d)

    @classmethod
    def cat(cls, parts: "list[SpectralContext]") -> "SpectralContext":
        """Several batches as one (same n, d)."""
        join = lambda name: torch.cat([getattr(p, name) for p in parts])  # noqa: E731
        return cls(*(join(k) for k in ("s", "V", "a", "x_t", "b", "rss")), parts[0].n, parts[0].d)

    # ------------------------------------------------------------------ coefficients, weights, predictions
    def ridge_coef(self, lam: Tensor | float) -> Float[Tensor, "... batch d"]:
        """1 / (s_k + λ) for λ a scalar or [..., batch]; 0 on the null space of Σ when λ = 0."""
        lam = self._param("lam", lam)
        denom = self.s + (lam[..., None] if lam.ndim else lam)
        keep = denom > _rank_tol(self.s)
        return torch.where(keep, 1.0 / torch.where(keep, denom, torch.ones_like(denom)), 0.0)

    def gd_coef(self, steps: int, eta: Tensor | float) -> Float[Tensor, "... batch d"]:
        """η Σ_{j<k} (1 − η s)^j for k = `steps`, η a scalar or [..., batch] (the GD construction)."""
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
            raise InvalidType(f"steps must be an int, got {steps!r:.60}")
        if steps < 0:
            raise InvalidArgument(f"steps must be >= 0, got {steps}")
        eta = self._param("eta", eta)
        eta = eta[..., None] if eta.ndim else eta
        c = torch.zeros_like(self.s * eta)
        for _ in range(steps):
            c = c * (1 - eta * self.s) + eta  # w_{j+1} = w_j + η(α − Σ w_j), coordinatewise
        return c

    def _param(self, name: str, value: Tensor | float) -> Tensor:
        """λ or η as a float64 tensor: a number, or one per sequence [..., batch] (or [..., 1], a grid of them);
        InvalidType / InvalidArgument naming it otherwise."""
        try:
            t = torch.as_tensor(value, dtype=torch.float64, device=self.s.device)
        except (TypeError, ValueError, RuntimeError):
            raise InvalidType(f"{name} must be a number or a tensor [..., batch], got {type(value).__name__}") from None
        if t.ndim and t.shape[-1] not in (1, self.s.shape[0]):  # broadcast against the batch: [..., batch] or [..., 1]
            raise InvalidArgument(
                f"{name} must be a number or [..., batch] with batch = {self.s.shape[0]}, got shape {list(t.shape)}"
            )
        return t

    def weights(self, coef: Float[Tensor, "... batch d"]) -> Float[Tensor, "... batch d"]:
        """w = V diag(coef) a."""
        return einsum(self.V, coef * self.a, "b i j, ... b j -> ... b i")

    def predict(self, w: Float[Tensor, "... batch d"]) -> Float[Tensor, "... batch"]:
        """ŷ = ⟨w, x_t⟩."""
        return einsum(w, self.x_t, "... b i, b i -> ... b")

    def predict_coef(self, coef: Float[Tensor, "... batch d"]) -> Float[Tensor, "... batch"]:
        """ŷ = Σ_k coef_k a_k b_k, without forming w."""
        return (coef * self.a * self.b).sum(-1)

    def coords(self, v: Float[Tensor, "... batch d"]) -> Float[Tensor, "... batch d"]:
        """Vᵀ v: a weight vector in the eigenbasis."""
        return einsum(self.V, v, "b i j, ... b i -> ... b j")

    def ridge(self, lam: Tensor | float) -> Float[Tensor, "... batch"]:
        """ŷ_λ = ⟨(Σ + λI)⁻¹α, x_t⟩ = Σ_k a_k b_k / (s_k + λ) (λ = 0: OLS, minimum-norm when n < d)."""
        lam = self._param("lam", lam)
        denom = self.s + (lam[..., None] if lam.ndim else lam)
        keep = denom > _rank_tol(self.s)
        return torch.where(keep, self.a * self.b / torch.where(keep, denom, torch.ones_like(denom)), 0.0).sum(-1)

    def ridge_weights(self, lam: Tensor | float) -> Float[Tensor, "... batch d"]:
        """w_λ = (Σ + λI)⁻¹α."""
        return self.weights(self.ridge_coef(lam))

    def ols(self) -> Float[Tensor, "batch"]:
        return self.ridge(0.0)

    def ols_weights(self) -> Float[Tensor, "batch d"]:
        """w* = Σ⁺α."""
        return self.ridge_weights(0.0)

    def gd(self, steps: int, eta: Tensor | float) -> Float[Tensor, "... batch"]:
        """ŷ after `steps` GD steps from w = 0: w_k = η Σ_{j<k} (I − ηΣ)^j α."""
        return self.predict_coef(self.gd_coef(steps, eta))

    def gd_weights(self, steps: int, eta: Tensor | float) -> Float[Tensor, "... batch d"]:
        return self.weights(self.gd_coef(steps, eta))

    # ------------------------------------------------------------------ noise
    def sigma2_hat(self) -> Float[Tensor, "batch"]:
        """Unbiased noise estimate σ̂² = ρ / (n − d) (AdaRR)."""
        if self.n <= self.d:
            raise InvalidArgument(f"AdaRR needs n > d (n={self.n}, d={self.d})")
        return self.rss / (self.n - self.d)

    def log_marginal(self, sigma2: float) -> Float[Tensor, "batch"]:
        """log N(y; 0, XXᵀ + σ²I_n) up to a constant (w ~ N(0, I_d); the Bayes floor).

        log det(XXᵀ + σ²I_n) = Σ_k log(s_k + σ²) + (n − d) log σ² (Sylvester), and by Woodbury
        yᵀ(XXᵀ + σ²I)^{-1}y = ρ/σ² + Σ_k a_k² / (s_k (s_k + σ²)), free of cancellation as σ → 0.
        """
        sigma2 = max(float(sigma2), SIGMA2_FLOOR)
        pos = self.s > _rank_tol(self.s)
        inv = torch.where(pos, self.a**2 / (self.s.clamp_min(1e-300) * (self.s + sigma2)), 0.0)
        quad = self.rss / sigma2 + inv.sum(-1)
        logdet = torch.log(self.s + sigma2).sum(-1) + (self.n - self.d) * math.log(sigma2)
        return -0.5 * (logdet + quad)

    # ------------------------------------------------------------------ implied λ
    def implied_lambda(
        self, w: Float[Tensor, "L1 batch d"], lo: float = 1e-6, hi: float = 1e6
    ) -> tuple[Tensor, Tensor]:
        """Per sequence and layer, the λ ∈ [lo, hi] whose ridge solution is nearest to w^l (Euclidean).

        Returns (λ [L+1, batch], relative error ‖w_λ − w^l‖/‖w^l‖ [L+1, batch]); λ = inf where w^l = 0,
        and for l = 0 (w⁰ = 0 is nobody's ridge solution).
        """
        target = self.coords(w[1:])  # [L, B, d]
        L, B, _ = target.shape

        def f(t: Tensor) -> Tensor:  # t [G, L, B]
            return ((self.a / (self.s + t.exp()[..., None]) - target) ** 2).sum(-1)

        t = minimize_log(f, math.log(lo), math.log(hi), (L, B))
        norm = target.norm(dim=-1)
        lam = torch.cat([torch.full((1, B), float("inf"), dtype=t.dtype), t.exp().masked_fill(norm == 0, float("inf"))])
        err = torch.cat([torch.full((1, B), float("nan"), dtype=t.dtype), f(t[None])[0].sqrt() / norm])
        return lam, err


def _pinv(s: Tensor) -> Tensor:
    """1/s where s is above the rank tolerance, else 0."""
    return torch.where(s > _rank_tol(s), 1.0 / s.clamp_min(1e-300), torch.zeros_like(s))


def minimize_log(f, lo: float, hi: float, shape: tuple[int, ...] = (), n_grid: int = 31, iters: int = 32) -> Tensor:
    """argmin over t ∈ [lo, hi] of f(t) elementwise, f taking t of shape [G, *shape]: a grid, then a
    golden-section search (one evaluation per step) in the grid cell pair around the best grid point."""
    grid = torch.linspace(lo, hi, n_grid, dtype=torch.float64)
    vals = f(grid.reshape(-1, *([1] * len(shape))).expand(n_grid, *shape)).nan_to_num(float("inf"))
    idx = vals.argmin(0)
    a, b = grid[(idx - 1).clamp(min=0)], grid[(idx + 1).clamp(max=n_grid - 1)]
    g = (5**0.5 - 1) / 2
    c, e = b - g * (b - a), a + g * (b - a)
    fc, fe = f(torch.stack([c, e])).nan_to_num(float("inf"))
    for _ in range(iters):
        left = fc <= fe  # the minimum lies in [a, e]: e ← c, new c; else in [c, b]: c ← e, new e
        a, b = torch.where(left, a, c), torch.where(left, e, b)
        new = torch.where(left, b - g * (b - a), a + g * (b - a))
        fn = f(new[None])[0].nan_to_num(float("inf"))
        c, e, fc, fe = (
            torch.where(left, new, e),
            torch.where(left, c, new),
            torch.where(left, fn, fe),
            torch.where(left, fc, fn),
        )
    return torch.where(fc <= fe, c, e)


def context_spectrum(
    x: Float[Tensor, "batch n d"], x_cov: Tensor | None = None
) -> tuple[Float[Tensor, "batch d"], Float[Tensor, "batch d"]]:
    """(s, u) of raw contexts x (float64): the eigenvalues s_j of Σ = XᵀX, and u_j = v_jᵀ Λ v_j, the query's variance
    along each eigenvector v_j (x_t ~ N(0, Λ); all ones when x_cov is None)."""
    x = x.to(torch.float64)
    s, V = torch.linalg.eigh(einsum(x, x, "b n i, b n j -> b i j"))
    if x_cov is None:
        return s.clamp_min(0), torch.ones_like(s)
    lam = torch.as_tensor(x_cov, dtype=torch.float64)
    return s.clamp_min(0), einsum(V, lam, V, "b i j, i k, b k j -> b j")
