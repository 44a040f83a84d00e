"""Atomic checkpoint files made only of plain data.

A checkpoint is a dict of tensors, dicts, lists, numbers and strings (the
resolved config included), so ``torch.load(path, weights_only=True)`` reads
it and the config in it can rebuild the model. Files are written to a
temporary name in the same directory and renamed over the old one
(:func:`knn.io.write_atomically`): a crash or a full disk mid-write leaves the previous
checkpoint intact, and a failed write is a one-line :class:`~knn.errors.CheckpointError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from knn.errors import CheckpointError
from knn.io import write_atomically

LAST = "last.pt"  # everything needed to resume; rewritten at every epoch end
BEST = "best.pt"  # model weights with the best validation metric so far


def save(obj: dict[str, Any], path: Path) -> None:
    """Write ``obj`` to ``path`` with ``torch.save``, atomically."""
    write_atomically(path, lambda f: torch.save(obj, f))


def load(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with the safe (weights-only) unpickler."""
    try:
        return torch.load(Path(path), map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"cannot read checkpoint {path}: no such file") from None
    except Exception as e:  # truncated, corrupt, or not a plain-data checkpoint
        # torch's own messages run to paragraphs; the first sentence says what broke
        first = " ".join(str(e).split()).split(". ")[0][:160] or type(e).__name__
        raise CheckpointError(f"cannot read checkpoint {path}: truncated, corrupt or not "
                              f"written by knn ({first})") from None


def append_jsonl(obj: Any, path: Path) -> None:
    """Append one JSON line (a torn last line is the worst a crash can do)."""
    with open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")
