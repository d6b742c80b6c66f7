"""A sweep's plan: the state of each of its runs under the root (queued, or failed on a bad setting, with the step
it is at), and the refusal of a run directory that holds another run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from interp.config import OPTIONS, TrainConfig
from interp.files import read_regular_tail
from interp.presets import resolve
from interp.run import Run
from interp.sweep.grid import RunSpec, SweepError
from interp.train import extendable


@dataclass(eq=False)
class RunState:
    """A run's place in a sweep: status is queued, running, done or failed."""

    spec: RunSpec
    run_dir: Path
    steps: int = 0
    step: int = 0  # latest logged step
    status: str = "queued"
    attempts: int = 0
    adjusted: dict | None = None  # LossEstimate.to_dict() of the final checkpoint
    error: str | None = None
    seconds: float | None = None
    extend: bool = False  # finished, and `interp.train.extend` adds the phase its preset has since given it
    trained: bool = False  # trained to its last step, not yet evaluated: a worker only evaluates it

    def summary(self) -> dict:
        return {
            "status": self.status,
            "step": self.step,
            "steps": self.steps,
            "attempts": self.attempts,
            "adjusted_loss": self.adjusted,
            "error": self.error,
            "seconds": self.seconds,
        }


def plan(specs: list[RunSpec], root: str | Path) -> list[RunState]:
    """The state of every run under `root`; SweepError when a directory holds a different run."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise SweepError(f"--root: {root} is not a directory")
    states, conflicts = [], []
    for spec in specs:
        state = RunState(spec, root / spec.name)
        if spec.error:
            state.status, state.error = "failed", spec.error
            states.append(state)
            continue
        want = resolve(spec.cfg)
        state.steps = want.steps
        if state.run_dir.exists():
            problem, state.extend = _conflict(state.run_dir, want)
            if problem:
                conflicts.append(problem)
            state.step = last_step(state.run_dir)
        states.append(state)
    if conflicts:
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        raise SweepError(f"{conflicts[0]}{more}; use another --root or remove the directory, nothing was started")
    return states


def dispatch_order(states: list[RunState]) -> list[RunState]:
    """The queued runs in the order the workers take them: the trained ones first (each needs only its evaluation,
    seconds, so the summary and the end table fill in before hours of training), then the grid's order."""
    return sorted((s for s in states if s.status == "queued"), key=lambda s: not s.trained)  # stable


# A config key (flattened, "model.param") as the sweep's options name it ("arch"); the others keep their key.
OPTION_NAMES = {o.field: o.flag.removeprefix("--") for o in OPTIONS.values()}


def _conflict(run_dir: Path, want: TrainConfig) -> tuple[str | None, bool]:
    """(why `run_dir` cannot hold the run `want`, or None when it holds that run or nothing; whether it holds a
    finished run that `interp.train.extend` turns into `want`'s, the one difference the sweep does not refuse)."""
    run = Run(run_dir)
    if not run.is_run(run_dir):
        if any(p.name != Run.LOCK_FILE for p in run_dir.iterdir()):
            return f"{run_dir}: holds files but no run config (not a run directory)", False
        return None, False
    try:
        have = resolve(run.config())
    except ValueError as err:  # CheckpointError is a ValueError
        return str(err), False
    a, b = _flat(have.to_dict()), _flat(want.to_dict())
    diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if diff and extendable(have, want) and run.is_complete():  # a last phase the preset has since added: extended
        return None, True
    if diff:
        have_s = ", ".join(f"{OPTION_NAMES.get(k, k)}={a.get(k)}" for k in diff)
        want_s = ", ".join(f"{OPTION_NAMES.get(k, k)}={b.get(k)}" for k in diff)
        return f"{run_dir}: holds a run with {have_s}, the sweep asks {want_s}", False
    return None, False


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def last_step(run_dir: Path) -> int:
    """The latest step logged in a run's metrics (0 when none)."""
    path = Run(run_dir).metrics_path
    try:  # bounded, regular files only: a FIFO or /dev/zero named metrics.jsonl counts as no log
        lines = read_regular_tail(path, 4096, what="metrics log").decode(errors="replace").splitlines()
    except ValueError:  # CheckpointError
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0
