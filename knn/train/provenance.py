"""Facts about where a run happened, for ``result.json``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def git_commit() -> str | None:
    """HEAD of the source checkout, with ``-dirty`` if it has local changes."""
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout, no commits yet, or no git
    return head + ("-dirty" if dirty else "")


def device_name(device: torch.device) -> str:
    """``cpu`` or ``cuda:N (<GPU name>)``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
