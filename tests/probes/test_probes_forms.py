"""The paper's algebraic forms (interp.probes.forms): DIAG / equivariant fits, Lemma 4.4, projection, ablation."""

from __future__ import annotations

import torch

from interp.config import ModelConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.model import LinearTransformer
from interp.probes import (
    diag_ablation,
    diag_projection,
    effective_step,
    fit_layer_maps,
    implicit_model,
    layer_omegas,
    lemma44,
    rescaling_factor,
    with_diag_layers,
)
from interp.probes.forms import const_ridge_fit, heads_from_operator, layer_update
from interp.tasks import sample_tasks


def tasks(batch, d, n, noise="uniform:2", seed=1):
    return sample_tasks(batch, d, n, noise, torch.Generator().manual_seed(seed), dtype=torch.float64)


def random_diag(d, L, H, param="diag", scale=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    model = LinearTransformer(ModelConfig(d=d, n_layers=L, n_heads=H, param=param, dtype="float64"), init=False)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model


def test_diag_model_fits_diag_form_exactly_and_returns_its_omegas():
    model = random_diag(6, 3, 2, scale=0.2)
    omega = model.omegas().stack().detach()
    imp = implicit_model(model, tasks(200, 6, 12).tokens)
    fits = fit_layer_maps(model, imp.S)
    torch.testing.assert_close(fits.diag, omega, rtol=1e-9, atol=1e-12)
    assert (fits.diag_r2 > 1 - 1e-12).all() and (fits.equivariant_r2 > 1 - 1e-12).all()
    torch.testing.assert_close(fits.equivariant[:, [0, 3, 4, 5]], omega, rtol=1e-9, atol=1e-12)
    assert fits.equivariant[:, [1, 2, 6]].abs().max() < 1e-10
    proj = diag_projection(model.P.detach(), model.Q.detach())
    torch.testing.assert_close(proj.omega, omega, rtol=1e-12, atol=1e-14)
    assert proj.share_outside.max() < 1e-24 and proj.remainder_sv.max() < 1e-12
    torch.testing.assert_close(layer_omegas(model)[0], omega)


def test_equivariant_fit_recovers_planted_coefficients():
    d, n = 5, 10
    D = d + 1
    c = torch.tensor([0.03, -0.02, 0.01, -0.05, 0.04, -0.015, 0.025], dtype=torch.float64)
    e = torch.eye(D, dtype=torch.float64)
    ex = e[:, :d] @ e[:d]  # projector on the x coordinates
    ed = e[d]
    K = (
        c[0] * torch.einsum("ia,jb->ijab", ex, ex)  # A = c1 Σ
        + c[1] * torch.einsum("ij,ab->ijab", ex, ex)  # + c2 tr(Σ) I
        + c[2] * torch.einsum("ij,a,b->ijab", ex, ed, ed)  # + c3 λ I
        + c[3] * torch.einsum("ia,j,b->ijab", ex, ed, ed)  # b = c4 α
        + c[4] * torch.einsum("i,a,jb->ijab", ed, ed, ex)  # c = c5 α
        + c[5] * torch.einsum("i,j,a,b->ijab", ed, ed, ed, ed)  # d = c6 λ
        + c[6] * torch.einsum("i,j,ab->ijab", ed, ed, ex)
    )  # + c7 tr Σ
    P, Q = heads_from_operator(K)
    model = LinearTransformer.from_matrices(P[None], Q[None])
    batch = tasks(300, d, n)
    S = implicit_model(model, batch.tokens).S
    torch.testing.assert_close(layer_update(P, Q, S[0]), torch.einsum("ijab,nab->nij", K, S[0]))
    fits = fit_layer_maps(model, S)
    torch.testing.assert_close(fits.equivariant[0], c, rtol=1e-8, atol=1e-12)
    assert fits.equivariant_r2[0] > 1 - 1e-12
    assert fits.diag_r2[0] < 0.999  # the c2, c3, c7 terms are outside the DIAG form
    torch.testing.assert_close(fits.diag[0], c[[0, 3, 4, 5]], rtol=0.5, atol=0.05)
    assert diag_projection(P[None], Q[None]).share_outside[0] > 0.01


def test_projection_is_invariant_to_rescaling_permutation_and_rotation():
    g = torch.Generator().manual_seed(4)
    L, H, d = 2, 3, 5
    P, Q = (torch.randn(L, H, d + 1, d + 1, generator=g, dtype=torch.float64) for _ in range(2))
    U, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    R = torch.eye(d + 1, dtype=torch.float64)
    R[:d, :d] = U
    scale = torch.tensor([2.0, -0.5, 3.0], dtype=torch.float64)[None, :, None, None]
    perm = [2, 0, 1]
    a = diag_projection(P, Q)
    b = diag_projection((R @ P @ R.T * scale)[:, perm], (R @ Q @ R.T / scale)[:, perm])
    torch.testing.assert_close(a.omega, b.omega, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a.share_outside, b.share_outside, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a.remainder_sv, b.remainder_sv, rtol=1e-8, atol=1e-10)
    for k in a.block_sv:
        torch.testing.assert_close(a.block_sv[k], b.block_sv[k], rtol=1e-8, atol=1e-10)
    assert ((a.share_outside > 0.5) & (a.share_outside < 1)).all()


def test_lemma44_reproduces_the_recursion_for_diag_and_gdpp():
    for param, H in (("diag", 2), ("diag", 1), ("gdpp", 3)):
        model = random_diag(5, 3, H, param=param, scale=0.15, seed=H)
        imp = implicit_model(model, tasks(100, 5, 11).tokens)
        lm = lemma44(imp, model.omegas().stack().detach())
        assert lm.recursion_error.max() < 1e-10, (param, H, lm.recursion_error)
        assert lm.Lambda.shape == (3, 100, 5, 5) and lm.s.shape == (3, 100)


def test_rescaling_and_effective_step_match_sections_52_53():
    d, n = 6, 15
    batch = tasks(80, d, n, noise="uniform:3")
    # §5.3: ω_xy layer, then ω_yx layer: ŷ² = −ω_yx (1 + ω_xy Σ_i y_i²) ⟨α, x_t⟩
    omega = torch.tensor([[0, -0.01, 0, 0], [0, 0, -0.04, 0]], dtype=torch.float64)
    imp = implicit_model(LinearTransformer.from_omegas(omega, d), batch.tokens)
    alpha = imp.S[0, :, :d, d]
    step = effective_step(imp.S, omega)
    torch.testing.assert_close(imp.pred[2], step[1] * (alpha * batch.x_query).sum(-1), rtol=1e-10, atol=1e-12)
    # §5.2: a layer with ω_yx then one with only ω_yy multiplies the prediction by 1 + ω_yy λ^1
    omega = torch.tensor([[0, 0, -0.04, 0], [0, 0, 0, -0.002]], dtype=torch.float64)
    imp = implicit_model(LinearTransformer.from_omegas(omega, d), batch.tokens)
    torch.testing.assert_close(imp.pred[2], rescaling_factor(imp.S, omega)[1] * imp.pred[1], rtol=1e-10, atol=1e-12)
    assert (rescaling_factor(imp.S, omega)[1] < 1).all()


def test_ablation_of_a_diag_model_changes_nothing():
    d = 10
    omega = torch.tensor([[-0.01, -0.002, -0.03, -0.001], [0.0, 0.0, -0.05, -0.0005]], dtype=torch.float64)
    model = LinearTransformer.from_omegas(omega, d)
    data = EvalSet("uniform:2", d=d, n=20, n_seq=2_000)
    res = diag_ablation(model, data)
    assert abs(res.delta_all) < 1e-10 and max(abs(x) for x in res.delta_per_layer) < 1e-10
    assert 0 < res.base < 5 and res.n_seq == 2_000
    # a FULL model with an off-DIAG part does change when projected
    g = torch.Generator().manual_seed(0)
    full = with_diag_layers(model, omega, [])
    with torch.no_grad():
        full.blocks[1].attn.Q.add_(0.01 * torch.randn(full.blocks[1].attn.Q.shape, generator=g, dtype=torch.float64))
    res = diag_ablation(full, data)
    assert abs(res.delta_per_layer[1]) > 1e-4 and abs(res.delta_per_layer[0]) < 1e-10
    assert res.base == adjusted_loss(full, data).mean  # the same sequences as the one adjusted loss


def test_const_ridge_match_recovers_a_constant_lambda():
    d, n = 10, 20
    batch = tasks(500, d, n, noise="uniform:3")
    imp = implicit_model(LinearTransformer.from_omegas(torch.zeros(1, 4, dtype=torch.float64), d), batch.tokens)
    ctx = imp.context()
    pred = torch.stack([ctx.ridge(lam) for lam in (0.5, 7.0)])
    out = const_ridge_fit(ctx, pred, batch.target)
    torch.testing.assert_close(out["lambda_match"], torch.tensor([0.5, 7.0], dtype=torch.float64), rtol=1e-5, atol=0)
    assert 0.5 < out["lambda_constrr"] < 20
