"""Opening files that come from outside (modules, ``.npz`` arguments, kernel
cache entries): only regular files are read, since a FIFO or a device could
block or never end, and a size limit is checked before any byte is read."""

from __future__ import annotations

import os
import stat
from typing import IO

from xlapy.errors import XlapyError


def open_regular_file(path: str | os.PathLike, *, nofollow: bool = False,
                      max_bytes: int | None = None) -> IO[bytes]:
    """``path`` opened for reading in binary; an ``XlapyError`` (``cannot read <path>: ...``) unless it is a
    regular file of at most ``max_bytes`` bytes. ``nofollow`` refuses a symbolic link as the last component."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        # Non-blocking, so that opening a FIFO without a writer does not wait forever.
        fd = os.open(path, flags)
    except OSError as e:
        raise XlapyError(f"cannot read {os.fsdecode(path)}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise XlapyError(f"cannot read {os.fsdecode(path)}: {kind}")
        if max_bytes is not None and info.st_size > max_bytes:
            raise XlapyError(f"cannot read {os.fsdecode(path)}: {info.st_size} bytes, more than {max_bytes}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | os.PathLike, *, nofollow: bool = False, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (see ``open_regular_file``); the limit also holds for a file
    that grows while it is read."""
    with open_regular_file(path, nofollow=nofollow, max_bytes=max_bytes) as f:
        try:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
        except OSError as e:
            raise XlapyError(f"cannot read {os.fsdecode(path)}: {e.strerror}") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise XlapyError(f"cannot read {os.fsdecode(path)}: more than {max_bytes} bytes")
    return data
