"""The paper's algebraic forms: ω's, Lemma 4.4 terms, momentum, rescaling / effective step,
FULL fitted to the DIAG and rotation-equivariant forms, the weight-space DIAG projection, the
functional DIAG ablation, and GD++ versus a constant-λ ridge (ConstRR).

A layer computes the linear map S ↦ Σ_k P_k S Q_k on symmetric (d+1)×(d+1) statistics; as an
operator it is K[i, j, a, b] = Σ_k P_k[i, a] Q_k[b, j] (F_ij = Σ_ab K_ijab S_ab). Every tensor has the
layer as its first axis; everything is float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from einops import einsum, rearrange
from jaxtyping import Float
from torch import Tensor

from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, evaluate
from interp.files import InvalidArgument, InvalidType
from interp.model import LinearTransformer
from interp.probes.implicit import ImplicitModel, as_float64, cosine, layer_update
from interp.records import Record
from interp.spectral import SpectralContext, minimize_log
from interp.tasks import check_tensor

OMEGA_NAMES = ("omega_xx", "omega_xy", "omega_yx", "omega_yy")
EQUIVARIANT_NAMES = (
    "c1_Sigma",
    "c2_trSigma_I",
    "c3_lambda_I",
    "c4_alpha_b",
    "c5_alpha_c",
    "c6_lambda_d",
    "c7_trSigma_d",
)
BLOCKS = {
    "x->x": (slice(None, -1), slice(None, -1)),
    "y->x": (slice(None, -1), -1),
    "x->y": (-1, slice(None, -1)),
    "y->y": (-1, -1),
}  # blocks A, b, cᵀ, d of the token update


# ---------------------------------------------------------------------- weight space
def layer_operator(P: Float[Tensor, "L H D D"], Q: Float[Tensor, "L H D D"]) -> Float[Tensor, "L D D D D"]:
    """K[l, i, j, a, b] = Σ_k P_k[i, a] Q_k[b, j], symmetrised over (a, b): the map only ever sees
    symmetric S, so its part acting on antisymmetric inputs is functionally null and dropped."""
    K = einsum(P.double(), Q.double(), "l h i a, l h b j -> l i j a b")
    return (K + K.transpose(-1, -2)) / 2


def check_weights(P: Tensor, Q: Tensor) -> None:
    """P and Q: finite floating tensors of one shape [L, H, D, D] with D = d + 1 >= 2 (a model's `.P`, `.Q`)."""
    for name, t in (("P", P), ("Q", Q)):
        check_tensor(name, t, ndim=4)
    if P.shape != Q.shape or P.shape[-1] != P.shape[-2] or P.shape[-1] < 2 or 0 in P.shape:
        raise InvalidArgument(
            f"P and Q must both be [L, H, d+1, d+1] with d >= 1, got {list(P.shape)} and {list(Q.shape)}"
        )
    if not (bool(torch.isfinite(P).all()) and bool(torch.isfinite(Q).all())):
        raise InvalidArgument("P and Q must be finite")


def diag_basis(d: int) -> Float[Tensor, "4 D D D D"]:
    """The four DIAG maps (ω_xx, ω_xy, ω_yx, ω_yy), symmetrised over the input indices like K."""
    D = d + 1
    px, py = torch.diag(torch.cat([torch.ones(d), torch.zeros(1)])), torch.zeros(D, D)
    py[d, d] = 1.0
    pairs = [(px, px), (px, py), (py, px), (py, py)]  # (P, Q) of each map
    P = torch.stack([p for p, _ in pairs])[:, None].double()
    Q = torch.stack([q for _, q in pairs])[:, None].double()
    return layer_operator(P, Q)


@dataclass
class DiagProjection:
    """Orthogonal (Frobenius) projection of each layer's operator on the DIAG subspace.

    omega [L, 4]: the nearest DIAG ω's; share_outside [L]: ‖K − proj‖² / ‖K‖²;
    remainder_sv [L, D²]: singular values of the remainder as a D²×D² operator vec(S) ↦ vec(F);
    block_sv: the same for the remainder restricted to each block of the token update
    ("x->x": A, "y->x": b, "x->y": cᵀ, "y->y": d). Invariant to P_k → cP_k, Q_k → Q_k/c, head
    permutation and a rotation of the x coordinates applied to every layer.
    """

    omega: Float[Tensor, "L 4"]
    share_outside: Float[Tensor, "L"]
    norm: Float[Tensor, "L"]
    remainder_sv: Float[Tensor, "L DD"]
    block_sv: dict[str, Tensor]


def diag_projection(P: Float[Tensor, "L H D D"], Q: Float[Tensor, "L H D D"]) -> DiagProjection:
    """Nearest DIAG ω's of every layer of any (P, Q), with the size and spectrum of what is left."""
    check_weights(P, Q)
    K = layer_operator(P, Q)
    L, D = K.shape[0], K.shape[1]
    basis = diag_basis(D - 1).reshape(4, -1)
    flat = K.reshape(L, -1)
    omega = (flat @ basis.T) / (basis**2).sum(-1)  # the basis is orthogonal: disjoint output blocks
    rem = (flat - omega @ basis).reshape(L, D, D, D, D)
    norm2 = (flat**2).sum(-1)
    share = (rem.reshape(L, -1) ** 2).sum(-1) / norm2.clamp_min(1e-300)
    sv = torch.linalg.svdvals(rem.reshape(L, D * D, D * D))
    block_sv = {name: torch.linalg.svdvals(rem[:, i, j].reshape(L, -1, D * D)) for name, (i, j) in BLOCKS.items()}
    return DiagProjection(omega, share, norm2.sqrt(), sv, block_sv)


def heads_from_operator(K: Float[Tensor, "D D D D"], tol: float = 1e-12) -> tuple[Tensor, Tensor]:
    """(P, Q) [H, D, D] with Σ_k P_k[i, a] Q_k[b, j] = K[i, j, a, b], H the rank of the realigned
    operator R[(i, a), (b, j)] (the fewest heads that realise the map; SVD split, √s to each side)."""
    D = K.shape[0]
    R = rearrange(K.double(), "i j a b -> (i a) (b j)")
    U, s, Vh = torch.linalg.svd(R)
    keep = s > tol * s[0].clamp_min(1e-300)
    root = s[keep].sqrt()
    P = rearrange(U[:, keep] * root, "(i a) h -> h i a", i=D)
    Q = rearrange(Vh[keep] * root[:, None], "h (b j) -> h b j", b=D)
    return P, Q


def diag_layer_matrices(omega: Float[Tensor, "4"], d: int, heads: int = 2) -> tuple[Tensor, Tensor]:
    """(P, Q) [heads, D, D] of a DIAG layer realising ω (the 2 heads of from_omegas, zero-padded)."""
    D = d + 1
    ex = torch.cat([torch.ones(d), torch.zeros(1)]).double()
    ey = 1.0 - ex
    P, Q = torch.zeros(heads, D, D, dtype=torch.float64), torch.zeros(heads, D, D, dtype=torch.float64)
    P[0], Q[0] = torch.diag(ex), torch.diag(omega[0] * ex + omega[1] * ey)
    P[1], Q[1] = torch.diag(ey), torch.diag(omega[2] * ex + omega[3] * ey)
    return P, Q


def layer_omegas(model: LinearTransformer) -> tuple[Float[Tensor, "L 4"], str]:
    """ω's per layer: from the weights for DIAG / GD++ ("weights"), the DIAG projection for FULL ("projection")."""
    if not model.arch.has_omegas:
        return diag_projection(model.P.detach(), model.Q.detach()).omega, "projection"
    return model.omegas().stack().detach().double(), "weights"


# ---------------------------------------------------------------------- fits on the cached statistics
def _blocks(S: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    d = S.shape[-1] - 1
    return S[..., :d, :d], S[..., :d, d], S[..., d, d]


def form_features(S: Float[Tensor, "batch D D"], form: str) -> Float[Tensor, "batch D D k"]:
    """Each column: one map of the form applied to S. DIAG: ω_xx, ω_xy, ω_yx, ω_yy; equivariant:
    A = c1 Σ + c2 tr(Σ) I + c3 λ I, b = c4 α, c = c5 α, d = c6 λ + c7 tr Σ."""
    Sig, alpha, lam = _blocks(S)
    B, D = S.shape[0], S.shape[-1]
    d, eye, tr = D - 1, torch.eye(D - 1, dtype=S.dtype), Sig.diagonal(dim1=-2, dim2=-1).sum(-1)
    feats = []

    def put(A=None, b=None, c=None, dd=None):
        F = S.new_zeros(B, D, D)
        if A is not None:
            F[:, :d, :d] = A
        if b is not None:
            F[:, :d, d] = b
        if c is not None:
            F[:, d, :d] = c
        if dd is not None:
            F[:, d, d] = dd
        feats.append(F)

    if form == "diag":
        put(A=Sig), put(b=alpha), put(c=alpha), put(dd=lam)
    elif form == "equivariant":
        put(A=Sig), put(A=tr[:, None, None] * eye), put(A=lam[:, None, None] * eye)
        put(b=alpha), put(c=alpha), put(dd=lam), put(dd=tr)
    else:
        raise InvalidArgument(f"unknown form {form!r} (diag or equivariant)")
    return torch.stack(feats, dim=-1)


def fit_form(S: Float[Tensor, "batch D D"], F: Float[Tensor, "batch D D"], form: str) -> tuple[Tensor, float]:
    """Least-squares coefficients of F ≈ Σ_k c_k feature_k(S) over all entries of all sequences
    (scikit-learn, no intercept) and its R² (1 − SS_res / SS_tot, SS_tot about the mean entry)."""
    X = form_features(S, form).reshape(-1, 4 if form == "diag" else 7).numpy()
    y = F.reshape(-1).numpy()
    from sklearn.linear_model import LinearRegression  # ~1 s to import: only when a fit is asked for

    reg = LinearRegression(fit_intercept=False).fit(X, y)
    return torch.from_numpy(reg.coef_.copy()), float(reg.score(X, y))


@dataclass
class FormFits:
    """Per layer: DIAG-form coefficients [L, 4] (ω's) and R² [L]; equivariant coefficients [L, 7] and R² [L]."""

    diag: Tensor
    diag_r2: Tensor
    equivariant: Tensor
    equivariant_r2: Tensor


def fit_layer_maps(model: LinearTransformer, S: Float[Tensor, "L batch D D"]) -> FormFits:
    """Fit what each layer computes, S^l ↦ Σ_k P_k S^l Q_k, on the layer's own cached statistics."""
    _check_model(model)
    check_tensor("S", S, ndim=4)
    D = model.cfg.d_model
    if S.shape[0] != model.cfg.n_layers or S.shape[-2:] != (D, D) or S.shape[1] == 0:
        raise InvalidArgument(
            f"S must be [L, batch, d+1, d+1] = [{model.cfg.n_layers}, batch, {D}, {D}] (each layer's statistics, "
            f"blocks.{{l}}.attn.hook_stats), got {list(S.shape)}"
        )
    S = S.double()
    P, Q = model.P.detach().double(), model.Q.detach().double()
    out = {"diag": [], "diag_r2": [], "equivariant": [], "equivariant_r2": []}
    for l in range(S.shape[0]):
        F = layer_update(P[l], Q[l], S[l])
        for form in ("diag", "equivariant"):
            coef, r2 = fit_form(S[l], F, form)
            out[form].append(coef)
            out[f"{form}_r2"].append(r2)
    return FormFits(
        torch.stack(out["diag"]),
        torch.tensor(out["diag_r2"], dtype=torch.float64),
        torch.stack(out["equivariant"]),
        torch.tensor(out["equivariant_r2"], dtype=torch.float64),
    )


def _check_model(model) -> None:
    if not isinstance(model, LinearTransformer):
        raise InvalidType(f"model must be an interp.LinearTransformer, got {type(model).__name__}")


def _check_omega(omega, L: int) -> None:
    """ω's of L layers: a finite floating tensor [L, 4] (ω_xx, ω_xy, ω_yx, ω_yy)."""
    check_tensor("omega", omega)
    if tuple(omega.shape) != (L, 4):
        raise InvalidArgument(
            f"omega must be [L, 4] = [{L}, 4] (ω_xx, ω_xy, ω_yx, ω_yy per layer), got {list(omega.shape)}"
        )
    if not bool(torch.isfinite(omega).all()):
        raise InvalidArgument("omega must be finite")


# ---------------------------------------------------------------------- Lemma 4.4 and friends
@dataclass
class Lemma44:
    """Lemma 4.4 terms per layer l = 0..L-1 and sequence, from ω^l, S^l and the implicit model.

    grad [L+1, batch, d] = Σ (a^l w* − w^l); recursion_error [L]: max over sequences of
    (‖u_pred − u^{l+1}‖ + ‖w_pred − w^{l+1}‖) / (‖u^{l+1}‖ + ‖w^{l+1}‖). Exact for DIAG / GD++ only.
    """

    Lambda: Tensor
    Gamma: Tensor
    s: Tensor
    Pi: Tensor
    Phi: Tensor
    grad: Tensor
    recursion_error: Tensor


def lemma44(imp: ImplicitModel, omega: Float[Tensor, "L 4"], ctx: SpectralContext | None = None) -> Lemma44:
    """Λ, Γ, s, Π, Φ of Lemma 4.4 and a check that they reproduce the Lemma 4.3 recursion."""
    if not isinstance(imp, ImplicitModel):
        raise InvalidType(f"imp must be an interp.ImplicitModel (interp.implicit_model), got {type(imp).__name__}")
    _check_omega(omega, imp.S.shape[0])
    if ctx is not None and not isinstance(ctx, SpectralContext):
        raise InvalidType(f"ctx must be an interp.SpectralContext or None, got {type(ctx).__name__}")
    ctx = imp.context() if ctx is None else ctx
    w_star, rho = ctx.ols_weights(), ctx.rss  # w* = Σ^{-1} α, ρ = Σ_i r_i² on the raw context
    Sig0 = imp.S[0, :, :-1, :-1]
    Sig_l, lam_l = imp.S[:, :, :-1, :-1], imp.S[:, :, -1, -1]
    wxx, wxy, wyx, wyy = (omega[:, k, None] for k in range(4))  # [L, 1]
    M, u, a, w = imp.M[:-1], imp.u[:-1], imp.a[:-1], imp.w[:-1]
    eye = torch.eye(M.shape[-1], dtype=M.dtype)
    grad = einsum(Sig0, imp.a[..., None] * w_star - imp.w, "b i j, l b j -> l b i")  # Σ (a w* − w)
    Mu = M + einsum(u, w_star, "l b i, b j -> l b i j")  # M + u w*ᵀ
    Lam = -(wxy * a**2 * rho)[..., None, None] * eye - wxx[..., None, None] * Sig_l  # Λ = −ω_xy a² ρ I − ω_xx Σ^l
    Gam = (a * wxy)[..., None, None] * Mu  # Γ = a ω_xy (M + u w*ᵀ)
    s = wyy * lam_l  # s = ω_yy λ^l
    Pi = wyx[..., None, None] * M.transpose(-1, -2) @ Mu  # Π = ω_yx Mᵀ (M + u w*ᵀ)
    Phi = (a * rho * wyx)[..., None, None] * M.transpose(-1, -2)  # Φ = a ρ ω_yx Mᵀ
    g = grad[:-1, ..., None]
    u_next = ((eye - Lam) @ u[..., None] + Gam @ g)[..., 0]
    w_next = (1 + s)[..., None] * w - (Pi @ g)[..., 0] - (Phi @ u[..., None])[..., 0]
    num = (u_next - imp.u[1:]).norm(dim=-1) + (w_next - imp.w[1:]).norm(dim=-1)
    den = (imp.u[1:].norm(dim=-1) + imp.w[1:].norm(dim=-1)).clamp_min(1e-300)
    return Lemma44(Lam, Gam, s, Pi, Phi, grad, (num / den).amax(-1))


def momentum(imp: ImplicitModel, grad: Tensor) -> dict[str, Tensor]:
    """‖u^l‖ [L+1, batch], cos(u^l, Σ(a^l w* − w^l)) [L+1, batch] and cos(u^{l+1}, Σ(a^l w* − w^l)) [L, batch]."""
    return {"u_norm": imp.u.norm(dim=-1), "align": cosine(imp.u, grad), "align_next": cosine(imp.u[1:], grad[:-1])}


def rescaling_factor(S: Float[Tensor, "L batch D D"], omega: Float[Tensor, "L 4"]) -> Float[Tensor, "L batch"]:
    """§5.2: every y is multiplied by 1 + ω_yy^l λ^l, λ^l = Σ_i (y_i^l)² (the current residuals)."""
    return 1 + omega[:, 3, None] * S[:, :, -1, -1]


def effective_step(S: Float[Tensor, "L batch D D"], omega: Float[Tensor, "L 4"]) -> Float[Tensor, "L batch"]:
    """§5.3: layer l's GD step −ω_yx^l (1 + ω_xy^{l−1} Σ_i r_i²), r_i = y_i^{l−1} the residuals the
    previous layer's ω_xy read (ω_xy^{−1} = 0); for ω_xy then ω_yx alone, ŷ² = step · ⟨α, x_t⟩."""
    prev = torch.cat([S.new_zeros(1, S.shape[1]), omega[:-1, 1, None] * S[:-1, :, -1, -1]])
    return -omega[:, 2, None] * (1 + prev)


# ---------------------------------------------------------------------- functional ablation
def with_diag_layers(model: LinearTransformer, omega: Float[Tensor, "L 4"], layers) -> LinearTransformer:
    """A float64 FULL copy of `model` whose listed layers are replaced by the DIAG layer of omega[l]."""
    P, Q = model.P.detach().double(), model.Q.detach().double()
    L, H, D, _ = P.shape
    heads = max(H, 2)
    P2, Q2 = (torch.cat([t, t.new_zeros(L, heads - H, D, D)], dim=1) for t in (P, Q))
    for l in layers:
        P2[l], Q2[l] = diag_layer_matrices(omega[l], D - 1, heads)
    return LinearTransformer.from_matrices(P2, Q2, dtype="float64")


@dataclass
class Ablation(Record):
    """Adjusted loss of the model (`base`), with each layer alone (`per_layer` [L]) and with all layers (`all`)
    replaced by their DIAG projection, and the differences to `base`, on `n_seq` shared sequences."""

    base: float
    per_layer: list
    all: float
    delta_per_layer: list
    delta_all: float
    n_seq: int


def diag_ablation(model: LinearTransformer, data: EvalSet, omega: Tensor | None = None) -> Ablation:
    """Adjusted loss with each layer (then all layers) replaced by its DIAG projection, on the same sequences."""
    model = as_float64(model)
    if not isinstance(data, (EvalSet, ScoredSet)):
        raise InvalidType(f"data must be an interp.EvalSet (or a ScoredSet), got {type(data).__name__}")
    if omega is None:
        omega = diag_projection(model.P.detach(), model.Q.detach()).omega
    _check_omega(omega, model.cfg.n_layers)
    L, d = model.cfg.n_layers, model.cfg.d
    preds = {"base": with_diag_layers(model, omega, []), "all": LinearTransformer.from_omegas(omega, d)}
    preds |= {f"layer{l}": with_diag_layers(model, omega, [l]) for l in range(L)}
    loss = {k: v.mean for k, v in evaluate(preds, data).items()}
    base, per_layer = loss["base"], [loss[f"layer{l}"] for l in range(L)]
    return Ablation(base, per_layer, loss["all"], [x - base for x in per_layer], loss["all"] - base, data.n_seq)


# ---------------------------------------------------------------------- GD++ versus ConstRR
def const_ridge_fit(
    ctx: SpectralContext,
    pred: Float[Tensor, "L1 batch"],
    target: Tensor | None = None,
    lo: float = 1e-4,
    hi: float = 1e4,
) -> dict[str, Tensor]:
    """Per layer, the constant λ whose ridge predictions ⟨w_λ, x_t⟩ are nearest (mean squared) to the
    model's ŷ^l; with `target`, also the loss-optimal constant λ (ConstRR of Vladymyrov et al. 2024, Table 1)."""

    def ridge_pred(t: Tensor) -> Tensor:  # t [G] -> [G, batch]
        return ctx.ridge(t.exp()[:, None])

    lams = []
    for l in range(pred.shape[0]):
        f = lambda t, l=l: ((ridge_pred(t) - pred[l]) ** 2).mean(-1)
        lams.append(minimize_log(f, math.log(lo), math.log(hi)).exp())
    out = {"lambda_match": torch.stack(lams)}
    if target is not None:
        f = lambda t: ((ridge_pred(t) - target) ** 2).mean(-1)
        out["lambda_constrr"] = minimize_log(f, math.log(lo), math.log(hi)).exp()
    return out


def const_ridge_mismatch(
    ctx: SpectralContext, pred: Float[Tensor, "L1 batch"], lam: Float[Tensor, "L1"]
) -> Float[Tensor, "L1 batch"]:
    """ŷ^l − ⟨w_λl, x_t⟩ per layer and sequence."""
    return pred - ctx.ridge(lam[:, None])
