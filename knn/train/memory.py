"""Keep freed host memory in the process, so each training step reuses its pages.

glibc's ``malloc`` serves an allocation above its mmap threshold (adaptive, at
most 32 MiB on 64-bit Linux) with a fresh ``mmap`` and unmaps it on ``free``.
A PTB step allocates its 1120 x 10000 logits, their log-softmax and their
gradients (45 MB each) anew every step, and the kernel zero-fills each 4 KiB
page of them on first touch: about a third of a CPU training step of the 5m
gated model (``experiments/bench/throughput_ptb_gated_5m*.json``: 345 against 211 ms; the time
shows up as ``fill_`` and autograd's own time in a profile). Setting
``M_MMAP_MAX = 0`` serves large blocks from the heap instead, and a maximal
``M_TRIM_THRESHOLD`` keeps freed heap memory for the next step. The cost: the
process's resident memory stays at its peak. Numbers are unchanged (only where
tensors live changes).
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_MAX = -4
INT_MAX = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> bool:
    """Ask glibc's allocator to keep freed memory for reuse; process-wide, cannot be undone.

    Returns False (and changes nothing) where the C library is not glibc.
    """
    libc = ctypes.CDLL(None)  # the C library this process already uses
    if not hasattr(libc, "gnu_get_libc_version"):
        log.debug("not glibc: freed memory is returned to the system as usual")
        return False
    ok = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1
    if not ok:
        log.warning("mallopt refused to keep freed memory; large CPU tensors will be page-faulted every step")
    return ok
