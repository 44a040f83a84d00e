"""Pretrained word vectors in GloVe / word2vec text format, cut to a task vocabulary.

File format, one vector a line, fields separated by single spaces::

    [count dim]                      optional word2vec header (two integers)
    word v_1 v_2 ... v_dim

The file may be plain text, ``.gz``, or ``.zip`` (one text member, or the one
named by ``member``). It is streamed line by line and only the rows of
``keep`` are parsed into numbers, so a 5.6 GB ``glove.840B.300d.txt`` costs
one pass and memory for the task vocabulary only.

Parsing rules:

* ``dim`` is the header's, else the first vector line's field count minus one
  (or the ``dim`` argument, which must then agree).
* A line with more than ``dim + 1`` fields has a token with spaces in it (a
  few GloVe 840B lines, e.g. ``. . .``): the last ``dim`` fields are the
  vector and the rest, re-joined with spaces, is the token. If the extra
  fields are all numbers the line is instead taken to have the wrong
  dimension (an error).
* Fewer than ``dim + 1`` fields, or a non-number among a kept row's values,
  is a :class:`DataError` naming file and line; so is a truncated or corrupt
  archive. Values of rows not kept are not parsed (that is what makes the
  pass fast), so garbage there goes unnoticed.
* Blank lines are skipped; the first occurrence of a repeated token wins.
  Bytes that are not UTF-8 are kept as surrogate escapes: such a token
  matches nothing, but it does not stop the pass.

Cased and uncased files: GloVe 840B is cased, GloVe 6B is lowercased. A file
is taken as uncased when no token of its first :data:`CASE_PROBE_LINES` lines
has an uppercase letter (:func:`detect_cased`; ``cased=`` overrides it). A task
type is looked up as written, then, in an uncased file, lowercased, so
"Good" finds "good"; :class:`Coverage` counts both the exact and the final
matches.

Out-of-vocabulary policy (``oov``) for task tokens without a vector, with
fixed embeddings in mind:

* ``"unk"`` (default): they share the ``<unk>`` row, a random vector
  (uniform ±0.25 from ``seed``, unit length if ``normalize``), so "some
  unknown word" is one learnable-from feature;
* ``"zero"``: each keeps its own all-zero row (it contributes nothing), and
  so does ``<unk>``. This is what the authors' SST code computes: every word
  missing from the vector file maps to its ``<unk>`` row, which is zero;
* ``"random"``: each gets its own random row as for ``<unk>`` (Kim 2014's
  treatment of words missing from word2vec).

Shared-vector policy (``shared``) for task types whose vectors are identical
(a pruned table such as spaCy's ``en_core_web_md`` maps many words to one
row: in the mirror's stand-in, 19,863 SST types have only 3,111 distinct
vectors, and "good", "bad" and "." share one):

* ``"keep"`` (default): use the vectors as given;
* ``"split"``: every type in a group of two or more gets its row mixed in
  equal parts with its own random direction, ``unit(unit(v) + unit(r))``
  (``r`` uniform ±0.25 from ``seed``), so fixed vectors can still tell the
  words apart while keeping the group's direction. Singletons are untouched.

``normalize=True`` scales every found vector (and the random ones) to unit
L2 length, as the paper does ("we normalize the vectors, ||w||=1, and fix
them"); all-zero vectors stay zero. Row 0 is always ``<pad>`` (zeros).
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch
from torch import Tensor

from knn.data.mirror import DataError
from knn.data.vocab import Vocab

PAD = "<pad>"
UNK = "<unk>"
OOV_POLICIES = ("unk", "zero", "random")
SHARED_POLICIES = ("keep", "split")
RANDOM_SCALE = 0.25  # Kim (2014): U(-a, a) with a chosen so variance matches word2vec's
#: Lines read by :func:`detect_cased`: GloVe 840B has capitalised tokens within its first
#: hundred lines, so an uncased verdict after this many is safe for real vector files.
CASE_PROBE_LINES = 20_000


@dataclass(frozen=True)
class Coverage:
    """How many task types and tokens have a pretrained vector."""

    found_types: int
    total_types: int
    found_tokens: int
    total_tokens: int
    missing: tuple[str, ...]  # types without a vector, most frequent first
    distinct: int  # distinct vectors among the found types (a pruned table has fewer)
    exact_types: int = 0  # of found_types, those found as written (the rest: lowercased)
    exact_tokens: int = 0
    cased: bool = True  # whether the file was read as cased (no lowercase fallback)

    @property
    def type_rate(self) -> float:
        return self.found_types / max(self.total_types, 1)

    @property
    def token_rate(self) -> float:
        return self.found_tokens / max(self.total_tokens, 1)

    def summary(self) -> str:
        text = (
            f"{self.found_types}/{self.total_types} types ({100 * self.type_rate:.1f}%), "
            f"{self.found_tokens}/{self.total_tokens} tokens ({100 * self.token_rate:.1f}%) "
            f"have a vector ({self.distinct} distinct)"
        )
        if self.cased:
            return text + "; cased file, exact lookup"
        exact = 100 * self.exact_tokens / max(self.total_tokens, 1)
        return (text + f"; uncased file: {self.exact_types} types ({exact:.1f}% of tokens) "
                "as written, the rest lowercased")


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors has no single truth value
class Embeddings:
    """A vocabulary and its fixed vectors: ``vectors[vocab[w]]`` is w's row, (V, dim)."""

    vocab: Vocab
    vectors: Tensor
    coverage: Coverage
    oov: str
    normalized: bool

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]


# --------------------------------------------------------------------------- #
# Reading
# --------------------------------------------------------------------------- #


@contextmanager
def open_text(path: str | Path, member: str | None = None) -> Iterator[IO[str]]:
    """Open a plain, ``.gz`` or ``.zip`` text file for streaming."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"word-vector file {path} does not exist")
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape") as f:
            yield f
    elif path.suffix == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as err:
            raise DataError(f"{path}: not a readable zip archive ({err})") from err
        with archive:
            name = member or _single_member(archive, path)
            if name not in archive.namelist():
                raise DataError(f"{path}: has no member {name!r}; it holds {archive.namelist()[:5]}")
            with archive.open(name) as raw:
                yield io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
    else:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            yield f


def _single_member(archive: zipfile.ZipFile, path: Path) -> str:
    names = [n for n in archive.namelist() if not n.endswith("/")]
    if len(names) != 1:
        raise DataError(f"{path}: holds {len(names)} files {names[:5]}; name the one to read")
    return names[0]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _header_dim(fields: list[str]) -> int | None:
    """``dim`` of a word2vec header line ``count dim``, else None."""
    if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
        return int(fields[1])
    return None


def _split_line(line: str, dim: int, where: str) -> tuple[str, str]:
    """(token, the values' text) of a vector line with ``dim`` values."""
    spaces = line.count(" ")
    if spaces == dim:  # the common case: one split, no list of 300 strings
        token, _, values = line.partition(" ")
        return token, values
    if spaces < dim:
        raise DataError(f"{where}: {spaces} values, expected {dim} (wrong dimension?)")
    head, *_ = line.rsplit(" ", dim)
    extra = head.split(" ")[1:]
    if all(_is_number(f) for f in extra):
        n_values = dim + len(extra)
        raise DataError(f"{where}: {n_values} numeric values, expected {dim} (wrong dimension?)")
    return head, line[len(head) + 1 :]


def _parse_values(values: str, dim: int, where: str) -> np.ndarray:
    try:
        vec = np.array(values.split(" "), dtype=np.float32)
    except ValueError as err:
        raise DataError(f"{where}: garbled vector values ({err})") from err
    if vec.shape != (dim,):
        raise DataError(f"{where}: expected {dim} values, got {vec.size}")
    return vec


def read_vectors(
    path: str | Path,
    keep: Collection[str] | None = None,
    dim: int | None = None,
    member: str | None = None,
) -> dict[str, np.ndarray]:
    """Stream ``path`` and return {token: float32 (dim,)} for tokens in ``keep``.

    ``keep=None`` keeps every row (only for small files). See the module
    docstring for the format and the errors raised.
    """
    found: dict[str, np.ndarray] = {}
    lineno = 0
    try:
        with open_text(path, member) as f:
            for lineno, raw in enumerate(f, start=1):
                line = raw.rstrip("\r\n").rstrip(" ")
                if not line:
                    continue
                where = f"{path}:{lineno}"
                if dim is None or lineno == 1:
                    first = line.split(" ")
                    header = _header_dim(first) if lineno == 1 else None
                    if header is not None:
                        if dim is not None and dim != header:
                            raise DataError(f"{where}: header says dim {header}, expected {dim}")
                        dim = header
                        continue
                    dim = dim if dim is not None else len(first) - 1
                    if dim < 1:
                        raise DataError(f"{where}: a line needs a token and at least one value")
                token, values = _split_line(line, dim, where)
                if (keep is None or token in keep) and token not in found:
                    found[token] = _parse_values(values, dim, where)
    except (EOFError, OSError, zlib.error, zipfile.BadZipFile, UnicodeError) as err:
        # Truncated gzip (EOFError), bad gzip/zip data or CRC (OSError, BadZipFile, zlib.error).
        raise DataError(f"{path}: unreadable after line {lineno}: {err}") from err
    return found


def detect_cased(path: str | Path, member: str | None = None,
                 lines: int = CASE_PROBE_LINES) -> bool:
    """Whether any token among the first ``lines`` lines has an uppercase letter."""
    lineno = 0
    try:
        with open_text(path, member) as f:
            for lineno, raw in enumerate(f, start=1):
                if lineno > lines:
                    break
                token = raw.split(" ", 1)[0]
                if token != token.lower():
                    return True
    except (EOFError, OSError, zlib.error, zipfile.BadZipFile, UnicodeError) as err:
        raise DataError(f"{path}: unreadable after line {lineno}: {err}") from err
    return False


# --------------------------------------------------------------------------- #
# Building the embedding table
# --------------------------------------------------------------------------- #


def _unit(rows: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 length; all-zero rows stay zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


def _split_shared(rows: np.ndarray, in_group: np.ndarray, seed: int) -> np.ndarray:
    """``unit(unit(v) + unit(r))`` times ``|v|`` for the rows flagged ``in_group``."""
    rng = np.random.default_rng([seed, 1])  # its own stream: other rows do not move
    r = _unit(rng.uniform(-RANDOM_SCALE, RANDOM_SCALE, size=rows.shape))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    mixed = _unit(_unit(rows) + r) * norms
    return np.where(in_group[:, None], mixed, rows)


def build_embeddings(
    tokens: Iterable[str],
    path: str | Path,
    oov: str = "unk",
    normalize: bool = True,
    seed: int = 0,
    dim: int | None = None,
    member: str | None = None,
    shared: str = "keep",
    cased: bool | None = None,
) -> Embeddings:
    """Vocabulary and fixed (V, dim) float32 vectors for the task's ``tokens``.

    ``tokens`` is the task's token stream (repeats count for coverage and
    order types by frequency). Rows: ``<pad>`` (0, zeros), ``<unk>`` (1),
    then the types with a vector, then (``oov`` "zero"/"random") those
    without. Tokens outside the task vocabulary encode as ``<unk>``.
    ``cased``: whether the file is cased (``None``: :func:`detect_cased`); an
    uncased file is also searched for each type's lowercase form.
    """
    if oov not in OOV_POLICIES:
        raise ValueError(f"oov must be one of {OOV_POLICIES}, got {oov!r}")
    if shared not in SHARED_POLICIES:
        raise ValueError(f"shared must be one of {SHARED_POLICIES}, got {shared!r}")
    counts = Counter(tokens)  # insertion-ordered, so the stable sort breaks ties by first use
    # The specials keep their own rows even if the task text spells them.
    ranked = sorted((t for t in counts if t not in (PAD, UNK)), key=lambda t: -counts[t])
    if cased is None:
        cased = detect_cased(path, member)
    keep = set(ranked) if cased else set(ranked) | {t.lower() for t in ranked}
    found = read_vectors(path, keep=keep, dim=dim, member=member)
    exact = {t for t in ranked if t in found}
    lookup = {t: t if t in exact or cased else t.lower() for t in ranked}
    have = [t for t in ranked if lookup[t] in found]
    missing = [t for t in ranked if lookup[t] not in found]
    if not have:
        raise DataError(f"{path}: none of the {len(ranked)} task types has a vector")
    d = len(found[lookup[have[0]]])
    found_rows = np.stack([found[lookup[t]] for t in have])
    _, group, group_size = np.unique(found_rows, axis=0, return_inverse=True, return_counts=True)
    coverage = Coverage(
        found_types=len(have),
        total_types=len(ranked),
        found_tokens=sum(counts[t] for t in have),
        total_tokens=sum(counts[t] for t in ranked),
        missing=tuple(missing),
        distinct=len(group_size),
        exact_types=len(exact),
        exact_tokens=sum(counts[t] for t in exact),
        cased=cased,
    )
    extra = missing if oov != "unk" else []
    rng = np.random.default_rng(seed)
    unk_row = rng.uniform(-RANDOM_SCALE, RANDOM_SCALE, size=(1, d))
    if oov == "zero":
        unk_row = np.zeros((1, d))
    if oov == "random":
        extra_rows = rng.uniform(-RANDOM_SCALE, RANDOM_SCALE, size=(len(extra), d))
    else:
        extra_rows = np.zeros((len(extra), d))
    if shared == "split":
        found_rows = _split_shared(found_rows, group_size[group.reshape(-1)] > 1, seed)
    if normalize:
        found_rows, unk_row, extra_rows = _unit(found_rows), _unit(unk_row), _unit(extra_rows)
    table = np.concatenate(
        [np.zeros((1, d)), unk_row, found_rows, extra_rows.reshape(len(extra), d)]
    ).astype(np.float32)
    vocab = Vocab([PAD, UNK, *have, *extra], unk_token=UNK)
    return Embeddings(vocab, torch.from_numpy(table), coverage, oov, normalize)

