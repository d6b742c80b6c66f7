"""interp sweep: grid expansion, refusal of changed settings, local and Ray backends, kill-and-resume, interp table.

The backend tests train a tiny grid (d=4, n=8, batch 64, 40 steps) and check that every backend gives
bit-identical final weights to an uninterrupted in-process run, including a run whose worker process is
SIGKILLed after its step-20 resume save (then started again by the sweep, resuming at step 20).
"""

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import torch

from interp import checkpoints as ck
from interp.evalset import EvalSet
from interp.evaluate import evaluate
from interp.run import Run, load
from interp.sweep import (
    RAY_MISSING,
    SWEEP_FILE,
    RunSpec,
    SweepError,
    config_from_options,
    end_table,
    expand,
    load_grid_file,
    plan,
    run_name,
    run_task,
    sweep,
    unmatched_where,
)
from interp.train import train
from tests.helpers import EXPERIMENTS, random_diag, run_cli

TINY = dict(d=4, n=8, batch=64, steps=40, save_every=10, checkpoints=5)
VICTIM = "diag1_uniform5_s1"  # the run dying_task kills once, after its step-20 resume save
KILL_AT = 20


def dying_task(run_dir: str, cfg: dict, threads: int = 1, eval_seq: int = 0) -> dict:
    """run_task, except that the first attempt at VICTIM SIGKILLs its own process after the step-20 resume
    save; a marker beside the run records the kill, then the step the next attempt resumed from."""
    marker = Path(run_dir + ".killed")
    if Path(run_dir).name == VICTIM:
        if not marker.exists():
            tr = sys.modules["interp.train"]  # (the attribute interp.train is the function)
            save = tr._save_resume

            def save_then_die(run, cfg, model, opt, gen, step, *rest):
                save(run, cfg, model, opt, gen, step, *rest)
                if step >= KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)

            marker.write_text("killed")
            tr._save_resume = save_then_die
        else:
            marker.write_text(str(ck.read_tensors(Run(run_dir).resume_path)[1]["step"]))
    return run_task(run_dir, cfg, threads, eval_seq)


def specs() -> list[RunSpec]:
    out = []
    for seed, layers, lr in ((0, 1, None), (1, 1, None), (2, 2, 1e3)):  # the last diverges (lr 1e3, no clip)
        opts = dict(arch="diag", layers=layers, noise="uniform:5", seed=seed, **TINY)
        if lr:
            opts.update(lr=lr, clip=0, schedule="constant")
        out.append(RunSpec(run_name(opts), opts, config_from_options(opts)))
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Final weights of the two good runs, trained uninterrupted in this process."""
    root = tmp_path_factory.mktemp("reference")
    return {s.name: train(s.cfg, root / s.name, progress=False).model.state_dict() for s in specs()[:2]}


def final_weights(run_dir: Path) -> dict:
    return load(run_dir).state_dict()


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k  # bit-identical


def test_expand_names_order_and_overrides():
    runs = expand(
        {"arch": ["full", "diag"], "layers": [1, 2], "seed": [0, 1], "lr": [0.01, 0.002], "steps": 50},
        overrides=[{"where": {"arch": "full", "layers": 2}, "steps": 80, "batch": 512}],
    )
    assert len(runs) == 16
    assert runs[0].name == "full1_uniform5_s0_lr0.01" and runs[1].name == "full1_uniform5_s0_lr0.002"
    assert [r.name for r in runs[:8]] == [
        f"{a}{L}_uniform5_s0_lr{lr}" for L in (1, 2) for a in ("full", "diag") for lr in (0.01, 0.002)
    ]  # seed 0 first, then shallow first
    by_name = {r.name: r.cfg for r in runs}
    assert by_name["full2_uniform5_s1_lr0.002"].steps == 80 and by_name["full2_uniform5_s1_lr0.002"].batch == 512
    assert by_name["diag2_uniform5_s1_lr0.002"].steps == 50 and by_name["diag2_uniform5_s1_lr0.002"].batch == 2048
    assert by_name["full1_uniform5_s0_lr0.01"].model.param == "full" and by_name["full1_uniform5_s0_lr0.01"].lr == 0.01
    (only,) = expand({"noise": "categorical:1,3", "clip": 0})
    assert only.name == "full4_cat13_s0" and only.cfg.clip is None and only.cfg.noise == "categorical:1,3"
    shaped = {r.name: r.cfg.x_cov for r in expand({"d": 2, "x_cov": ["diag:1,2", "diag:2,1"]})}
    assert shaped == {
        "full4_uniform5_s0_xcovdiag-1-2": ((1.0, 0.0), (0.0, 2.0)),
        "full4_uniform5_s0_xcovdiag-2-1": ((2.0, 0.0), (0.0, 1.0)),
    }
    (bad,) = expand({"d": 0})
    assert (
        bad.cfg is None and "d must be in [1, 4096], got 0" in bad.error
    )  # a bad setting fails that run, not the sweep
    with pytest.raises(SweepError, match="seed cannot be set per run"):
        expand({"seed": [0, 1]}, overrides=[{"where": {"seed": 0}, "seed": 3}])
    with pytest.raises(SweepError, match="unknown run option 'learning_rate'"):
        expand({"learning_rate": [1, 2]})


def test_a_grids_order_puts_its_options_slowest(tmp_path):
    """`order` (a grid file's key, or expand's): the options it names vary slowest, in its order; the same runs, the
    same names, only their order changes. A name the grid does not set, or one named twice, is a SweepError."""
    options = {"arch": ["full", "diag"], "layers": [1, 2], "seed": [0, 1]}
    default = [r.name for r in expand(options)]
    shallow = [r.name for r in expand({**options, "order": ["layers", "seeds"]})]
    assert sorted(shallow) == sorted(default) and shallow != default
    assert shallow == [f"{a}{L}_uniform5_s{s}" for L in (1, 2) for s in (0, 1) for a in ("full", "diag")]
    grid = tmp_path / "grid.toml"
    grid.write_text('arch = ["full", "diag"]\nlayers = [1, 2]\nseeds = [0, 1]\norder = ["layers"]\n')
    assert [r.name for r in expand(*load_grid_file(grid))] == [
        f"{a}{L}_uniform5_s{s}" for L in (1, 2) for s in (0, 1) for a in ("full", "diag")
    ]
    for bad, match in (
        (["noise"], "order names 'noise', which the grid does not set"),
        (["layers", "layers"], "twice"),
    ):
        with pytest.raises(SweepError, match=match):
            expand({**options, "order": bad})
    with pytest.raises(SweepError, match="order must be a list of option names"):
        expand({**options, "order": "layers"})


def test_grid_file_and_its_errors(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'arch = ["full", "gdpp"]\nlayers = 2\nseeds = [0, 1]\nsave-every = 100\n\n'
        '[[override]]\nwhere = { arch = "gdpp" }\nlr = 3e-3\n'
    )
    options, overrides = load_grid_file(grid)
    assert options == {"arch": ["full", "gdpp"], "layers": 2, "seed": [0, 1], "save_every": 100}
    runs = {r.name: r.cfg for r in expand(options, overrides)}
    assert sorted(runs) == ["full2_uniform5_s0", "full2_uniform5_s1", "gdpp2_uniform5_s0", "gdpp2_uniform5_s1"]
    assert runs["gdpp2_uniform5_s1"].lr == 3e-3 and runs["full2_uniform5_s1"].lr is None
    assert runs["full2_uniform5_s0"].resume_every == 100
    code, out, _ = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--grid", grid, "--seeds", "7", "--dry-run")
    assert code == 0 and "gdpp2_uniform5_s7: start" in out and "_s0" not in out  # flags replace the file's values
    bad = tmp_path / "bad.toml"
    bad.write_text("arch = ['full']\nlearning_rate = 1\n")
    code, _, err = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--grid", bad)
    assert code == 2 and err.count("\n") == 1 and "learning_rate" in err and str(bad) in err
    bad.write_text("arch = [full\n")
    code, _, err = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--grid", bad)
    assert code == 2 and err.count("\n") == 1 and "cannot read grid file" in err


def test_a_where_that_matches_no_run_is_said(tmp_path, capsys):
    """An override's where value that no run can have (a typo: kernel-norm, the run name's slug, for kernel_norm) skips
    nothing; interp sweep says so, one note per value, and plans the grid as written. Values an override sets, an
    option's default and a noise prior's other spelling all match."""
    options = {"arch": "full", "layers": [1, 2], "attention": ["retnet", "kernel_norm"], "noise": "uniform:1"}
    overrides = [
        {"where": {"attention": ["kernel-norm", "retnet"], "layers": 2, "noise": "uniform:1.0"}, "skip": True},
        {"where": {"layers": 1}, "mlp": "relu"},
        {"where": {"mlp": "relu", "quad": 0.0, "layers": 7}, "lr": 1e-3},
    ]
    assert unmatched_where(options, overrides) == [
        "override 1: where attention = 'kernel-norm' matches no run (the grid's attention: 'retnet', 'kernel_norm')",
        "override 3: where layers = 7 matches no run (the grid's layers: 1, 2)",
    ]
    assert len(expand(options, overrides)) == 3  # 4 runs less retnet-2: kernel_norm-2 stays, the typo skips nothing
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'layers = [1, 2]\nattention = ["retnet", "kernel_norm"]\n\n'
        '[[override]]\nwhere = { attention = "kernel-norm" }\nskip = true\n'
    )
    code, out, err = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--grid", grid, "--dry-run")
    assert code == 0 and out.endswith("4 runs\n")
    note = "override 1: where attention = 'kernel-norm' matches no run (the grid's attention: 'retnet', 'kernel_norm')"
    assert err == f"interp sweep: note: {grid}: {note}\n"
    code, _, err = run_cli(
        capsys, "sweep", "--root", tmp_path / "r", "--grid", EXPERIMENTS / "family_grid.toml", "--dry-run"
    )
    assert code == 0 and err == ""  # the shipped grid's every where value names a run


def test_changed_setting_is_refused_and_nothing_written(tmp_path, capsys):
    root = tmp_path / "root"
    cfg = config_from_options(dict(arch="diag", layers=1, seed=0, d=4, n=8, batch=16, steps=3, checkpoints=2))
    train(cfg, root / "diag1_uniform5_s0", progress=False)
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    args = [
        "sweep",
        "--root",
        root,
        "--arch",
        "diag",
        "--layers",
        "1",
        "--d",
        "4",
        "--n",
        "8",
        "--batch",
        "16",
        "--checkpoints",
        "2",
    ]
    code, _, err = run_cli(capsys, *args, "--steps", "5")
    assert code == 2 and err.count("\n") == 1
    assert "diag1_uniform5_s0: holds a run with steps=3, the sweep asks steps=5" in err and "nothing was started" in err
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before and not (root / SWEEP_FILE).exists()
    (root / "diag2_uniform5_s0").mkdir()
    (root / "diag2_uniform5_s0" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, *args[:7], "2", *args[7:], "--steps", "3")
    assert code == 2 and "diag2_uniform5_s0: holds files but no" in err
    code, out, _ = run_cli(capsys, *args, "--steps", "3", "--dry-run")
    assert code == 0 and "diag1_uniform5_s0: done" in out


def test_ray_backend_without_ray_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is not installed
    code, _, err = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--backend", "ray", "--steps", "5")
    assert code == 2 and err == f"interp sweep: error: {RAY_MISSING}\n" and '".[ray]"' in err
    assert not (tmp_path / "r").exists()
    code, _, err = run_cli(capsys, "sweep", "--root", tmp_path / "r", "--gpus-per-run", "0.25")
    assert code == 2 and "--gpus-per-run: only with --backend ray" in err


def check_sweep(root: Path, states, reference, failed: int = 1) -> None:
    """Both good runs done with the reference weights, the victim killed once and resumed at step 20,
    the diverging run failed with its error, sweep.json in agreement."""
    by = {s.spec.name: s for s in states}
    assert by["diag1_uniform5_s0"].status == "done" and by[VICTIM].status == "done"
    assert by["diag2_uniform5_s2"].status == "failed" and "TrainingDiverged: step" in by["diag2_uniform5_s2"].error
    assert (root / f"{VICTIM}.killed").read_text() == str(KILL_AT)  # the second attempt resumed at step 20
    for name, weights in reference.items():
        assert Run(root / name).is_complete()
        assert_same(final_weights(root / name), weights)
    summary = json.loads((root / SWEEP_FILE).read_text())
    assert summary["counts"] == {"done": 2, "running": 0, "failed": failed, "queued": 0}
    assert summary["runs"]["diag2_uniform5_s2"]["error"].startswith("TrainingDiverged")
    assert summary["runs"]["diag1_uniform5_s0"]["adjusted_loss"]["n_seq"] == 500


@pytest.mark.slow
def test_local_backend_kill_resume_rerun(tmp_path, reference, capsys):
    root = tmp_path / "local"
    ck.save_checkpoint(tmp_path / "one_layer.safetensors", random_diag(d=4, n_layers=1), 0)
    opts = dict(arch="diag", layers=2, seed=0, init=str(tmp_path / "one_layer.safetensors"), **TINY)
    bad_init = RunSpec("diag2_init", opts, config_from_options(opts))  # --init with 1 layer for a 2-layer run
    states = sweep([*specs(), bad_init], root, workers=2, eval_seq=500, progress=False, task=dying_task)
    assert {s.spec.name: s.attempts for s in states} == {
        "diag1_uniform5_s0": 1,
        VICTIM: 2,
        "diag2_uniform5_s2": 1,
        "diag2_init": 1,
    }
    check_sweep(root, states, reference, failed=2)
    assert states[-1].status == "failed" and "has 1 layers but the run asks for 2" in states[-1].error
    # a rerun skips the finished runs (nothing rewritten, adjusted loss read back) and retries the failed one
    stamps = {p: p.stat().st_mtime_ns for p in (root / "diag1_uniform5_s0").rglob("*")}
    again = sweep(specs(), root, workers=2, eval_seq=500, progress=False)
    assert [s.status for s in again] == ["done", "done", "failed"] and [s.attempts for s in again] == [0, 0, 1]
    assert again[0].adjusted == states[0].adjusted
    assert {p: p.stat().st_mtime_ns for p in (root / "diag1_uniform5_s0").rglob("*")} == stamps
    # the same two good runs from the command line: skipped, and the end table shows their adjusted loss
    code, out, err = run_cli(
        capsys,
        "sweep",
        "--root",
        root,
        "--arch",
        "diag",
        "--layers",
        "1",
        "--seeds",
        "0",
        "1",
        "--d",
        "4",
        "--n",
        "8",
        "--batch",
        "64",
        "--steps",
        "40",
        "--save-every",
        "10",
        "--checkpoints",
        "5",
        "--eval-seq",
        "500",
        "--no-progress",
    )
    assert code == 0, err
    assert f"| diag1_uniform5_s0 | done | 40/40 | {states[0].adjusted['mean']:.4g} ± " in out
    assert {p: p.stat().st_mtime_ns for p in (root / "diag1_uniform5_s0").rglob("*")} == stamps
    assert json.loads((root / SWEEP_FILE).read_text())["command"][:2] == ["interp", "sweep"]


PLAN_GRID = """
arch = ["gdpp", "diag"]
layers = [1, 2]
noise = ["uniform:1", "categorical:1,3"]
seeds = [0, 1]
d = 2
n = 4
batch = 8
steps = 4
save-every = 2
checkpoints = 2
lr = [0.01, 0.005]

[[override]]
where = { arch = "diag", layers = 2 }
steps = 6
init_noise = 0.5

[[override]]
where = { arch = "gdpp", layers = 2, noise = "categorical:1,3" }
batch = 0
"""
# `interp sweep --dry-run` of PLAN_GRID over a root holding one finished and one unfinished run, as interp/sweep.py
# planned it before it became a package: the run names, their order and what happens to each.
PLAN = [
    "gdpp1_uniform1_s0_lr0.01: done",
    "gdpp1_uniform1_s0_lr0.005: start",
    "diag1_uniform1_s0_lr0.01: start",
    "diag1_uniform1_s0_lr0.005: start",
    "gdpp2_uniform1_s0_lr0.01: start",
    "gdpp2_uniform1_s0_lr0.005: start",
    "diag2_uniform1_s0_lr0.01: start",
    "diag2_uniform1_s0_lr0.005: start",
    "gdpp1_cat13_s0_lr0.01: start",
    "gdpp1_cat13_s0_lr0.005: start",
    "diag1_cat13_s0_lr0.01: start",
    "diag1_cat13_s0_lr0.005: start",
    "gdpp2_cat13_s0_lr0.01: bad setting: batch must be in [1, 268435456], got 0",
    "gdpp2_cat13_s0_lr0.005: bad setting: batch must be in [1, 268435456], got 0",
    "diag2_cat13_s0_lr0.01: start",
    "diag2_cat13_s0_lr0.005: start",
    "gdpp1_uniform1_s1_lr0.01: start",
    "gdpp1_uniform1_s1_lr0.005: start",
    "diag1_uniform1_s1_lr0.01: start",
    "diag1_uniform1_s1_lr0.005: start",
    "gdpp2_uniform1_s1_lr0.01: start",
    "gdpp2_uniform1_s1_lr0.005: start",
    "diag2_uniform1_s1_lr0.01: start",
    "diag2_uniform1_s1_lr0.005: start",
    "gdpp1_cat13_s1_lr0.01: start",
    "gdpp1_cat13_s1_lr0.005: start",
    "diag1_cat13_s1_lr0.01: start",
    "diag1_cat13_s1_lr0.005: start",
    "gdpp2_cat13_s1_lr0.01: bad setting: batch must be in [1, 268435456], got 0",
    "gdpp2_cat13_s1_lr0.005: bad setting: batch must be in [1, 268435456], got 0",
    "diag2_cat13_s1_lr0.01: start",
    "diag2_cat13_s1_lr0.005: resume at step 6",
]


def test_planning_a_grid_over_a_root_is_unchanged(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(PLAN_GRID)
    options, overrides = load_grid_file(grid)
    by = {s.name: s for s in expand(options, overrides)}
    root = tmp_path / "root"
    for name in ("gdpp1_uniform1_s0_lr0.01", "diag2_cat13_s1_lr0.005"):
        train(by[name].cfg, root / name, progress=False)
    Run(root / "diag2_cat13_s1_lr0.005").checkpoints()[-1][1].unlink()  # unfinished: its final checkpoint is missing
    code, out, err = run_cli(capsys, "sweep", "--root", root, "--grid", grid, "--dry-run")
    assert code == 0, err
    assert out.splitlines() == [f"{root}/{line}" for line in PLAN] + ["32 runs"]
    states = {s.spec.name: s for s in plan(list(by.values()), root)}
    assert [(s.status, s.steps, s.step) for s in states.values()][:3] == [("queued", 4, 4), ("queued", 4, 0)] + [
        ("queued", 4, 0)
    ]
    assert states["diag2_cat13_s1_lr0.005"].step == 6 and states["gdpp2_cat13_s0_lr0.01"].status == "failed"
    assert by["diag2_uniform1_s0_lr0.005"].options == {
        "seed": 0,
        "noise": "uniform:1",
        "layers": 2,
        "arch": "diag",
        "d": 2,
        "n": 4,
        "batch": 8,
        "steps": 6,
        "save_every": 2,
        "checkpoints": 2,
        "lr": 0.005,
        "init_noise": 0.5,
    }
    changed = config_from_options({**by["diag1_uniform1_s0_lr0.01"].options, "steps": 3})
    train(changed, root / "diag1_uniform1_s0_lr0.01", progress=False)
    code, _, err = run_cli(capsys, "sweep", "--root", root, "--grid", grid, "--dry-run")
    assert code == 2 and err == (
        f"interp sweep: error: {root}/diag1_uniform1_s0_lr0.01: holds a run with steps=3, the sweep asks steps=4; "
        "use another --root or remove the directory, nothing was started\n"
    )


def test_progress_goes_through_tqdm_on_a_terminal_and_plain_lines_elsewhere(tmp_path):
    """The live view: a tqdm bar on a terminal (run events printed above it), a plain status line otherwise, events
    only with progress off; the end table says how many sequences its adjusted loss is on."""
    import io

    from tqdm.auto import tqdm

    from interp.sweep import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    result = {"status": "done", "adjusted_loss": {"mean": 0.25, "stderr": 0.01}}
    for stream, live in ((Terminal(), True), (io.StringIO(), True), (io.StringIO(), False)):
        states = plan(expand({"arch": "diag", "layers": 1, "seed": [0, 1], "d": 4, "n": 8, "steps": 100}), tmp_path)
        view = Progress(states, tmp_path, {"backend": "local"}, live=live, stream=stream)
        assert isinstance(view.bar, tqdm) == isinstance(stream, Terminal)
        view.started(states[0])
        states[0].step = 50
        view.tick(force=True)
        view.finished(states[0], result)
        view.close()
        text = stream.getvalue()
        assert "diag1_uniform5_s0: done (100 steps, adjusted loss 0.25)\n" in text
        status = "1 done, 0 running, 0 failed, 1 queued |"
        if not live:
            assert text == "diag1_uniform5_s0: done (100 steps, adjusted loss 0.25)\n"
        elif isinstance(stream, Terminal):
            assert "\r0 done, 1 running, 0 failed, 1 queued |" in text and "50/200 steps" in text and status in text
        else:  # a log file: whole lines, no carriage return
            assert "\r" not in text and text.splitlines()[-1].startswith(status + " 100/200 steps, ")
        assert json.loads((tmp_path / SWEEP_FILE).read_text())["counts"] == {
            "done": 1,
            "running": 0,
            "failed": 0,
            "queued": 1,
        }
    table = end_table(states, 10_000)
    assert table.splitlines()[0] == "| run | status | steps | adjusted loss on 10 000 sequences |"
    assert (
        "| diag1_uniform5_s0 | done | 100/100 | 0.25 ± 0.01 |" in table
        and "| diag1_uniform5_s1 | queued | 0/100 | – |" in table
    )


@pytest.fixture(scope="module")
def ray_local():
    """One local 2-CPU Ray instance shared by the Ray tests (starting one takes several seconds)."""
    ray = pytest.importorskip("ray", reason="ray is in the test extra: pip install -e '.[test]'")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import this file
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_backend_kill_resume_matches_local(tmp_path, reference, ray_local):
    root = tmp_path / "ray"
    states = sweep(specs(), root, backend="ray", retries=1, eval_seq=500, progress=False, task=dying_task)
    check_sweep(root, states, reference)
    assert ray_local.is_initialized()  # the sweep used the instance it found and left it running


@pytest.mark.slow
def test_ray_worker_dying_too_often_fails_the_run_only(tmp_path, ray_local):
    root = tmp_path / "ray0"
    states = sweep(specs()[:2], root, backend="ray", retries=0, eval_seq=0, progress=False, task=dying_task)
    by = {s.spec.name: s for s in states}
    assert by["diag1_uniform5_s0"].status == "done" and Run(root / "diag1_uniform5_s0").is_complete()
    assert by[VICTIM].status == "failed" and "Worker" in by[VICTIM].error and not Run(root / VICTIM).is_complete()


@pytest.mark.slow
def test_ray_resources_no_node_has_are_refused(tmp_path, ray_local):
    gpu = [RunSpec(s.name, s.options, config_from_options({**s.options, "device": "cuda"})) for s in specs()[:1]]
    with pytest.raises(SweepError, match=r"--gpus-per-run: no node .* 0.5 GPUs .*the largest has 2 CPUs, 0 GPUs"):
        sweep(gpu, tmp_path / "gpu", backend="ray", gpus_per_run=0.5, progress=False)
    with pytest.raises(SweepError, match="--cpus-per-run: no node of the Ray cluster has 3 CPUs"):
        sweep(specs()[:1], tmp_path / "cpu", backend="ray", cpus_per_run=3, progress=False)
    assert not (tmp_path / "cpu" / specs()[0].name).exists()  # nothing was started


def logging_task(run_dir: str, cfg: dict, threads: int = 1, eval_seq: int = 0) -> dict:
    """run_task, noting each run's name in <root>/taken.txt as a worker takes it."""
    with open(Path(run_dir).parent / "taken.txt", "a") as f:
        f.write(Path(run_dir).name + "\n")
    return run_task(run_dir, cfg, threads, eval_seq)


@pytest.mark.slow
def test_a_trained_run_is_evaluated_before_runs_still_to_train(tmp_path):
    """A run trained to its last step but not evaluated (no cache entry) needs only its evaluation: the workers take it
    before the runs that still train, whatever the grid's order, so the summary fills in first."""
    options = dict(arch="diag", layers=1, seed=[0, 1, 2], steps=4, batch=32, checkpoints=2)
    specs = expand(options)
    root = tmp_path / "root"
    train(specs[2].cfg, root / specs[2].name, progress=False)  # the grid's last run, trained outside the sweep
    states = sweep(specs, root, workers=1, eval_seq=200, progress=False, task=logging_task)
    assert [s.status for s in states] == ["done"] * 3 and [s.spec.name for s in states] == [s.name for s in specs]
    assert (root / "taken.txt").read_text().split() == [specs[2].name, specs[0].name, specs[1].name]
    trained = load(root / specs[2].name)
    want = evaluate({"m": trained}, EvalSet("uniform:5", n_seq=200, seed=0))["m"].mean
    assert states[2].adjusted["mean"] == pytest.approx(want, rel=1e-9)


@pytest.mark.slow
def test_table_from_a_root(tmp_path, capsys):
    """interp table: best of seeds per cell, its median and worst sequence, cross-checked with evaluate()."""
    root = tmp_path / "root"
    for seed, steps in ((0, 2), (1, 40)):  # seed 1 trains longer, so it is the better seed
        opts = dict(arch="diag", layers=1, seed=seed, steps=steps, batch=256, checkpoints=2)
        train(config_from_options(opts), root / run_name(opts), progress=False)
    code, out, err = run_cli(
        capsys, "table", root, "--n-seq", "1000", "--baseline-seq", "1000", "--json", tmp_path / "t.json"
    )
    assert code == 0, err
    cell = json.loads((tmp_path / "t.json").read_text())["cells"]["diag1|uniform:5"]
    est = evaluate({"m": load(root / "diag1_uniform5_s1")}, EvalSet("uniform:5", n_seq=1000, seed=0))["m"]
    assert cell["best_seed"] == 1 and cell["seeds"] == [0, 1] and cell["paper"] == 0.906
    assert (cell["mean"], cell["median"], cell["worst"]) == pytest.approx((est.mean, est.median, est.worst), rel=1e-12)
    assert "| 1 | DIAG | " in out and "(0.906)" in out and f"median {est.median:.3g}" in out
    assert (root / "table1_evals.json").exists()  # the cache, so a rerun evaluates nothing
    code, _, err = run_cli(capsys, "table", root, "--n-seq", "1000", "--baseline-seq", "1000")
    assert code == 0 and "diag1_uniform5_s1:" not in err  # (an evaluation logs the run's path)
    code, _, err = run_cli(capsys, "table", tmp_path / "nowhere")
    assert code == 2 and err.count("\n") == 1 and "nowhere" in err


@pytest.mark.slow
def test_table_leaves_out_a_run_trained_on_another_input_covariance(tmp_path, capsys):
    """Table 1 has x ~ N(0, I): a d = 10, n = 20 run trained with --x-cov is not in the table, and one line says why."""
    root = tmp_path / "root"
    lam = "diag:" + ",".join(["2"] * 5 + ["0.5"] * 5)
    for name, x_cov in (("eye", None), ("lam", lam)):
        opts = dict(arch="diag", layers=1, steps=2, batch=16, checkpoints=2, x_cov=x_cov)
        train(config_from_options(opts), root / name, progress=False)
    code, out, err = run_cli(
        capsys, "table", root, "--n-seq", "200", "--baseline-seq", "200", "--json", tmp_path / "t.json"
    )
    assert code == 0, err
    assert [Path(r["run"]).name for r in json.loads((tmp_path / "t.json").read_text())["runs"]] == ["eye"]
    (note,) = [line for line in err.splitlines() if "lam" in line]
    assert note == f"skipping {root / 'lam'}: trained on x ~ N(0, {lam}); Table 1 has x ~ N(0, I)"
    assert "| 1 | DIAG | " in out


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_sweep_driver_takes_its_workers_with_it(tmp_path, how):
    """SIGTERM or SIGKILL of `interp sweep`: its workers stop within seconds (they left training going and the
    runs locked before), and each run keeps its resume state."""
    import subprocess
    import time

    root = tmp_path / "root"
    argv = [sys.executable, "-m", "interp.cli", "sweep", "--root", str(root), "--arch", "diag", "--layers", "1"]
    argv += ["--seeds", "0", "1", "--d", "4", "--n", "8", "--batch", "64", "--steps", "200000", "--save-every", "50"]
    argv += ["--workers", "2", "--threads", "1", "--no-progress", "--eval-seq", "0"]
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    runs = [Run(root / f"diag1_uniform5_s{s}") for s in (0, 1)]
    deadline = time.monotonic() + 120
    while not all(r.writer() and r.has_resume() for r in runs):  # both workers training, a resume state saved
        assert time.monotonic() < deadline and driver.poll() is None, "the sweep did not start its runs"
        time.sleep(0.2)
    driver.send_signal(how)
    driver.wait(timeout=30)
    deadline = time.monotonic() + 60
    while any(r.writer() for r in runs):
        assert time.monotonic() < deadline, "a worker kept training after its driver was killed"
        time.sleep(0.2)
    assert all(r.has_resume() and not r.is_complete() for r in runs)


def test_a_model_cell_at_or_below_the_paper_meets_it():
    """Table 1's mark: a model's cell is met within 10% of the paper or below it; a baseline's only near it."""
    from interp.table import _cell

    assert _cell(0.00175, 0.002).endswith("✓") and _cell(0.0021, 0.002).endswith("✓")
    assert _cell(0.0023, 0.002).endswith("✗")
    assert _cell(0.001, 0.1, rel=0.05, atol=0.003, below=False).endswith("✗")
