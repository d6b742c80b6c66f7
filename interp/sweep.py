"""Sweeps: a grid of `interp train` runs under one root, resumable, on local processes or Ray tasks.

Each run is a directory ROOT/NAME holding exactly what `interp train` writes. NAME comes from the run's
settings: {arch}{layers}_{prior}_s{seed}, plus _{option}{value} for every other option the grid varies.
A rerun skips finished runs and resumes unfinished ones from their resume state; a directory whose
config differs from what the sweep asks is refused before anything starts. ROOT/sweep.json summarises
the sweep and is rewritten atomically whenever a run starts or ends.
"""

from __future__ import annotations

import _thread
import contextlib
import itertools
import json
import math
import os
import re
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from interp.config import ModelConfig, TrainConfig, covariance_spec
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.files import atomic_write_text
from interp.presets import resolve
from interp.run import Run, resolve_model
from interp.tasks import as_prior, prior_slug
from interp.train import train

SWEEP_FILE = "sweep.json"
EVAL_SEQ = 10_000  # sequences for the end table's adjusted loss (interp table uses 100 000)
NAME_AXES = ("arch", "layers", "noise", "seed")  # always in a run's name, in this order
# `interp train` option (dest name) -> TrainConfig field ("model." for ModelConfig fields)
OPTIONS = {
    "arch": "model.param",
    "layers": "model.n_layers",
    "heads": "model.n_heads",
    "d": "model.d",
    "dtype": "model.dtype",
    "noise": "noise",
    "n": "n",
    "seed": "seed",
    "preset": "preset",
    "steps": "steps",
    "batch": "batch",
    "lr": "lr",
    "schedule": "schedule",
    "clip": "clip",
    "checkpoints": "n_checkpoints",
    "save_every": "resume_every",
    "init": "init",
    "init_noise": "init_noise",
    "device": "device",
    "guard": "guard",
    "x_cov": "x_cov",
    "stress": "stress",
    "stress_scale": "stress_scale",
}


class SweepError(ValueError):
    """A sweep that cannot start (conflicting run directory, bad grid file); the message is one line."""


def config_from_options(options: Mapping[str, Any]) -> TrainConfig:
    """The TrainConfig of one run from `interp train` option values (dest names; missing ones default).

    `clip` 0 means no clipping; `noise` is canonicalised (uniform:5.0 -> uniform:5); an `x_cov` spec
    (diag:λ1,...,λd or a .json file) becomes its matrix.
    """
    model, train = {}, {}
    for key, value in options.items():
        if key not in OPTIONS:
            raise ValueError(f"unknown run option {key!r}")
        target = OPTIONS[key]
        if key == "noise":
            value = as_prior(value).spec
        if key == "clip":
            value = value or None
        if key == "x_cov" and isinstance(value, str):
            value = covariance_spec(value)
        if target.startswith("model."):
            model[target[len("model.") :]] = value
        else:
            train[target] = value
    return TrainConfig(model=ModelConfig(**model), **train)


@dataclass
class RunSpec:
    """One run of a sweep: its directory name, its option values and its config (None when they are bad)."""

    name: str
    options: dict[str, Any]
    cfg: TrainConfig | None = None
    error: str | None = None  # a bad setting: the run is reported failed with this and never started


def _value_slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", str(value)).strip("-") or "none"


def _canonical(key: str, value: Any) -> Any:
    if key == "noise":
        try:
            return as_prior(value).spec
        except ValueError:
            return value
    return value


def expand(options: Mapping[str, Any], overrides: Iterable[Mapping[str, Any]] = ()) -> list[RunSpec]:
    """Every combination of the list-valued options (scalars go to every run), in order seed, prior,
    layers, arch, then the other varied options; each override {"where": {...}, option: value, ...}
    sets options on the runs whose settings match all of `where`.
    """
    options = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in options.items()}
    for key in options:
        if key not in OPTIONS:
            raise SweepError(f"unknown run option {key!r}")
    swept = [k for k, v in options.items() if k not in NAME_AXES and len(v) > 1]
    order = [k for k in ("seed", "noise", "layers", "arch") if k in options]
    order += [k for k in options if k not in NAME_AXES]
    overrides = [dict(o) for o in overrides]
    for o in overrides:
        bad = [k for k in o if k != "where" and (k not in OPTIONS or k in NAME_AXES)]
        if bad or not isinstance(o.get("where", {}), dict):
            raise SweepError(
                f"override {o}: {bad[0] if bad else 'where'} cannot be set per run "
                f"(set options other than {', '.join(NAME_AXES)}; match them with where)"
            )
    specs, seen = [], {}
    for combo in itertools.product(*(options[k] for k in order)):
        opts = dict(zip(order, combo))
        for o in overrides:
            where = o.get("where", {})
            if all(_canonical(k, opts.get(k, _default(k))) == _canonical(k, v) for k, v in where.items()):
                opts.update({k: v for k, v in o.items() if k != "where"})
        name = run_name(opts, swept)
        if name in seen:
            raise SweepError(
                f"two runs would share the directory {name} ({seen[name]} and {opts}); "
                f"vary fewer options or give them different values"
            )
        seen[name] = opts
        if opts.get("init"):  # workers (Ray nodes, a forkserver) need not share this process's directory
            opts["init"] = os.path.abspath(opts["init"])
        spec = RunSpec(name, opts)
        try:
            spec.cfg = config_from_options(opts)
            resolve(spec.cfg)
        except (ValueError, TypeError) as err:
            spec.cfg, spec.error = None, f"bad setting: {err}"
        specs.append(spec)
    return specs


def _default(key: str) -> Any:
    """The default value of an option (TrainConfig's, under its option name)."""
    target = OPTIONS[key]
    if target.startswith("model."):
        return getattr(ModelConfig(), target[len("model.") :])
    return getattr(TrainConfig(), target)


def run_name(opts: Mapping[str, Any], swept: Iterable[str] = ()) -> str:
    """{arch}{layers}_{prior}_s{seed}, then _{option}{value} for each varied option: full4_uniform5_s0_lr0.002."""
    get = lambda k: opts.get(k, _default(k))  # noqa: E731
    try:
        prior = prior_slug(get("noise"))
    except ValueError:
        prior = _value_slug(get("noise"))
    name = f"{get('arch')}{get('layers')}_{prior}_s{get('seed')}"
    return name + "".join(f"_{k.replace('_', '')}{_value_slug(get(k))}" for k in swept)


# ---------------------------------------------------------------------------------------------- planning


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
            problem = _conflict(state.run_dir, want)
            if problem:
                conflicts.append(problem)
            state.step = last_step(state.run_dir)
        states.append(state)
    if conflicts:
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        raise SweepError(f"{conflicts[0]}{more}; use another --root or remove the directory, nothing was started")
    return states


def _conflict(run_dir: Path, want: TrainConfig) -> str | None:
    """Why `run_dir` cannot hold the run `want`, or None when it holds that run (or nothing)."""
    run = Run(run_dir)
    if not run.is_run(run_dir):
        if any(p.name != Run.LOCK_FILE for p in run_dir.iterdir()):
            return f"{run_dir}: holds files but no run config (not a run directory)"
        return None
    try:
        have = resolve(run.config())
    except ValueError as err:  # CheckpointError is a ValueError
        return str(err)
    a, b = _flat(have.to_dict()), _flat(want.to_dict())
    diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if diff:
        names = {v: k.replace("_", "-") for k, v in OPTIONS.items()}
        have_s = ", ".join(f"{names.get(k, k)}={a.get(k)}" for k in diff)
        want_s = ", ".join(f"{names.get(k, k)}={b.get(k)}" for k in diff)
        return f"{run_dir}: holds a run with {have_s}, the sweep asks {want_s}"
    return None


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
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


# ---------------------------------------------------------------------------------------------- one run


def run_task(run_dir: str, cfg: dict, threads: int = 1, eval_seq: int = EVAL_SEQ) -> dict:
    """Train one run (start, resume or skip it) and evaluate its final checkpoint; runs in a worker.

    Returns {"status": "done", "adjusted_loss": {...} | None, "seconds": s} or {"status": "failed",
    "error": "..."}: an error in the run never escapes, so the rest of the sweep goes on.
    """
    import torch

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        config = TrainConfig.from_dict(cfg)
        if not Run(run_dir).is_complete():  # train holds the run's writer lock; an earlier start is resumed
            train(config, run_dir, resume=Run.is_run(run_dir), progress=False)
        est = None
        if eval_seq:
            m = resolve_model(run_dir)  # its last checkpoint, on the prior, d, n and Λ it was trained on
            data = EvalSet(m.noise, d=m.d, n=m.n, n_seq=eval_seq, seed=0, x_cov=m.x_cov)
            est = adjusted_loss(m.model, data).to_dict()
    except Exception as err:  # noqa: BLE001  (reported with the run; the sweep goes on)
        return {"status": "failed", "error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - t0}
    return {"status": "done", "adjusted_loss": est, "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------- backends

Task = Callable[..., dict]


def _local_child(conn, task: Task, args: tuple, driver: int) -> None:
    """Run one task in a worker; a watchdog stops it (as Ctrl-C would: the run keeps its last resume state) when
    the driver process is gone, however it died: the worker's parent is the fork server, not the driver."""
    threading.Thread(target=_watch_driver, args=(driver,), daemon=True).start()
    conn.send(task(*args))
    conn.close()


def _watch_driver(driver: int, every: float = 2.0) -> None:
    while True:
        time.sleep(every)
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            _thread.interrupt_main()  # KeyboardInterrupt in the task: training stops, the lock is released
            time.sleep(5 * every)  # if the main thread did not get there (blocked, or the interrupt was caught):
            os._exit(1)  # the run keeps its last resume state (written atomically); the lock dies with the process
        except PermissionError:  # alive, another user's (cannot happen for our own parent, but never kill then)
            pass


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the sweep runs (main thread only), so its cleanup stops the workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def run_local(
    states: list[RunState],
    args_of: Callable[[RunState], tuple],
    workers: int,
    retries: int,
    view: "Progress",
    task: Task = run_task,
) -> None:
    """One process per run, `workers` at a time (forked from a server that has imported interp once).

    A process that dies without a result (killed, out of memory) is started again, up to `retries` times,
    and resumes from the run's resume state.
    """
    import multiprocessing as mp

    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["interp.sweep"])
    queue = deque(s for s in states if s.status == "queued")
    running: dict[str, tuple[Any, Any, RunState]] = {}
    with _terminate_as_interrupt():
        _run_local_loop(ctx, queue, running, args_of, workers, retries, view, task)


def _run_local_loop(ctx, queue, running, args_of, workers, retries, view, task) -> None:
    from multiprocessing.connection import wait

    try:
        while queue or running:
            while queue and len(running) < workers:
                state = queue.popleft()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_local_child, args=(send, task, args_of(state), os.getpid()), daemon=True)
                proc.start()
                send.close()
                running[state.spec.name] = (proc, recv, state)
                view.started(state)
            wait([c for _, c, _ in running.values()] + [p.sentinel for p, _, _ in running.values()], timeout=1.0)
            for name, (proc, conn, state) in list(running.items()):
                result = None
                if conn.poll():
                    try:
                        result = conn.recv()
                    except EOFError:
                        result = None
                elif proc.is_alive():
                    continue
                proc.join()
                conn.close()
                del running[name]
                if result is None:
                    why = f"worker process died (exit code {proc.exitcode})"
                    if state.attempts <= retries:
                        view.retrying(state, why)
                        queue.appendleft(state)
                        continue
                    result = {"status": "failed", "error": f"{why} {state.attempts} times"}
                view.finished(state, result)
            view.tick()
    finally:  # an interrupt or SIGTERM: stop the workers (SIGINT first: each keeps its run's last resume state)
        for proc, _, _ in running.values():
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGINT)
        for proc, conn, _ in running.values():
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()


RAY_MISSING = '--backend ray needs Ray, an optional extra: pip install -e ".[ray]" (or pip install ray)'


def run_ray(
    states: list[RunState],
    args_of: Callable[[RunState], tuple],
    retries: int,
    view: "Progress",
    address: str | None = None,
    cpus_per_run: float = 1,
    gpus_per_run: float = 0,
    task: Task = run_task,
) -> None:
    """Every run is a Ray task on the cluster at `address` (or RAY_ADDRESS), else on a Ray instance
    started here (or the one this process already joined). Ray starts a task again, up to `retries`
    times, when its worker dies; the run resumes from its resume state."""
    try:
        import ray
    except ImportError:
        raise SweepError(RAY_MISSING) from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    pending = {}
    try:
        _check_feasible(ray, cpus_per_run, gpus_per_run)
        remote = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=retries, retry_exceptions=False)(
            task
        )
        for state in states:
            if state.status == "queued":
                pending[remote.remote(*args_of(state))] = state
        view.watch = set(pending.values())  # queued in Ray until their metrics file changes
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                state = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as err:  # the worker died more than `retries` times
                    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                    result = {"status": "failed", "error": f"{type(err).__name__}: {first}"}
                view.finished(state, result)
            view.tick()
    finally:
        for ref in pending:  # interrupted: stop this sweep's tasks (they resume on the next run)
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _check_feasible(ray, cpus: float, gpus: float) -> None:
    """SweepError when no node of the cluster has `cpus` CPUs and `gpus` GPUs (the tasks would wait forever)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if not any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in nodes):
        most = max(((r.get("CPU", 0), r.get("GPU", 0)) for r in nodes), default=(0, 0))
        flag = "--gpus-per-run" if gpus > most[1] else "--cpus-per-run"
        raise SweepError(
            f"{flag}: no node of the Ray cluster has {cpus:g} CPUs and {gpus:g} GPUs for one run "
            f"(the largest has {most[0]:g} CPUs, {most[1]:g} GPUs)"
        )


# ---------------------------------------------------------------------------------------------- progress


@dataclass
class Progress:
    """Live view (done / running / failed / queued, steps/s, ETA) and ROOT/sweep.json, kept up to date."""

    states: list[RunState]
    root: Path
    meta: dict = field(default_factory=dict)
    live: bool = True  # the refreshed status line; each run's start, retry and end are printed regardless
    stream: Any = None  # None: stderr
    every: float = 1.0  # seconds between status lines (30 when not a terminal)

    def __post_init__(self) -> None:
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.watch: set = set()  # submitted runs whose start is only seen on the filesystem (Ray)
        self.samples = deque([(self.t0, self._done_steps())])
        self.window = 60.0
        self.last = self.last_refresh = 0.0
        self.out = sys.stderr if self.stream is None else self.stream
        self.tty = getattr(self.out, "isatty", lambda: False)()
        if not self.tty:
            self.every = max(self.every, 30.0)
        self.write()

    def _done_steps(self) -> int:
        return sum(s.steps if s.status == "done" else min(s.step, s.steps) for s in self.states)

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("done", "running", "failed", "queued")}
        for s in self.states:
            out[s.status] += 1
        return out

    def refresh(self) -> None:
        """Runs submitted to Ray count as running once their metrics file changes; steps from the metrics."""
        started = False
        for s in list(self.watch):
            try:
                touched = Run(s.run_dir).metrics_path.stat().st_mtime >= self.wall0 - 1
            except OSError:
                touched = False
            if touched:
                self.watch.discard(s)
                s.status, s.attempts, started = "running", s.attempts + 1, True
        for s in self.states:
            if s.status == "running":
                s.step = max(s.step, last_step(s.run_dir))
        if started:
            self.write()

    def line(self) -> str:
        c = self.counts()
        done, total = self._done_steps(), sum(s.steps for s in self.states if s.status != "failed")
        now = time.perf_counter()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] > self.window:
            self.samples.popleft()
        t_first, done_first = self.samples[0]
        rate = (done - done_first) / (now - t_first) if now > t_first else 0.0  # over the last `window` seconds
        eta = _duration((total - done) / rate) if rate > 0 else "?"
        return (
            f"{c['done']} done, {c['running']} running, {c['failed']} failed, {c['queued']} queued | "
            f"{done}/{total} steps, {rate:.0f} steps/s, ETA {eta}"
        )

    def _say(self, text: str, event: bool) -> None:
        if self.tty and self.live:
            self.out.write("\r\033[K" + text + ("\n" if event else ""))
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def tick(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self.last_refresh >= min(self.every, 5.0):
            self.last_refresh = now
            self.refresh()
        if self.live and (force or now - self.last >= self.every):
            self.last = now
            self._say(self.line(), event=False)

    def started(self, state: RunState) -> None:
        state.status, state.attempts = "running", state.attempts + 1
        self.write()

    def retrying(self, state: RunState, why: str) -> None:
        state.status = "queued"
        self._say(f"{state.spec.name}: {why}; starting it again (resumes from its last saved state)", event=True)
        self.write()

    def finished(self, state: RunState, result: dict) -> None:
        if state in self.watch:
            self.watch.discard(state)
            state.attempts += 1
        state.status, state.error = result["status"], result.get("error")
        state.adjusted, state.seconds = result.get("adjusted_loss"), result.get("seconds")
        if state.status == "done":
            state.step = state.steps
            loss = f", adjusted loss {state.adjusted['mean']:.4g}" if state.adjusted else ""
            self._say(f"{state.spec.name}: done ({state.steps} steps{loss})", event=True)
        else:
            state.step = max(state.step, last_step(state.run_dir))
            self._say(f"{state.spec.name}: failed: {state.error}", event=True)
        self.write()
        if self.tty:
            self.tick(force=True)

    def write(self) -> None:
        """Rewrite ROOT/sweep.json atomically."""
        data = {
            **self.meta,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "counts": self.counts(),
            "runs": {s.spec.name: s.summary() for s in self.states},
        }
        atomic_write_text(self.root / SWEEP_FILE, json.dumps(_json_safe(data), indent=1) + "\n")


def _json_safe(obj: Any) -> Any:
    """Non-finite floats (a diverged model's loss) become None: sweep.json stays strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def read_summary(root: str | Path) -> dict:
    """ROOT/sweep.json, or {} when there is none (or it is unreadable)."""
    try:
        return json.loads((Path(root) / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        return {}


def end_table(states: list[RunState], eval_seq: int) -> str:
    """Markdown table of every run: status, steps and the final adjusted loss (or the error)."""
    lines = [f"| run | status | steps | adjusted loss ({eval_seq} sequences) |", "|---|---|---|---|"]
    for s in sorted(states, key=lambda s: s.spec.name):
        if s.status == "done" and s.adjusted:
            loss = f"{s.adjusted['mean']:.4g} ± {s.adjusted['stderr']:.2g}"
        else:
            loss = s.error or "–"
        lines.append(f"| {s.spec.name} | {s.status} | {s.step}/{s.steps} | {loss} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the sweep


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
) -> list[RunState]:
    """Train every run of a grid into ROOT/NAME; returns each run's final state (done or failed).

    `runs`: option values as for `expand` ({"arch": ["full", "diag"], "layers": [1, 2], "steps": 500}) or
    a list of RunSpec (explicit names). `backend`: "local" (`workers` processes of `threads` torch
    threads) or "ray" (one Ray task per run with `cpus_per_run` CPUs, default `threads`, and
    `gpus_per_run` GPUs, fractions allowed). Finished runs are skipped (their adjusted loss is read back
    from sweep.json when it was computed on the same `eval_seq` sequences), unfinished ones resumed.
    """
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
    root = Path(root)
    states = plan(specs, root)
    summary = read_summary(root)
    previous = summary.get("runs", {}) if summary.get("eval_seq") == eval_seq else {}
    for s in states:
        old = previous.get(s.spec.name, {})
        if (
            s.status == "queued"
            and Run(s.run_dir).is_complete()
            and old.get("status") == "done"
            and (old.get("adjusted_loss") or not eval_seq)
        ):
            s.status, s.step, s.adjusted, s.seconds = "done", s.steps, old.get("adjusted_loss"), old.get("seconds")
    root.mkdir(parents=True, exist_ok=True)
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
    view.tick(force=True)
    if progress and view.tty:
        sys.stderr.write("\n")
    return states


def load_grid_file(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(options, overrides) from a TOML or JSON grid file: option = value or [values], and [[override]]
    tables with a `where` table. Option names as `interp train`'s flags, dashes or underscores."""
    path = Path(path)
    try:
        text = path.read_text()
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import tomllib  # Python 3.11+

            data = tomllib.loads(text)
    except ImportError:
        raise SweepError(f"{path}: reading TOML needs Python 3.11; write the grid as JSON") from None
    except (OSError, ValueError) as err:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise SweepError(f"{path}: cannot read grid file ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a grid file is a table of options")
    norm = lambda k: {"seeds": "seed"}.get(k.replace("-", "_"), k.replace("-", "_"))  # noqa: E731
    overrides = data.pop("override", [])
    if not isinstance(overrides, list) or not all(isinstance(o, dict) for o in overrides):
        raise SweepError(f"{path}: override must be a list of tables ([[override]])")
    options = {norm(k): v for k, v in data.items()}
    overrides = [{norm(k) if k != "where" else k: v for k, v in o.items()} for o in overrides]
    for o in overrides:
        if isinstance(o.get("where"), dict):
            o["where"] = {norm(k): v for k, v in o["where"].items()}
    bad = [
        k
        for k in [*options, *(k for o in overrides for k in [*o, *o.get("where", {})] if k != "where")]
        if k not in OPTIONS
    ]
    if bad:
        raise SweepError(f"{path}: unknown option {bad[0]!r} (use interp train's option names)")
    return options, overrides


__all__ = [
    "RunSpec",
    "RunState",
    "SweepError",
    "config_from_options",
    "expand",
    "plan",
    "run_name",
    "run_task",
    "sweep",
    "end_table",
    "load_grid_file",
    "read_summary",
    "SWEEP_FILE",
    "EVAL_SEQ",
]
