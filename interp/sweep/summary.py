"""What a sweep reports: ROOT/sweep.json (rewritten atomically whenever a run starts or ends) and the markdown table
printed at its end."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Mapping

from interp.files import atomic_write_text, read_regular_file
from interp.limits import MAX_TEXT_BYTES
from interp.render import DASH, count, loss, markdown
from interp.sweep.grid import SweepError
from interp.sweep.planning import RunState

SWEEP_FILE = "sweep.json"
EVAL_SEQ = 10_000  # sequences for the end table's adjusted loss (interp table uses 100 000)


def write_summary(root: Path, meta: Mapping[str, Any], states: list[RunState]) -> None:
    """Rewrite ROOT/sweep.json atomically: `meta`, the time, the counts by status and every run's state."""
    data = {
        **meta,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": counts(states),
        "runs": {s.spec.name: s.summary() for s in states},
    }
    atomic_write_text(Path(root) / SWEEP_FILE, json.dumps(_json_safe(data), indent=1) + "\n")


def counts(states: list[RunState]) -> dict[str, int]:
    """How many runs are done, running, failed and queued."""
    out = {k: 0 for k in ("done", "running", "failed", "queued")}
    for s in states:
        out[s.status] += 1
    return out


def _json_safe(obj: Any) -> Any:
    """Non-finite floats (a diverged model's loss) become None: sweep.json stays strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def read_summary(root: str | Path) -> dict:
    """ROOT/sweep.json, or {} when there is none (or it is unreadable: the sweep starts its summary afresh). JSON of
    another shape than the summary's (a list, runs that are not a table of tables) is SweepError naming the file: some
    other file sits where the sweep keeps its summary, and the sweep would overwrite it."""
    path = Path(root) / SWEEP_FILE
    try:
        data = json.loads(read_regular_file(path, MAX_TEXT_BYTES, "sweep summary"))
    except (OSError, ValueError, RecursionError):  # CheckpointError (no such file, a FIFO, ...) is a ValueError
        return {}
    if not isinstance(data, dict):
        problem = f"is a JSON {type(data).__name__}, not a sweep summary (an object)"
    elif not isinstance(data.get("runs", {}), dict):
        problem = f"its runs are a {type(data['runs']).__name__}, not a table of run name -> state"
    else:
        bad = [k for k, v in data.get("runs", {}).items() if not isinstance(v, dict)]
        problem = f"run {bad[0]!r:.60} is {data['runs'][bad[0]]!r:.40}, not a table of its state" if bad else None
    if problem:
        raise SweepError(f"{path}: {problem}; move it away or remove it (the sweep rewrites it)")
    return data


def end_table(states: list[RunState], eval_seq: int) -> str:
    """Markdown table of every run: status, steps and the final adjusted loss ± its standard error on `eval_seq`
    sequences, the count in the heading (interp.render.loss), or the error."""
    loss_on = f"adjusted loss on {count(eval_seq)} sequences" if eval_seq else "adjusted loss (not evaluated)"
    rows = []
    for s in sorted(states, key=lambda s: s.spec.name):
        done = s.status == "done" and s.adjusted
        cell = loss(s.adjusted["mean"], s.adjusted["stderr"]) if done else s.error or DASH
        rows.append([s.spec.name, s.status, f"{s.step}/{s.steps}", cell])
    return markdown(["run", "status", "steps", loss_on], rows) + "\n"
