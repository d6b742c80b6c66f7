"""Theorem 4.1 readouts: the implicit linear model (M, u, a, w) of every layer, two independent ways.

(a) least squares of the cached layer-l tokens on the layer-0 tokens (every token, the query
included, is mapped by the same matrix T^l, so n + 1 >= d + 1 equations fix it per sequence);
(b) the Lemma 4.3 recursion from the cached per-layer statistics S^l and the weights P, Q.
Then w^l against known solvers (OLS, oracle ridge, GD-k; interp.spectral).

Everything is float64; every tensor has the layer as its first axis. The model is read only through
run_with_cache and its public P / Q.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer
from interp.spectral import SpectralContext, minimize_log


def as_float64(model: LinearTransformer) -> LinearTransformer:
    """A float64 copy of the same parameterization (hooks, omegas() and the dtype of its config intact)."""
    if not isinstance(model, LinearTransformer):
        raise InvalidType(f"model must be an interp.LinearTransformer, got {type(model).__name__}")
    if model.cfg.dtype == "float64":
        return model
    cfg = dataclasses.replace(model.cfg, dtype="float64")
    copy = LinearTransformer(cfg, init=False)
    copy.load_state_dict({k: v.detach().double().cpu() for k, v in model.state_dict().items()})
    return copy.eval()


def probe_cache(model: LinearTransformer, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """(resid [L+1, batch, pos, D], S [L, batch, D, D]) read through the hooks, float64."""
    model = as_float64(model)
    L = model.cfg.n_layers
    last = f"blocks.{L - 1}.hook_resid_post"
    keep = lambda name: name.endswith("hook_resid_pre") or name.endswith("attn.hook_stats") or name == last
    with torch.no_grad():
        _, cache = model.run_with_cache(model._check_tokens(tokens), names_filter=keep)  # float64 [batch, pos, D]
    resid = torch.stack([cache[f"blocks.{l}.hook_resid_pre"] for l in range(L)] + [cache[last]])
    S = torch.stack([cache[f"blocks.{l}.attn.hook_stats"] for l in range(L)])
    return resid, S


def layer_update(P: Float[Tensor, "H D D"], Q: Float[Tensor, "H D D"], S: Float[Tensor, "*b D D"]) -> Tensor:
    """Σ_k P_k S Q_k = [[A, b], [cᵀ, d]] (Lemma 4.3), [*b, D, D]."""
    return einsum(P, S, Q, "h i a, ... a c, h c j -> ... i j")


@dataclass
class ImplicitModel:
    """Theorem 4.1 per layer l = 0..L: x_i^l = M x_i + y_i u, y_i^l = a y_i − ⟨w, x_i⟩, ŷ^l = ⟨w, x_t⟩.

    M, u, a, w come from the Lemma 4.3 recursion (b); T_lstsq is the token map of (a).
    disagreement[l]: max over sequences of max|T_a − T_b| / max|T_b|;
    residual[l]: max over sequences of ‖E⁰ T_aᵀ − E^l‖_F / ‖E^l‖_F (the linear fit of (a));
    prediction_error[l]: max over sequences of |⟨w^l, x_t⟩ − ŷ^l| / (1 + |ŷ^l|), ŷ^l the model's
    own prediction after l layers (−y of the cached query token).
    """

    M: Float[Tensor, "L1 batch d d"]
    u: Float[Tensor, "L1 batch d"]
    a: Float[Tensor, "L1 batch"]
    w: Float[Tensor, "L1 batch d"]
    T_lstsq: Float[Tensor, "L1 batch D D"]
    S: Float[Tensor, "L batch D D"]  # cached per-layer statistics Σ_{j≤n} e_j^l e_j^lᵀ
    pred: Float[Tensor, "L1 batch"]  # the model's own ŷ after l layers
    disagreement: Float[Tensor, "L1"]
    residual: Float[Tensor, "L1"]
    prediction_error: Float[Tensor, "L1"]
    x_t: Float[Tensor, "batch d"]  # the query
    n: int  # context length

    def context(self) -> SpectralContext:
        """The raw context (layer-0 statistics S⁰ and the query) in the eigenbasis of Σ."""
        return SpectralContext.from_stats(self.S[0], self.x_t, self.n)

    @property
    def T(self) -> Float[Tensor, "L1 batch D D"]:
        """The recursion's token map T^l = [[M, u], [−wᵀ, a]]."""
        top = torch.cat([self.M, self.u[..., None]], dim=-1)
        bottom = torch.cat([-self.w, self.a[..., None]], dim=-1)[..., None, :]
        return torch.cat([top, bottom], dim=-2)


def implicit_by_lstsq(resid: Float[Tensor, "L1 batch pos D"]) -> tuple[Tensor, Tensor]:
    """(a): T^l with E^l ≈ E⁰ T^lᵀ by least squares (one QR of E⁰ per sequence for all layers).

    Returns T [L+1, batch, D, D] and the relative residual per layer and sequence [L+1, batch].
    """
    L1, B, pos, D = resid.shape
    if pos < D:
        raise InvalidArgument(f"least squares needs n + 1 >= d + 1 tokens, got {pos} tokens of width {D}")
    E0 = resid[0]
    rhs = resid.permute(1, 2, 0, 3).reshape(B, pos, L1 * D)  # [B, pos, (L+1)·D]
    Qm, R = torch.linalg.qr(E0)  # reduced: Qm [B, pos, D], R [B, D, D]
    X = torch.linalg.solve_triangular(R, Qm.transpose(1, 2) @ rhs, upper=True)  # [B, D, (L+1)·D]
    fit = E0 @ X
    res = (fit - rhs).reshape(B, pos, L1, D).pow(2).sum((1, 3)).sqrt()
    scale = rhs.reshape(B, pos, L1, D).pow(2).sum((1, 3)).sqrt().clamp_min(torch.finfo(E0.dtype).tiny)
    T = X.reshape(B, D, L1, D).permute(2, 0, 3, 1)  # T^l = X_lᵀ
    return T, (res / scale).T


def implicit_by_recursion(P: Tensor, Q: Tensor, S: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(b): Lemma 4.3 from M⁰ = I, u⁰ = 0, a⁰ = 1, w⁰ = 0 with [[A, b], [cᵀ, d]] = Σ_k P_k S^l Q_k.

    P, Q [L, H, D, D]; S [L, batch, D, D]. Returns M [L+1, B, d, d], u [L+1, B, d], a [L+1, B], w [L+1, B, d].
    """
    L, B, D, _ = S.shape
    d = D - 1
    M = torch.eye(d, dtype=S.dtype).expand(B, d, d)
    u, a, w = S.new_zeros(B, d), S.new_ones(B), S.new_zeros(B, d)
    out = [(M, u, a, w)]
    for l in range(L):
        G = layer_update(P[l], Q[l], S[l])
        A, b, c, dd = G[:, :d, :d], G[:, :d, d], G[:, d, :d], G[:, d, d]
        IA = torch.eye(d, dtype=S.dtype) + A
        M, u, a, w = (
            IA @ M - b[:, :, None] * w[:, None, :],  # M^{l+1} = (I + A) M − b wᵀ
            (IA @ u[..., None])[..., 0] + a[:, None] * b,  # u^{l+1} = (I + A) u + a b
            (1 + dd) * a + (c * u).sum(-1),  # a^{l+1} = (1 + d) a + cᵀ u
            (1 + dd)[:, None] * w - (M.transpose(1, 2) @ c[..., None])[..., 0],  # w^{l+1} = (1 + d) w − Mᵀ c
        )
        out.append((M, u, a, w))
    return tuple(torch.stack(t) for t in zip(*out))  # type: ignore[return-value]


def implicit_model(model: LinearTransformer, tokens: Float[Tensor, "batch pos D"]) -> ImplicitModel:
    """Theorem 4.1's (M, u, a, w) for every layer, by (a) least squares and (b) the Lemma 4.3 recursion."""
    model = as_float64(model)
    resid, S = probe_cache(model, tokens)
    P, Q = (t.detach() for t in (model.P, model.Q))
    M, u, a, w = implicit_by_recursion(P, Q, S)
    T_a, res = implicit_by_lstsq(resid)
    x_t = resid[0, :, -1, :-1]
    imp = ImplicitModel(M, u, a, w, T_a, S, -resid[:, :, -1, -1], *(torch.empty(0),) * 3, x_t, resid.shape[2] - 1)
    T_b = imp.T
    scale = T_b.abs().amax((-2, -1))
    imp.disagreement = ((T_a - T_b).abs().amax((-2, -1)) / scale).amax(-1)
    imp.residual = res.amax(-1)
    yhat = einsum(w, x_t, "l b i, b i -> l b")
    imp.prediction_error = ((yhat - imp.pred).abs() / (1 + imp.pred.abs())).amax(-1)
    return imp


# ---------------------------------------------------------------------- known solvers (interp.spectral)
def tune_gd_steps(
    ctx: SpectralContext, L: int, reference: Tensor | None = None, target: Tensor | None = None
) -> Tensor:
    """One step η_k per k = 0..L shared by the batch (η_0 = nan): the GD-k iterate nearest to
    `reference` [L+1, batch, d] (mean squared distance), or the one with the least ½·MSE on the
    query labels `target` [batch] — exactly one of the two."""
    if (reference is None) == (target is None):
        raise InvalidArgument("tune_gd_steps needs exactly one of reference= and target=")
    etas = [torch.tensor(float("nan"), dtype=torch.float64)]
    for k in range(1, L + 1):
        if reference is not None:
            f = lambda t, k=k: ((ctx.gd_weights(k, t.exp()[:, None]) - reference[k]) ** 2).sum(-1).mean(-1)
        else:
            f = lambda t, k=k: ((ctx.gd(k, t.exp()[:, None]) - target) ** 2).mean(-1)
        etas.append(minimize_log(f, -12.0, 0.0).exp())
    return torch.stack(etas)


def gd_iterates(ctx: SpectralContext, etas: Float[Tensor, "L1"]) -> Float[Tensor, "L1 batch d"]:
    """w_k after k = 0..L GD steps, step η_k for the k-step run (w_0 = 0)."""
    out = [torch.zeros_like(ctx.a)] + [ctx.gd_weights(k, etas[k]) for k in range(1, len(etas))]
    return torch.stack(out)


def cosine(a: Tensor, b: Tensor) -> Tensor:
    """cos∠(a, b) over the last axis; nan where either is zero."""
    num = (a * b).sum(-1)
    den = a.norm(dim=-1) * b.norm(dim=-1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, float("nan")))


def rel_error(a: Tensor, ref: Tensor) -> Tensor:
    """‖a − ref‖ / ‖ref‖ over the last axis."""
    return (a - ref).norm(dim=-1) / ref.norm(dim=-1)


def compare_solvers(w: Tensor, ctx: SpectralContext, sigma: Tensor, gd_etas: Tensor) -> dict[str, Tensor]:
    """cos and relative error of w^l [L+1, batch, d] against OLS, oracle ridge (λ = σ²) and GD-l."""
    refs = {
        "ols": ctx.ols_weights(),
        "ridge_oracle": ctx.ridge_weights(sigma.double() ** 2),
        "gd": gd_iterates(ctx, gd_etas),
    }
    out = {}
    for name, ref in refs.items():
        ref = ref.expand_as(w)
        out[f"cos_{name}"], out[f"relerr_{name}"] = cosine(w, ref), rel_error(w, ref)
    return out
