"""Where a sweep's runs train: `run_task` trains and evaluates one run in a worker; `run_local` runs the tasks in
processes forked from a server that has imported interp once, `run_ray` as Ray tasks. Both start a task whose worker
died again, and the run resumes from its resume state."""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from interp.config import TrainConfig
from interp.evalcache import CACHE_FILE, run_loss
from interp.run import Run
from interp.sweep.grid import SweepError
from interp.sweep.planning import RunState, dispatch_order
from interp.sweep.progress import Progress
from interp.sweep.summary import EVAL_SEQ
from interp.train import extend, train


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
        else:  # finished: a phase its preset added since (the spectral polish), or nothing
            extend(config, run_dir)
        est = None
        if eval_seq:  # its last checkpoint, on the prior, d, n and Λ it was trained on, through the root's cache
            est = run_loss(run_dir, eval_seq, cache=Path(run_dir).parent / CACHE_FILE).to_dict()
    except Exception as err:  # noqa: BLE001  (reported with the run; the sweep goes on)
        return {"status": "failed", "error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - t0}
    return {"status": "done", "adjusted_loss": est, "seconds": time.perf_counter() - t0}


Task = Callable[..., dict]


# A worker that re-imported a script calling the sweep at its top level (no `if __name__ == "__main__":`) exits with
# this status, and the driver stops the sweep with MAIN_GUARD instead of starting it again.
NO_MAIN_GUARD_EXIT = 87
MAIN_GUARD = (
    "the script that started the sweep runs it at import: a worker process imports the main script again, so the "
    'call must sit under `if __name__ == "__main__":` (docs/sweeps.md shows it); nothing was trained'
)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def refuse_when_bootstrapping() -> None:
    """In a worker that is importing the main script (multiprocessing's bootstrap of a script without a main guard):
    exit NO_MAIN_GUARD_EXIT at once, before the sweep writes or starts anything; the driver raises MAIN_GUARD."""
    import multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):
        os._exit(NO_MAIN_GUARD_EXIT)  # the driver says why, once


def _local_child(conn, task: Task, args: tuple, driver: int) -> None:
    """Run one task in a worker, and stop it (as Ctrl-C would: the run keeps its last resume state, its lock is
    released) when the driver is gone, however it died, SIGKILL included. The worker's parent is the fork server,
    which exits when the driver does: the kernel then sends SIGINT (PR_SET_PDEATHSIG), and a watchdog thread checks
    too (the parent changed, or the driver is gone or a zombie). Ends quietly: no traceback, no write to a closed
    pipe."""
    parent = os.getppid()
    _interrupt_when_parent_dies()
    tqdm.set_lock(threading.RLock())  # not tqdm's default multiprocessing lock: a semaphore a stopped worker leaks
    threading.Thread(target=_watch_driver, args=(driver, parent), daemon=True).start()
    try:
        if not _driver_alive(driver, parent):  # gone before the watchdog started
            raise KeyboardInterrupt
        result = task(*args)
        conn.send(result)
        conn.close()
    except (KeyboardInterrupt, BrokenPipeError):  # stopped (its driver gone, or the driver's own interrupt)
        sys.stderr.flush()
        os._exit(130)


def _interrupt_when_parent_dies() -> None:
    """SIGINT to this process when its parent exits (Linux prctl; elsewhere the watchdog alone)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _driver_alive(driver: int, parent: int) -> bool:
    """Whether the sweep's driver still runs: this process's parent unchanged, and the driver neither gone nor a zombie
    (a driver killed but not yet reaped by its own parent still answers kill(pid, 0))."""
    if os.getppid() != parent:
        return False
    try:
        os.kill(driver, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's (cannot happen for our own driver, but never stop then)
        return True
    try:
        with open(f"/proc/{driver}/stat", "rb") as f:
            state = f.read(4096).rsplit(b")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


def _watch_driver(driver: int, parent: int, every: float = 1.0) -> None:
    while True:
        time.sleep(every)
        if not _driver_alive(driver, parent):
            _thread.interrupt_main()  # KeyboardInterrupt in the task: training stops, the lock is released
            time.sleep(10 * every)  # if the main thread did not get there (blocked, or the interrupt was caught):
            os._exit(130)  # the run keeps its last resume state (written atomically); the lock dies with the process


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
    view: Progress,
    task: Task = run_task,
) -> None:
    """One process per run, `workers` at a time (forked from a server that has imported interp once).

    A process that dies without a result (killed, out of memory) is started again, up to `retries` times,
    and resumes from the run's resume state.
    """
    import multiprocessing as mp

    refuse_when_bootstrapping()
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["interp.sweep"])
    queue = deque(dispatch_order(states))
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
                if result is None and proc.exitcode == NO_MAIN_GUARD_EXIT:
                    raise SweepError(MAIN_GUARD)
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
    view: Progress,
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
        for state in dispatch_order(states):
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
