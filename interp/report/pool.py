"""The report's measurements in worker processes: each a picklable call, one torch thread a process, the costliest
first, so that two workers of a 2-core machine finish together. Results come back to the caller, which alone writes
the caches (two processes never write one cache file)."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping

import torch


@dataclass(frozen=True)
class Task:
    """fn(*args) in a worker; `cost` orders the queue (larger first)."""

    fn: Callable[..., Any]
    args: tuple
    cost: float = 1.0


def _start(threads: int) -> None:
    torch.set_num_threads(threads)


def _call(task: Task) -> Any:
    return task.fn(*task.args)


def run_tasks(
    tasks: Mapping[Hashable, Task],
    workers: int = 1,
    threads: int = 1,
    on_done: Callable[[Hashable, Any], None] | None = None,
) -> dict:
    """{key: fn(*args)} of every task: in this process when `workers` is 1 (or there is one task), else in `workers`
    processes of `threads` torch threads each, started by a forkserver that has imported the report once (spawn
    where there is no forkserver). `on_done(key, result)` is called in this process as each task ends. A task's
    exception is raised here, after the other workers are stopped."""
    done = on_done or (lambda key, result: None)
    order = sorted(tasks, key=lambda k: -tasks[k].cost)
    if workers <= 1 or len(tasks) <= 1:
        out = {}
        for key in order:
            out[key] = _call(tasks[key])
            done(key, out[key])
        return out
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["interp.report.data"])
    out = {}
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=ctx, initializer=_start, initargs=(threads,)) as pool:
        pending = {pool.submit(_call, tasks[key]): key for key in order}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    key = pending.pop(future)
                    out[key] = future.result()
                    done(key, out[key])
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    return {key: out[key] for key in tasks}
