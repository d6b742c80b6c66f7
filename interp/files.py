"""Bounded reads and atomic writes, and interp's error types: InterpError, its kinds InvalidArgument (a ValueError)
and InvalidType (a TypeError), and CheckpointError, which a file that cannot be used raises.

Reads open only regular files (never a FIFO, a device, a socket, a directory or a /proc or /sys file, through a
symlink or not), refuse a file larger than the caller's limit before reading a byte, and return exactly the bytes the
file's size says, never more (a file that reads more or fewer is refused); every file interp reads goes through
open_regular. Writes go through a temporary file in the same directory, fsync and a rename, so a reader never sees
a half-written file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from interp.limits import MAX_FILE_BYTES


class InterpError(Exception):
    """interp's own errors: what the caller gave cannot be used (an argument, a file, a run, a config), or a run failed
    the way runs can (it diverged). Never a bug in interp. The message is one line naming the argument or file and
    what is wrong; `interp` prints it and exits with status 2. Each kind is also a ValueError or TypeError (a
    RuntimeError for a diverged run), so `except ValueError` keeps catching it."""

    def __str__(self) -> str:  # one line, whatever a wrapped message held
        return " ".join(part.strip() for part in super().__str__().splitlines() if part.strip())


class InvalidArgument(InterpError, ValueError):
    """A value interp cannot use: a size, shape, range, spec or option that is wrong (the message names it)."""


class InvalidType(InterpError, TypeError):
    """An argument of the wrong type: a list or a string where a tensor is wanted, integer tokens, None (the message
    names it)."""


class CheckpointError(InvalidArgument):
    """A checkpoint or run directory that cannot be used; the message names the file and the problem."""


def as_path(value: object, what: str = "path") -> Path:
    """`value` (a str or os.PathLike) as a Path; InvalidType for anything else, InvalidArgument for an empty path or
    one holding a NUL byte (no file can have it), naming `what`."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise InvalidType(f"{what} must be a path (str or os.PathLike), got {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise InvalidType(f"{what} must be a path (str or os.PathLike), got {type(text).__name__}")
    if text == "":
        raise InvalidArgument(f"{what} is empty")
    if "\0" in text:
        raise InvalidArgument(f"{what} {text!r:.80} holds a NUL byte; no file can have that name")
    return Path(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over `path`. An OSError names `path`
    (not the temporary file, nor nothing: a full disk while writing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise _naming(err, path) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise _naming(err, path) from None
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _naming(err: OSError, path: Path) -> OSError:
    """`err` as the same kind of OSError naming `path` (the file being written)."""
    if err.errno is None:
        return err
    return type(err)(err.errno, err.strerror, str(path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@functools.cache
def _pseudo_devices() -> frozenset[int]:
    """The devices of /proc and /sys: their files say they are regular, report a size of 0 (or 4096) and read
    anything from nothing to the whole address space (/proc/self/pagemap)."""
    found = set()
    for root in ("/proc", "/sys"):
        try:
            found.add(os.stat(root).st_dev)
        except OSError:
            pass
    return frozenset(found)


def _check_kind(path: Path, st: os.stat_result, what: str, limit: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise CheckpointError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise CheckpointError(f"{path}: not a regular file ({kind}); refusing to read it")
    if st.st_dev in _pseudo_devices():
        raise CheckpointError(f"{path}: not a regular file (a /proc or /sys pseudo-file); refusing to read it")
    if st.st_size > limit:
        raise CheckpointError(f"{path}: {st.st_size} bytes, more than the {limit} a {what} may have")


class RegularFile:
    """A regular file opened by open_regular: its size as fstat reported it when opened, and reads that return
    exactly the bytes asked for (never more than that size), or CheckpointError naming the file."""

    def __init__(self, path: Path, fh: BinaryIO, size: int):
        self.path, self._fh, self.size = path, fh, size

    def read_at(self, offset: int, count: int) -> bytes:
        """Exactly `count` bytes from `offset` (within the size)."""
        if not 0 <= offset <= offset + count <= self.size:
            raise CheckpointError(f"{self.path}: bytes [{offset}, {offset + count}) of a {self.size}-byte file")
        data = self._read(offset, count)
        if len(data) != count:
            raise CheckpointError(f"{self.path}: truncated while being read ({len(data)} of {count} bytes)")
        return data

    def read_all(self, growing: bool = False) -> bytes:
        """The whole file: exactly the size it had when opened. A file that reads more or fewer bytes than that
        is refused; with `growing` (an append-only log being written), the first `size` bytes are what counts."""
        if growing:
            return self._read(0, self.size)
        data = self._read(0, self.size + 1)  # one byte more: a file that reads past its reported size is no file
        if len(data) > self.size:
            raise CheckpointError(
                f"{self.path}: reads more than the {self.size} bytes it reports (not a file on disk, or changed "
                "while being read); refusing it"
            )
        if len(data) < self.size:
            raise CheckpointError(f"{self.path}: truncated while being read ({len(data)} of {self.size} bytes)")
        return data

    def tail(self, count: int) -> bytes:
        """At most the last `count` bytes (of the size it had when opened)."""
        return self._read(max(0, self.size - count), min(count, self.size))

    def _read(self, offset: int, count: int) -> bytes:
        try:
            self._fh.seek(offset)
            return self._fh.read(count)
        except OSError as err:
            raise CheckpointError(f"{self.path}: cannot read ({err.strerror})") from None


@contextlib.contextmanager
def open_regular(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "file") -> Iterator[RegularFile]:
    """A regular file of at most `limit` bytes, open for bounded reads; never opens a FIFO, device, socket or
    /proc file, and never a file larger than `limit` (checked on its size, before a byte is read)."""
    path = Path(path)
    limit = min(limit, MAX_FILE_BYTES)
    try:
        before = os.stat(path)  # before opening: opening a FIFO or a device can block or act
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read ({err.strerror})") from None
    _check_kind(path, before, what, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise CheckpointError(f"{path}: replaced while being opened; refusing to read it")
        _check_kind(path, st, what, limit)
        yield RegularFile(path, fh, st.st_size)


def read_regular_file(
    path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "file", growing: bool = False
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (open_regular, RegularFile.read_all)."""
    with open_regular(path, limit, what) as f:
        return f.read_all(growing)


def read_regular_tail(path: str | Path, count: int, limit: int = MAX_FILE_BYTES, what: str = "file") -> bytes:
    """At most the last `count` bytes of a regular file of at most `limit` bytes (a log being appended to)."""
    with open_regular(path, limit, what) as f:
        return f.tail(count)


# Where available_memory looks (tests point these at fake trees).
PROC_ROOT = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 1 << 60  # a cgroup v1 limit at or above this is none (the kernel reports 2^63 rounded to a page)


def available_memory(proc: Path | None = None, cgroup: Path | None = None) -> int | None:
    """Bytes this process can still use: the smaller of the machine's MemAvailable and the headroom of every memory
    cgroup above it (its limit less its usage, page cache it can reclaim counted as free): cgroup v2 `memory.max` and
    `memory.current`, v1 `memory.limit_in_bytes` and `memory.usage_in_bytes`. In a container MemAvailable is the
    host's, and a process past its cgroup's limit is killed by the OOM killer without a word. None where nothing can
    be read."""
    proc, cgroup = PROC_ROOT if proc is None else Path(proc), CGROUP_ROOT if cgroup is None else Path(cgroup)
    found = []
    meminfo = _pseudo_text(proc / "meminfo")
    for line in (meminfo or "").splitlines():
        if line.startswith("MemAvailable:"):
            with contextlib.suppress(ValueError, IndexError):
                found.append(int(line.split()[1]) * 1024)
    for line in (_pseudo_text(proc / "self" / "cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, where = parts
        if controllers == "":  # v2: the unified hierarchy
            found += _cgroup_headrooms(cgroup, where, "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # v1
            found += _cgroup_headrooms(
                cgroup / "memory", where, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
            )
    return min(found) if found else None


def _cgroup_headrooms(base: Path, where: str, limit_file: str, usage_file: str, reclaimable: str) -> list[int]:
    """The headroom (limit - usage + reclaimable page cache) of the cgroup at `where` under `base` and of each one
    above it that has a limit."""
    out = []
    parts = [p for p in where.strip().split("/") if p]
    for depth in range(len(parts), -1, -1):
        here = base.joinpath(*parts[:depth])
        limit = (_pseudo_text(here / limit_file) or "").strip()
        if not limit or limit == "max":
            continue
        try:
            limit_bytes, usage = int(limit), int((_pseudo_text(here / usage_file) or "").strip())
        except ValueError:
            continue
        if limit_bytes >= UNLIMITED:
            continue
        cache = 0
        for line in (_pseudo_text(here / "memory.stat") or "").splitlines():
            key, _, value = line.partition(" ")
            if key == reclaimable and value.strip().isdigit():
                cache = int(value)
        out.append(max(0, limit_bytes - usage + cache))
    return out


def _pseudo_text(path: Path) -> str | None:
    """The first 64 KiB of a /proc or /sys file (their sizes say nothing), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16).decode(errors="replace")
    except OSError:
        return None
