"""The spectral polish (interp.train.spectral_polish, TrainConfig.spectral_polish): GD++'s ω's read off any model
that holds them, the phase lowering the exact noise-free loss, and `extend` adding it to a finished run so that the
run ends as a fresh run of the new config does (bit for bit), through `interp sweep` too."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import interp.train as T
from interp.config import ModelConfig, TrainConfig
from interp.files import CheckpointError, InvalidArgument
from interp.model import LinearTransformer
from interp.noise_free import gdpp_noise_free_loss, spectral_proposal
from interp.presets import resolve
from interp.run import Run
from interp.sweep import expand, plan
from interp.tasks import sample_tasks

SMALL = dict(noise="uniform:0", n=8, batch=128, log_every=10, resume_every=50, n_checkpoints=3, lr=1e-2)


@pytest.fixture
def quick(monkeypatch):
    """The phase at a test's size (the preset's draws are 10⁶ contexts)."""
    monkeypatch.setattr(T, "SPECTRAL_CONTEXTS", 2048)
    monkeypatch.setattr(T, "SPECTRAL_CHECK_CONTEXTS", 8192)
    monkeypatch.setattr(T, "SPECTRAL_BINS", 4000)
    monkeypatch.setattr(T, "SPECTRAL_ITERS", 60)


def _cfg(param="gdpp", layers=5, spectral=0, **kw):
    model = ModelConfig(d=3, n_layers=layers, param=param, dtype="float64")
    start = None if param == "gdpp" else "gdpp"
    return TrainConfig(model=model, start_as=start, steps=40, polish=0, spectral_polish=spectral, **{**SMALL, **kw})


def _gdpp(omegas) -> LinearTransformer:
    return LinearTransformer.from_gdpp_omegas(
        torch.as_tensor(omegas, dtype=torch.float64),
        ModelConfig(d=3, n_layers=len(omegas), param="gdpp", dtype="float64"),
    )


def test_gdpp_omegas_are_read_exactly_from_every_parameterization_that_holds_them():
    om = torch.tensor([[-0.05, -0.07], [-0.11, -0.2], [0.01, -0.6]], dtype=torch.float64)
    gdpp = _gdpp(om)
    tokens = sample_tasks(64, 3, 8, "uniform:0", torch.Generator().manual_seed(0), dtype=torch.float64).tokens
    for param in ("gdpp", "diag", "full"):
        model = LinearTransformer.from_gdpp_omegas(om, dataclasses.replace(gdpp.cfg, param=param))
        assert model.cfg.param == param
        assert torch.equal(model.gdpp_omegas(), om), param
        assert torch.allclose(model(tokens), gdpp(tokens), rtol=1e-12, atol=1e-14), param
    diag = LinearTransformer.from_omegas(torch.tensor([[-0.05, 0.01, -0.07, 0.0]]), d=3)  # ω_xy ≠ 0
    with pytest.raises(InvalidArgument, match="not a GD\\+\\+ model"):
        diag.gdpp_omegas()
    full = LinearTransformer(ModelConfig(d=3, n_layers=1, param="full", dtype="float64"))  # dense init
    with pytest.raises(InvalidArgument, match="not GD\\+\\+'s"):
        full.gdpp_omegas()


def test_the_phase_lowers_the_exact_loss_and_keeps_only_what_its_check_accepts(quick):
    cfg = resolve(_cfg(spectral=3))
    start = torch.tensor([[-0.04, -0.04], [-0.1, -0.15], [-0.3, -0.4], [-0.5, -0.8], [0.0, -1.0]], dtype=torch.float64)
    omegas, rounds = T.spectral_polish(start, cfg, 3)
    assert len(rounds) == 3
    assert rounds[-1][1] <= rounds[0][0] and all(after <= before for before, after in rounds)
    fresh = spectral_proposal(20_000, 3, 8, (1.0,), torch.Generator().manual_seed(9))
    loss = lambda om: (fresh.weight * 2 * gdpp_noise_free_loss(om[:, 0], om[:, 1], fresh.s[:, None])).sum().item() / 2  # noqa: E731
    assert loss(omegas) < 0.5 * loss(start)  # on contexts it never saw
    again, _ = T.spectral_polish(start, cfg, 3)
    assert torch.equal(again, omegas)  # its own data stream: deterministic given the ω's and the seed


def test_preset_and_validation():
    assert resolve(_cfg(layers=5, spectral=None)).spectral_polish == T.presets.SPECTRAL_POLISH
    assert resolve(_cfg("full", layers=7, spectral=None)).spectral_polish == T.presets.SPECTRAL_POLISH
    assert resolve(_cfg(layers=4, spectral=None)).spectral_polish == 0  # the fragile basin at 4 layers
    assert resolve(_cfg(layers=5, spectral=None, noise="uniform:1")).spectral_polish == 0
    old = _cfg().to_dict()
    del old["spectral_polish"]
    assert TrainConfig.from_dict(old).spectral_polish == 0  # written before the field: trained without it
    with pytest.raises(InvalidArgument, match="noise-free"):
        _cfg(spectral=2, noise="uniform:1")
    with pytest.raises(InvalidArgument, match="polishes a GD\\+\\+ model"):
        resolve(dataclasses.replace(_cfg("diag", spectral=2), start_as="diag"))


def test_extending_a_finished_run_ends_as_a_fresh_run_of_the_new_config(tmp_path, quick):
    old, new = _cfg("full", spectral=0), _cfg("full", spectral=2)
    T.train(old, tmp_path / "old", progress=False)
    before = Run(tmp_path / "old").checkpoints()[-1][1].read_bytes()
    fresh = T.train(new, tmp_path / "fresh", progress=False).model
    assert T.extend(new, tmp_path / "old") is not None
    run = Run(tmp_path / "old")
    extended = run.load()[0]
    assert run.config().spectral_polish == 2 and run.is_complete()
    assert not (run.path / T.SPECTRAL_START).exists()
    assert run.checkpoints()[-1][1].read_bytes() != before
    for a, b in zip(extended.parameters(), fresh.parameters()):
        assert torch.equal(a, b)
    assert [r["phase"] for r in run.trained_on()][-1] == "spectral_polish"
    assert T.extend(new, tmp_path / "old") is None  # nothing left to add
    with pytest.raises(CheckpointError, match="another run"):
        T.extend(dataclasses.replace(new, seed=1), tmp_path / "old")


def test_an_extension_killed_after_its_checkpoint_restarts_from_the_kept_start(tmp_path, quick, monkeypatch):
    old, new = _cfg(spectral=0), _cfg(spectral=2)
    T.train(old, tmp_path / "a", progress=False)
    T.train(old, tmp_path / "b", progress=False)
    T.extend(new, tmp_path / "a")

    def killed(self, cfg):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Run, "write_config", killed)
        with pytest.raises(KeyboardInterrupt):
            T.extend(new, tmp_path / "b")
    assert (tmp_path / "b" / T.SPECTRAL_START).exists() and Run(tmp_path / "b").config().spectral_polish == 0
    T.extend(new, tmp_path / "b")  # from the kept start, not from the checkpoint it already overwrote
    a, b = Run(tmp_path / "a").load()[0], Run(tmp_path / "b").load()[0]
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_the_sweep_plans_an_extension_instead_of_refusing_the_run(tmp_path, quick, monkeypatch):
    options = dict(arch=["gdpp"], layers=[5], noise=["uniform:0"], n=8, d=3, batch=128, steps=40, lr=1e-2, polish=0)
    options.update(dtype="float64", checkpoints=3)
    old = dict(options, spectral_polish=0)
    T.train(expand(old)[0].cfg, tmp_path / expand(old)[0].name, progress=False)
    assert not plan(expand(old), tmp_path)[0].extend
    state = plan(expand(options), tmp_path)[0]  # spectral_polish from the preset: 3
    assert state.extend and state.error is None
    other = dict(options, lr=2e-2)
    with pytest.raises(Exception, match="holds a run"):
        plan(expand(other), tmp_path)
