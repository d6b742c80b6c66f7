"""A diverged Adam phase rolls back (interp.train.MAX_ROLLBACKS): to its last resume state, at half the learning rate,
recorded in the resume state, so that a run killed before or after the rollback resumes to the same weights."""

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

import interp.train as T
from interp.config import ModelConfig, TrainConfig
from interp.run import Run

# resume states at steps 40 and 80 (and the checkpoints 0, 1, ..., 120); the divergence is injected at step 47
CFG = TrainConfig(
    model=ModelConfig(d=3, n_layers=2, param="diag"),
    noise="uniform:1",
    n=8,
    batch=64,
    steps=120,
    lr=2e-2,
    schedule="constant",
    resume_every=40,
    log_every=10,
    n_checkpoints=4,
)
DIVERGE_AT, ROLLED_TO = 47, 40
REAL_LOSS = T._loss


class Killed(Exception):
    pass


def _inject(monkeypatch, actions: dict[int, str]) -> None:
    """The trainer's n-th batch loss (counted from 1 in this process) is NaN ("nan") or raises Killed ("kill")."""
    real, calls = REAL_LOSS, [0]

    def loss(model, cfg, gen):
        calls[0] += 1
        value, dropped = real(model, cfg, gen)
        action = actions.get(calls[0])
        if action == "kill":
            raise Killed(calls[0])
        return (value * float("nan"), dropped) if action == "nan" else (value, dropped)

    monkeypatch.setattr(T, "_loss", loss)


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / Run.METRICS_FILE).read_text().splitlines()]


def _final(run_dir):
    return load_file(str(Run(run_dir).checkpoints()[-1][1]))


def _same(a, b):
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def reference(tmp_path, monkeypatch, capfd):
    _inject(monkeypatch, {DIVERGE_AT: "nan"})
    T.train(CFG, tmp_path / "ref", progress=False)
    return tmp_path / "ref", capfd.readouterr().err


def test_rollback_goes_back_to_the_resume_state_with_half_the_lr(tmp_path, reference, monkeypatch):
    ref, err = reference
    note = f"step {DIVERGE_AT}: loss is nan; rolled back to step {ROLLED_TO}, at 0.5× the schedule's learning rate"
    assert note in err
    assert Run(ref).is_complete()
    rows = _rows(ref)
    assert [r["step"] for r in rows] == list(range(10, 121, 10))  # the log is rewound to step 40, no duplicate
    assert {r["lr"] for r in rows if r["step"] <= ROLLED_TO} == {2e-2}
    assert {r["lr"] for r in rows if r["step"] > ROLLED_TO} == {1e-2}
    # up to the resume state it is the uninterrupted run, after it not (half the lr)
    _inject(monkeypatch, {})
    T.train(CFG, tmp_path / "plain", progress=False)
    plain = _rows(tmp_path / "plain")
    assert [r["loss"] for r in rows if r["step"] <= ROLLED_TO] == [r["loss"] for r in plain if r["step"] <= ROLLED_TO]
    assert all(a["loss"] != b["loss"] for a, b in zip(rows, plain) if a["step"] > ROLLED_TO)


def test_a_run_killed_after_the_rollback_resumes_to_the_same_weights(tmp_path, reference, monkeypatch):
    ref, _ = reference
    run = tmp_path / "late"
    # calls 48… are steps 41…; call 92 is step 85, after the resume state of step 80 (saved at half the lr)
    _inject(monkeypatch, {DIVERGE_AT: "nan", DIVERGE_AT + 45: "kill"})
    with pytest.raises(Killed):
        T.train(CFG, run, progress=False)
    assert T.ck.read_tensors(Run(run).resume_path)[1]["lr_scale"] == 0.5
    _inject(monkeypatch, {})
    T.train(CFG, run, resume=True, progress=False)
    _same(_final(run), _final(ref))


def test_a_run_killed_before_the_divergence_replays_the_rollback(tmp_path, reference, monkeypatch):
    ref, _ = reference
    run = tmp_path / "early"
    _inject(monkeypatch, {ROLLED_TO + 5: "kill"})  # step 45: the resume state is step 40's, at the full lr
    with pytest.raises(Killed):
        T.train(CFG, run, progress=False)
    assert "lr_scale" not in T.ck.read_tensors(Run(run).resume_path)[1]
    _inject(monkeypatch, {DIVERGE_AT - ROLLED_TO: "nan"})  # the resumed process's 7th batch is step 47 again
    T.train(CFG, run, resume=True, progress=False)
    _same(_final(run), _final(ref))


def test_rollbacks_are_bounded_and_guard_none_stops_at_once(tmp_path, monkeypatch):
    _inject(monkeypatch, {k: "nan" for k in range(DIVERGE_AT, 1000)})  # diverges at every try
    with pytest.raises(T.TrainingDiverged, match=r"step 4[17]: loss is nan \(after 3 rollbacks.*last good"):
        T.train(CFG, tmp_path / "bounded", progress=False)
    _inject(monkeypatch, {DIVERGE_AT: "nan"})
    with pytest.raises(T.TrainingDiverged, match=rf"^step {DIVERGE_AT}: loss is nan; training stopped"):
        T.train(dataclasses.replace(CFG, guard="none"), tmp_path / "none", progress=False)
