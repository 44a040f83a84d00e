"""Facts about where and how a number was produced, for every JSON the project writes.

:func:`provenance` is the one source of the provenance keys that
``result.json`` (:mod:`knn.train.loop`), the layer benchmark
(:mod:`knn.tools.bench`), the throughput tool (:mod:`knn.tools.throughput`) and the
nightly run (:mod:`knn.tools.nightly`) record: the source commit, the command, the
machine, torch's version and which implementations the dispatching ops ran.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from knn.ops import recurrence, usage
from knn.paths import CHECKOUT

#: Folders whose untracked files change what runs (code, configs, data preparation):
#: a new file there makes the checkout dirty even though no tracked file changed.
SOURCE_DIRS = ("knn", "conf", "data_prep")
#: The note the migration writes into files recorded before these keys existed.
NOT_RECORDED = "not recorded at the time"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()


def git_commit(repo: Path | None = CHECKOUT) -> str | None:
    """HEAD of the checkout at ``repo``, with ``-dirty`` if a tracked file has local changes
    or an untracked (not ignored) file exists under :data:`SOURCE_DIRS`; None without git,
    and None in a wheel install (no checkout: a repository around site-packages is not
    this code's)."""
    if repo is None:
        return None
    try:
        head = _git(repo, "rev-parse", "HEAD")
        tracked = _git(repo, "status", "--porcelain", "--untracked-files=no")
        untracked = _git(repo, "status", "--porcelain", "--untracked-files=all", "--", *SOURCE_DIRS)
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout, no commits yet, or no git
    new_source = any(line.startswith("??") for line in untracked.splitlines())
    return head + ("-dirty" if tracked or new_source else "")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo; elsewhere :func:`platform.processor`."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """The CPU, its logical cores and the torch intra-op threads this process uses."""
    return {"cpu_model": cpu_model(), "logical_cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}


def ops() -> dict[str, Any]:
    """Which implementation each dispatching op ran in this process
    (:func:`knn.ops.usage.ops_report`), which fused libraries were built (``fused_built``,
    per part tried: :data:`knn.ops.recurrence.PARTS`), and why a build failed
    (``fused_build_errors``, empty when none failed or none was tried)."""
    return {**usage.ops_report(), "fused_built": recurrence.fused_parts(),
            "fused_build_errors": recurrence.fused_build_errors()}


def provenance(command: str, commit: str | None = None) -> dict[str, Any]:
    """The provenance keys of a JSON written by ``command`` (the exact command line):
    ``git_commit``, ``command``, ``machine``, ``torch_version`` and ``ops``.

    ``commit``: the checkout's state when the work started (a long run's code is
    what it imported then; an edit made while it runs must not mark it dirty);
    default: now."""
    return {"git_commit": commit or git_commit(), "command": command, "machine": machine(),
            "torch_version": torch.__version__, "ops": ops()}


def device_name(device: torch.device) -> str:
    """``cpu`` or ``cuda:N (<GPU name>)``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
