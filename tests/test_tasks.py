import math

import pytest
import torch

from interp.tasks import NoisePrior, draw_tasks, sample_tasks


@pytest.mark.parametrize(
    "spec,kind,values,probs",
    [
        ("fixed:0.5", "fixed", (0.5,), ()),
        ("uniform:5", "uniform", (5.0,), ()),
        ("categorical:1,3", "categorical", (1.0, 3.0), ()),
        ("categorical:1,3,5;0.2,0.3,0.5", "categorical", (1.0, 3.0, 5.0), (0.2, 0.3, 0.5)),
    ],
)
def test_parse(spec, kind, values, probs):
    prior = NoisePrior.parse(spec)
    assert (prior.kind, prior.values, prior.probs) == (kind, values, probs)
    assert NoisePrior.parse(prior.spec) == prior


@pytest.mark.parametrize(
    "spec,match",
    [
        ("uniform:-1", ">= 0"),
        ("gauss:1", "unknown noise prior"),
        ("uniform", "not a noise spec"),
        ("categorical:1,3;0.5", "2 values but 1"),
        ("categorical:1,3;0.7,0.7", "sum to 1"),
        ("fixed:abc", "numbers"),
        ("uniform:nan", "finite"),
    ],
)
def test_parse_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        NoisePrior.parse(spec)


def test_mean_sigma2():
    assert NoisePrior.parse("uniform:6").mean_sigma2() == pytest.approx(12.0)
    assert NoisePrior.parse("categorical:1,3").mean_sigma2() == pytest.approx(5.0)
    assert NoisePrior.parse("fixed:2").mean_sigma2() == pytest.approx(4.0)


def test_sample_statistics_match_prior():
    g = torch.Generator().manual_seed(1)
    u = NoisePrior.parse("uniform:5").sample(200_000, g, dtype=torch.float64)
    assert 0 <= u.min() and u.max() <= 5
    assert (u**2).mean().item() == pytest.approx(25 / 3, rel=0.01)
    c = NoisePrior.parse("categorical:1,3;0.25,0.75").sample(200_000, g, dtype=torch.float64)
    assert set(c.unique().tolist()) == {1.0, 3.0}
    assert (c == 3).double().mean().item() == pytest.approx(0.75, abs=0.005)


def test_sample_tasks_layout_and_noise():
    g = torch.Generator().manual_seed(0)
    b = sample_tasks(4000, d=3, n=50, noise="fixed:0.7", generator=g, dtype=torch.float64)
    assert b.tokens.shape == (4000, 51, 4)
    assert torch.all(b.tokens[:, -1, -1] == 0)  # query label slot is zero
    torch.testing.assert_close(b.target, (b.x_query * b.w).sum(-1))  # query label noise-free
    resid = b.y - (b.x * b.w[:, None]).sum(-1)
    assert resid.std().item() == pytest.approx(0.7, rel=0.01)
    assert b.x.var().item() == pytest.approx(1.0, rel=0.02)


def test_sample_tasks_seeded_and_covariance():
    cov = torch.diag(torch.tensor([4.0, 1.0, 0.25], dtype=torch.float64))
    a = sample_tasks(20_000, d=3, n=10, generator=torch.Generator().manual_seed(3), x_cov=cov, dtype=torch.float64)
    b = sample_tasks(20_000, d=3, n=10, generator=torch.Generator().manual_seed(3), x_cov=cov, dtype=torch.float64)
    torch.testing.assert_close(a.tokens, b.tokens, rtol=0, atol=0)
    emp = torch.einsum("bni,bnj->ij", a.x, a.x) / (20_000 * 10)
    torch.testing.assert_close(emp, cov, atol=0.05, rtol=0.03)
    q = sample_tasks(
        20_000,
        d=3,
        n=10,
        generator=torch.Generator().manual_seed(3),
        x_cov=cov,
        query_cov=torch.eye(3, dtype=torch.float64),
        dtype=torch.float64,
    )
    assert q.x_query.var(0).mean().item() == pytest.approx(1.0, rel=0.03)
    assert math.isclose(q.x.var().item(), a.x.var().item(), rel_tol=1e-12)


def test_a_draw_forms_sample_tasks_batch():
    """draw_tasks draws the same numbers as sample_tasks; its batch() forms the same tokens and target from them."""
    from interp.tasks import draw_tasks

    cov = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    kw = dict(x_cov=cov, dtype=torch.float64)
    draw = draw_tasks(50, 2, 7, "categorical:1,3", torch.Generator().manual_seed(3), **kw)
    batch = sample_tasks(50, 2, 7, "categorical:1,3", torch.Generator().manual_seed(3), **kw)
    assert len(draw) == 50 and torch.equal(draw.batch().tokens, batch.tokens)
    assert torch.equal(draw.batch().target, batch.target) and torch.equal(draw.sigma, batch.sigma)
    torch.testing.assert_close(batch.y, (draw.x * draw.w[:, None]).sum(-1) + draw.sigma[:, None] * draw.xi)
    assert (
        torch.equal(batch.x, draw.x)
        and torch.equal(batch.x_query, draw.x_query)
        and (batch.tokens[:, -1, -1] == 0).all()
    )


def test_stressed_tasks_weights_are_p_over_q():
    """The weights equal p/q computed independently from Gaussian log-densities of x, x_t and the noise ξ."""
    from torch.distributions import MultivariateNormal, Normal

    from interp.tasks import stressed_tasks

    cov = torch.tensor([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 0.7]], dtype=torch.float64)
    frac, c = 0.3, 1.4
    draw, weight = stressed_tasks(
        2000, 3, 6, "fixed:1", torch.Generator().manual_seed(1), frac=frac, scale=c, x_cov=cov, dtype=torch.float64
    )
    b = draw.batch()
    xi = b.y - torch.einsum("bnd,bd->bn", b.x, b.w)  # σ = 1
    inputs = torch.cat([b.x, b.x_query[:, None]], dim=1)

    def log_density(s):
        xs = MultivariateNormal(torch.zeros(3, dtype=torch.float64), s**2 * cov).log_prob(inputs).sum(1)
        scale = torch.tensor(s, dtype=torch.float64)
        return xs + Normal(torch.zeros((), dtype=torch.float64), scale).log_prob(xi).sum(1)

    ratio = torch.exp(log_density(c) - log_density(1.0))
    torch.testing.assert_close(weight, 1 / ((1 - frac) + frac * ratio), rtol=1e-9, atol=0)


def test_stressed_tasks_estimate_the_same_expectations():
    """E_q[weight] = 1 and E_q[weight · ½y_t²] = E_p[½y_t²] = ½·tr(Λ), within 4 standard errors."""
    from interp.tasks import stressed_tasks

    cov = torch.diag(torch.tensor([3.0, 1.0, 0.5, 0.5], dtype=torch.float64))
    draw, weight = stressed_tasks(
        200_000,
        4,
        20,
        "uniform:5",
        torch.Generator().manual_seed(2),
        frac=0.125,
        scale=1.25,
        x_cov=cov,
        dtype=torch.float64,
    )
    b = draw.batch()
    for f, want in ((torch.ones_like(weight), 1.0), (0.5 * b.target**2, 2.5)):
        v = weight * f
        assert abs(v.mean().item() - want) < 4 * v.std().item() / len(v) ** 0.5


def test_task_draws_are_torchs_own_numbers():
    """draw_tasks draws w, x, x_t, σ, ξ in that order with torch.randn / torch.rand, bit for bit: a run's data are
    the same on every machine and backend (the kernel only reads the draw)."""
    batch, d, n = 300, 10, 20
    draw = draw_tasks(batch, d, n, "uniform:5", torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    w = torch.randn(batch, d, generator=g)
    x = torch.randn(batch, n, d, generator=g)
    x_t = torch.randn(batch, d, generator=g)
    sigma = torch.rand(batch, generator=g) * 5
    xi = torch.randn(batch, n, generator=g)
    for ours, theirs in zip((draw.w, draw.x, draw.x_query, draw.sigma, draw.xi), (w, x, x_t, sigma, xi)):
        assert torch.equal(ours, theirs)


def test_tail_tasks_draw_the_top_of_the_noise_range_with_labels_scaled():
    from interp.tasks import tail_tasks

    batch, d, n, c, a, smax = 40_000, 3, 8, 1.35, 0.85, 6.0
    draw = tail_tasks(batch, d, n, "uniform:6", torch.Generator().manual_seed(3), scale=c, sigma_from=a)
    s = draw.sigma.double()
    assert a * smax <= s.min() and s.max() <= smax
    # σ ~ U(a·σ_max, σ_max): E[σ²] = σ_max²(1 − a³) / (3(1 − a))
    want_s2 = smax**2 * (1 - a**3) / (3 * (1 - a))
    assert abs(s.square().mean() - want_s2) < 4 * s.square().std() / math.sqrt(batch)
    # x as drawn, labels c× theirs: E[Σ_i y_i²] = c²·n·(d + E[σ²]) for x_i ~ N(0, I), w ~ N(0, I), ξ ~ N(0, 1)
    y2 = draw.batch().y.double().square().sum(1)
    want = c**2 * n * (d + want_s2)
    assert abs(y2.mean() - want) < 4 * y2.std() / math.sqrt(batch)
    assert abs(draw.x.double().square().mean() - 1) < 0.01
    # the same numbers as draw_tasks at those σ's, with w and ξ (so y and the target) c× theirs
    gen = torch.Generator().manual_seed(3)
    torch.rand(batch, generator=gen, dtype=torch.float64)  # tail_tasks' σ draw comes first
    plain = draw_tasks(batch, d, n, "uniform:6", gen, sigma=draw.sigma).batch()
    torch.testing.assert_close(draw.batch().y, c * plain.y)
    torch.testing.assert_close(draw.batch().target, c * plain.target)
    torch.testing.assert_close(draw.x, plain.x)


def test_tail_tasks_refuse_a_noise_free_prior_and_bad_sizes():
    from interp.files import InvalidArgument
    from interp.tasks import tail_tasks

    gen = torch.Generator().manual_seed(0)
    with pytest.raises(InvalidArgument, match="noise-free"):
        tail_tasks(8, 3, 8, "uniform:0", gen, scale=1.35, sigma_from=0.85)
    for scale, sigma_from in ((0.0, 0.5), (math.inf, 0.5), (1.2, 1.5), (1.2, -0.1)):
        with pytest.raises(InvalidArgument, match="tail_tasks"):
            tail_tasks(8, 3, 8, "uniform:1", gen, scale=scale, sigma_from=sigma_from)
