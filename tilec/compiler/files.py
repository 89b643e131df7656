"""Writing and reading the files tilec makes (PTX, kernel.json, IR dumps,
cache entries) safely: never through a symbolic link, never half-written.

A file is written to a fresh temporary name in its directory (created with
O_EXCL and O_NOFOLLOW, so neither an existing file nor a link planted there
is opened) and renamed over the destination.  The rename replaces a link at
the destination instead of writing where it points, and a reader sees the
old file or the whole new one.  A writer killed before the rename leaves
only a temporary file (`.NAME.XXXXXXXX.tmp`), which `remove_stale_temps`
clears.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Union

TEMP_SUFFIX = ".tmp"


def write_atomic(path: Union[str, Path], data: Union[str, bytes], mode: int = 0o666) -> None:
    """Write `data` (text is UTF-8) to `path` as one rename; `mode` is masked
    by the umask like any new file.  Raises OSError."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.parent / f".{path.name}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_no_follow(path: Union[str, Path]) -> bytes:
    """The bytes of the regular file at `path`; OSError when it is a link
    (ELOOP) or missing."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def remove_stale_temps(directory: Union[str, Path], older_than: float) -> None:
    """Remove temporary files `write_atomic` left in `directory` more than
    `older_than` seconds ago (their writer was killed); younger ones may
    belong to a writer still at work.  Links and directories are left."""
    cutoff = time.time() - older_than
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:
            pass
