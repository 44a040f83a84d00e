"""Process-group helpers that are no-ops in a single process.

The trainer calls these at the few places where data-parallel training would
differ (who writes files, how metrics are summed), so that launching under
``torchrun`` later needs changes here rather than in the loop. Today nothing
initialises a process group, so every function answers for one process.
"""

from __future__ import annotations

import torch
import torch.distributed as tdist


def _active() -> bool:
    return tdist.is_available() and tdist.is_initialized()


def rank() -> int:
    """This process's rank; 0 without a process group."""
    return tdist.get_rank() if _active() else 0


def world_size() -> int:
    """Number of processes; 1 without a process group."""
    return tdist.get_world_size() if _active() else 1


def is_main() -> bool:
    """True on the one process that writes checkpoints, logs and results."""
    return rank() == 0


def barrier() -> None:
    """Wait for every process (e.g. before reading a checkpoint rank 0 wrote)."""
    if _active():
        tdist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over processes in place and return it (identity for one)."""
    if _active():
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return t
