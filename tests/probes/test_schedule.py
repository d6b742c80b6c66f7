"""§5.3's layer schedule (interp.probes.schedule): block sizes, single-block ablation and labels, in closed form."""

from __future__ import annotations

import math

import pytest
import torch

from interp.config import ModelConfig
from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, adjusted_losses
from interp.model import LinearTransformer
from interp.probes import Schedule, block_ablation, block_sizes, block_zeroed, layer_schedule, probe_model
from interp.probes.implicit import layer_update, probe_cache
from interp.probes.schedule import BLOCKS, block_masks, hurts, schedule_labels, unablated
from interp.tasks import TaskBatch

D_, N_ = 5, 10  # task size of these tests


def evalset(n_seq: int, seed: int = 0, noise: str = "uniform:5") -> EvalSet:
    return EvalSet(noise, d=D_, n=N_, n_seq=n_seq, seed=seed)


def random_model(param: str, L: int = 3, H: int = 2, scale: float = 0.05, seed: int = 0) -> LinearTransformer:
    g = torch.Generator().manual_seed(seed)
    cfg = ModelConfig(d=D_, n_layers=L, n_heads=H, param=param, dtype="float64")
    model = LinearTransformer(cfg, init=False)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model.eval()


def context_parts(tokens):
    X, y = tokens[:, :-1, :D_], tokens[:, :-1, D_]
    return X, y, (X * y[..., None]).sum(1)  # α = Σ y_i x_i


def two_step_model() -> LinearTransformer:
    """Layer 1 only ω_xy (x_i += ω_xy α y_i, so layer 2 reads α' = α (1 + ω_xy λ)), layer 2 only ω_yx: the §5.3
    pair, with ŷ = a ⟨α, x_t⟩ + b λ ⟨α, x_t⟩ fitted by least squares (a = −ω_yx, ω_xy = b / a)."""
    fit = evalset(10_000, seed=3).draw()
    _, y, alpha = context_parts(fit.tokens)
    g = (alpha * fit.tokens[:, -1, :D_]).sum(-1)
    lam = (y**2).sum(1)
    a, b = torch.linalg.lstsq(torch.stack([g, lam * g], -1), fit.target[:, None]).solution[:, 0].tolist()
    return LinearTransformer.from_omegas(torch.tensor([[0, b / a, 0, 0], [0, 0, -a, 0]], dtype=torch.float64), D_)


# ---------------------------------------------------------------------- sizes
def test_diag_update_is_S_times_omega_and_sizes_are_its_four_terms():
    """For DIAG, A = S ⊙ Ω blockwise, so the four relative sizes are |ω_xx|‖XΣ‖/‖X‖, |ω_xy|‖α‖‖y‖/‖X‖,
    |ω_yx|‖Xα‖/‖y‖ and |ω_yy|λ (λ = Σ y_i²), per sequence, with the layer's own X, y, Σ, α, λ."""
    model = random_model("diag", L=3)
    tokens = evalset(300).draw().tokens
    resid, S = probe_cache(model, tokens)
    omega = model.omegas().stack().detach()
    sizes = block_sizes(model, tokens)
    assert sizes.shape == (3, 300, 4)
    for l in range(3):
        A = layer_update(model.P.detach()[l], model.Q.detach()[l], S[l])
        Om = torch.full((D_ + 1, D_ + 1), omega[l, 0].item(), dtype=torch.float64)
        Om[:D_, D_], Om[D_, :D_], Om[D_, D_] = omega[l, 1], omega[l, 2], omega[l, 3]
        torch.testing.assert_close(A, S[l] * Om, rtol=1e-12, atol=1e-15)
        X, y, alpha = context_parts(resid[l])
        Sig = S[l][:, :D_, :D_]
        xn, yn = X.pow(2).sum((1, 2)).sqrt(), y.norm(dim=-1)
        want = torch.stack(
            [
                omega[l, 0].abs() * (X @ Sig).pow(2).sum((1, 2)).sqrt() / xn,
                omega[l, 1].abs() * alpha.norm(dim=-1) * yn / xn,
                omega[l, 2].abs() * (X @ alpha[..., None]).squeeze(-1).norm(dim=-1) / yn,
                omega[l, 3].abs() * S[l][:, D_, D_],
            ],
            dim=-1,
        )
        torch.testing.assert_close(sizes[l], want, rtol=1e-10, atol=1e-15)


def test_one_gd_step_is_a_pure_y_step():
    """ω = (0, 0, −η, 0): the update is −η ⟨α, x_i⟩ on the labels only. The x<-x, x<-y, y<-y sizes are exactly 0;
    zeroing y<-x leaves the zero predictor (its increase is the zero predictor's loss minus GD-1's); zeroing any
    other block changes nothing, to the last bit; the label is "y-step"."""
    eta = 0.05
    model = LinearTransformer.from_omegas(torch.tensor([[0.0, 0.0, -eta, 0.0]], dtype=torch.float64), D_)
    data, abl = evalset(500), evalset(3_000, seed=1)
    s = layer_schedule(model, data, abl)
    sizes = block_sizes(model, data.draw().tokens)
    assert sizes[0][:, [0, 1, 3]].abs().max().item() == 0.0
    X, y, alpha = context_parts(data.draw().tokens)
    yx = eta * (X @ alpha[..., None]).squeeze(-1).norm(dim=-1) / y.norm(dim=-1)
    torch.testing.assert_close(sizes[0][:, 2], yx, rtol=1e-12, atol=0)
    assert s.relative.tolist()[0][1] == 0.0 and s.labels == ["y-step"] and s.pattern == "y"
    inc = s.increase.tolist()[0]
    assert inc[0] == inc[1] == inc[3] == 0.0
    direct = adjusted_losses({"zero": lambda b: torch.zeros_like(b.target), "gd": model}, abl)
    assert math.isclose(inc[2], (direct["zero"] - direct["gd"]).mean().item(), rel_tol=1e-9)
    assert math.isclose(s.base, direct["gd"].mean().item(), rel_tol=1e-12)


def test_x_from_y_then_y_step():
    """The §5.3 pair: layer 1 only ω_xy (an x-from-y layer), layer 2 only ω_yx (the y-step it feeds). Sizes of the
    absent blocks are exactly 0, the increases of zeroing the absent blocks exactly 0, and zeroing layer 1's x<-y
    costs what the closed form says: the prediction falls back from a(1 + (b/a)λ)⟨α, x_t⟩ to a⟨α, x_t⟩."""
    model = two_step_model()
    omega = model.omegas().stack()
    data, abl = evalset(1_000), evalset(4_000, seed=1)
    s = layer_schedule(model, data, abl)
    rel, inc = s.relative.tolist(), s.increase.tolist()
    assert rel[0][0] == rel[0][2] == rel[0][3] == 0.0 and rel[0][1] > 0
    assert rel[1][0] == rel[1][1] == rel[1][3] == 0.0 and rel[1][2] > 0
    assert [inc[0][k] for k in (0, 2, 3)] == [0.0] * 3 and [inc[1][k] for k in (0, 1, 3)] == [0.0] * 3
    assert s.labels == ["x-from-y", "y-step"] and s.pattern == "x y"

    def closed(with_xy: bool):
        def predict(batch):
            _, y, alpha = context_parts(batch.tokens)
            g = (alpha * batch.tokens[:, -1, :D_]).sum(-1)
            scale = 1 + omega[0, 1] * (y**2).sum(1) if with_xy else 1.0
            return -omega[1, 2] * scale * g

        return predict

    direct = adjusted_losses({"model": closed(True), "no_xy": closed(False)}, abl)
    assert math.isclose(inc[0][1], (direct["no_xy"] - direct["model"]).mean().item(), rel_tol=1e-8)
    assert inc[0][1] > 0.05 * s.base and inc[0][1] > 2 * s.increase_stderr.tolist()[0][1]


# ---------------------------------------------------------------------- FULL
def test_full_ablation_zeroes_exactly_one_block_of_one_layer():
    """block_zeroed on FULL: the layer computes A − E_R A E_C on its own S (checked at layer 1, whose S the
    ablation cannot change), every other layer is untouched."""
    model = random_model("full", L=2, H=2, scale=0.1)
    tokens = evalset(50).draw().tokens
    _, S = probe_cache(model, tokens)
    A = layer_update(model.P.detach()[0], model.Q.detach()[0], S[0])
    for b in BLOCKS:
        ER, EC = block_masks(D_, b)
        ab = block_zeroed(model, 0, b)
        _, S2 = probe_cache(ab, tokens)
        torch.testing.assert_close(S2[0], S[0], rtol=0, atol=0)
        A2 = layer_update(ab.P.detach()[0], ab.Q.detach()[0], S2[0])
        torch.testing.assert_close(A2, A - ER @ A @ EC, rtol=0, atol=1e-13 * A.abs().max().item())
        torch.testing.assert_close(ab.P.detach()[1, :2], model.P.detach()[1], rtol=0, atol=0)
        assert ab.P.detach()[1, 2:].abs().max() == 0 and ab.Q.detach()[1, 2:].abs().max() == 0
    with pytest.raises(ValueError, match="unknown block"):
        block_zeroed(model, 0, "x->y")
    with pytest.raises(ValueError, match="layer"):
        block_zeroed(model, 2, "x<-y")


def test_full_copy_of_a_diag_model_gives_the_same_schedule():
    """model.to_full(): the same block sizes (true P, Q and S, against S ⊙ Ω) and the same increases and labels
    (partner heads against ω set to 0): two computations of one schedule."""
    diag = LinearTransformer.from_omegas(
        torch.tensor(
            [*two_step_model().omegas().stack().tolist(), [-0.01, -0.001, -0.02, -0.001]], dtype=torch.float64
        ),
        D_,
    )
    data, abl = evalset(800), evalset(3_000, seed=1)
    a, b = layer_schedule(diag, data, abl), layer_schedule(diag.to_full(), data, abl)
    torch.testing.assert_close(b.relative, a.relative, rtol=1e-10, atol=1e-15)
    torch.testing.assert_close(b.increase, a.increase, rtol=1e-7, atol=1e-12)
    assert b.labels == a.labels and a.pattern == "x y y", a.pattern
    assert math.isclose(a.base, b.base, rel_tol=1e-10)


def test_zeroing_a_block_whose_weights_are_zero_changes_nothing():
    """GD++ has q_y = 0, so its x<-y and y<-y blocks vanish: zeroing them (DIAG path, and FULL path on its
    to_full()) gives exactly 0; so does zeroing the last layer's x-rows (never read)."""
    model = random_model("gdpp", L=3, H=1, scale=0.1, seed=4)
    abl = evalset(1_000, seed=1)
    for m in (model, model.to_full()):
        res = block_ablation(m, abl)
        inc = [[e.mean for e in row] for row in res.increase]
        assert all(row[1] == 0.0 and row[3] == 0.0 for row in inc), inc
        assert inc[-1][0] == 0.0 and inc[-1][1] == 0.0
        assert res.n_seq == 1_000 and all(n == 0 for row in res.blowups for n in row)
    sizes = block_sizes(model, abl.draw().tokens)
    assert sizes[:, :, [1, 3]].abs().max().item() == 0.0
    base = adjusted_losses({"a": model, "b": unablated(model)}, abl)  # the rebuilt model is the same function
    torch.testing.assert_close(base["a"], base["b"], rtol=1e-9, atol=1e-12)


def test_sequences_where_the_model_itself_blows_up_are_left_out():
    """A sequence on which the unablated model's adjusted loss exceeds 100·d (here: one context scaled by 30) would
    carry the standard error of every increase; it is left out of base and increase, and counted."""
    model = two_step_model()
    batch = evalset(500, seed=1).draw()
    tokens = batch.tokens.clone()
    tokens[0] *= 30
    scored = ScoredSet.of_batches([TaskBatch(tokens, batch.target, batch.sigma, batch.w)])
    res = block_ablation(model, scored)
    assert res.n_seq == 500 and res.excluded == 1 and res.base.n_seq == 499
    rest = (batch.target, batch.sigma, batch.w)
    clean = block_ablation(model, ScoredSet.of_batches([TaskBatch(*(t[1:] for t in (tokens, *rest)))]))
    assert math.isclose(res.base.mean, clean.base.mean, rel_tol=1e-12)
    assert [[e.mean for e in row] for row in res.increase] == [[e.mean for e in row] for row in clean.increase]


# ---------------------------------------------------------------------- labels and the record
def test_labelling_rule():
    assert hurts(0.2, 0.05, base=1.0) and not hurts(0.04, 0.001, base=1.0)  # the 5 % threshold
    assert not hurts(0.2, 0.11, base=1.0)  # under 2 standard errors
    assert hurts(0.01, 1e9, base=1.0, blowups=3)  # a blow-up hurts whatever the standard error
    assert hurts(float("inf"), float("nan"), base=1.0) and hurts(None, None, base=1.0)  # non-finite (JSON null)
    assert hurts(1e-3, 1e-4, base=-0.1)  # a negative base: only the standard-error test
    inc = [[0.0, 0.3, 0.0, 0.0], [0.0, 0.0, 0.3, 0.0], [0.0, 0.3, 0.3, 0.0], [5.0, 0.0, 0.0, 5.0]]
    se = [[0.01] * 4] * 4
    assert schedule_labels(inc, se, 1.0) == ["x-from-y", "y-step", "both", "neither"]
    assert schedule_labels(inc, se, 1.0, rel=0.5) == ["neither"] * 4
    assert schedule_labels(inc, se, 1.0, blowups=[[0] * 4, [0] * 4, [0] * 4, [0, 1, 0, 0]])[3] == "x-from-y"


def test_record_reads_back_and_relabels():
    s = layer_schedule(two_step_model(), evalset(300), evalset(2_000, seed=1))
    back = Schedule.from_json(s.to_json())
    assert back.labels == s.labels and back.relative == s.relative.tolist() and back.blowups == s.blowups
    assert back.relabel() == s.labels and back.relabel(rel=1e9) == ["neither", "neither"]
    assert set(s.to_json()) == {
        "blocks",
        "relative",
        "n_seq",
        "rel_threshold",
        "z",
        "base",
        "base_stderr",
        "increase",
        "increase_stderr",
        "blowups",
        "labels",
        "ablation_seq",
        "excluded",
    }
    sizes_only = Schedule.of(block_sizes(two_step_model(), evalset(100).draw().tokens))
    assert (
        sizes_only.labels is None
        and sizes_only.pattern is None
        and set(sizes_only.to_json())
        == {
            "blocks",
            "relative",
            "n_seq",
            "rel_threshold",
            "z",
        }
    )
    with pytest.raises(ValueError, match="no ablation"):
        sizes_only.relabel()
    with pytest.raises(ValueError, match="d = 5"):
        layer_schedule(LinearTransformer.from_omegas(torch.zeros(1, 4), 3), evalset(10))


def test_probe_model_carries_the_schedule():
    """probe_model's schedule: sizes on the probe sequences (any chunk), ablation on the seed + 1 ones."""
    model = two_step_model()
    data = evalset(400).replace(chunk=150)
    rec = probe_model(model, data, fit_seq=256, ablation_seq=0, schedule_seq=1_500)
    alone = layer_schedule(model, data, data.replace(n_seq=1_500, seed=1, sigma=None))
    assert rec.ablation is None and rec.schedule.labels == alone.labels == ["x-from-y", "y-step"]
    torch.testing.assert_close(
        torch.tensor(rec.schedule.relative, dtype=torch.float64), alone.relative, rtol=1e-12, atol=0
    )
    assert rec.schedule.increase == alone.increase.tolist() and rec.schedule.ablation_seq == 1_500
    none = probe_model(model, data, fit_seq=256, ablation_seq=0)
    assert none.schedule.labels is None and len(none.schedule.relative) == 2
