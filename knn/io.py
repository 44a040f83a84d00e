"""Writing files atomically: readers see the old file or the whole new one, never a part.

Everything the project writes for later reading (checkpoints, ``result.json``,
cached data, benchmark records) goes through :func:`atomic_write`: a temporary
file in the target's folder, flushed to disk, then renamed over the target with
``os.replace``, which is atomic within one folder. A crash or a full disk
mid-write leaves the previous file intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from knn.errors import CheckpointError


@contextmanager
def atomic_write(dest: Path) -> Iterator[IO[bytes]]:
    """Open a temp file beside ``dest``; on clean exit move it onto ``dest``.

    ``os.replace`` within one directory is atomic, so readers (and parallel
    runs) see either no file or a complete one, never a partial download.
    Failures propagate as ``OSError``; :func:`write_atomically` turns them into
    one line.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename, so a power cut cannot leave it empty
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a shared cache must be readable by all
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(f)`` on a temp file and move it onto ``path`` (:func:`atomic_write`).

    An ``OSError`` (disk full, read-only or missing folder, quota) becomes a
    one-line :class:`~knn.errors.CheckpointError` saying whether the previous
    file is kept.
    """
    try:
        with atomic_write(Path(path)) as f:
            write(f)
    except OSError as e:
        reason = e.strerror or " ".join(str(e).split())
        kept = "; the previous file is kept" if Path(path).exists() else ""
        raise CheckpointError(f"cannot write {path}: {reason}{kept}") from None


def write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, atomically."""
    write_atomically(path, lambda f: f.write(text.encode()))


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as indented JSON (non-ASCII kept as is, one trailing newline), atomically."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
