"""Data-parallel training under ``torchrun``; every helper is a no-op in one process.

``torchrun --nproc_per_node=N -m knn.train ...`` starts N copies of the
trainer with ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` set. :func:`init` (called
by the trainer) then joins the process group: gloo on CPU, nccl on CUDA with
``cuda:LOCAL_RANK`` as the device. Without ``torchrun`` (or with one process)
nothing is initialised and every function answers for a single process.

How the work is shared, so that N processes take the same steps as one
process with the same (effective) batch:

* every rank builds the model from the same seed, and DDP broadcasts rank 0's
  parameters at start-up; dropout masks differ per rank (:func:`rank_seed`);
* each rank trains on its contiguous share of every batch (:func:`share`):
  the language model's batch columns, the sentences or molecules of a batch
  (whose order all ranks derive from the seed and the epoch). DDP averages
  the gradients over ranks, and :func:`split_batch` gives the factor that
  turns this average into the gradient of the whole batch's mean loss;
* each step's logged loss sums and a non-finite loss are summed over ranks
  (:func:`sum_over_ranks`), and a time budget stops every rank at the same
  step (:func:`any_rank`);
* evaluation runs on rank 0 alone and its metrics are broadcast
  (:func:`broadcast_object`), so model selection, patience and stopping are
  the same decisions on every rank and the numbers equal a one-process
  evaluation;
* only rank 0 (:func:`is_main`) writes checkpoints, logs and results.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as tdist

#: How long a collective waits: rank 0 evaluates alone (PTB with one column is
#: slow on a CPU) while the other ranks wait in a broadcast.
TIMEOUT = timedelta(hours=2)

_device = torch.device("cpu")  # where collectives' tensors live (the rank's CUDA device under nccl)


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


def init(device: torch.device) -> torch.device:
    """Join the process group when launched by ``torchrun`` with ``WORLD_SIZE`` > 1.

    Returns the device this rank trains on: ``device`` on CPU (backend gloo),
    ``cuda:LOCAL_RANK`` on CUDA (backend nccl). Ranks other than 0 log
    warnings and errors only, so that a run's log lines appear once.
    """
    global _device
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or _active():
        return device
    cuda = device.type == "cuda"
    if cuda:  # one GPU per process (device=cuda:N is overridden)
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    tdist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT,
                             device_id=device if cuda else None)
    _device = device
    if rank() > 0:
        logging.getLogger().setLevel(logging.WARNING)
    return device


def shutdown() -> None:
    """Leave the process group (if any)."""
    global _device
    if _active():
        tdist.destroy_process_group()
    _device = torch.device("cpu")


def barrier() -> None:
    """Wait for every process (e.g. before reading a checkpoint rank 0 wrote)."""
    if _active():
        tdist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over processes in place and return it (identity for one)."""
    if _active():
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return t


def sum_over_ranks(*values: Any) -> tuple[Any, ...]:
    """Sum numbers (ints, floats, one-element tensors) over processes, in one all-reduce.

    One process gets ``values`` back untouched (tensors stay on their device,
    unsynchronised); otherwise floats, with ints kept ints.
    """
    if not _active():
        return values
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_device)
    all_reduce_sum(t)
    return tuple(int(s) if isinstance(v, int) else s for v, s in zip(values, t.tolist()))


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any process (a decision every rank must share)."""
    if not _active():
        return flag
    return sum_over_ranks(int(flag))[0] > 0


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` (picklable) on every process."""
    if not _active():
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=0, device=_device)
    return box[0]


def gather_cat(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The ranks' ``t`` (equal shapes) concatenated along ``dim`` in rank order; ``t`` for one."""
    if not _active():
        return t
    parts = [torch.empty_like(t) for _ in range(world_size())]
    tdist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim)


def share(n: int) -> slice:
    """This rank's contiguous part of ``n`` items, in rank order.

    Lengths differ by at most one and the ranks' parts, concatenated, are the
    ``n`` items; a part is empty when ``n`` < world size.
    """
    r, w = rank(), world_size()
    return slice(r * n // w, (r + 1) * n // w)


def split_batch(n: int) -> tuple[slice, float]:
    """The items of an ``n``-item batch this rank trains on, and its loss factor.

    DDP averages gradients over ranks; multiplying the mean loss over this
    rank's items by ``len(part) * world_size / n`` makes that average the
    gradient of the mean loss over the whole batch, also when the parts are
    unequal. A rank with an empty part (``n`` < world size) gets item 0 with
    factor 0: every rank must run forward and backward at every step. One
    process: all items, factor exactly 1.
    """
    part = share(n)
    size = part.stop - part.start
    if size == 0:
        return slice(0, 1), 0.0
    return part, size * world_size() / n


def rank_seed(seed: int, step: int) -> int:
    """The seed of rank > 0's generators (dropout), from (seed, rank, step).

    Rank 0 keeps the single-process stream (and its state is what a
    checkpoint saves); the others draw different masks, reseeded from this on
    start and on resume.
    """
    return int(np.random.SeedSequence([seed, rank(), step]).generate_state(1)[0])
