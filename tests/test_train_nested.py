"""A run that starts as a nested parameterization (TrainConfig.start_as, GD++ ⊂ DIAG ⊂ FULL): the exact embedding
(LinearTransformer.embed), the preset that picks it (interp.presets.NOISE_FREE_NEST), and the run itself: its Adam
phase is the nested run's, every checkpoint is the run's own parameterization, and a kill resumes to the same
weights."""

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

import interp
import interp.train as T
from interp import checkpoints as ck
from interp import kernel
from interp.config import ModelConfig, TrainConfig
from interp.files import InvalidArgument
from interp.model import LinearTransformer
from interp.presets import resolve
from interp.run import Run
from interp.tasks import sample_tasks

SMALL = dict(noise="uniform:0", n=8, batch=256, log_every=10, resume_every=50, n_checkpoints=5)


def _cfg(param, start_as, steps=100, polish=0, **kw):
    model = ModelConfig(d=3, n_layers=2, param=param, dtype="float64")
    return TrainConfig(model=model, start_as=start_as, steps=steps, polish=polish, **{**SMALL, "lr": 1e-2, **kw})


def _batch(n_seq=512):
    return sample_tasks(n_seq, 3, 8, "uniform:1", torch.Generator().manual_seed(3), dtype=torch.float64)


def test_embed_keeps_the_function_and_refuses_what_does_not_nest():
    gen = torch.Generator().manual_seed(0)
    gdpp = LinearTransformer(ModelConfig(d=3, n_layers=3, n_heads=2, param="gdpp", dtype="float64"), generator=gen)
    with torch.no_grad():
        for p in gdpp.parameters():
            p.mul_(300)  # far from the init's scale, so that the layers interact
    tokens = _batch().tokens
    want = gdpp(tokens)
    diag = gdpp.embed(dataclasses.replace(gdpp.cfg, param="diag"))
    full = diag.embed(dataclasses.replace(gdpp.cfg, param="full"))
    assert all(float(b.attn.q_y.detach().abs().max()) == 0 for b in diag.blocks)
    torch.testing.assert_close(diag.omegas().stack(), gdpp.omegas().stack(), rtol=0, atol=0)
    for model in (diag, full, gdpp.embed(full.cfg)):
        torch.testing.assert_close(model(tokens), want, rtol=1e-12, atol=1e-12)
    assert full.cfg == dataclasses.replace(gdpp.cfg, param="full")
    with pytest.raises(InvalidArgument, match="a FULL model is not a DIAG model"):
        full.embed(diag.cfg)
    with pytest.raises(InvalidArgument, match="a DIAG model is not a GD\\+\\+ model"):
        diag.embed(gdpp.cfg)
    with pytest.raises(InvalidArgument, match="cannot be embedded"):
        gdpp.embed(dataclasses.replace(full.cfg, n_layers=2))


def test_start_as_must_be_nested_and_old_configs_started_as_their_own():
    with pytest.raises(InvalidArgument, match="start_as full is not nested in diag"):
        _cfg("diag", "full")
    with pytest.raises(InvalidArgument, match="start_as must be one of"):
        _cfg("diag", "mlp")
    cfg = resolve(_cfg("full", "gdpp"))
    assert cfg.adam_model == dataclasses.replace(cfg.model, param="gdpp")
    old = {k: v for k, v in cfg.to_dict().items() if k != "start_as"}  # written before the field existed
    assert TrainConfig.from_dict(old).start_as == "full"
    # the preset nests only a fast run of its own init: with --init (or the paper preset) Adam trains --arch
    model = ModelConfig(n_layers=5, param="full")
    assert resolve(TrainConfig(model=model, noise="uniform:0")).start_as == "gdpp"
    assert resolve(TrainConfig(model=model, noise="uniform:0", init="x")).start_as == "full"
    assert resolve(TrainConfig(model=model, noise="uniform:0", preset="paper")).start_as == "full"
    assert resolve(TrainConfig(model=model, noise="uniform:0.5")).start_as == "full"


def test_a_nested_run_is_the_nested_run_embedded(tmp_path, monkeypatch):
    """DIAG started as GD++ ends with the GD++ run's weights, polish included (bit for bit: the same init draws, data,
    updates and polish batches), and q_y = 0; every checkpoint on the way is a DIAG model, the resume state holds
    Adam's GD++."""
    monkeypatch.setattr(T, "POLISH_BATCH", 1024)
    gdpp = T.train(_cfg("gdpp", "gdpp", polish=1), tmp_path / "gdpp", progress=False).model
    diag = T.train(_cfg("diag", "gdpp", polish=1), tmp_path / "diag", progress=False).model
    assert diag.cfg.param == "diag"
    for a, b in zip(gdpp.blocks, diag.blocks):
        for name in ("p_x", "p_y", "q_x"):
            assert torch.equal(getattr(a.attn, name), getattr(b.attn, name)), name
        assert torch.equal(b.attn.q_y, torch.zeros_like(b.attn.q_y))
    adam = ck.read_tensors(Run(tmp_path / "gdpp").resume_path)[0]
    assert any(not torch.equal(v, gdpp.state_dict()[k[len("model.") :]]) for k, v in adam.items() if "model." in k)
    run = Run(tmp_path / "diag")
    assert len(run.checkpoints()) == 5
    for _, path in run.checkpoints():
        assert interp.load(path).cfg == diag.cfg
    assert ck.read_tensors(run.resume_path)[1]["model_config"]["param"] == "gdpp"
    assert interp.load(tmp_path / "diag").cfg == resolve(_cfg("diag", "gdpp")).model


def test_a_nested_run_killed_in_adam_resumes_to_the_same_polished_model(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "POLISH_BATCH", 1024)
    cfg = _cfg("full", "gdpp", steps=120, polish=1)
    a = T.train(cfg, tmp_path / "a", progress=False).model
    real, saves = T._save_resume, []

    def save_then_die(*args, **kwargs):
        real(*args, **kwargs)
        saves.append(args[5])
        if args[5] == 100:
            raise KeyboardInterrupt

    monkeypatch.setattr(T, "_save_resume", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        T.train(cfg, tmp_path / "b", progress=False)
    monkeypatch.setattr(T, "_save_resume", real)
    T.train(cfg, tmp_path / "b", resume=True, progress=False)
    fa, fb = (load_file(str(Run(tmp_path / k).checkpoints()[-1][1])) for k in "ab")
    assert fa.keys() == fb.keys() == {f"blocks.{l}.attn.{w}" for l in range(2) for w in ("P", "Q")}
    assert all(torch.equal(fa[k], fb[k]) for k in fa)
    # the machine record: one line per segment, the killed process's Adam segment, the resumed one, the polish
    here = T.training_path(resolve(cfg))
    assert here["path"] in ("torch", f"kernel {kernel.info()['isa']}") and here["threads"] == torch.get_num_threads()
    segments = lambda k: [(r.pop("step"), r.pop("phase"), r) for r in Run(tmp_path / k).trained_on()]  # noqa: E731
    assert segments("a") == [(0, "adam", here), (120, "polish", here)]
    assert segments("b") == [(0, "adam", here), (100, "adam", here), (120, "polish", here)]
    # the polish ran on Adam's GD++ before the embedding: the final P_k, Q_k keep GD++'s structure (diagonal, Q's
    # y-entry 0)
    P, Q = a.P.detach(), a.Q.detach()
    for M in (P, Q):
        assert torch.equal(M, torch.diag_embed(torch.diagonal(M, dim1=-2, dim2=-1)))
    assert float(Q[..., -1, -1].abs().max()) == 0


def test_init_from_a_nested_parameterization(tmp_path):
    T.train(_cfg("gdpp", "gdpp", steps=20), tmp_path / "gdpp", progress=False)
    src = interp.load(tmp_path / "gdpp")
    cfg = dataclasses.replace(_cfg("diag", None, steps=1, lr=1e-12), init=str(tmp_path / "gdpp"))
    first = interp.load(Run(T.train(cfg, tmp_path / "diag", progress=False).run_dir).checkpoints()[0][1])
    torch.testing.assert_close(first.omegas().stack(), src.omegas().stack(), rtol=0, atol=0)
    back = dataclasses.replace(_cfg("gdpp", None, steps=1), init=str(tmp_path / "diag"))
    with pytest.raises(InvalidArgument, match="is a diag model, which a gdpp run does not hold"):
        T.train(back, tmp_path / "back", progress=False)
