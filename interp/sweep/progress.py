"""A sweep's live view: runs done / running / failed / queued, steps done of all, steps/s and an ETA, through tqdm
(the trainer's progress library) on a terminal, a plain line every 30 s otherwise; each run's start, retry and end is
printed as it happens, and ROOT/sweep.json kept up to date."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from interp.run import Run
from interp.sweep.planning import RunState, last_step
from interp.sweep.summary import counts, write_summary

STATS = "{n}/{total} steps, {rate_noinv_fmt}, ETA {remaining}"
BAR_FORMAT = "{desc} |{bar}| " + STATS  # on a terminal
LINE_FORMAT = "{desc} | " + STATS  # elsewhere (a log file), one line every 30 s
SMOOTHING = 0.02  # the terminal bar's rate: an exponential average over about the last 50 updates (about a minute)


@dataclass
class Progress:
    """Live view (done / running / failed / queued, steps/s, ETA) and ROOT/sweep.json, kept up to date."""

    states: list[RunState]
    root: Path
    meta: dict = field(default_factory=dict)
    live: bool = True  # the status line; each run's start, retry and end are printed regardless
    stream: Any = None  # None: stderr
    every: float = 1.0  # seconds between status lines (30 when not a terminal)

    def __post_init__(self) -> None:
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.watch: set = set()  # submitted runs whose start is only seen on the filesystem (Ray)
        self.last = self.last_refresh = 0.0
        self.out = sys.stderr if self.stream is None else self.stream
        self.tty = getattr(self.out, "isatty", lambda: False)()
        if not self.tty:
            self.every = max(self.every, 30.0)
        self.done0 = self._done_steps()
        self.bar = None
        if self.live and self.tty:
            self.bar = tqdm(
                total=self._total_steps(),
                initial=self.done0,
                desc=self._counts_text(),
                unit=" steps",
                file=self.out,
                dynamic_ncols=True,
                bar_format=BAR_FORMAT,
                smoothing=SMOOTHING,
            )
        self.write()

    def _done_steps(self) -> int:
        return sum(s.steps if s.status == "done" else min(s.step, s.steps) for s in self.states)

    def _total_steps(self) -> int:
        return sum(s.steps for s in self.states if s.status != "failed")

    def _counts_text(self) -> str:
        c = self.counts()
        return f"{c['done']} done, {c['running']} running, {c['failed']} failed, {c['queued']} queued"

    def counts(self) -> dict[str, int]:
        return counts(self.states)

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
        """The status as one line: counts | steps done of all, steps/s since the sweep started, ETA."""
        return tqdm.format_meter(
            self._done_steps(),
            self._total_steps(),
            time.perf_counter() - self.t0,
            prefix=self._counts_text(),
            unit=" steps",
            bar_format=LINE_FORMAT,
            initial=self.done0,
        )

    def _say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.out)  # above the bar, which is drawn again below it
        else:
            self.out.write(text + "\n")
            self.out.flush()

    def tick(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self.last_refresh >= min(self.every, 5.0):
            self.last_refresh = now
            self.refresh()
        if self.bar is not None:
            self.bar.total = self._total_steps()
            self.bar.set_description_str(self._counts_text(), refresh=False)
            done = self._done_steps()
            if done >= self.bar.n:
                self.bar.update(done - self.bar.n)  # redrawn at most every 0.1 s (tqdm's mininterval)
            else:
                self.bar.n = done
            if force:
                self.bar.refresh()
        elif self.live and (force or now - self.last >= self.every):
            self.last = now
            self._say(self.line())

    def started(self, state: RunState) -> None:
        state.status, state.attempts = "running", state.attempts + 1
        self.write()

    def retrying(self, state: RunState, why: str) -> None:
        state.status = "queued"
        self._say(f"{state.spec.name}: {why}; starting it again (resumes from its last saved state)")
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
            self._say(f"{state.spec.name}: done ({state.steps} steps{loss})")
        else:
            state.step = max(state.step, last_step(state.run_dir))
            self._say(f"{state.spec.name}: failed: {state.error}")
        self.write()
        if self.bar is not None:
            self.tick(force=True)

    def close(self) -> None:
        """The last status line (on a terminal the bar, left in place)."""
        self.tick(force=True)
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def write(self) -> None:
        """Rewrite ROOT/sweep.json atomically."""
        write_summary(self.root, self.meta, self.states)
