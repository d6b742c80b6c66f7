import pytest
import torch

from interp.config import ModelConfig
from interp.model import LinearTransformer
from tests.helpers import gd_construction, random_diag, random_full, small_batch


def reference_forward(P, Q, tokens):
    """Plain per-token loop with explicit scores: e_i += Σ_k P_k Σ_{j≤n} e_j (e_jᵀ Q_k e_i) (README, Conventions)."""
    Z = tokens.clone()
    B, T, D = Z.shape
    n = T - 1
    preds = [-Z[:, -1, -1].clone()]
    for P_l, Q_l in zip(P, Q):
        new = Z.clone()
        for b in range(B):
            for i in range(T):
                upd = torch.zeros(D, dtype=Z.dtype)
                for P_k, Q_k in zip(P_l, Q_l):
                    for j in range(n):
                        upd += P_k @ Z[b, j] * (Z[b, j] @ Q_k @ Z[b, i])
                new[b, i] = Z[b, i] + upd
        Z = new
        preds.append(-Z[:, -1, -1].clone())
    return torch.stack(preds)


def test_forward_matches_per_token_loop_full_multihead():
    model = random_full(d=3, n_layers=3, n_heads=2, scale=0.2)
    batch = small_batch(batch=3, d=3, n=5)
    ref = reference_forward(model.P.detach(), model.Q.detach(), batch.tokens)
    with torch.no_grad():
        per_layer = model.predict_per_layer(batch.tokens)
        out = model(batch.tokens)
    assert per_layer.shape == (4, 3)
    torch.testing.assert_close(per_layer, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, ref[-1], rtol=1e-12, atol=1e-12)
    assert torch.all(per_layer[0] == 0)


@pytest.mark.parametrize("param", ["diag", "gdpp"])
def test_diag_and_gdpp_match_closed_form_update(param):
    """x_i ← x_i + ω_xx Σ x_i + ω_xy y_i α, y_i ← y_i + ω_yx ⟨α, x_i⟩ + ω_yy λ y_i (Vladymyrov et al. 2024, DIAG;
    README, Conventions)."""
    d = 4
    model = random_diag(d=d, n_layers=2, n_heads=3, param=param, scale=0.15)
    batch = small_batch(batch=5, d=d, n=7)
    om = model.omegas()
    if param == "gdpp":
        assert torch.all(om.omega_xy == 0) and torch.all(om.omega_yy == 0)
    x, y = batch.tokens[..., :d].clone(), batch.tokens[..., d].clone()
    for l in range(2):
        xc, yc = x[:, :-1], y[:, :-1]
        Sigma = xc.transpose(1, 2) @ xc
        alpha = (xc * yc[..., None]).sum(1)
        lam = (yc**2).sum(1)
        x_new = x + om.omega_xx[l] * x @ Sigma + om.omega_xy[l] * y[..., None] * alpha[:, None, :]
        y_new = y + om.omega_yx[l] * (x @ alpha[..., None])[..., 0] + om.omega_yy[l] * lam[:, None] * y
        x, y = x_new, y_new
    with torch.no_grad():
        resid = model.residual_stream(batch.tokens)[-1]
    torch.testing.assert_close(resid[..., :d], x, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(resid[..., d], y, rtol=1e-10, atol=1e-12)


def test_single_head_diag_satisfies_omega_identity():
    om = random_diag(d=3, n_layers=4, n_heads=1).omegas()
    torch.testing.assert_close(om.omega_xx * om.omega_yy, om.omega_xy * om.omega_yx)


def test_from_omegas_realises_any_omegas():
    omegas = torch.tensor([[0.1, -0.2, 0.3, -0.05], [-0.02, 0.0, -0.1, 0.2]], dtype=torch.float64)
    model = LinearTransformer.from_omegas(omegas, d=3)
    torch.testing.assert_close(model.omegas().stack(), omegas)


@pytest.mark.parametrize("L", [1, 3])
def test_gd_construction_gives_exact_gd_steps(L):
    """von Oswald et al. 2023: each layer is one GD step on ½Σ(y_i − ⟨w, x_i⟩)² from w = 0 with step η."""
    d, n, eta = 4, 12, 0.03
    model = gd_construction(d, L, eta)
    batch = small_batch(batch=6, d=d, n=n, noise="fixed:0.5")
    x, y = batch.x, batch.y
    w = torch.zeros(6, d, dtype=torch.float64)
    gd_preds = []
    for _ in range(L):
        w = w + eta * ((y - (x @ w[..., None])[..., 0])[..., None] * x).sum(1)
        gd_preds.append((w * batch.x_query).sum(-1))
    with torch.no_grad():
        per_layer = model.predict_per_layer(batch.tokens)
    torch.testing.assert_close(per_layer[1:], torch.stack(gd_preds), rtol=1e-10, atol=1e-10)
    # the same map as the DIAG model with ω_yx = −η in every layer (and nothing else)
    diag = LinearTransformer.from_omegas(torch.tensor([[0.0, 0.0, -eta, 0.0]] * L, dtype=torch.float64), d=d)
    with torch.no_grad():
        torch.testing.assert_close(diag.predict_per_layer(batch.tokens), per_layer, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="diag and gdpp"):
        model.omegas()


def test_hooks_fire_with_stated_shapes():
    B, d, n, H, L = 3, 4, 6, 2, 2
    model = random_full(d=d, n_layers=L, n_heads=H)
    batch = small_batch(batch=B, d=d, n=n)
    out, cache = model.run_with_cache(batch.tokens)
    D, T = d + 1, n + 1
    for l in range(L):
        assert cache[f"blocks.{l}.hook_resid_pre"].shape == (B, T, D)
        assert cache[f"blocks.{l}.attn.hook_stats"].shape == (B, D, D)
        assert cache[f"blocks.{l}.attn.hook_result"].shape == (B, T, H, D)
        assert cache[f"blocks.{l}.hook_attn_out"].shape == (B, T, D)
        assert cache[f"blocks.{l}.hook_resid_post"].shape == (B, T, D)
        # TransformerLens-style addressing
        assert cache["resid_pre", l] is cache[f"blocks.{l}.hook_resid_pre"]
    # S is the context second moment of the layer's input (query excluded)
    ctx = cache["blocks.1.hook_resid_pre"][:, :-1]
    torch.testing.assert_close(cache["blocks.1.attn.hook_stats"], ctx.transpose(1, 2) @ ctx)
    # attn_out is the sum over heads; resid_post = resid_pre + attn_out
    torch.testing.assert_close(cache["blocks.0.attn.hook_result"].sum(2), cache["blocks.0.hook_attn_out"])
    torch.testing.assert_close(cache["resid_post", 0], cache["resid_pre", 0] + cache["attn_out", 0])
    torch.testing.assert_close(out, -cache["resid_post", -1][:, -1, -1])
    with torch.no_grad():  # the hook-free path (second moments only) gives the same prediction
        torch.testing.assert_close(model(batch.tokens), out, rtol=1e-12, atol=1e-12)
    assert model.cfg.n_layers == L


def test_hook_intervention_changes_output():
    model = random_full(d=4, n_layers=2, n_heads=1, scale=0.2)
    batch = small_batch(batch=4, d=4, n=6)
    with torch.no_grad():
        clean = model(batch.tokens)
        ablated = model.run_with_hooks(
            batch.tokens, fwd_hooks=[("blocks.1.hook_attn_out", lambda act, hook: torch.zeros_like(act))]
        )
        one_layer = model.predict_per_layer(batch.tokens)[1]
    assert not torch.allclose(clean, ablated)
    torch.testing.assert_close(ablated, one_layer)  # zeroing the last layer leaves the 1-layer prediction
    with torch.no_grad():  # hooks were removed afterwards
        torch.testing.assert_close(model(batch.tokens), clean)


def test_from_matrices_round_trip_and_validation():
    model = random_diag(d=3, n_layers=2, n_heads=2)
    full = model.to_full()
    batch = small_batch(batch=4, d=3, n=5)
    with torch.no_grad():
        torch.testing.assert_close(full(batch.tokens), model(batch.tokens))
    with pytest.raises(ValueError, match=r"\[L, H, d\+1, d\+1\]"):
        LinearTransformer.from_matrices(torch.zeros(2, 4, 4), torch.zeros(2, 4, 4))


def test_bad_tokens_raise():
    model = LinearTransformer(ModelConfig(d=4, n_layers=1))
    with pytest.raises(ValueError, match="d\\+1 = 5"):
        model(torch.zeros(2, 7, 11))


def test_config_validation():
    with pytest.raises(ValueError, match="n_layers"):
        ModelConfig(n_layers=0)
    with pytest.raises(ValueError, match="param"):
        ModelConfig(param="lowrank")
