"""The evaluation cache: one key for every stored evaluation, one file format, used by `interp table`, the sweep's
end table and the report's model records.

A key is the SHA-256 of
  - the subject, what was evaluated: a checkpoint's content digest (SHA-256 of its bytes, `checkpoint_digest`) or a
    baseline's name and tuned parameters (`baseline_subject`). Never a path or an mtime: a copy of a run in another
    directory, a fresh clone or a touched file hits the entry, and a retrained run (other bytes) misses it;
  - the EvalSet's identity (`EvalSet.identity()`: prior, d, n, sequence count, seed, block, σ, Λ), which fixes the
    sequences;
  - `interp.evaluate.EVAL_VERSION`, the version of the evaluation code;
  - the kind of measurement ("loss": the adjusted loss on the set; "report": the report's whole record of a model)
    and the settings of that kind.

A cache file is a JSON object {"format": "interp-eval-cache", "version": 1, "entries": {key: {"value": ..., "check":
SHA-256 of the value, "about": {...}}}}. `about` says in words what an entry is (the run it was computed from, its
step, the sequences); it is not part of the key. Files are read through interp.files' bounded regular-file reader
and written atomically (a temporary file and a rename), merged with what another process wrote meanwhile. A value
that no longer matches its check, or has the wrong shape for its kind (an edit by hand), is left out with a warning
and evaluated afresh: an edited number is never printed as a result. A file that is not such a cache (a list,
another format) is an error naming the file, or, for caches the reader may drop (`strict=False`: the report's
per-run files), left out with a warning.

The tuned baseline parameters of interp.tuning are not evaluations and are not cached here (interp.tuning says why);
they enter the keys of the baselines' losses through `baseline_subject`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from interp.evalset import EvalSet
from interp.evaluate import EVAL_VERSION, LossEstimate, evaluate
from interp.files import CheckpointError, atomic_write_text, read_regular_file
from interp.limits import MAX_TEXT_BYTES
from interp.run import resolve_model

try:
    import fcntl
except ImportError:  # not POSIX: writes are merged, not locked
    fcntl = None

FORMAT = "interp-eval-cache"
FORMAT_VERSION = 1
CACHE_FILE = "table1_evals.json"  # the evaluation cache of a root of runs (interp table, the sweep's end table)
LOSS_FIELDS = ("mean", "stderr", "median", "worst")  # LossEstimate.to_dict()'s numbers, with n_seq

Log = Callable[[str], None]


def _warn(text: str) -> None:
    print(f"interp: warning: {text}", file=sys.stderr, flush=True)


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------- subjects and keys
def baseline_subject(name: str, params: Mapping[str, Any]) -> str:
    """The subject of a baseline's evaluations: its name and tuned parameters (interp.tuning.parameters), so the
    losses of a retuned baseline are other entries."""
    return "baseline:" + _sha(_canonical({"baseline": name, "params": dict(params)}))


def cache_key(subject: str, data: EvalSet, kind: str = "loss", **settings: Any) -> str:
    """The key of an evaluation of `subject` (a checkpoint digest or a baseline subject) on the sequences of `data`
    by this version of the evaluation code; `kind` and `settings` name what was measured and how."""
    blob = {"v": EVAL_VERSION, "subject": subject, "data": data.identity(), "kind": kind, **settings}
    return _sha(_canonical(blob))[:32]


# ---------------------------------------------------------------------------- values
def is_loss(value: Any, n_seq: int | None = None) -> bool:
    """Whether a cached value is a LossEstimate.to_dict() (of `n_seq` sequences when given): numbers where numbers
    belong, mean and stderr present, a positive integer count."""
    if not isinstance(value, dict) or not {"mean", "stderr", "n_seq"} <= set(value):
        return False
    if set(value) - {*LOSS_FIELDS, "n_seq"}:
        return False
    count = value["n_seq"]
    if type(count) is not int or count < 1 or (n_seq is not None and count != n_seq):
        return False
    numbers = [value[k] for k in LOSS_FIELDS if k in value]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers)


def as_estimate(value: dict) -> LossEstimate:
    return LossEstimate(**{k: value[k] for k in (*LOSS_FIELDS, "n_seq") if k in value})


# ---------------------------------------------------------------------------- the file
@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive flock on the cache's directory while it is read, merged and rewritten (best effort: where a
    directory cannot be locked, the merge still keeps what another writer wrote before)."""
    try:
        fd = os.open(directory, os.O_RDONLY) if fcntl is not None else None
    except OSError:
        fd = None
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)


class EvalCache:
    """The entries of one cache file (or, with `path` None, of memory only).

    `strict`: a file that is not an evaluation cache is a CheckpointError naming it (interp table's --cache); else it
    is left out with a warning and replaced on the next write (the report's per-run caches). `keep`: entries kept
    per file, the oldest dropped first (None: all). `log` receives the warnings.
    """

    def __init__(self, path: str | Path | None, strict: bool = True, keep: int | None = None, log: Log | None = _warn):
        self.path = None if path is None else Path(path)
        self.strict, self.keep, self.log = strict, keep, log or (lambda text: None)
        self.entries: dict[str, dict] = self._read(warn=True)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def _read(self, warn: bool) -> dict[str, dict]:
        """The file's entries whose value matches its check; {} when there is no file."""
        if self.path is None or not self.path.exists():
            return {}
        say = self.log if warn else (lambda text: None)
        try:
            data = json.loads(read_regular_file(self.path, MAX_TEXT_BYTES, "evaluation cache"))
        except (ValueError, RecursionError) as err:  # CheckpointError (unreadable, not a regular file) is a ValueError
            why = str(err) if isinstance(err, CheckpointError) else f"{self.path}: not JSON ({err})"
            return self._not_a_cache(why, say)
        if not isinstance(data, dict):
            return self._not_a_cache(f"{self.path}: a JSON {type(data).__name__}, not an evaluation cache", say)
        if not data:
            return {}
        if data.get("format") != FORMAT:
            if data.get("format") is None and all(k.startswith(("model|", "baselines|")) for k in data):
                say(f"{self.path}: an evaluation cache of an older interp (keys of path and mtime); ignored, rewritten")
                return {}
            if data.get("format") == "interp-report-cache":  # the report's own format before this one
                return {}
            return self._not_a_cache(f"{self.path}: format {str(data.get('format'))[:40]!r}, not {FORMAT!r}", say)
        if data.get("version") != FORMAT_VERSION or not isinstance(data.get("entries"), dict):
            return self._not_a_cache(f"{self.path}: evaluation cache version {data.get('version')!r:.20}", say)
        good = {}
        for key, entry in data["entries"].items():
            if isinstance(entry, dict) and "value" in entry and entry.get("check") == _sha(_canonical(entry["value"])):
                good[key] = entry
            else:
                about = entry.get("about") if isinstance(entry, dict) else None
                say(f"{self.path}: entry {key[:12]} ({_about(about)}) does not match its check (edited?); ignored")
        return good

    def _not_a_cache(self, why: str, say: Log) -> dict:
        if self.strict:
            raise CheckpointError(f"{why}; remove it or name another cache file")
        say(f"{why}; ignored")
        return {}

    def get(self, key: str, valid: Callable[[Any], bool] | None = None) -> Any | None:
        """The value stored under `key`, or None; a value that `valid` rejects is left out with a warning."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        if valid is not None and not valid(entry["value"]):
            self.log(f"{self.path}: entry {key[:12]} ({_about(entry.get('about'))}) has the wrong shape; ignored")
            del self.entries[key]
            return None
        return entry["value"]

    def values(self) -> dict[str, Any]:
        """key -> value of every entry that matches its check."""
        return {k: e["value"] for k, e in self.entries.items()}

    def put(self, key: str, value: Any, about: Mapping[str, Any] | None = None) -> None:
        """Store `value` (JSON-ready) under `key` and rewrite the file atomically, keeping what another process
        wrote meanwhile. OSError when the file cannot be written."""
        entry = {"value": value, "check": _sha(_canonical(value))}
        if about:
            entry["about"] = dict(about)
        self.entries.pop(key, None)
        self.entries[key] = entry
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self.path.parent):
            try:
                merged = self._read(warn=False)
            except CheckpointError:
                merged = {}  # strict and no cache: the caller was told when it opened the file
            merged.update(self.entries)
            merged.pop(key, None)
            merged[key] = entry
            if self.keep is not None:
                merged = dict(list(merged.items())[-self.keep :])
            text = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "entries": merged}, indent=1) + "\n"
            atomic_write_text(self.path, text)
        self.entries = merged


def _about(about: Any) -> str:
    if isinstance(about, dict) and about.get("run"):
        return str(about["run"])[:200]
    return "no description"


def open_cache(cache: "EvalCache | str | Path | None", log: Log | None = _warn) -> EvalCache:
    return cache if isinstance(cache, EvalCache) else EvalCache(cache, log=log)


# ---------------------------------------------------------------------------- evaluations through the cache
def cached_loss(
    subject: str,
    data: EvalSet,
    cache: EvalCache,
    compute: Callable[[], LossEstimate] | None,
    about: Mapping[str, Any] | None = None,
) -> tuple[LossEstimate | None, bool]:
    """(the adjusted loss of `subject` on `data`, whether it came from the cache): the cached value when there is
    one, else `compute()`, stored (None when `compute` is None and nothing is cached)."""
    key = cache_key(subject, data)
    hit = cache.get(key, lambda v: is_loss(v, data.n_seq))
    if hit is not None:
        return as_estimate(hit), True
    if compute is None:
        return None, False
    est = compute()
    cache.put(key, est.to_dict(), {**(about or {}), "data": data.describe()})
    return est, False


def cached_losses(
    subjects: Mapping[str, str],
    predictors: Mapping[str, Any],
    data: EvalSet,
    cache: EvalCache,
    about: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, LossEstimate], list[str]]:
    """({name: adjusted loss on `data`}, the names evaluated now) of named predictors whose subjects are
    `subjects[name]`: cached values where there are some, the others evaluated together on one draw of the
    sequences and stored."""
    out: dict[str, LossEstimate] = {}
    for name, subject in subjects.items():
        hit = cache.get(cache_key(subject, data), lambda v: is_loss(v, data.n_seq))
        if hit is not None:
            out[name] = as_estimate(hit)
    missing = [name for name in subjects if name not in out]
    if missing:
        for name, est in evaluate({name: predictors[name] for name in missing}, data).items():
            info = {**((about or {}).get(name) or {}), "data": data.describe()}
            cache.put(cache_key(subjects[name], data), est.to_dict(), info)
            out[name] = est
    return {name: out[name] for name in subjects}, missing


def run_loss(
    path: str | Path,
    n_seq: int,
    seed: int = 0,
    cache: "EvalCache | str | Path | None" = None,
    compute: bool = True,
) -> LossEstimate | None:
    """Adjusted loss of a run's final checkpoint (or of a checkpoint file of a run) on `n_seq` sequences of `seed`
    of the prior, d, n, input covariance and task (quad) the run was trained on, through the cache (the sweep's end
    table).

    `cache`: an EvalCache or a file (default: none, evaluate). `compute=False`: only what the cache holds (None
    when it holds nothing). The run's config must name its prior (a checkpoint file of no run: its metadata's)."""
    m = resolve_model(path)  # the one resolver: checkpoint, run config, prior, d, n, Λ, digest
    if m.noise is None:
        raise CheckpointError(f"{m.checkpoint}: records no training noise prior")
    quad = 0.0 if m.config is None else m.config.quad  # a --quad run: its own task
    data = EvalSet(m.noise, d=m.d, n=20 if m.n is None else m.n, n_seq=n_seq, seed=seed, x_cov=m.x_cov, quad=quad)
    about = {"run": str(path), "step": m.step}
    est, _ = cached_loss(
        m.sha256,
        data,
        open_cache(cache),
        (lambda: evaluate({"m": m.model}, data)["m"]) if compute else None,
        about,
    )
    return est


__all__ = [
    "CACHE_FILE",
    "EvalCache",
    "baseline_subject",
    "cache_key",
    "cached_loss",
    "cached_losses",
    "is_loss",
    "open_cache",
    "run_loss",
]
