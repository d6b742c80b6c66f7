"""The CLI's error contract (interp/cli/__init__.py): a user's mistake is one line and exit status 2, a bug is a
traceback, a line saying so and exit status 1, --debug shows the traceback of a user's mistake too, and Ctrl-C at
any moment, start-up included, is "interrupted" and exit status 130 without a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.files import InvalidArgument, atomic_write_text
from tests.helpers import run_cli
from tests.test_hostile import _read_only

ROOT = Path(__file__).resolve().parents[2]


def _boom(exc):
    def cmd(args):
        raise exc

    return cmd


def test_a_plain_error_is_a_bug_with_its_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("interp.cli.table.cmd_table", _boom(ValueError("something inside went wrong")))
    code, _, err = run_cli(capsys, "table", tmp_path)
    assert code == 1
    assert "Traceback (most recent call last)" in err and "ValueError: something inside went wrong" in err
    assert err.strip().splitlines()[-1] == (
        "interp table: internal error (a bug in interp; please report it with the traceback above)"
    )


@pytest.mark.parametrize("exc", [KeyError("x"), AttributeError("y"), RuntimeError("z"), OSError("no file named")])
def test_other_exceptions_are_bugs_too(tmp_path, monkeypatch, capsys, exc):
    monkeypatch.setattr("interp.cli.table.cmd_table", _boom(exc))
    code, _, err = run_cli(capsys, "table", tmp_path)
    assert code == 1 and "Traceback" in err and "internal error" in err


def test_an_interp_error_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("interp.cli.table.cmd_table", _boom(InvalidArgument("--thing: must be positive, got -1")))
    code, out, err = run_cli(capsys, "table", tmp_path)
    assert code == 2 and out == ""
    assert err == "interp table: error: --thing: must be positive, got -1\n"


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_prints_the_traceback_of_a_user_error(tmp_path, monkeypatch, capsys, where):
    monkeypatch.setattr("interp.cli.table.cmd_table", _boom(InvalidArgument("--thing: bad")))
    argv = ["--debug", "table", tmp_path] if where == "before" else ["table", tmp_path, "--debug"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "Traceback (most recent call last)" in err and "InvalidArgument: --thing: bad" in err
    assert err.strip().splitlines()[-1] == "interp table: error: --thing: bad"


def test_an_os_error_names_its_file(tmp_path, monkeypatch, capsys):
    target = tmp_path / "3"
    target.mkdir()
    with pytest.raises(IsADirectoryError) as info:  # the atomic write names the file it writes, not its temporary
        atomic_write_text(target, "x")
    assert info.value.filename == str(target)
    monkeypatch.setattr("interp.cli.table.cmd_table", lambda args: atomic_write_text(target, "x"))
    code, _, err = run_cli(capsys, "table", tmp_path)
    assert code == 2 and err == f"interp table: error: {target}: Is a directory\n", err


def test_keyboard_interrupt_in_process_is_130(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("interp.cli.table.cmd_table", _boom(KeyboardInterrupt()))
    code, _, err = run_cli(capsys, "table", tmp_path)
    assert code == 130 and err == "interp table: interrupted\n"


def test_argparse_errors_stay_one_line(capsys):
    code, _, err = run_cli(capsys, "train", "--layers", "0")
    assert code == 2 and err.count("\n") == 1 and "--layers" in err
    code, _, err = run_cli(capsys, "bogus")
    assert code == 2 and "invalid choice" in err and "Traceback" not in err


def test_help_lists_every_command_without_importing_torch():
    code = (
        "import sys\nfrom interp.cli import COMMANDS, main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "heavy = [m for m in ('torch', 'transformer_lens', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for name in ("train", "sweep", "table", "eval", "probe", "drift", "report", "export", "import"):
        assert f"    {name} " in done.stdout, done.stdout


def test_the_listed_help_is_each_commands_own():
    """`interp --help` lists each command from the help its add() passes to add_parser (nothing kept twice)."""
    from interp.cli import build_parser

    def helps(parser):
        action = next(a for a in parser._actions if a.dest == "command")
        return {c.dest: c.help for c in action._choices_actions}

    assert helps(build_parser(["--help"])) == helps(build_parser())


def test_a_bad_preset_in_a_run_config_names_the_file(tmp_path, capsys):
    from interp.config import ModelConfig, TrainConfig
    from interp.train import train

    cfg = TrainConfig(model=ModelConfig(d=2, n_layers=1, param="diag"), noise="uniform:1", n=4, batch=8, steps=2)
    run = train(cfg, tmp_path / "run", progress=False).run_dir
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "preset": "bogus"}))
    code, _, err = run_cli(capsys, "eval", run, "--no-baselines", "--n-seq", "10")
    assert code == 2 and err.count("\n") == 1, err
    assert str(run / "config.json") in err and "preset must be one of fast, paper, got 'bogus'" in err, err


def test_a_sweep_whose_summary_is_a_directory_is_refused_before_training(tmp_path, capsys):
    root = tmp_path / "root"
    (root / "sweep.json").mkdir(parents=True)
    start = time.perf_counter()
    code, _, err = run_cli(capsys, "sweep", "--root", root, "--arch", "diag", "--layers", "1", "--steps", "1")
    assert code == 2 and err.count("\n") == 1 and str(root / "sweep.json") in err, err
    assert not any(p.name != "sweep.json" for p in root.iterdir()) and time.perf_counter() - start < 30


def test_table_on_a_read_only_root_caches_in_the_users_cache_directory(tmp_path, capsys, monkeypatch):
    """Issue 51: a read-only root is read, not refused; its evaluations go to $XDG_CACHE_HOME/interp (issue 24 had
    it refused before evaluating)."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with _read_only(root):
        code, out, err = run_cli(capsys, "table", root, "--baselines-only", "--noise", "uniform:1", "--quick")
    assert code == 0 and out, err
    assert f"{root} is not writable; evaluations are cached in {tmp_path / 'xdg' / 'interp'}" in err
    assert list(root.iterdir()) == [] and list((tmp_path / "xdg" / "interp").glob("table1_evals-root-*.json"))


# ---------------------------------------------------------------------------- Ctrl-C in a real process
def _interp() -> list[str]:
    script = Path(sys.executable).with_name("interp")  # the console script (interp = interp.cli:main)
    return [str(script)] if script.exists() else [sys.executable, "-m", "interp.cli"]


def _interrupt(out: Path, delay: float | None) -> subprocess.CompletedProcess:
    """`interp train` sent SIGINT `delay` seconds after it started (None: once its run directory holds a config,
    i.e. while it trains)."""
    argv = [*_interp(), "train", "--arch", "diag", "--layers", "1", "--d", "2", "--n", "4", "--batch", "16"]
    argv += ["--steps", "1000000", "--no-progress", "--out", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # as a terminal starts it: SIGINT at its default, even where this test runs in a background job (a shell starts
    # those with SIGINT ignored, which the child would inherit and interp, rightly, leave alone)
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=default_sigint
    )
    if delay is None:
        deadline = time.monotonic() + 120
        while not (out / "metrics.jsonl").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # well into the training loop
    else:
        time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 120
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=2)
            return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
        except subprocess.TimeoutExpired as err:
            seen = err.stderr.decode() if isinstance(err.stderr, bytes) else err.stderr or ""
            if SWALLOWED_AT_STARTUP in seen or time.monotonic() > deadline:
                proc.kill()  # CPython printed the interrupt and carried on: the run would train its 10⁶ steps
                stdout, stderr = proc.communicate(timeout=60)
                return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


# CPython's start-up, computing sys.path[0] for the console script, reports an exception there (a KeyboardInterrupt
# too) with this line and its traceback, then runs the program: a Ctrl-C that lands there is lost before any of
# interp's code runs (seen once in about 20 runs of the test on a loaded 2-core machine).
SWALLOWED_AT_STARTUP = "Failed checking if argv[0] is an import path entry"


def _in_python_startup(done: subprocess.CompletedProcess) -> bool:
    """The signal came before any of interp's code ran, in Python's own start-up: before Python installed its SIGINT
    handler (killed by the signal, nothing printed), in its core or `site` initialisation ("Fatal Python error"), or
    in the import machinery looking for the package (a traceback without one frame of interp/), or in the check of
    argv[0] as an import path entry, which CPython reports and then goes on from (SWALLOWED_AT_STARTUP). A loaded
    machine can take a second to get past these."""
    if done.returncode == -signal.SIGINT and not done.stderr:
        return True
    if "Fatal Python error" in done.stderr or SWALLOWED_AT_STARTUP in done.stderr:
        return True
    return "Traceback" in done.stderr and str(ROOT / "interp") not in done.stderr


@pytest.mark.slow
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(tmp_path):
    landed = 0
    for i, delay in enumerate([0.05, 0.2, 0.5, 1.0, 2.0, 3.0]):
        for attempt in range(3):
            done = _interrupt(tmp_path / f"run{i}_{attempt}", delay)
            if not _in_python_startup(done):
                break
        else:
            continue  # every try landed before interp's code: nothing of interp's to check at this delay
        landed += 1
        assert done.returncode == 130, (delay, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.endswith("interrupted\n"), (delay, done.stderr)
        assert done.stderr.count("\n") == 1, (delay, done.stderr)
    assert landed >= 4
    during_training = _interrupt(tmp_path / "trained", None)
    assert during_training.returncode == 130 and during_training.stderr == "interp train: interrupted\n"
    assert (tmp_path / "trained" / "config.json").exists()  # it had started: the run is there to resume
