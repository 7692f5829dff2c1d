"""The few durable file operations both stores share: whole writes, reads, fsyncs, quarantines.

I/O only; what to write comes from the pure core. A quarantine (docs/format/persistence.md
§6.5) is written under a temporary name, fsynced, linked to its final name and its directory
fsynced, so it is complete or absent, and a repair retried after a crash finds its own file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Final, cast

from kernel.errors import CorruptLog
from kernel.storage.quarantine import quarantine_name
from kernel.store.errors import StoreError
from kernel.values.json import summary

__all__ = (
    "store_path",
    "write_all",
    "read_file",
    "fsync_dir",
    "write_new_file",
    "write_quarantine",
)

FILE_MODE: Final = 0o600


def store_path(path: object, name: str) -> str:
    """`path` as a file-system path string, or a `KernelError` naming the argument."""
    if issubclass(type(path), str | os.PathLike):  # type(): a value may claim any __class__
        try:
            spelled = os.fspath(path)  # type: ignore[call-overload]
        except TypeError:  # its __fspath__ gave neither str nor bytes
            spelled = None
        if issubclass(type(spelled), str) and spelled and "\x00" not in spelled:
            return cast(str, spelled)
    raise StoreError(f"{name} must be a non-empty path (str or os.PathLike), not {summary(path)}")


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (`os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_file(path: Path) -> bytes:
    """The bytes of the file at `path`."""
    with open(path, "rb") as f:
        return f.read()


def fsync_dir(path: Path) -> None:
    """Make the entries of directory `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new_file(path: Path, data: bytes) -> bool:
    """Create `path` holding `data`, durably and whole, unless it exists; whether it did.

    The bytes go to a temporary name beside it, fsynced, then are hard-linked to
    `path` (never replacing a file there) and the directory is fsynced: `path` is
    complete or absent at every instant.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        fsync_dir(path.parent)
        return True
    finally:
        os.unlink(temporary)


def write_quarantine(beside: Path, offset: int, removed: bytes) -> Path:
    """Keep `removed`, cut from `beside` at `offset`, in a file next to it, durably.

    Returns the quarantine's path (`quarantine_name`); a repair retried after a
    crash finds its own file there. A file of that name holding other bytes is
    `CorruptLog`.
    """
    target = beside.with_name(quarantine_name(beside.name, offset, removed))
    if not write_new_file(target, removed) and read_file(target) != removed:
        raise CorruptLog(f"{target}: a quarantine file of that name holds other bytes")
    return target
