"""Data: verified local copies of the data sets, vocabularies and PTB batching."""

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
