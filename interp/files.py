"""Bounded reads and atomic writes, and the error a file that cannot be used raises.

Reads open only regular files, never block on a FIFO or read a device, and are capped in size; writes go through
a temporary file in the same directory, fsync and a rename, so a reader never sees a half-written file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from interp.limits import MAX_FILE_BYTES


class CheckpointError(ValueError):
    """A checkpoint or run directory that cannot be used; the message names the file and the problem."""


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def read_regular_file(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; never blocks on a FIFO or reads a device."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise CheckpointError(f"{path}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{path}: not a regular file (a FIFO, device or socket); refusing to read it")
        if st.st_size > limit:
            raise CheckpointError(f"{path}: {st.st_size} bytes, more than the {limit} a {what} may have")
        try:
            return fh.read(limit + 1)[:limit]
        except OSError as err:
            raise CheckpointError(f"{path}: cannot read ({err.strerror})") from None
