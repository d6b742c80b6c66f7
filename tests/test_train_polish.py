"""The noise-free preset (float64 and the L-BFGS polish after Adam, interp.presets.NOISE_FREE_POLISH) and the polish
phase itself (interp.train.polish): what it resolves to, that it lowers the loss, and that a run killed during it
restarts it and ends with the same weights."""

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

import interp.train as T
from interp.config import OPTIONS, ModelConfig, TrainConfig
from interp.files import InvalidArgument
from interp.model import LinearTransformer
from interp.presets import FAST_PEAK_LRS, NOISE_FREE_POLISH, NOISY_PEAK_LR, NOISY_POLISH_TAIL, resolve
from interp.run import Run
from interp.tasks import sample_tasks, stressed_tasks, tail_tasks

SMALL = dict(noise="uniform:0", n=8, batch=256, log_every=10)


def _cfg(param="gdpp", L=2, **kw):
    return TrainConfig(
        model=ModelConfig(d=3, n_layers=L, param=param, dtype=kw.pop("dtype", "float32")), **{**SMALL, **kw}
    )


def _half_mse(model, n_seq=20_000, seed=7):
    b = sample_tasks(n_seq, 3, 8, "uniform:0", torch.Generator().manual_seed(seed), dtype=model.cfg.torch_dtype)
    with torch.no_grad():
        return float((0.5 * (model(b.tokens) - b.target) ** 2).mean())


def test_noise_free_prior_resolves_float64_and_the_polish():
    for param in ("full", "diag", "gdpp"):
        for L in (1, 3, 5, 7):
            for noise in ("uniform:0", "fixed:0"):
                cfg = resolve(TrainConfig(model=ModelConfig(n_layers=L, param=param), noise=noise))
                assert (cfg.polish, cfg.model.dtype) == (NOISE_FREE_POLISH, "float64") == (4, "float64")
                # from 4 layers DIAG and FULL train as GD++ (NOISE_FREE_NEST), with GD++'s preset
                assert cfg.start_as == ("gdpp" if L >= 4 else param)
                # the rest of the preset is what it is on any other prior, for the parameterization Adam trains
                other = resolve(TrainConfig(model=ModelConfig(n_layers=L, param=cfg.start_as), noise="fixed:0.5"))
                assert other.start_as == cfg.start_as or L < 4
                assert (cfg.steps, cfg.schedule) == (other.steps, other.schedule)
                if (cfg.start_as, L) in NOISY_PEAK_LR:  # only a noisy prior takes the higher peak (session 14)
                    assert (cfg.lr, other.lr) == (FAST_PEAK_LRS[cfg.start_as][L], NOISY_PEAK_LR[cfg.start_as, L])
                else:
                    assert cfg.lr == other.lr
    for noise in ("uniform:1", "uniform:5", "fixed:0.5", "categorical:1,3", "categorical:0,1"):  # noisy: unchanged
        cfg = resolve(TrainConfig(model=ModelConfig(n_layers=5, param="gdpp"), noise=noise))
        assert (cfg.polish, cfg.model.dtype) == (0, "float32")
    paper = resolve(TrainConfig(model=ModelConfig(n_layers=5), noise="uniform:0", preset="paper"))
    assert (paper.polish, paper.model.dtype) == (0, "float32")
    # an explicit --polish leaves the dtype asked for: float32 on the noise-free prior is --polish N (or 0)
    assert resolve(TrainConfig(model=ModelConfig(n_layers=5), noise="uniform:0", polish=0)).model.dtype == "float32"
    assert resolve(TrainConfig(model=ModelConfig(n_layers=5), noise="uniform:0", polish=2)).model.dtype == "float32"
    # a resolved config resolves to itself (a resumed run keeps its dtype), and a config written before the field
    # existed was trained without the polish
    cfg = resolve(TrainConfig(model=ModelConfig(n_layers=5, param="gdpp"), noise="uniform:0"))
    assert resolve(cfg) == cfg
    old = {k: v for k, v in cfg.to_dict().items() if k != "polish"}
    old["model"] = {**old["model"], "dtype": "float32"}
    assert (resolve(TrainConfig.from_dict(old)).polish, resolve(TrainConfig.from_dict(old)).model.dtype) == (
        0,
        "float32",
    )


def test_polish_option_is_declared_once_and_checked():
    opt = OPTIONS["polish"]
    assert (opt.flag, opt.field, opt.default) == ("--polish", "polish", None)
    for bad in (-1, 101):
        with pytest.raises(InvalidArgument, match="polish"):
            TrainConfig(polish=bad)


def test_polish_lowers_the_loss_on_its_batch_and_on_fresh_sequences(monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 2048)
    cfg = resolve(_cfg(L=2, dtype="float64", polish=1, steps=1))
    # two GD steps of size 1/(n + d + 1) (the GD construction, von Oswald et al. 2023): ½·MSE ≈ 0.33 on d = 3, n = 8
    model = LinearTransformer(ModelConfig(d=3, n_layers=2, param="gdpp", dtype="float64"), init=False)
    with torch.no_grad():
        for block in model.blocks:  # ω_yx = p_y q_x = −1/12, ω_xx = p_x q_x = 0
            block.attn.p_x.zero_(), block.attn.p_y.fill_(-1 / 12), block.attn.q_x.fill_(1.0)
    assert model.omegas().omega_yx.tolist() == [-1 / 12, -1 / 12]
    start = _half_mse(model)
    assert 0.1 < start < 0.6
    rounds = T.polish(model, cfg, torch.Generator().manual_seed(1), 2)
    assert len(rounds) == 2 and all(after <= before for before, after in rounds)
    assert rounds[0][1] < 0.5 * rounds[0][0]
    assert _half_mse(model) < 0.5 * start


def test_tiny_noise_free_training_with_the_polish_beats_adam_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 4096)
    adam = T.train(_cfg(L=3, dtype="float64", polish=0, steps=300), tmp_path / "adam", progress=False).model
    polished = T.train(_cfg(L=3, dtype="float64", polish=2, steps=300), tmp_path / "polished", progress=False).model
    a, p = _half_mse(adam), _half_mse(polished)
    assert p < 0.2 * a
    assert p < BOUND_GDPP3


# measured 2026-12-01: this 3-layer GD++ (d = 3, n = 8, 300 Adam steps) at 0.066 without the polish, 0.0084 with it
BOUND_GDPP3 = 0.02


def test_run_killed_during_the_polish_restarts_it_and_ends_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 1024)
    cfg = _cfg(L=2, dtype="float64", polish=2, steps=100, resume_every=50)
    T.train(cfg, tmp_path / "a", progress=False)
    T.train(cfg, tmp_path / "b", progress=False)
    run = Run(tmp_path / "b")
    last = run.checkpoints()[-1]
    assert last[0] == 100
    last[1].unlink()  # killed during the polish: the resume state of step 100 is there, the final checkpoint is not
    assert not run.is_complete() and run.has_resume()
    T.train(cfg, tmp_path / "b", resume=True, progress=False)
    a = load_file(str(Run(tmp_path / "a").checkpoints()[-1][1]))
    b = load_file(str(run.checkpoints()[-1][1]))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # the polish changed the model: the final checkpoint is not Adam's last step
    tensors, _ = run.read_resume(resolve(cfg))
    assert any(not torch.equal(v, a[k[len("model.") :]]) for k, v in tensors.items() if k.startswith("model."))


def test_noisy_3_and_4_layer_diag_resolve_the_polish_with_its_tail_term():
    for param in ("full", "diag", "gdpp"):
        for L in (1, 3, 4, 5, 7):
            for noise in ("uniform:1", "uniform:6", "categorical:1,3,5", "uniform:0"):
                cfg = resolve(TrainConfig(model=ModelConfig(n_layers=L, param=param), noise=noise))
                tail = param == "diag" and L in (3, 4) and noise != "uniform:0"
                assert cfg.polish_tail == (NOISY_POLISH_TAIL if tail else 0.0) and (cfg.polish > 0 or not tail)
    assert NOISY_POLISH_TAIL == 1e-3
    diag3 = TrainConfig(model=ModelConfig(n_layers=3, param="diag"), noise="uniform:6")
    assert resolve(dataclasses.replace(diag3, polish_tail=0.0)).polish_tail == 0.0  # asked for: kept
    assert resolve(dataclasses.replace(diag3, polish=2)).polish_tail == 0.0  # an explicit --polish: no tail by default
    cfg = resolve(diag3)
    assert resolve(cfg) == cfg
    old = {k: v for k, v in cfg.to_dict().items() if k != "polish_tail"}  # written before the field: trained without
    assert resolve(TrainConfig.from_dict(old)).polish_tail == 0.0
    with pytest.raises(InvalidArgument, match="needs polish rounds"):
        resolve(dataclasses.replace(diag3, polish=0, polish_tail=1e-3))
    with pytest.raises(InvalidArgument, match="noise-free"):
        TrainConfig(noise="uniform:0", polish=2, polish_tail=1e-3)
    with pytest.raises(InvalidArgument, match="polish_tail"):
        TrainConfig(noise="uniform:1", polish=2, polish_tail=-1.0)
    opt = OPTIONS["polish_tail"]
    assert (opt.flag, opt.field, opt.default) == ("--polish-tail", "polish_tail", None)


def _gd_diag(L=2):
    """A DIAG model (d = 3) making L GD steps of size 1/12, in float64."""
    model = LinearTransformer(ModelConfig(d=3, n_layers=L, param="diag", dtype="float64"), init=False)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.p_x.zero_(), block.attn.p_y.fill_(-1 / 12), block.attn.q_x.fill_(1.0), block.attn.q_y.zero_()
    return model


def test_polish_objective_is_the_stressed_loss_plus_kappa_times_the_tail_loss(monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 512)
    monkeypatch.setattr(T, "POLISH_TAIL_BATCH", 128)
    monkeypatch.setattr(T, "POLISH_ITERS", 3)
    base = dict(noise="uniform:2", n=8, polish=1, steps=1)
    for kappa in (0.0, 0.5):
        cfg = resolve(TrainConfig(model=ModelConfig(d=3, n_layers=2, param="diag"), polish_tail=kappa, **base))
        model, gen = _gd_diag(), torch.Generator().manual_seed(4)
        # the draws the round makes, in its order: stressed batch and check, then (κ > 0) the tail batch and check
        replay = torch.Generator().manual_seed(4)
        size = dict(generator=replay, dtype=torch.float64)
        stressed = [stressed_tasks(512, 3, 8, "uniform:2", frac=T.POLISH_STRESS, scale=T.POLISH_STRESS_SCALE, **size)
                    for _ in range(2)]  # fmt: skip
        check = stressed[1]
        with torch.no_grad():
            want = float(T._batch_half_se(model, *check))
            if kappa:
                tails = [tail_tasks(128, 3, 8, "uniform:2", scale=1.35, sigma_from=0.85, **size) for _ in range(2)]
                want += kappa * float(T._batch_half_se(model, tails[1], torch.ones(128, dtype=torch.float64)))
        ((before, after),) = T.polish(model, cfg, gen, 1)
        assert before == pytest.approx(want, rel=1e-12)
        assert torch.equal(gen.get_state(), replay.get_state())  # κ = 0 draws no tail batch: old runs replay exactly


def test_the_tail_term_lowers_the_loss_on_large_label_contexts(monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 2048)
    monkeypatch.setattr(T, "POLISH_TAIL_BATCH", 2048)
    base = dict(noise="uniform:2", n=8, polish=2, steps=1)
    tail = tail_tasks(20_000, 3, 8, "uniform:2", torch.Generator().manual_seed(9), scale=1.35, sigma_from=0.85,
                      dtype=torch.float64)  # fmt: skip
    ones = torch.ones(20_000, dtype=torch.float64)
    losses = {}
    for kappa in (0.0, 10.0):
        cfg = resolve(TrainConfig(model=ModelConfig(d=3, n_layers=2, param="diag"), polish_tail=kappa, **base))
        model = _gd_diag()
        T.polish(model, cfg, torch.Generator().manual_seed(1), 2)
        with torch.no_grad():
            losses[kappa] = float(T._batch_half_se(model, tail, ones))
    # weighted by κ = 10 the tail set is most of the objective: the polished model fits it better than without it
    assert losses[10.0] < 0.95 * losses[0.0]
