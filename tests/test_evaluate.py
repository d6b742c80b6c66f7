"""Adjusted loss (README, Conventions: adjusted loss): determinism, chunking, profiles, per-layer curves, and a
trained 1-layer model."""

import pytest
import torch

from interp.baselines import AdaRR, ConstRR, GDk, oracle_predict
from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import (
    LossEstimate,
    ScoredSet,
    adjusted_loss,
    adjusted_losses,
    dominated,
    evaluate,
    paper_value,
    per_layer_loss,
    per_layer_profile,
    precise,
    sigma_grid,
    sigma_profile,
    skipped_layer_loss,
    skipped_layer_predictor,
)
from interp.model import LinearTransformer
from interp.train import train
from tests.helpers import random_diag, random_variant, small_batch

torch.set_num_threads(1)


def test_same_seed_same_numbers_for_any_chunk():
    data = EvalSet("uniform:2", n_seq=3000, seed=3)
    a = adjusted_loss(AdaRR(), data)
    b = adjusted_loss(AdaRR(), data.replace(chunk=700))
    c = adjusted_loss(AdaRR(), data.replace(seed=4))
    assert a.mean == pytest.approx(b.mean, abs=1e-14) and a.stderr == pytest.approx(b.stderr, rel=1e-10)
    assert a.mean != c.mean and a.n_seq == 3000
    # the batches themselves are the same sequences, whatever the chunk (also across the 10 000-sequence blocks)
    big = EvalSet("uniform:2", n_seq=12_000, seed=3)
    x = torch.cat([b.tokens for b in big.batches()])
    y = torch.cat([b.tokens for b in big.replace(chunk=999).batches()])
    assert torch.equal(x, y) and torch.equal(big.draw().tokens, x) and x.shape[0] == 12_000
    # held in memory with the oracle's loss: the same per-sequence numbers
    torch.testing.assert_close(
        adjusted_losses({"a": AdaRR()}, ScoredSet.of(data))["a"],
        adjusted_losses({"a": AdaRR()}, data)["a"],
        rtol=0,
        atol=0,
    )


def test_evalset_validates_and_describes():
    data = EvalSet("uniform:2", d=5, n=8, n_seq=10, seed=1)
    assert data.describe() == {"noise": "uniform:2", "d": 5, "n": 8, "n_seq": 10, "seed": 1}
    assert data.at_sigma(1.5).describe()["sigma"] == 1.5 and (data.at_sigma(1.5).draw().sigma == 1.5).all()
    b = data.draw()
    assert b.tokens.shape == (10, 9, 6) and b.tokens.dtype == torch.float64
    for bad in (dict(n_seq=0), dict(d=0), dict(chunk=-1), dict(sigma=-1.0)):
        with pytest.raises(ValueError, match="EvalSet"):
            data.replace(**bad)
    with pytest.raises(ValueError, match="noise"):
        EvalSet("gaussian:1")
    assert data.identity() == data.describe() | {"block": 10_000}  # what the sequences depend on (cache keys)
    assert data.replace(chunk=3).identity() == data.identity()


def test_precise_only_where_the_error_supports_a_comparison():
    """A ratio or mark against the paper only where the standard error is within 10% of the value."""
    assert precise(0.05, 0.004) and not precise(0.05, 0.006) and precise(0.0, 0.0) and not precise(0.0, 1e-9)
    assert not precise(float("nan"), 0.1) and not precise(1.0, float("nan"))


def test_one_sequence_carries_the_mean_is_decided_once():
    """interp.evaluate.dominated: what interp eval, interp table and LossEstimate.dominated all mark with ⚠."""
    assert dominated(0.1, 60.0, 1000) and not dominated(0.1, 40.0, 1000)  # 60/1000 > 0.05, 40/1000 < 0.05
    assert not dominated(0.1, None, 1000) and not dominated(0.1, float("nan"), 1000) and not dominated(0.1, 1.0, 0)
    assert not dominated(-5e-18, 4e-14, 1000)  # sigma = 0: every sequence at rounding level, nothing carries the mean
    diff = torch.tensor([0.0] * 99 + [100.0], dtype=torch.float64)
    est = LossEstimate.of(diff)
    assert est.dominated == dominated(est.mean, est.worst, est.n_seq) is True


def test_evalset_draws_inputs_from_x_cov():
    """EvalSet.x_cov (a model trained on x ~ N(0, Λ)): the same seed's sequences with x = L z, L Lᵀ = Λ."""
    cov = [[2.0, 0.6], [0.6, 1.0]]
    plain, shaped = (
        EvalSet("uniform:1", d=2, n=4, n_seq=50, seed=2),
        EvalSet("uniform:1", d=2, n=4, n_seq=50, seed=2, x_cov=cov),
    )
    chol = torch.linalg.cholesky(torch.tensor(cov, dtype=torch.float64))
    torch.testing.assert_close(shaped.draw().x, plain.draw().x @ chol.T)
    torch.testing.assert_close(shaped.draw().x_query, plain.draw().x_query @ chol.T)
    assert shaped.describe()["x_cov"] == cov and "x_cov" not in plain.describe()
    with pytest.raises(ValueError, match="EvalSet.x_cov must be 3×3"):
        plain.replace(d=3, x_cov=cov)


def test_evalset_quad_adds_the_quadratic_term_to_the_same_sequences():
    """EvalSet.quad c (a run trained with --quad): the same seed's sequences, every label and the target + c·(x(1)² − 1)
    (interp.tasks); described only where c ≠ 0, so the paper's task keeps its cache keys."""
    plain, quad = (
        EvalSet("uniform:1", d=3, n=6, n_seq=40, seed=4),
        EvalSet("uniform:1", d=3, n=6, n_seq=40, seed=4, quad=0.5),
    )
    a, b = plain.draw(), quad.draw()
    torch.testing.assert_close(b.tokens[..., :-1], a.tokens[..., :-1], rtol=0, atol=0)
    torch.testing.assert_close(b.tokens[:, :-1, -1], a.tokens[:, :-1, -1] + 0.5 * (a.x[..., 0] ** 2 - 1))
    torch.testing.assert_close(b.target, a.target + 0.5 * (a.x_query[:, 0] ** 2 - 1))
    assert quad.describe() == plain.describe() | {"quad": 0.5} and "quad" not in plain.describe()
    with pytest.raises(TypeError, match="EvalSet.quad must be a number"):
        plain.replace(quad="1")
    with pytest.raises(ValueError, match="EvalSet.quad must be finite"):
        plain.replace(quad=float("inf"))


def test_oracle_has_zero_adjusted_loss_and_stderr_is_paired():
    est = evaluate({"oracle": oracle_predict, "zero": lambda b: torch.zeros(len(b))}, EvalSet("uniform:1", n_seq=4000))
    assert est["oracle"].mean == 0 and est["oracle"].stderr == 0
    # predicting 0 costs ½E[y_t²] = ½E‖w‖² = d/2 = 5, minus the oracle's small loss
    assert est["zero"].mean == pytest.approx(5.0, abs=4 * est["zero"].stderr + 0.05)


def test_sigma_grid_and_profile():
    assert sigma_grid("uniform:5") == [0.5 * i for i in range(13)]
    assert sigma_grid("categorical:1,3", step=1) == [0, 1, 2, 3, 4]
    prof = sigma_profile({"const": ConstRR(1.0), "ada": AdaRR()}, [0.0, 1.0, 3.0], EvalSet("uniform:5", n_seq=2000))
    assert prof["const"][1].mean == pytest.approx(0.0, abs=1e-12)  # λ = 1 is the oracle at σ = 1
    assert prof["ada"][0].mean == pytest.approx(0.0, abs=1e-12)  # noiseless: σ̂² = 0 is exact
    assert prof["const"][2].mean > 0.1 and len(prof["ada"]) == 3


def test_per_layer_of_gd_construction_matches_gd_k():
    # von Oswald et al.: ω_yx = −η per layer gives exactly k GD steps after k layers (von Oswald et al. 2023)
    eta = 0.02
    model = LinearTransformer.from_omegas(torch.tensor([[0.0, 0.0, -eta, 0.0]] * 3), d=10)
    data = EvalSet("uniform:3", n_seq=3000)
    curve = per_layer_loss(model, data)
    ref = [adjusted_loss(GDk(k, eta) if k else (lambda b: torch.zeros(len(b))), data).mean for k in range(4)]
    assert [c.mean for c in curve] == pytest.approx(ref, rel=1e-6)  # float64; only the order of sums differs
    grid = per_layer_profile(model, [0.0, 2.0], data.replace(n_seq=1000))
    assert len(grid) == 4 and len(grid[0]) == 2 and grid[3][0].mean < grid[1][0].mean


def test_paper_values():
    assert paper_value("full", "uniform:5", 4) == 0.065
    assert paper_value("constrr", "categorical:1,3") == 0.222
    assert paper_value("diag", "uniform:5", 9) is None and paper_value("adarr", "fixed:1") is None


@pytest.mark.slow
def test_trained_one_layer_model_reaches_the_closed_form(tmp_path):
    """One layer: the optimum is ŷ = η⟨α, x_t⟩, η = 1/(n + d + 1 + E σ²), with
    E½(ŷ − y_t)² = ½ d (1 − n η) in closed form (one layer, derived)."""
    noise, d, n = "uniform:5", 10, 20
    eta = 1 / (n + d + 1 + 25 / 3)
    closed_mse = 0.5 * d * (1 - n * eta)  # ≈ 2.458
    cfg = TrainConfig(
        model=ModelConfig(d=d, n_layers=1, param="diag"),
        noise=noise,
        seed=0,
        steps=300,
        batch=1024,
        n_checkpoints=2,
        resume_every=10_000,
        log_every=100,
    )
    model = train(cfg, tmp_path / "run", progress=False).model
    omega_yx = model.omegas().omega_yx.item()
    assert -omega_yx == pytest.approx(eta, rel=0.03)
    data = EvalSet(noise, d=d, n=n, n_seq=40_000)
    est = evaluate({"model": model, "closed": GDk(1, eta)}, data)
    # the oracle's ½·MSE on the same sequences turns the closed-form ½·MSE into an adjusted loss
    oracle_mse = torch.cat([0.5 * (oracle_predict(b) - b.target) ** 2 for b in data.batches()]).mean().item()
    closed_adjusted = closed_mse - oracle_mse
    assert est["closed"].mean == pytest.approx(closed_adjusted, abs=4 * est["closed"].stderr + 0.01)
    assert est["model"].mean == pytest.approx(closed_adjusted, abs=0.02)
    assert est["model"].mean >= est["closed"].mean - 1e-3  # nothing beats the one-layer optimum
    assert est["model"].mean == pytest.approx(paper_value("diag", noise, 1), abs=0.03)  # Table 1: 0.906


def _skipped(model, batch) -> torch.Tensor:
    return skipped_layer_predictor(model)(batch)


def test_skipping_a_diag_layer_is_setting_its_omegas_to_zero():
    """Row l of skipped_layer_predictor against a second construction: the DIAG model rebuilt from its ω's with
    layer l's four ω's set to 0 (its update of every token is then 0)."""
    model, batch = random_diag(n_layers=3, scale=0.3), small_batch(d=4)
    skipped = _skipped(model, batch)
    omega = model.omegas().stack().detach()
    for layer in range(3):
        zeroed = omega.clone()
        zeroed[layer] = 0.0
        want = LinearTransformer.from_omegas(zeroed, 4)(batch.tokens)
        assert (want - model(batch.tokens)).abs().max() > 1e-3  # the layer matters
        torch.testing.assert_close(skipped[layer], want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(_skipped(model, batch), skipped, rtol=0, atol=0)  # no hook state carried over
    data = EvalSet("uniform:1", d=4, n=8, n_seq=64)
    for layer, est in enumerate(skipped_layer_loss(model, data)):  # the same through skipped_layer_loss
        zeroed = omega.clone()
        zeroed[layer] = 0.0
        assert est.mean == pytest.approx(adjusted_loss(LinearTransformer.from_omegas(zeroed, 4), data).mean, rel=1e-12)


def test_skipping_a_delta_layer_is_beta_zero_and_an_ffn_layer_is_zero_weights():
    """DeltaNet: row l is the model whose β is 0 in layer l only (the delta rule's identity layer). FULL + ReLU FFN:
    row l is the model with layer l's P and FFN output weights set to 0 (attention and FFN both skipped)."""
    batch = small_batch(d=4)
    delta = random_variant(n_layers=3, attention="delta")
    skipped = _skipped(delta, batch)
    for layer in range(3):
        hook = (f"blocks.{layer}.attn.hook_beta", lambda t, hook: torch.zeros_like(t))
        with torch.no_grad():
            want = delta.run_with_hooks(batch.tokens, fwd_hooks=[hook])
        assert (want - delta(batch.tokens)).abs().max() > 1e-3
        torch.testing.assert_close(skipped[layer], want, rtol=1e-12, atol=1e-12)
    ffn = random_variant(n_layers=3, mlp="relu")
    skipped = _skipped(ffn, batch)
    for layer in range(3):
        zeroed = random_variant(n_layers=3, mlp="relu")
        with torch.no_grad():
            zeroed.blocks[layer].attn.P.zero_()
            zeroed.blocks[layer].mlp.W_out.zero_()
            want = zeroed(batch.tokens)
        assert (want - ffn(batch.tokens)).abs().max() > 1e-3
        torch.testing.assert_close(skipped[layer], want, rtol=1e-12, atol=1e-12)


def test_skipped_layers_pair_through_adjusted_losses():
    """The [L, batch] predictor goes through adjusted_losses as [L, n_seq]; a one-layer model with its only layer
    skipped reads the query's empty y slot, ŷ = 0, so it pairs exactly with the zero predictor."""
    model = random_diag(d=10, n_layers=1, scale=0.3)
    data = EvalSet("uniform:1", d=10, n=20, n_seq=64)
    diffs = adjusted_losses(
        {"skip": skipped_layer_predictor(model), "zero": lambda b: torch.zeros_like(b.target)}, data
    )
    assert diffs["skip"].shape == (1, 64)
    torch.testing.assert_close(diffs["skip"][0], diffs["zero"], rtol=0, atol=0)
