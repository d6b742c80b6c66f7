"""Drift metrics (interp.probes.drift): invariances, a monotone synthetic FULL -> DIAG trajectory, DIAG is zero."""

from __future__ import annotations

import pytest
import torch

from interp.evalset import EvalSet
from interp.evaluate import ScoredSet, adjusted_losses, evaluate
from interp.model import LinearTransformer
from interp.probes.drift import (
    DriftData,
    DriftRecord,
    drift_record,
    drift_trajectory,
    effective_rank,
    functional_metrics,
    offdiag_part,
    scalar_identity_deviation,
    weight_metrics,
)
from interp.tasks import TaskBatch, sample_tasks
from tests.helpers import random_diag, random_full

D_, N_ = 4, 10  # small problems: d = 4, n = 10


def batch(size=2_000, seed=3, noise="uniform:1"):
    return sample_tasks(size, D_, N_, noise, torch.Generator().manual_seed(seed), dtype=torch.float64)


def transformed(model: LinearTransformer, seed: int = 1) -> tuple[LinearTransformer, Tensor]:
    """The same function: every head rescaled (P·c, Q/c), heads permuted, x rotated by one O in every layer."""
    g = torch.Generator().manual_seed(seed)
    P, Q = model.P.detach().clone(), model.Q.detach().clone()
    L, H, D, _ = P.shape
    c = torch.exp(torch.randn(L, H, 1, 1, generator=g, dtype=torch.float64))
    perm = torch.randperm(H, generator=g)
    O, _ = torch.linalg.qr(torch.randn(D - 1, D - 1, generator=g, dtype=torch.float64))
    R = torch.block_diag(O, torch.ones(1, 1, dtype=torch.float64))
    P, Q = (P * c)[:, perm], (Q / c)[:, perm]
    return LinearTransformer.from_matrices(R @ P @ R.T, R @ Q @ R.T), O


def rotate(b: TaskBatch, O) -> TaskBatch:
    tokens = b.tokens.clone()
    tokens[..., :-1] = tokens[..., :-1] @ O.T  # x -> O x; w -> O w keeps y = ⟨w, x⟩
    return TaskBatch(tokens, b.target, b.sigma, b.w @ O.T)


Tensor = torch.Tensor
INVARIANT = [
    "omega",
    "norm",
    "share_outside",
    "share_outside_read",
    "remainder_sv",
    "remainder_sv_rel",
    "remainder_effective_rank",
    "remainder_top1_share",
    "x_block_dev_P",
    "x_block_dev_Q",
    "write_share",
    "register_cos",
]


def test_weight_metrics_invariant_to_rescaling_head_permutation_and_rotation():
    model = random_full(d=D_, n_layers=3, n_heads=3, scale=0.3, seed=0)
    other, _ = transformed(model)
    a, b = weight_metrics(model.P, model.Q), weight_metrics(other.P, other.Q)
    for key in INVARIANT:
        torch.testing.assert_close(getattr(a, key), getattr(b, key), rtol=1e-9, atol=1e-12, msg=key)
    for key in ("remainder_block_share", "remainder_block_sv"):
        for block in getattr(a, key):
            torch.testing.assert_close(
                getattr(a, key)[block], getattr(b, key)[block], rtol=1e-9, atol=1e-12, msg=f"{key} {block}"
            )
    for key in ("x_block_dev_P_per_head", "offdiag_sv_rel_Q_per_head"):  # per head: the same set of heads
        ours, theirs = getattr(a, key).sort(1).values, getattr(b, key).sort(1).values
        torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-12)
    assert (a.share_outside > 0.5).all()  # a random model is far from DIAG


def test_functional_metrics_invariant_on_rotated_sequences():
    """Rescaled / permuted / rotated model on rotated sequences: the same R² and losses (to rounding)."""
    model = random_full(d=D_, n_layers=2, n_heads=2, scale=0.08, seed=2)
    other, O = transformed(model, seed=5)
    ev, fit = batch(1_000, seed=3), batch(512, seed=4)
    a = functional_metrics(model, ScoredSet.of_batches([ev]), fit.tokens)
    b = functional_metrics(other, ScoredSet.of_batches([rotate(ev, O)]), rotate(fit, O).tokens)
    for key in ("r2_diag", "r2_equivariant", "gap_per_layer"):
        torch.testing.assert_close(getattr(a, key), getattr(b, key), rtol=1e-7, atol=1e-10, msg=key)
    for key in ("loss", "loss_diag_projection", "loss_diag_fit", "gap_diag_projection"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-8, abs=1e-12), key


def test_effective_rank_closed_forms_and_floor():
    sv = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1e-20, 1e-20, 1e-20], [0.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(effective_rank(sv), torch.tensor([1.0, 3.0, 3.0, 0.0], dtype=torch.float64))
    floored = effective_rank(sv, torch.tensor([1e-10, 1e-10, 1e-10, 1e-10], dtype=torch.float64))
    torch.testing.assert_close(floored, torch.tensor([1.0, 3.0, 0.0, 0.0], dtype=torch.float64))
    two = torch.tensor([3.0, 4.0], dtype=torch.float64)  # p = (9, 16)/25: exp of its entropy
    p = torch.tensor([9 / 25, 16 / 25], dtype=torch.float64)
    torch.testing.assert_close(effective_rank(two), (-(p * p.log()).sum()).exp())


def test_scalar_identity_deviation_and_offdiag_part():
    B = torch.diag(torch.tensor([2.0, 2.0, 2.0], dtype=torch.float64))
    assert scalar_identity_deviation(B).item() == 0.0
    T = torch.tensor([[1.0, 0, 0], [0, -1.0, 0], [0, 0, 0]], dtype=torch.float64)  # traceless
    assert scalar_identity_deviation(T).item() == pytest.approx(1.0, abs=1e-15)
    M = torch.arange(16, dtype=torch.float64).reshape(4, 4)
    rest = offdiag_part(M)
    assert rest[3, 3] == 0 and rest[:3, :3].trace().abs() < 1e-12 and torch.equal(rest[0, 1:], M[0, 1:])


def _interpolated(t: float, seed: int = 0) -> LinearTransformer:
    """P_t = P_DIAG + (1 − t) N_P (same for Q), N traceless on the x-block and zero at (y, y)."""
    g = torch.Generator().manual_seed(seed)
    L, D = 2, D_ + 1
    omega = torch.tensor([[-0.05, -0.01, -0.08, -0.01], [-0.03, 0.0, -0.06, -0.005]], dtype=torch.float64)
    P, Q = torch.zeros(L, 1, D, D, dtype=torch.float64), torch.zeros(L, 1, D, D, dtype=torch.float64)
    for l, (wxx, wxy, wyx, wyy) in enumerate(omega):  # one head: p_x = 1, p_y = wyx / wxx, q_x = wxx, q_y = wxy
        P[l, 0] = torch.diag(torch.tensor([1.0] * D_ + [(wyx / wxx).item()], dtype=torch.float64))
        Q[l, 0] = torch.diag(torch.tensor([wxx.item()] * D_ + [wxy.item()], dtype=torch.float64))
    NP = offdiag_part(0.3 * torch.randn(L, 1, D, D, generator=g, dtype=torch.float64))
    NQ = offdiag_part(0.02 * torch.randn(L, 1, D, D, generator=g, dtype=torch.float64))
    return LinearTransformer.from_matrices(P + (1 - t) * NP, Q + (1 - t) * NQ)


def test_synthetic_full_to_diag_trajectory_is_monotone():
    data = DriftData(EvalSet("uniform:1", d=D_, n=N_, n_seq=4_000, seed=1), fit_seq=512, fit_seed=2)
    traj = [(i, _interpolated(t)) for i, t in enumerate(torch.linspace(0, 1, 6).tolist())]
    recs = drift_trajectory(traj, data)["checkpoints"]
    series = lambda key, l: torch.tensor([r[key][l] for r in recs], dtype=torch.float64)
    for l in range(2):
        for key in ("share_outside", "share_outside_read", "x_block_dev_P", "x_block_dev_Q"):
            s = series(key, l)
            assert (s.diff() < 0).all(), (key, l, s)
        s = torch.tensor([r["remainder_sv_rel"][l][0] for r in recs], dtype=torch.float64)
        assert (s.diff() < 0).all(), s
        r2 = series("r2_diag", l)
        assert (r2.diff() > 0).all() and r2[-1] > 1 - 1e-9, (r2, 1 - r2[-1])
        assert series("share_outside", l)[0] > 0.1 and series("share_outside", l)[-1] < 1e-28
    gap = torch.tensor([abs(r["gap_diag_projection"]) for r in recs], dtype=torch.float64)
    assert (gap.diff() < 0).all() and gap[0] > 1e-3 and gap[-1] < 1e-12, gap


@pytest.mark.parametrize("param", ["diag", "gdpp"])
def test_diag_model_has_zero_remainder_and_zero_gap(param):
    model = random_diag(d=D_, n_layers=3, n_heads=2, param=param, scale=0.05, seed=4)
    w = weight_metrics(model.P, model.Q)
    assert w.share_outside.max() < 1e-28 and w.share_outside_read.max() < 1e-28
    assert (w.remainder_sv <= 1e-15 * w.norm[:, None]).all()
    assert (w.remainder_effective_rank == 0).all()  # rounding noise is no rank (interp drift prints "zero")
    assert w.x_block_dev_P.max() < 1e-14 and w.x_block_dev_Q.max() < 1e-14
    assert w.write_share.max() == 0 and w.register_cos.max() == 0
    torch.testing.assert_close(w.omega, model.omegas().stack().double(), rtol=1e-12, atol=1e-15)
    ev, fit = batch(1_000, seed=7), batch(256, seed=8)
    f = functional_metrics(model, ScoredSet.of_batches([ev]), fit.tokens)
    tol = 1e-12 * (1 + abs(f.loss))  # zero to float64 rounding of the loss
    assert 0.1 < f.loss < 100 and abs(f.gap_diag_projection) < tol and f.gap_per_layer.abs().max() < tol
    assert f.r2_diag.min() > 1 - 1e-10


def test_drift_loss_is_the_adjusted_loss_and_the_record_round_trips():
    model = random_full(d=D_, n_layers=2, n_heads=1, scale=0.05, seed=9)
    evalset = EvalSet("uniform:2", d=D_, n=N_, n_seq=3_000, seed=11)
    data = DriftData(evalset, fit_seq=64)
    rec = drift_record(5, model, data)
    ref = evaluate({"m": model}, evalset)["m"]
    assert rec.functional.loss == pytest.approx(ref.mean, rel=1e-10)
    assert rec.functional.loss_stderr == pytest.approx(ref.stderr, rel=1e-8)
    assert adjusted_losses({"m": model}, data.scored)["m"].mean().item() == pytest.approx(ref.mean, rel=1e-10)
    assert data.describe() == {
        "noise": "uniform:2",
        "d": D_,
        "n": N_,
        "eval_seq": 3_000,
        "eval_seed": 11,
        "fit_seq": 64,
        "fit_seed": data.fit_seed,
    }
    doc = rec.to_json()  # flat, as `interp drift --json` writes it
    assert doc["step"] == 5 and doc["gap_diag_projection"] == rec.functional.gap_diag_projection
    assert len(doc["remainder_sv"][0]) <= 8 and "gap_per_layer" in doc
    back = DriftRecord.from_json(doc)
    assert back.functional.gap_per_layer == doc["gap_per_layer"] and back.weights.share_outside == doc["share_outside"]
    assert back.to_json() == doc


def test_register_directions_find_a_planted_register():
    """Layer 1 writes y-row content along u (P[:d, d] = u); layer 2 reads x along u (Q_xx = qI + v uᵀ)."""
    g = torch.Generator().manual_seed(6)
    d, D = D_, D_ + 1
    u = torch.randn(d, generator=g, dtype=torch.float64)
    u = u / u.norm()
    P, Q = torch.zeros(2, 1, D, D, dtype=torch.float64), torch.zeros(2, 1, D, D, dtype=torch.float64)
    for l in range(2):
        P[l, 0] = torch.diag(torch.tensor([0.5] * d + [-0.3], dtype=torch.float64))
        Q[l, 0] = torch.diag(torch.tensor([-0.1] * d + [0.02], dtype=torch.float64))
    P[0, 0, :d, d] = 0.4 * u
    v = torch.randn(d, generator=g, dtype=torch.float64)
    v = v - (v @ u) * u  # v ⟂ u: v uᵀ is traceless, so it is exactly the x-block's deviation from a multiple of I
    Q[1, 0, :d, :d] += 0.2 * v[:, None] @ u[None]
    w = weight_metrics(P, Q)
    share = 0.16 / (0.16 + 0.25 * d + 0.09)
    assert w.write_share[0].item() == pytest.approx(share, rel=1e-12) and w.write_share[1] == 0
    assert w.register_cos[0, 1].item() == pytest.approx(1.0, abs=1e-12)
    assert w.register_cos[1].abs().max() == 0 and w.register_cos[0, 0] == 0  # only later layers read
