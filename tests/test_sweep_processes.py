"""Issue 51, sweep processes: a driver killed while its own parent has not reaped it (a zombie, which still answers
kill(pid, 0)) takes its workers with it, their locks released and nothing on stderr; the Python example of
docs/sweeps.md runs as written; a script without a main guard gets one error; failed runs are said in Python too."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.run import Run
from interp.sweep import SweepFailed, SweepResult, sweep

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
TINY = '"steps": 20, "d": 2, "n": 4, "batch": 16'


def docs_example() -> str:
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S) if "run_sweep" in b]
    return code


@pytest.mark.slow
def test_the_docs_python_example_runs_as_written(tmp_path):
    code = docs_example().replace('"steps": 2000', TINY)  # tiny settings, the code otherwise as written
    assert TINY in code and 'if __name__ == "__main__":' in code
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "4 runs done, 0 failed" in done.stdout, done.stderr
    assert all(Run(p).is_complete() for p in (tmp_path / "runs" / "grid").iterdir() if p.is_dir())


@pytest.mark.slow
def test_a_script_without_a_main_guard_gets_one_error_and_trains_nothing(tmp_path):
    code = docs_example().replace('"steps": 2000', TINY).replace('if __name__ == "__main__":\n', "if True:\n")
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.count("Traceback") == 1, done.stderr
    assert "SweepError: the script that started the sweep runs it at import" in done.stderr
    assert "__main__" in done.stderr.splitlines()[-1] and "bootstrapping" not in done.stderr
    assert not any(Run(p).has_resume() for p in (tmp_path / "runs" / "grid").iterdir() if p.is_dir())


@pytest.mark.slow
def test_a_sigkilled_driver_not_yet_reaped_takes_its_workers_with_it(tmp_path):
    root = tmp_path / "root"
    argv = [sys.executable, "-m", "interp.cli", "sweep", "--root", str(root), "--arch", "diag", "--layers", "1"]
    argv += ["--seeds", "0", "1", "--d", "4", "--n", "8", "--batch", "64", "--steps", "200000", "--save-every", "50"]
    argv += ["--workers", "2", "--threads", "1", "--no-progress", "--eval-seq", "0"]
    err = tmp_path / "driver.err"
    with open(err, "w") as stderr:
        driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path)
    runs = [Run(root / f"diag1_uniform5_s{s}") for s in (0, 1)]
    try:
        deadline = time.monotonic() + 120
        while not all(r.writer() and r.has_resume() for r in runs):
            assert time.monotonic() < deadline and driver.poll() is None, "the sweep did not start its runs"
            time.sleep(0.2)
        driver.send_signal(signal.SIGKILL)  # and not reaped (no wait) until the workers are checked
        deadline = time.monotonic() + 20
        while any(r.writer() for r in runs):
            assert time.monotonic() < deadline, "a worker kept training after its driver was SIGKILLed"
            time.sleep(0.2)
    finally:
        driver.kill()
        driver.wait()
    time.sleep(1)
    assert err.read_text() == ""  # no traceback, no BrokenPipeError, no leaked semaphore warning
    assert all(r.has_resume() and not r.is_complete() for r in runs)


def failing_task(run_dir: str, cfg: dict, threads: int = 1, eval_seq: int = 0) -> dict:
    return {"status": "failed", "error": "ValueError: planted", "seconds": 0.0}


def test_failed_runs_are_said_by_the_python_api(tmp_path):
    opts = {"arch": "diag", "layers": [1, 2], "d": 2, "n": 4, "steps": 5}
    states = sweep(opts, tmp_path / "a", workers=1, eval_seq=0, progress=False, task=failing_task)
    assert isinstance(states, SweepResult) and not states.ok and len(states.failed) == 2
    with pytest.raises(SweepFailed) as info:
        sweep(opts, tmp_path / "b", workers=1, eval_seq=0, progress=False, task=failing_task, check=True)
    assert "2 of 2 runs failed" in str(info.value) and "planted" in str(info.value)
    assert len(info.value.states.failed) == 2
