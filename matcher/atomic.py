"""Write a file so that a reader (or a crash) sees the old content or the new, never half.

One helper for every file the package replaces: the checkpoint, the catalog caches (parsed
files, checked patterns, extracted releases, the installed sglang's catalog). The data goes to a
temporary file in the target's directory (same filesystem, so the rename is atomic), which is
renamed over the target; on any error the temporary file is removed and the error raised.
`durable=True` also fsyncs the file before the rename and the directory after it, so the new
content survives a power loss (the checkpoint needs this; a cache does not).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes | str, *, durable: bool = False,
                 mkdir: bool = True) -> None:
    """Replace `path` with `data` (text is written as UTF-8) atomically; raises OSError.

    `mkdir`: create the parent directory first if it is missing."""
    path = Path(path)
    directory = path.parent
    if mkdir:
        directory.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
