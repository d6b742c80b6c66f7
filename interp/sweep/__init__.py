"""Sweeps: a grid of `interp train` runs under one root, resumable, on local processes or Ray tasks.

Each run is a directory ROOT/NAME holding exactly what `interp train` writes. NAME comes from the run's
settings: {arch}{layers}_{prior}_s{seed}, plus _{option}{value} for every other option the grid varies.
A rerun skips finished runs and resumes unfinished ones from their resume state; a directory whose
config differs from what the sweep asks is refused before anything starts. ROOT/sweep.json summarises
the sweep and is rewritten atomically whenever a run starts or ends.

By concern, bottom to top: `grid` (options, expansion, run names, grid files), `planning` (each run's state under
the root, conflicts), `summary` (sweep.json, the end table), `progress` (the live view), `executors` (the worker,
local processes, Ray); `sweep` here puts them together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from interp.config import OPTIONS, config_from_options
from interp.evalcache import CACHE_FILE, open_cache, run_loss
from interp.files import InterpError, InvalidType, as_path
from interp.run import Run
from interp.sweep.executors import RAY_MISSING, Task, refuse_when_bootstrapping, run_local, run_ray, run_task
from interp.sweep.grid import NAME_AXES, RunSpec, SweepError, expand, load_grid_file, run_name, unmatched_where
from interp.sweep.planning import RunState, last_step, plan
from interp.sweep.progress import Progress
from interp.sweep.summary import EVAL_SEQ, SWEEP_FILE, end_table, read_summary


class SweepFailed(InterpError, RuntimeError):
    """Runs of a sweep failed (`sweep(..., check=True)`); `.states` holds every run's final state. The message is
    one line: how many failed, the first one's name and error."""

    def __init__(self, message: str, states: "SweepResult"):
        super().__init__(message)
        self.states = states


class SweepResult(list):
    """Every run's final state (a list of RunState, in the grid's order), and which failed: `.failed` (the runs not
    done), `.ok` (none failed), `.check()` (SweepFailed when some did)."""

    @property
    def failed(self) -> list[RunState]:
        return [s for s in self if s.status != "done"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def check(self) -> "SweepResult":
        failed = self.failed
        if failed:
            first = failed[0]
            raise SweepFailed(
                f"{len(failed)} of {len(self)} runs failed; first {first.spec.name}: {first.error or first.status}",
                self,
            )
        return self


def sweep(
    runs: Mapping[str, Any] | list[RunSpec],
    root: str | Path,
    overrides: Iterable[Mapping[str, Any]] = (),
    backend: str = "local",
    workers: int = 1,
    threads: int = 1,
    retries: int = 2,
    address: str | None = None,
    cpus_per_run: float | None = None,
    gpus_per_run: float = 0,
    eval_seq: int = EVAL_SEQ,
    progress: bool = True,
    meta: Mapping[str, Any] | None = None,
    task: Task = run_task,
    check: bool = False,
) -> SweepResult:
    """Train every run of a grid into ROOT/NAME; returns each run's final state (done or failed) as a SweepResult, a
    list whose `.failed` names the runs that failed and `.ok` says whether none did; with `check`, SweepFailed is raised
    instead when some did (after every run ended, the failed ones reported in ROOT/sweep.json), as `interp sweep`
    exits with status 1. Worker processes need the calling script's sweep under `if __name__ == "__main__":`.

    `runs`: option values as for `expand` ({"arch": ["full", "diag"], "layers": [1, 2], "steps": 500}) or
    a list of RunSpec (explicit names). `backend`: "local" (`workers` processes of `threads` torch
    threads) or "ray" (one Ray task per run with `cpus_per_run` CPUs, default `threads`, and
    `gpus_per_run` GPUs, fractions allowed). Finished runs are skipped (their adjusted loss is read back
    from sweep.json when it was computed on the same `eval_seq` sequences), unfinished ones resumed.
    """
    refuse_when_bootstrapping()  # a worker re-importing a script without a main guard: nothing is written
    if not isinstance(runs, Mapping) and not (isinstance(runs, list) and all(isinstance(r, RunSpec) for r in runs)):
        raise InvalidType(f"runs must be a dict of option values or a list of RunSpec, got {type(runs).__name__}")
    root = as_path(root, "root")
    if not isinstance(check, bool):
        raise InvalidType(f"check must be True or False, got {check!r:.60}")
    if backend not in ("local", "ray"):
        raise SweepError(f"unknown backend {backend!r} (local or ray)")
    if workers < 1 or threads < 1 or retries < 0 or eval_seq < 0 or gpus_per_run < 0:
        raise SweepError("workers and threads must be >= 1, retries, eval_seq and gpus_per_run >= 0")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise SweepError(RAY_MISSING) from None
    if backend == "local" and gpus_per_run:
        raise SweepError("--gpus-per-run: only for --backend ray (local runs share whatever --device gives them)")
    specs = expand(runs, overrides) if isinstance(runs, Mapping) else list(runs)
    if len({s.name for s in specs}) != len(specs):
        raise SweepError("two runs share a name")
    if gpus_per_run and any(s.cfg is not None and s.cfg.device == "cpu" for s in specs):
        raise SweepError("--gpus-per-run: the runs train on --device cpu; pass --device cuda")
    if (root / SWEEP_FILE).is_dir():  # found now, not when the first run ends and the summary cannot be written
        raise SweepError(f"{root / SWEEP_FILE}: is a directory; the sweep writes its summary there")
    states = plan(specs, root)
    previous = read_summary(root).get("runs", {})  # only its timings: losses come from the validated cache
    cache = open_cache(root / CACHE_FILE) if eval_seq else None
    for s in states:
        if s.status != "queued" or not Run(s.run_dir).is_complete() or s.extend:
            continue
        hit = run_loss(s.run_dir, eval_seq, cache=cache, compute=False) if eval_seq else None
        if hit is not None or not eval_seq:  # finished and evaluated: nothing to do
            seconds = previous.get(s.spec.name, {}).get("seconds")
            s.status, s.step, s.adjusted = "done", s.steps, None if hit is None else hit.to_dict()
            s.seconds = seconds if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None
        else:  # finished, not evaluated: a worker only evaluates it, before the runs still to train
            s.trained = True
    root.mkdir(parents=True, exist_ok=True)
    if not os.access(root, os.W_OK | os.X_OK):
        raise SweepError(f"--root: {root} is not a writable directory")
    info = {"backend": backend, "eval_seq": eval_seq, **(meta or {})}
    view = Progress(states, root, info, live=progress)
    args_of = lambda s: (str(s.run_dir.resolve()), s.spec.cfg.to_dict(), threads, eval_seq)  # noqa: E731
    try:
        if backend == "local":
            run_local(states, args_of, workers, retries, view, task)
        else:
            run_ray(states, args_of, retries, view, address, cpus_per_run or threads, gpus_per_run, task)
    finally:  # interrupted: what was running is queued again (a rerun resumes it)
        for s in states:
            if s.status == "running":
                s.status = "queued"
        view.write()
        view.close()
    result = SweepResult(states)
    return result.check() if check else result


__all__ = [
    "NAME_AXES",
    "OPTIONS",
    "Progress",
    "RAY_MISSING",
    "RunSpec",
    "RunState",
    "SweepError",
    "SweepFailed",
    "SweepResult",
    "config_from_options",
    "expand",
    "last_step",
    "load_grid_file",
    "plan",
    "run_local",
    "run_name",
    "run_ray",
    "run_task",
    "sweep",
    "unmatched_where",
    "end_table",
    "read_summary",
    "SWEEP_FILE",
    "EVAL_SEQ",
]
