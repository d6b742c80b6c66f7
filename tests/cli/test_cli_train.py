"""Every `interp train` error path: exit status 2 and one line naming the argument, never a traceback."""

import pytest

from interp import checkpoints as ck
from interp.run import Run
from tests.helpers import random_diag, random_full, run_cli


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    ck.save_checkpoint(path, random_full(d=3, n_layers=2, n_heads=1), 0)
    return path


@pytest.mark.parametrize(
    "argv,name",
    [
        (["--noise", "uniform:-1"], "--noise"),
        (["--noise", "fixed:-0.5"], "--noise"),
        (["--noise", "gaussian:1"], "--noise"),
        (["--layers", "0"], "--layers"),
        (["--layers", "two"], "--layers"),
        (["--arch", "sparse"], "--arch"),
        (["--d", "-3"], "--d"),
        (["--lr", "-1"], "--lr"),
        (["--steps", "0"], "--steps"),
        (["--init", "/nonexistent/ckpt.safetensors"], "--init"),
        (["--resume", "/nonexistent/run"], "--resume"),
        (["--x-cov", "diag:1,-1"], "--x-cov"),
        (["--x-cov", "diag:1,x"], "--x-cov"),
        (["--x-cov", "cov.txt"], "--x-cov"),
        (["--x-cov", "/nonexistent/cov.json"], "--x-cov"),
        (["--x-cov", "diag:1,2"], "--x-cov"),  # 2×2 for the default d = 10
        ([], "--out"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, tmp_path, argv, name):
    if "--init" not in argv and "--resume" not in argv and argv:
        argv = [*argv, "--out", str(tmp_path / "run")]
    code, _, err = run_cli(capsys, "train", *argv)
    assert code == 2
    assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_d_mismatch_with_init_checkpoint(capsys, tmp_path, ckpt):
    code, _, err = run_cli(
        capsys, "train", "--init", str(ckpt), "--d", "10", "--layers", "2", "--out", str(tmp_path / "r")
    )
    assert code == 2 and "--d" in err and "d=3" in err and err.count("\n") == 1
    assert not Run.is_run(tmp_path / "r")  # refused before the run's config is written: the same --out takes a fix


def test_a_refused_family_init_leaves_no_run_and_the_family_trains_on_torch(capsys, tmp_path):
    """--init of another variant is refused in one line before anything of the run is written, so the corrected
    command trains into the same --out; its summary names the path that trained it (autograd, not FULL's kernel)."""
    small = ["--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "2", "--no-progress"]
    code, _, err = run_cli(capsys, "train", *small, "--attention", "gated", "--out", tmp_path / "gated")
    assert code == 0, err
    argv = ["train", *small, "--init", tmp_path / "gated", "--out", tmp_path / "r"]
    code, _, err = run_cli(capsys, *argv, "--attention", "retnet")
    assert code == 2 and err.count("\n") == 1 and "is a gated model, the run a retnet" in err
    assert not Run.is_run(tmp_path / "r")
    code, out, err = run_cli(capsys, *argv, "--attention", "gated")
    assert code == 0, err
    assert "training path: torch (autograd, the gated model's hook-free forward)" in out


def test_unreadable_or_corrupt_init(capsys, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"garbage")
    code, _, err = run_cli(capsys, "train", "--init", str(bad), "--d", "3", "--out", str(tmp_path / "r"))
    assert code == 2 and str(bad) in err and err.count("\n") == 1


def test_out_directory_not_empty(capsys, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("keep me")
    code, _, err = run_cli(capsys, "train", "--out", str(tmp_path / "run"))
    assert code == 2 and "--out" in err
    assert (tmp_path / "run" / "x").read_text() == "keep me"


def test_resume_of_a_non_run_and_conflicting_args(capsys, tmp_path):
    (tmp_path / "plain").mkdir()
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "plain"))
    assert code == 2 and Run.CONFIG_FILE in err and err.count("\n") == 1
    code, _, _ = run_cli(
        capsys,
        "train",
        "--arch",
        "diag",
        "--layers",
        "1",
        "--d",
        "2",
        "--n",
        "4",
        "--batch",
        "8",
        "--steps",
        "5",
        "--save-every",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "ok"),
    )
    assert code == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "ok"), "--d", "5")
    assert code == 2 and "--d" in err and err.count("\n") == 1


def test_x_cov_from_a_json_file(capsys, tmp_path):
    """--x-cov FILE.json: a full matrix lands in the run config; a bad file is one line naming it."""
    import json

    cov = tmp_path / "cov.json"
    cov.write_text(json.dumps([[2.0, 0.5], [0.1, 1.0]]))
    argv = ["train", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "5", "--no-progress"]
    code, _, err = run_cli(capsys, *argv, "--x-cov", cov, "--out", tmp_path / "bad")
    assert code == 2 and err.count("\n") == 1 and "--x-cov" in err and str(cov) in err and "symmetric" in err
    cov.write_text(json.dumps([[2.0, 0.5], [0.5, 1.0]]))
    code, out, err = run_cli(capsys, *argv, "--x-cov", cov, "--out", tmp_path / "run")
    assert code == 0, err
    assert Run(tmp_path / "run").config().x_cov == ((2.0, 0.5), (0.5, 1.0))
    assert "x ~ N(0, a full 2×2 matrix)" in out
    code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", "--x-cov", "diag:2,1")
    assert code == 2 and err.count("\n") == 1 and "--x-cov: diag:2,1" in err and "has a full 2×2 matrix" in err
    code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", "--x-cov", cov, "--no-progress")
    assert code == 0, err  # the same matrix is fine


def test_the_summary_of_a_quad_run_is_on_its_own_task(capsys, tmp_path):
    """interp train's closing evaluation scores a --quad run on the quadratic task it trained on, and says so."""
    from interp import load
    from interp.cli.train import SUMMARY_SEED
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss

    argv = ["train", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "5", "--no-progress"]
    code, out, err = run_cli(capsys, *argv, "--quad", "1", "--out", tmp_path / "run")
    assert code == 0, err
    want = adjusted_loss(
        load(tmp_path / "run"), EvalSet("uniform:5", d=2, n=4, n_seq=10_000, seed=SUMMARY_SEED, quad=1.0)
    )
    assert "quadratic task (--quad 1)" in out and f"adjusted loss {want.mean:.4g}" in out


def test_help_for_every_command(capsys):
    from interp.cli import COMMANDS

    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0 and "usage: interp" in out


def test_resuming_a_finished_run_says_so_and_recomputes_nothing(capsys, tmp_path):
    """--resume on a finished run prints its recorded final loss and exits 0: no training, no evaluation, no
    checkpoint touched, with or without its resume state."""
    run_dir = tmp_path / "run"
    argv = ["--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "20"]
    code, _, err = run_cli(capsys, "train", *argv, "--no-progress", "--out", run_dir)
    assert code == 0, err
    recorded = Run(run_dir).read_metrics()[-1]["loss"]
    before = {p.name: p.read_bytes() for _, p in Run(run_dir).checkpoints()}
    for drop_resume in (False, True):
        if drop_resume:
            Run(run_dir).resume_path.unlink()
        code, out, err = run_cli(capsys, "train", "--resume", run_dir, "--no-progress")
        assert code == 0, err
        assert "already finished at step 20" in out and f"{recorded:.4f}" in out and "nan" not in out
        assert "eval on" not in out  # nothing recomputed
        assert {p.name: p.read_bytes() for _, p in Run(run_dir).checkpoints()} == before


def _sample(opt, tmp_path) -> list[str]:
    """Two valid values of an option on the command line."""
    if opt.key == "stress_scale":
        return ["1.5", "1.25"]  # in (1, 4]
    if opt.key in ("polish", "spectral_polish"):
        return ["3", "2"]  # rounds, in [0, 100]
    if opt.key == "head_width":
        return ["3", "0"]  # a width, or 0 for d + 1
    if opt.kind == "choice":
        return [opt.choices[0], opt.choices[-1]]
    if opt.kind == "path":
        for name in ("a", "b"):
            (tmp_path / name).write_text("")
        return [str(tmp_path / "a"), str(tmp_path / "b")]
    return {
        "count": ["3", "2"],
        "int": ["-2", "5"],
        "number": ["0.5", "0.25"],
        "noise": ["fixed:1", "uniform:2"],
        "x_cov": ["diag:1,2", "diag:2,1"],
        "device": ["cpu", "cpu:0"],
    }[opt.kind]


def test_every_option_has_one_flag_in_train_and_sweep_with_its_declared_default(tmp_path):
    """Both parsers come from interp.config.OPTIONS: each option's flag (and in the sweep its aliases) parses, to a
    value per run in `interp train`, a list in `interp sweep`; an option not given is left out, so the run gets the
    field's declared default."""
    from interp.cli import build_parser
    from interp.config import OPTIONS, TrainConfig, config_from_options

    parser = build_parser()
    args = parser.parse_args(["train", "--out", "r"])
    assert not set(vars(args)) & set(OPTIONS) and args.threads == 1
    assert config_from_options({k: v for k, v in vars(args).items() if k in OPTIONS}) == TrainConfig()
    args = parser.parse_args(["sweep", "--root", "r"])
    assert not set(vars(args)) & set(OPTIONS) and args.threads == 1
    for key, opt in OPTIONS.items():
        one, two = _sample(opt, tmp_path)
        args = vars(parser.parse_args(["train", "--out", "r", opt.flag, one]))
        assert args[key] == _parsed(one) and not set(args) & set(OPTIONS) - {key}, opt.flag
        dims = {"d": 2} if key == "x_cov" else {"noise": "uniform:0"} if key == "spectral_polish" else {}  # (2×2 Λ)
        dims |= {"attention": "qkv"} if key == "head_width" else {}  # the family's head width
        assert opt.of(config_from_options({**dims, key: args[key]})) == opt.to_field(args[key])
        for flag in (opt.flag, *opt.aliases):
            assert vars(parser.parse_args(["sweep", "--root", "r", flag, one, two]))[key] == [
                _parsed(one),
                _parsed(two),
            ]
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--out", "r", "--seeds", "1"])  # --seeds is the sweep's


def _parsed(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def test_resume_refuses_each_option_that_differs_and_takes_the_same_values(capsys, tmp_path):
    """`interp train --resume RUN --flag value`, for every option: the run's own value (in any spelling of it) resumes,
    another is refused in one line naming the flag. The old flag spellings (--arch, --checkpoints, --save-every)
    are the options' flags."""
    from interp.config import OPTIONS

    init = tmp_path / "init.safetensors"
    ck.save_checkpoint(init, random_diag(d=2, n_layers=1), 0)
    other = tmp_path / "other.safetensors"
    other.write_bytes(init.read_bytes())
    argv = ["--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--batch", "8", "--steps", "5"]
    argv += ["--save-every", "1", "--checkpoints", "2", "--x-cov", "diag:1,2", "--init", init, "--dtype", "float64"]
    code, _, err = run_cli(capsys, "train", *argv, "--no-progress", "--out", tmp_path / "run")
    assert code == 0, err
    # (the run's value, another); lr, schedule, stress and stress-scale as the fast preset resolves them for DIAG-1
    values = {
        "d": ("2", "3"),
        "layers": ("1", "2"),
        "heads": ("1", "2"),
        "arch": ("diag", "gdpp"),
        "dtype": ("float64", "float32"),
        "noise": ("uniform:5.0", "uniform:4"),
        "n": ("4", "5"),
        "seed": ("0", "1"),
        "preset": ("fast", "paper"),
        "steps": ("5", "6"),
        "batch": ("8", "16"),
        "lr": ("0.01", "0.02"),
        "schedule": ("onecycle", "constant"),
        "clip": ("1", "0"),
        "guard": ("robust", "none"),
        "checkpoints": ("2", "3"),
        "save_every": ("1", "2"),
        "init": (init, other),
        "init_noise": ("0", "0.5"),
        "device": ("cpu", "cpu:0"),
        "x_cov": ("diag:1,2", "diag:2,1"),
        "stress": ("0", "0.25"),
        "stress_scale": ("1.4", "1.25"),
        "polish": ("0", "2"),
        "polish_tail": ("0", "0.5"),
        "spectral_polish": ("0", "2"),
        "start_as": ("diag", "gdpp"),
        "attention": ("lsa", "qkv"),
        "head_width": ("0", "3"),
        "mlp": ("none", "relu"),
        "mlp_width": ("32", "16"),
        "quad": ("0", "0.5"),
    }
    assert set(values) == set(OPTIONS)
    same = [a for key, (v, _) in values.items() for a in (OPTIONS[key].flag, v)]
    code, out, err = run_cli(capsys, "train", "--resume", tmp_path / "run", *same, "--no-progress")
    assert code == 0 and "already finished at step 5" in out, err
    for key, (_, differs) in values.items():
        flag = OPTIONS[key].flag
        code, _, err = run_cli(capsys, "train", "--resume", tmp_path / "run", flag, differs)
        assert code == 2 and err.count("\n") == 1, (flag, err)
        assert err.startswith(f"interp train: error: {flag}: ") and "does not match the run being resumed" in err, err
