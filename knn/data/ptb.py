"""Penn Treebank language-modelling data (Mikolov et al., 2010 preprocessing).

The three files are already lower-cased, numbers are ``N`` and rare words are
``<unk>`` (10,000 types in all); we only append ``<eos>`` at each line end and
map tokens to ids. The token stream is then cut into batch columns and BPTT
segments as in pytorch/examples ``word_language_model`` (see :func:`batchify`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from knn.data import mirror as data_mirror  # read its table at call time, not import time
from knn.data.mirror import DataError, default_cache_dir, resolve
from knn.data.vocab import Vocab
from knn.io import atomic_write

log = logging.getLogger(__name__)

EOS = "<eos>"
UNK = "<unk>"
SPLITS = ("train", "valid", "test")
PTB_FILES = {split: f"ptb/ptb.{split}.txt" for split in SPLITS}
# Bump when the cached payload's layout changes, so old caches are rebuilt.
CACHE_FORMAT = 1


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors has no single truth value
class PTBCorpus:
    """The PTB splits as id streams sharing one vocabulary built on train.

    ``train``, ``valid``, ``test``: 1-D ``torch.long`` tensors, one id per
    token, ``<eos>`` included (929,589 / 73,760 / 82,430 ids).
    """

    vocab: Vocab
    train: Tensor
    valid: Tensor
    test: Tensor


def read_tokens(path: str | Path) -> list[str]:
    """Whitespace-split tokens of a text file with ``<eos>`` after every line."""
    tokens: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            tokens.extend(line.split())
            tokens.append(EOS)
    return tokens


def build_corpus(train: Sequence[str], valid: Sequence[str], test: Sequence[str]) -> PTBCorpus:
    """Build the train vocabulary and encode all three token lists.

    Raises :class:`DataError` if valid or test hold a type absent from train:
    PTB is closed-vocabulary, so that means the wrong files were given.
    """
    vocab = Vocab.build(train, specials=(UNK, EOS), unk_token=UNK)
    for split, tokens in (("valid", valid), ("test", test)):
        oov = sorted({t for t in tokens if t not in vocab})
        if oov:
            raise DataError(
                f"PTB {split} has {len(oov)} token types missing from the train vocabulary "
                f"(e.g. {oov[:5]}); the files are not a matching Mikolov PTB set"
            )

    def ids(tokens: Sequence[str]) -> Tensor:
        return torch.tensor(vocab.encode(tokens), dtype=torch.long)

    return PTBCorpus(vocab=vocab, train=ids(train), valid=ids(valid), test=ids(test))


def _cache_key(shas: Sequence[str]) -> str:
    """Key of the id cache: the cache format plus the sha256 of each source file."""
    return hashlib.sha256(":".join([str(CACHE_FORMAT), *shas]).encode()).hexdigest()


def _load_cached(path: Path, key: str) -> PTBCorpus | None:
    """The cached corpus, or ``None`` if absent, stale or unreadable."""
    if not path.is_file():
        return None
    try:
        blob = torch.load(path, weights_only=True)
        if blob["key"] != key:
            raise ValueError("key differs from the source files' checksums")
        tensors = {s: blob[s] for s in SPLITS}
        if not all(t.dtype == torch.long and t.dim() == 1 for t in tensors.values()):
            raise ValueError("id tensors are not 1-D long")
        return PTBCorpus(vocab=Vocab.from_dict(blob["vocab"]), **tensors)
    except Exception as err:  # any defect in a cache just means "rebuild"
        log.warning("rebuilding PTB id cache %s: %s", path, " ".join(str(err).split()))
        return None


def _save_cached(corpus: PTBCorpus, path: Path, key: str) -> None:
    """Write the corpus as plain data (``weights_only``-loadable), atomically."""
    blob = {"key": key, "vocab": corpus.vocab.to_dict()}
    blob.update({s: getattr(corpus, s) for s in SPLITS})
    try:
        with atomic_write(path) as f:
            torch.save(blob, f)
    except OSError as err:
        # A read-only cache only costs a few seconds of re-tokenising next time.
        log.warning("could not write PTB id cache %s: %s", path, err)


def load_ptb(
    mirror: str | Path | None = None,
    cache_dir: str | Path | None = None,
    download: bool = True,
    data_dir: str | Path | None = None,
) -> PTBCorpus:
    """Load PTB from a verified mirror/cache/download (see :func:`knn.data.mirror.resolve`).

    With ``data_dir``, read ``ptb.train.txt``, ``ptb.valid.txt`` and
    ``ptb.test.txt`` from that folder instead: any text in the Mikolov PTB
    format (your own corpus, the tests' fixture), taken as it is, without a
    checksum; a warning names the folder and the files' sha256. ``mirror``
    and ``download`` are then unused.

    The encoded ids are cached under ``<cache_dir>/ptb/`` keyed by the three
    files' sha256, so later runs skip tokenising.
    """
    if data_dir is not None and str(data_dir) != "":
        folder = Path(data_dir).expanduser()
        paths = {s: folder / Path(PTB_FILES[s]).name for s in SPLITS}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise DataError(f"PTB-format data folder {folder} lacks {', '.join(missing)} "
                            f"(task.data.dir needs ptb.train.txt, ptb.valid.txt, ptb.test.txt)")
        shas = [data_mirror.sha256_file(paths[s]) for s in SPLITS]
        log.warning("PTB-format files from %s, not checksum-verified (sha256 train %s, valid %s, "
                    "test %s)", folder, *(sha[:12] for sha in shas))
    else:
        paths = {s: resolve(PTB_FILES[s], mirror, cache_dir, download) for s in SPLITS}
        shas = [data_mirror.CHECKSUMS[PTB_FILES[s]] for s in SPLITS]
    key = _cache_key(shas)
    cache_file = default_cache_dir(cache_dir) / "ptb" / f"ptb-ids-{key[:16]}.pt"
    corpus = _load_cached(cache_file, key)
    if corpus is None:
        corpus = build_corpus(*(read_tokens(paths[s]) for s in SPLITS))
        _save_cached(corpus, cache_file, key)
    return corpus


def batchify(ids: Tensor, batch_size: int) -> Tensor:
    """Cut a 1-D id stream into ``batch_size`` contiguous columns, shape ``(N, B)``.

    The tail that does not fill a whole row is dropped. With the stream
    ``a b c ... x`` (24 tokens) and ``batch_size=4``, each column is one
    contiguous stretch of 6 tokens, read top to bottom::

        stream: a b c d e f | g h i j k l | m n o p q r | s t u v w x

        data (N=6, B=4)     bptt=2: x is a block of rows, y the same block one row later
        row 0 | a g m s |   segment 0:  x = | a g m s |    y = | b h n t |
        row 1 | b h n t |                   | b h n t |        | c i o u |
        row 2 | c i o u |   segment 1:  x = rows 2-3,      y = rows 3-4
        row 3 | d j p v |   segment 2:  x = row 4,         y = row 5  (the last may be shorter)
        row 4 | e k q w |
        row 5 | f l r x |

    Columns are independent streams, so the hidden state carried from one
    segment to the next continues each column's own text. A token's
    neighbours across columns are unrelated text; the model never mixes them.
    """
    if ids.dim() != 1:
        raise ValueError(f"batchify expects a 1-D id stream, got shape {tuple(ids.shape)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    rows = ids.numel() // batch_size
    if rows == 0:
        raise ValueError(f"{ids.numel()} tokens cannot fill {batch_size} columns")
    # (B, N) row-major keeps each column's stretch contiguous; transpose to (N, B).
    return ids[: rows * batch_size].view(batch_size, rows).t().contiguous()


def num_segments(length: int, bptt: int) -> int:
    """How many ``(x, y)`` segments :func:`bptt_segments` yields for ``length`` rows.

    Every row but the last is an input (the last has no next-token target),
    so this is ``ceil((length - 1) / bptt)``.
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    return max(0, -(-(length - 1) // bptt))


def segment(data: Tensor, i: int, bptt: int) -> tuple[Tensor, Tensor]:
    """The ``i``-th BPTT segment of ``data`` (N, B): ``x`` (T, B) and targets ``y`` (T, B).

    ``x = data[i*bptt : i*bptt + T]`` and ``y`` is the same rows moved down by
    one, with ``T = bptt`` except possibly for the last segment. Random
    access by index lets a trainer resume mid-epoch exactly. Both are views.
    """
    n = num_segments(data.size(0), bptt)
    if not 0 <= i < n:
        raise IndexError(f"segment {i} out of range: {n} segments of bptt={bptt}")
    start = i * bptt
    length = min(bptt, data.size(0) - 1 - start)
    return data[start : start + length], data[start + 1 : start + 1 + length]


def bptt_segments(data: Tensor, bptt: int, start: int = 0) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield :func:`segment` ``start``, ``start + 1``, ... to the end of ``data`` (N, B)."""
    for i in range(start, num_segments(data.size(0), bptt)):
        yield segment(data, i, bptt)
