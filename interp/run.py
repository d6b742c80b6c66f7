"""A run directory as one object: its files, its validated config, its checkpoints, its writer lock.

Layout (Run alone knows these names):
  config.json                               the TrainConfig, with "format_version"
  checkpoints/step_{step:07d}.safetensors   the geometric trajectory (model weights only)
  resume.safetensors                        the latest full state: weights, Adam state, data RNG, the config
  metrics.jsonl                             one JSON line per logged step
  trained_on.jsonl                          one JSON line per training segment: its first step, machine, path
  .lock                                     the writer lock (an OS lock: it dies with its process); holds the PID

One writer at a time: `with run.lock():` holds an exclusive flock on .lock and refuses a second writer in
one line naming the holder's PID. Readers never take the lock; `run.writer()` says whether a run is training.

`load(path)` / `load_with_meta(path)` take a checkpoint file or a run directory (its last checkpoint);
`resolve_model(path)` says what such a path is: which model, step, training prior, d, n and input covariance. A
checkpoint inside a run is always checked against the run's config (`Run.load_checkpoint`): every loader above goes
through it, so no command reads a DIAG checkpoint as part of a FULL run. Every file is read through interp.files'
bounded, regular-file-only reads.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from interp import checkpoints as ck
from interp.config import Matrix, TrainConfig
from interp.files import CheckpointError, InvalidArgument, as_path, atomic_write_text, read_regular_file
from interp.limits import MAX_CONFIG_BYTES, MAX_TEXT_BYTES
from interp.model import LinearTransformer
from interp.presets import resolve

FORMAT_VERSION = 1
_CKPT_RE = re.compile(r"^step_(\d{1,12})\.safetensors$")
# The phases that follow Adam, in the order a run trains them (interp.train): each starts from the one before.
POST_ADAM = ("polish", "spectral_polish")


class RunLocked(CheckpointError):
    """Another process is writing this run directory; the message names its PID."""

    def __init__(self, message: str, pid: int | None):
        super().__init__(message)
        self.pid = pid


class Run:
    """The run directory at `path` (it need not exist yet). Cheap to make; every read validates."""

    CONFIG_FILE = "config.json"
    RESUME_FILE = "resume.safetensors"
    METRICS_FILE = "metrics.jsonl"
    TRAINED_ON_FILE = "trained_on.jsonl"
    CKPT_DIR = "checkpoints"
    LOCK_FILE = ".lock"

    def __init__(self, path: str | Path):
        self.path = as_path(path, "run directory")

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------ paths
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config_path(self) -> Path:
        return self.path / self.CONFIG_FILE

    @property
    def resume_path(self) -> Path:
        return self.path / self.RESUME_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / self.METRICS_FILE

    @property
    def trained_on_path(self) -> Path:
        return self.path / self.TRAINED_ON_FILE

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / self.CKPT_DIR

    @property
    def lock_path(self) -> Path:
        return self.path / self.LOCK_FILE

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoint_dir / f"step_{step:07d}.safetensors"

    # ------------------------------------------------------------------ finding runs
    @classmethod
    def is_run(cls, path: str | Path) -> bool:
        """Whether `path` is a directory holding a run config (valid or not: a FIFO or a dangling link named
        config.json still makes a run, whose config() then says what is wrong, rather than a loose directory)."""
        return os.path.lexists(Path(path) / cls.CONFIG_FILE)

    @classmethod
    def find(cls, root: str | Path, recursive: bool = False) -> list["Run"]:
        """The run directories directly under `root` (at any depth with `recursive`), sorted by path."""
        root = Path(root)
        if not root.is_dir():
            return []
        found = (p.parent for p in root.rglob(cls.CONFIG_FILE)) if recursive else root.iterdir()
        return [cls(p) for p in sorted(set(found)) if cls.is_run(p)]

    @classmethod
    def of(cls, path: str | Path) -> "Run | None":
        """The run a run directory or one of its checkpoint files belongs to; None for a loose file."""
        path = Path(path)
        if path.is_dir():
            return cls(path) if cls.is_run(path) else None
        if path.parent.name == cls.CKPT_DIR and cls.is_run(path.parent.parent):
            return cls(path.parent.parent)
        if path.name == cls.RESUME_FILE and cls.is_run(path.parent):
            return cls(path.parent)
        return None

    @classmethod
    def owns(cls, path: str | Path) -> "Run | None":
        """The run whose own file (config, resume state, metrics, machine record, lock, a checkpoint) `path` is, else
        None."""
        path = Path(os.path.abspath(path))
        own = (cls.CONFIG_FILE, cls.RESUME_FILE, cls.METRICS_FILE, cls.TRAINED_ON_FILE, cls.LOCK_FILE, cls.CKPT_DIR)
        if path.name in own:
            return cls(path.parent) if cls.is_run(path.parent) else None
        if path.parent.name == cls.CKPT_DIR and cls.is_run(path.parent.parent):
            return cls(path.parent.parent)
        return None

    # ------------------------------------------------------------------ config
    def config(self) -> TrainConfig:
        """The validated TrainConfig the run was started with; CheckpointError names the file and the problem."""
        if not self.path.is_dir():
            why = "not a directory, so no run" if os.path.lexists(self.path) else "no such run directory"
            raise CheckpointError(f"{self.path}: {why}")
        path = self.config_path
        if not path.exists():
            raise CheckpointError(f"{path}: no such file (not a run directory)")
        try:
            data = json.loads(read_regular_file(path, MAX_CONFIG_BYTES, "run config"))
        except (ValueError, RecursionError) as err:
            if isinstance(err, CheckpointError):
                raise
            raise CheckpointError(f"{path}: unreadable run config ({err})") from None
        if not isinstance(data, dict):
            raise CheckpointError(f"{path}: run config must be a JSON object, got {data!r:.60}")
        version = data.pop("format_version", None)
        if version != FORMAT_VERSION:
            raise CheckpointError(f"{path}: unknown run config format version {version!r:.60}")
        try:
            return TrainConfig.from_dict(data)
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{path}: bad run config ({err})") from None

    def write_config(self, cfg: TrainConfig) -> None:
        atomic_write_text(
            self.config_path, json.dumps({"format_version": FORMAT_VERSION, **cfg.to_dict()}, indent=2, sort_keys=True)
        )

    @property
    def prior(self) -> str:
        """The noise prior the run is trained on (its config's spec)."""
        return self.config().noise

    @property
    def x_cov(self) -> Matrix | None:
        """The input covariance Λ the run is trained on, x ~ N(0, Λ) (its config's x_cov; None: I)."""
        return self.config().x_cov

    @property
    def total_steps(self) -> int:
        return resolve(self.config()).steps

    # ------------------------------------------------------------------ checkpoints
    def checkpoints(self) -> list[tuple[int, Path]]:
        """The trajectory as (step, path), sorted by step; [] before the first checkpoint."""
        if not self.checkpoint_dir.is_dir():
            return []
        found = []
        for entry in self.checkpoint_dir.iterdir():
            m = _CKPT_RE.match(entry.name)
            if m:
                found.append((int(m.group(1)), entry))
        return sorted(found)

    def last_checkpoint(self) -> Path:
        ckpts = self.checkpoints()
        if not ckpts:
            raise CheckpointError(f"{self.path}: directory holds no checkpoints ({self.CKPT_DIR}/step_*.safetensors)")
        return ckpts[-1][1]

    def load(self, step: int | None = None) -> tuple[LinearTransformer, dict[str, Any]]:
        """(model, metadata) of the checkpoint at `step` (default: the last one), checked against the run's config."""
        if step is None:
            return self.load_checkpoint(self.last_checkpoint())[:2]
        path = self.checkpoint_path(step)
        if not path.exists():
            raise CheckpointError(f"{path}: no checkpoint at step {step}")
        return self.load_checkpoint(path)[:2]

    def load_checkpoint(
        self, path: str | Path, cfg: TrainConfig | None = None
    ) -> tuple[LinearTransformer, dict[str, Any], str]:
        """(model, metadata, SHA-256) of one of this run's checkpoint files (its resume file too), whose model must be
        the one the run's config describes: a DIAG checkpoint in a FULL run, or one of another d, depth or head count,
        is refused naming what differs. `cfg`: the run's config when already read."""
        model, meta, digest = ck.load_file_digest(path)
        self.check_model(path, model, self.config() if cfg is None else cfg)
        return model, meta, digest

    def check_model(self, path: str | Path, model: LinearTransformer, cfg: TrainConfig) -> None:
        """CheckpointError naming what differs when `model` (read from `path`) is not the model of `cfg`."""
        saved, now = _common(model.cfg.to_dict(), cfg.model.to_dict())
        if saved != now:
            raise CheckpointError(f"{path} disagrees with {self.config_path}: " + _differences(saved, now, "model."))

    def trajectory(self) -> list[tuple[int, LinearTransformer]]:
        """Every checkpoint as (step, model), sorted by step; each the run config's model, or CheckpointError."""
        ckpts = self.checkpoints()
        if not ckpts:
            raise CheckpointError(f"{self.path}: no checkpoints found under {self.CKPT_DIR}/")
        cfg = self.config()
        return [(step, self.load_checkpoint(p, cfg)[0]) for step, p in ckpts]

    def save_checkpoint(
        self, model: LinearTransformer, step: int, trained_on: TrainConfig | None = None, **extra: Any
    ) -> Path:
        """Atomically save the model's weights, its config, the training step and what it was trained on
        (checkpoints.save_checkpoint) into the trajectory."""
        path = self.checkpoint_path(step)
        ck.save_checkpoint(path, model, step, trained_on, **extra)
        return path

    def export(self, dest: str | Path) -> Path:
        """Write the run's last checkpoint as one standalone file that embeds the run's training config (what a zoo
        ships: the final model and how it was trained, without the trajectory or the resume state)."""
        ckpts = self.checkpoints()
        if not ckpts:
            raise CheckpointError(f"{self.path}: no checkpoints found under {self.CKPT_DIR}/")
        cfg = self.config()
        step, path = ckpts[-1]
        model, _, _ = self.load_checkpoint(path, cfg)
        dest = as_path(dest)
        ck.save_checkpoint(dest, model, step, cfg, embed_config=True)
        return dest

    def drop_checkpoints_after(self, step: int) -> None:
        """Remove trajectory files past `step` (written after the resume state a restart goes back to)."""
        for s, path in self.checkpoints():
            if s > step:
                path.unlink()

    def is_complete(self) -> bool:
        """True when the run holds its final checkpoint."""
        if not self.is_run(self.path):
            return False
        ckpts = self.checkpoints()
        return bool(ckpts) and ckpts[-1][0] == self.total_steps

    # ------------------------------------------------------------------ resume state
    def has_resume(self) -> bool:
        return self.resume_path.exists()

    def write_resume(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        ck.save_tensors(self.resume_path, tensors, meta)

    def read_resume(self, cfg: TrainConfig) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The resume state, checked against the (resolved) config: the checkpoint is trusted, not the text.

        A config edited after the run started (architecture, prior, steps, ...) is refused naming what differs.
        """
        path = self.resume_path
        tensors, meta = ck.read_tensors(path)
        stray = sorted(k for k in tensors if not k.startswith(("model.", "opt.")) and k != "rng.data")
        if stray:
            raise CheckpointError(f"{path}: resume state holds unknown tensors {', '.join(stray[:4])[:200]}")
        for key, kind in (("model_config", dict), ("step", int), ("param_groups", list)):
            if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
                raise CheckpointError(f"{path}: resume state has no valid {key!r}")
        rng = tensors.get("rng.data")
        if rng is None or rng.dtype != torch.uint8 or rng.ndim != 1:
            raise CheckpointError(f"{path}: resume state has no data RNG state ('rng.data')")
        window = meta.get("window", [])
        if not isinstance(window, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in window
        ):
            raise CheckpointError(f"{path}: resume state has a malformed loss window")
        if not 0 <= meta["step"] <= cfg.steps:
            raise CheckpointError(f"{path}: resume step {meta['step']} is outside the run's 0..{cfg.steps} steps")
        logged = 0 if meta["step"] == cfg.steps else meta["step"] % cfg.log_every  # losses since the last log line
        if len(window) != logged:
            raise CheckpointError(
                f"{path}: resume state holds {len(window)} losses since the last log line, step {meta['step']} "
                f"implies {logged}"
            )
        for saved, now, prefix in (
            (meta["model_config"], cfg.adam_model.to_dict(), "model."),  # the model Adam trains
            (meta.get("train_config"), cfg.to_dict(), ""),
        ):  # older files: the model only
            if not isinstance(saved, dict):
                continue
            saved, now = _common(saved, now)  # a field added to the config since is not a disagreement
            if saved != now:
                raise CheckpointError(f"{self.config_path} disagrees with {path}: " + _differences(saved, now, prefix))
        return tensors, meta

    # ------------------------------------------------------------------ metrics
    def read_metrics(self) -> list[dict]:
        """The logged rows; a torn last line (a crash mid-write) is dropped, a bad line elsewhere is an error."""
        if not os.path.lexists(self.metrics_path):
            return []
        data = read_regular_file(self.metrics_path, MAX_TEXT_BYTES, "metrics log", growing=True)  # being appended to
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        rows = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or type(row.get("step")) is not int:
                    raise InvalidArgument("no integer 'step'")
                loss = row.get("loss")
                if "loss" in row and (isinstance(loss, bool) or not isinstance(loss, (int, float))):
                    raise InvalidArgument(f"its loss is {loss!r:.40}, not a number")
            except (ValueError, RecursionError) as err:
                if i == len(lines) - 1:  # no newline after it: torn by a crash
                    break
                raise CheckpointError(f"{self.metrics_path}: line {i + 1} is not a metrics row ({err})") from None
            rows.append(row)
        return rows

    def truncate_metrics(self, step: int) -> None:
        """Keep the rows up to `step` (the resume point), dropping a torn last line."""
        keep = [row for row in self.read_metrics() if row["step"] <= step]
        atomic_write_text(self.metrics_path, "".join(json.dumps(row) + "\n" for row in keep))

    # ------------------------------------------------------------------ machine record
    def trained_on(self) -> list[dict]:
        """The training segments, in order: {"step": the first step it trained, "phase": "adam" or "polish", and the
        machine and path (interp.train.training_path)}; [] for a run trained before interp recorded them. Bit-identical
        weights need every segment's path, build, device and thread count to be the same as in the run reproduced."""
        if not os.path.lexists(self.trained_on_path):
            return []
        text = read_regular_file(self.trained_on_path, MAX_TEXT_BYTES, "machine record").decode("utf-8", "replace")
        rows = []
        for i, line in enumerate(text.splitlines()):
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or type(row.get("step")) is not int:
                    raise InvalidArgument("no integer 'step'")
            except (ValueError, RecursionError) as err:
                raise CheckpointError(f"{self.trained_on_path}: line {i + 1} is not a segment ({err})") from None
            rows.append(row)
        return rows

    def record_trained_on(self, step: int, phase: str, machine: dict, fresh: bool = False) -> None:
        """Note that training continues from `step` in `phase` on `machine`, replacing what the new segment replays: a
        start from step 0 (`fresh`) every segment, Adam from `step` the Adam segments from `step` on (a killed
        process's) and every phase after Adam, a phase after Adam (POST_ADAM) its earlier run and the phases after
        it. Written atomically."""
        rows = [] if fresh else self.trained_on()
        later = POST_ADAM[POST_ADAM.index(phase) :] if phase in POST_ADAM else POST_ADAM
        keep = [r for r in rows if r["phase"] not in later and (phase in POST_ADAM or r["step"] < step)]
        keep.append({"step": step, "phase": phase, **machine})
        atomic_write_text(self.trained_on_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep))

    # ------------------------------------------------------------------ lock
    @contextlib.contextmanager
    def lock(self) -> Iterator["Run"]:
        """Hold the writer lock (creating the directory); RunLocked names the PID of a writer already there."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # never through a symlink (O_NOFOLLOW), and only a regular file: the lock is truncated and written
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        except OSError as err:
            why = "it is a symlink" if err.errno == errno.ELOOP else err.strerror
            raise CheckpointError(f"{self.lock_path}: cannot open the run's lock ({why})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise CheckpointError(f"{self.lock_path}: the run's lock is not a regular file")
        try:
            for attempt in range(20):  # a reader's probe holds a shared lock for microseconds
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == 19:
                        pid = _holder(fd)
                        raise RunLocked(
                            f"{self.path}: another process (PID {pid if pid else 'unknown'}) is "
                            "writing this run; wait for it or stop it",
                            pid,
                        ) from None
                    time.sleep(0.025)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield self
        finally:
            os.close(fd)  # releases the flock

    def writer(self) -> int | None:
        """The PID of the process writing this run now, -1 if unknown, None if no process is."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return _holder(fd) or -1
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def training_note(self) -> str | None:
        """'RUN is training (PID n), read at step s of S', or None when no writer holds the run."""
        pid = self.writer()
        if pid is None:
            return None
        ckpts = self.checkpoints()
        at = f"its last checkpoint is step {ckpts[-1][0]}" if ckpts else "it has no checkpoint yet"
        return f"{self.path} is training (PID {pid if pid > 0 else 'unknown'}); {at}"


def _holder(fd: int) -> int | None:
    """The PID of the live process holding the lock open on `fd` (None: not known). The PID the lock file holds is the
    one that wrote it, which need not be the holder: the lock belongs to an open file, and a process forked by the
    writer (a worker) keeps it after the writer is gone, as does a writer that took the lock but has not written its
    PID yet. So the file's PID is taken only when that process has the lock file open; else the one other process that
    has it open (found under /proc) is named."""
    written = _read_pid(fd)
    holders = _openers(fd)
    if holders is None:  # no /proc to look in: the file's PID if that process lives
        return written if written and _alive(written) else None
    if written in holders or (written and not holders and _alive(written)):
        return written
    return holders[0] if len(holders) == 1 else None


def _openers(fd: int) -> list[int] | None:
    """The other processes that have the file open on `fd` open (those this user may inspect), from /proc/PID/fd; None
    where there is no /proc."""
    st = os.fstat(fd)
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for f in fds:
            try:
                other = os.stat(f"/proc/{name}/fd/{f}")
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                found.append(int(name))
                break
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text.isdigit() else None
    except (OSError, UnicodeDecodeError):
        return None


def _common(a: dict, b: dict) -> tuple[dict, dict]:
    """`a` and `b` restricted to the keys both have, recursively."""
    keys = [k for k in a if k in b]
    pairs = {
        k: _common(a[k], b[k]) if isinstance(a[k], dict) and isinstance(b[k], dict) else (a[k], b[k]) for k in keys
    }
    return {k: v[0] for k, v in pairs.items()}, {k: v[1] for k, v in pairs.items()}


def _differences(saved: dict, now: dict, prefix: str) -> str:
    """'n_layers: 2 in the checkpoint, 4 in the config; ...' for the keys that differ."""
    keys = sorted(set(saved) | set(now))
    parts = []
    for k in keys:
        a, b = saved.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            if a != b:
                parts.append(_differences(a, b, f"{prefix}{k}."))
        elif a != b:
            parts.append(f"{prefix}{k}: {a!r} in the checkpoint, {b!r} in the config")
    return "; ".join(parts)


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file as given, or the last checkpoint of a run directory."""
    path = as_path(path)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as err:  # a name too long, a directory that cannot be searched, ...
        raise CheckpointError(f"{str(path)[:200]}: cannot read ({err.strerror})") from None
    if is_dir:
        return Run(path).last_checkpoint()
    if not exists:
        raise CheckpointError(f"{path}: no such file or directory")
    return path


@dataclass(frozen=True)
class ResolvedModel:
    """What a path names (resolve_model): the model read, and what it was trained on.

    A run's facts come from its config.json; a loose checkpoint file's from its own metadata, which records the
    training prior, n and the input covariance when it was saved by a trainer that recorded them (`note` says when
    it does not: such a file is taken as trained on x ~ N(0, I)).
    """

    path: Path  # as given: a run directory, a checkpoint file of a run (its resume file too), or a loose file
    checkpoint: Path  # the checkpoint file read: the file given, or a run directory's last checkpoint
    model: LinearTransformer  # that file's model, in its own dtype
    step: int | None  # the training step the checkpoint records (None: it records none)
    noise: str | None  # spec of the training noise prior: the run's config, else the checkpoint's; None: unknown
    d: int  # the task dimension (the model's)
    n: int | None  # the training context length (the run's config, or a loose checkpoint's metadata); None: unknown
    x_cov: Matrix | None  # the training input covariance Λ, x ~ N(0, Λ) (config or loose metadata); None: I
    run: Run | None  # the run the checkpoint belongs to; None for a loose checkpoint file
    config: TrainConfig | None = None  # the run's validated config, or the one a standalone file embeds (Run.export)
    sha256: str = ""  # of the checkpoint file's bytes the model was read from, once they passed every check
    covariance_recorded: bool = True  # False: a loose checkpoint whose metadata does not say what Λ it had

    @property
    def note(self) -> str | None:
        """One line for the user when what the model was trained on is not known, else None."""
        if self.covariance_recorded:
            return None
        return (
            f"{self.checkpoint}: a loose checkpoint that records no input covariance (copied out of its run, or saved "
            "before interp recorded it); taken as trained on x ~ N(0, I)"
        )


def resolve_model(path: str | Path) -> ResolvedModel:
    """What `path` is: a run directory (its last checkpoint), a checkpoint file of a run or a loose checkpoint file.

    The checkpoint is read first, then the run's config when there is a run, and the checkpoint's model must be the
    config's (Run.load_checkpoint); any problem is a CheckpointError naming the file. A directory without a config
    that holds checkpoints/ counts as loose (no run, n unknown).
    """
    path = as_path(path)
    checkpoint, run, cfg, model, meta, digest = _load(path)
    if cfg is None and isinstance(meta.get("train_config"), TrainConfig):
        cfg = meta["train_config"]  # a standalone file (Run.export) says how it was trained
    return ResolvedModel(
        path=path,
        checkpoint=checkpoint,
        model=model,
        step=meta.get("step"),
        noise=meta.get("noise") if cfg is None else cfg.noise,
        d=model.cfg.d,
        n=meta.get("n") if cfg is None else cfg.n,
        x_cov=meta.get("x_cov") if cfg is None else cfg.x_cov,
        run=run,
        config=cfg,
        sha256=digest,
        covariance_recorded=cfg is not None or "x_cov" in meta,
    )


def _load(path: Path) -> tuple[Path, Run | None, TrainConfig | None, LinearTransformer, dict[str, Any], str]:
    """(checkpoint file, its run and the run's config or None, model, metadata, SHA-256) of what `path` names; the
    checkpoint is read first, then a run's config, which the checkpoint's model must match."""
    checkpoint = resolve_checkpoint(path)
    run = Run.of(path)
    model, meta, digest = ck.load_file_digest(checkpoint)
    cfg = None
    if run is not None:
        cfg = run.config()
        run.check_model(checkpoint, model, cfg)
    return checkpoint, run, cfg, model, meta, digest


def load_with_digest(path: str | Path) -> tuple[LinearTransformer, dict[str, Any], str]:
    """(model, metadata, SHA-256 of the checkpoint file's bytes) from a checkpoint file or a run directory (its last
    checkpoint), as load_with_meta: the digest is of the bytes the model was read from, once they passed every check."""
    return _load(as_path(path))[3:]


def checkpoint_sha256(path: str | Path) -> str:
    """SHA-256 of the checkpoint file `path` names (a run directory: its last checkpoint), taken from the bytes read
    only once they passed every check of resolve_model (the run's config included)."""
    return _load(as_path(path))[5]


def load_with_meta(path: str | Path) -> tuple[LinearTransformer, dict[str, Any]]:
    """(model, metadata) from a checkpoint file or a run directory (its last checkpoint); a run's checkpoint is
    checked against the run's config."""
    return _load(as_path(path))[3:5]


def load(path: str | Path) -> LinearTransformer:
    """The model of a checkpoint file or of a run directory (its last checkpoint)."""
    return load_with_meta(path)[0]
