"""Orders in which training items are drawn, each a pure function of (seed, epoch, index).

* :class:`ResamplingSampler`: draws spread evenly over target buckets, toward
  rare targets (the authors' CEP scheme);
* :class:`ShuffledPasses`: pass after pass over the items, each pass shuffled.

Both answer ``batch(epoch, index, batch_size)`` with item indices and have
``num_samples`` draws an epoch, so a run stopped mid-epoch resumes on the same
items without replaying earlier batches.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from torch import Tensor
from torch.utils.data import Sampler


class ResamplingSampler(Sampler[int]):
    """Draws training items so that every target range is seen about equally often.

    The authors' scheme (graph_knn/*/nntrain.py): targets are put in buckets
    of width ``bin_width`` (0.05); each draw picks a non-empty bucket
    uniformly at random, then the bucket's next item, cycling through the
    bucket in a fixed shuffled order. Rare (high-PCE) molecules are thus seen
    far more often than in plain shuffling; every epoch has ``num_samples``
    draws (default: the number of items).

    Negative targets: the authors' bucket ``int(y / 0.05)`` truncates toward
    zero and sends y ≤ -0.05 to a list slot counted from the end, among the
    high-PCE buckets. On the CEP mirror's training split that gives 64
    buckets of negative molecules only, about 22% of all draws. Here bucket k
    holds ``max(y, floor) ∈ [floor + k·w, floor + (k+1)·w)``, so with the
    default ``floor = 0.0`` every target below 0 joins the zeros in the first
    bucket [0, 0.05), drawn as often as any other bucket (on that split: 496
    negative molecules, in one of 222 buckets, about 0.45% of draws).
    ``floor=None`` buckets negatives by ``floor(y / w)`` like any other range.

    Order is a pure function of (seed, epoch): :meth:`epoch_indices` replays
    earlier epochs' bucket counts, so a run resumed mid-training draws the
    same items as one that never stopped. Cost O(epoch · num_samples) numpy.
    """

    def __init__(
        self,
        targets: Sequence[float] | np.ndarray | Tensor,
        bin_width: float = 0.05,
        floor: float | None = 0.0,
        num_samples: int | None = None,
        seed: int = 0,
    ) -> None:
        y = np.asarray(targets, dtype=np.float64)
        if y.ndim != 1 or len(y) == 0:
            raise ValueError("targets must be a non-empty 1-D array")
        if not bin_width > 0:
            raise ValueError(f"bin_width must be > 0, got {bin_width}")
        self.bin_width, self.floor, self.seed = float(bin_width), floor, seed
        self.num_samples = len(y) if num_samples is None else int(num_samples)
        base = np.maximum(y, floor) - floor if floor is not None else y
        bucket_of = np.floor(base / bin_width).astype(np.int64)
        order = np.random.RandomState(seed).permutation(len(y))  # one shuffle, as the authors
        keys, inverse = np.unique(bucket_of, return_inverse=True)
        self.bucket_keys = keys  # (B,) bucket numbers, ascending
        # members[b]: items of bucket b in their cycling order
        self.members = [order[inverse[order] == b] for b in range(len(keys))]
        self.sizes = np.array([len(m) for m in self.members], dtype=np.int64)
        self._flat = np.concatenate(self.members)  # members back to back
        self._offset = np.cumsum(self.sizes) - self.sizes
        self.epoch = 0
        self._counts = {0: np.zeros(len(keys), dtype=np.int64)}  # draws per bucket before epoch e
        self._last: tuple[int, np.ndarray] | None = None  # (epoch, indices) of the latest call

    @property
    def num_buckets(self) -> int:
        return len(self.members)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _bucket_draws(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, epoch])
        return rng.integers(self.num_buckets, size=self.num_samples)

    def _counts_before(self, epoch: int) -> np.ndarray:
        e = max(k for k in self._counts if k <= epoch)
        counts = self._counts[e].copy()
        for k in range(e, epoch):
            counts += np.bincount(self._bucket_draws(k), minlength=self.num_buckets)
            self._counts[k + 1] = counts.copy()
        return counts

    def epoch_indices(self, epoch: int) -> np.ndarray:
        """The ``num_samples`` item indices drawn in ``epoch``."""
        if self._last is not None and self._last[0] == epoch:
            return self._last[1]
        draws = self._bucket_draws(epoch)
        start = self._counts_before(epoch)
        # k-th draw of bucket b in this epoch -> its (start[b] + k)-th draw overall
        rank = np.empty_like(draws)
        sorter = np.argsort(draws, kind="stable")
        first = np.searchsorted(draws[sorter], np.arange(self.num_buckets))
        rank[sorter] = np.arange(len(draws)) - first[draws[sorter]]
        slot = (start[draws] + rank) % self.sizes[draws]
        indices = self._flat[self._offset[draws] + slot].astype(np.int64)
        self._last = (epoch, indices)
        return indices

    def batch(self, epoch: int, index: int, batch_size: int) -> np.ndarray:
        """Items of batch ``index`` of ``epoch`` (the last batch may be short)."""
        return self.epoch_indices(epoch)[index * batch_size : (index + 1) * batch_size]

    def __iter__(self) -> Iterator[int]:
        return iter(self.epoch_indices(self.epoch).tolist())

    def __len__(self) -> int:
        return self.num_samples


class ShuffledPasses:
    """Pass after pass over ``num_items`` items, each pass a permutation seeded by (seed, pass);
    epoch e holds draws e·S .. (e+1)·S - 1 of that stream (S = ``num_samples``)."""

    def __init__(self, num_items: int, num_samples: int, seed: int) -> None:
        self.n, self.num_samples, self.seed = num_items, num_samples, seed
        self._perms: dict[int, np.ndarray] = {}  # the latest passes

    def _perm(self, k: int) -> np.ndarray:
        if k not in self._perms:
            if len(self._perms) >= 4:
                self._perms.pop(min(self._perms))
            self._perms[k] = np.random.default_rng([self.seed, k]).permutation(self.n)
        return self._perms[k]

    def batch(self, epoch: int, index: int, batch_size: int) -> np.ndarray:
        """Items of batch ``index`` of ``epoch`` (the last batch may be short)."""
        start = index * batch_size
        stop = min(start + batch_size, self.num_samples)
        draws = epoch * self.num_samples + np.arange(start, max(start, stop))
        passes, offsets = np.divmod(draws, self.n)
        out = np.empty(len(draws), dtype=np.int64)
        for k in np.unique(passes):
            out[passes == k] = self._perm(int(k))[offsets[passes == k]]
        return out
