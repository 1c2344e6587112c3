"""Writing an output file: atomically when it is a regular file, into it when it is special.

Reports, baselines, judgments, qrels and run files all go through :func:`atomic_writer`. A reader
never sees half a file: the text goes to a temporary file beside ``path`` that replaces it with
``os.replace`` only once complete; on any error the temporary is removed and ``path`` keeps its
old content. A path that exists and is not a regular file (``/dev/null``, a FIFO a consumer reads,
a terminal) is written into instead: replacing it would put a regular file in place of
``/dev/null`` or of the pipe.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["atomic_writer", "write_atomic"]


@contextmanager
def atomic_writer(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text handle (``\\n`` line ends) whose content becomes ``path`` when the block
    ends without an error. Missing parent directories are created; the new file has ordinary
    permissions (0666 minus the umask), as ``open(path, "w")`` would give it."""
    path = Path(path)
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8", newline="\n") as handle:
            yield handle
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_writer`."""
    with atomic_writer(path) as handle:
        handle.write(text)


def _create_beside(path: Path) -> tuple[int, Path]:
    # O_EXCL with mode 0666 lets the kernel apply the umask (tempfile.mkstemp creates 0600, and
    # reading the umask means setting it, which races with other threads).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
