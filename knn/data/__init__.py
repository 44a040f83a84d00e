"""Data: verified local copies of the data sets, vocabularies and PTB batching.

Per data set: :mod:`~knn.data.ptb`, :mod:`~knn.data.sst`, :mod:`~knn.data.vectors`
and :mod:`~knn.data.molecules` (CSV -> graphs); not tied to one data set:
:mod:`~knn.data.mirror` (verified files), :mod:`~knn.data.splits` (train/valid/test
rows from a file, a column or at random) and :mod:`~knn.data.sampling` (training
orders).
"""

from knn.data.mirror import DataError, resolve
from knn.data.ptb import PTBCorpus, batchify, bptt_segments, load_ptb, num_segments, segment
from knn.data.vocab import Vocab

__all__ = [
    "DataError",
    "PTBCorpus",
    "Vocab",
    "batchify",
    "bptt_segments",
    "load_ptb",
    "num_segments",
    "resolve",
    "segment",
]
