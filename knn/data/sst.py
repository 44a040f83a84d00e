"""Stanford Sentiment Treebank (Socher et al., 2013) for paper Section 5.2, Table 2.

The mirror's ``sst/trees/{train,dev,test}.txt`` hold one PTB-style tree a line
with a sentiment label 0-4 (very negative .. very positive) on every node::

    (3 (2 (2 The) (2 Rock)) (4 (3 (2 is) ...) (2 .)))
     ^ root label = sentence label     ^ leaf: (label word)

What this module builds from them:

* sentence level (train/dev/test): one :class:`Example` per tree, the root's
  label: 8,544 / 1,101 / 2,210 sentences;
* phrase level (train only, the authors' ``stsa.*.phrases.train``): one
  example per node (leaves and root included), each distinct token sequence
  kept once (first occurrence in file order);
* fine-grained (5 classes, labels as is) or binary views; binary maps 0-1 to
  0 (negative) and 3-4 to 1 (positive) and drops neutral 2 (sentence level:
  6,920 / 872 / 1,821).

Token normalisation (``normalize=True``): the treebank writes brackets and a
few characters in PTB escapes, which pretrained vector files spell plainly
(GloVe 840B has ``(`` and ``1/2``). :data:`PTB_ESCAPES` maps ``-LRB-`` ``(``,
``-RRB-`` ``)`` (and the curly/square variants), and ``\\/`` ``/``, ``\\*``
``*`` inside tokens. The mirror's stand-in vectors were cut to the raw SST
types and hold neither spelling, so the choice changes nothing there. Case is
kept (GloVe 840B is cased); ``lowercase=True`` folds it. Tokens are split on
ASCII whitespace only: two SST tokens (``2 1\\/2``, ``8 1\\/2``) contain a
no-break space, which Python's ``str.split()`` would cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from knn.data.mirror import DataError, resolve
from knn.data.vocab import Vocab

SPLITS = ("train", "dev", "test")
SST_FILES = {split: f"sst/trees/{split}.txt" for split in SPLITS}
GRANULARITIES = ("fine", "binary")
NUM_CLASSES = {"fine": 5, "binary": 2}
FINE_LABELS = range(5)

#: PTB escapes in SST leaves and their plain spelling (whole-token replacements).
PTB_ESCAPES = {
    "-LRB-": "(",
    "-RRB-": ")",
    "-LCB-": "{",
    "-RCB-": "}",
    "-LSB-": "[",
    "-RSB-": "]",
}
#: Backslash escapes inside tokens (``1\/2``, ``\*``).
_BACKSLASH = re.compile(r"\\([/*])")
#: Parentheses, or a run of characters that are neither parentheses nor ASCII
#: whitespace. Not ``\s``: in Python it matches U+00A0, which SST has in tokens.
_TREE_TOKEN = re.compile(r"[()]|[^()\t\n\r\f\v ]+")


@dataclass(frozen=True)
class Tree:
    """A labelled constituency tree: a leaf has ``word`` and no children."""

    label: int
    children: tuple[Tree, ...] = ()
    word: str | None = None

    @property
    def is_leaf(self) -> bool:
        return self.word is not None

    def leaves(self) -> list[str]:
        """The words under this node, left to right."""
        if self.word is not None:
            return [self.word]
        return [w for child in self.children for w in child.leaves()]

    def subtrees(self) -> Iterator[Tree]:
        """Every node, pre-order (the root first)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass(frozen=True)
class Example:
    """One classification example: ``tokens`` (length >= 1) and a class id."""

    tokens: tuple[str, ...]
    label: int


# --------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------- #


def _parse_label(text: str, where: str) -> int:
    if not text.isdigit() or int(text) not in FINE_LABELS:
        raise DataError(f"{where}: expected a label 0-4 after '(', got {text!r}")
    return int(text)


def parse_tree(line: str, where: str = "<string>") -> Tree:
    """Parse one PTB-style tree ``(label word)`` / ``(label child child ...)``.

    ``where`` names the source in errors (``"train.txt:12"``). Raises
    :class:`DataError` on unbalanced parentheses, a missing or out-of-range
    label, an empty node, a node that mixes words and subtrees or holds two
    words, or text after the tree.
    """
    tokens = _TREE_TOKEN.findall(line)
    if not tokens:
        raise DataError(f"{where}: empty line, expected a tree")
    # Each open node: [label, children, words]; closed on ")".
    stack: list[tuple[int, list[Tree], list[str]]] = []
    root: Tree | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if root is not None:
            raise DataError(f"{where}: unexpected {tok!r} after the end of the tree")
        if tok == "(":
            if i + 1 >= len(tokens) or tokens[i + 1] in "()":
                raise DataError(f"{where}: node without a label (token {i + 1})")
            stack.append((_parse_label(tokens[i + 1], where), [], []))
            i += 2
            continue
        if not stack:
            raise DataError(f"{where}: expected '(' at token {i + 1}, got {tok!r}")
        label, children, words = stack[-1]
        if tok == ")":
            stack.pop()
            node = _close_node(label, children, words, where)
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        else:
            words.append(tok)
        i += 1
    if stack:
        raise DataError(f"{where}: unbalanced parentheses, {len(stack)} node(s) not closed")
    assert root is not None
    return root


def _close_node(label: int, children: list[Tree], words: list[str], where: str) -> Tree:
    """A finished node: a leaf (exactly one word) or an inner node (subtrees only)."""
    if words and children:
        raise DataError(f"{where}: node mixes words {words[:3]} and subtrees")
    if len(words) > 1:
        raise DataError(f"{where}: leaf holds {len(words)} words {words[:3]}, expected one")
    if words:
        return Tree(label, word=words[0])
    if not children:
        raise DataError(f"{where}: empty node with label {label}")
    return Tree(label, tuple(children))


def read_trees(path: str | Path) -> list[Tree]:
    """Parse every non-blank line of ``path``; errors name the file and line."""
    trees = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip(" \t\r\n"):
                trees.append(parse_tree(line, where=f"{path}:{lineno}"))
    return trees


# --------------------------------------------------------------------------- #
# Labels, tokens and examples
# --------------------------------------------------------------------------- #


def binary_label(label: int) -> int | None:
    """0-1 -> 0 (negative), 3-4 -> 1 (positive), 2 (neutral) -> None (dropped)."""
    if label not in FINE_LABELS:
        raise ValueError(f"SST labels are 0-4, got {label}")
    return None if label == 2 else int(label > 2)


def map_label(label: int, granularity: str) -> int | None:
    """The class of a 0-4 label in the ``granularity`` view, None if dropped."""
    if granularity == "fine":
        return label
    if granularity == "binary":
        return binary_label(label)
    raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")


def normalize_token(token: str, lowercase: bool = False) -> str:
    """Undo PTB escapes (:data:`PTB_ESCAPES`, ``\\/``, ``\\*``); optionally lowercase."""
    token = _BACKSLASH.sub(r"\1", PTB_ESCAPES.get(token, token))
    return token.lower() if lowercase else token


def _example(node: Tree, granularity: str, normalize: bool, lowercase: bool) -> Example | None:
    label = map_label(node.label, granularity)
    if label is None:
        return None
    words = node.leaves()
    if normalize or lowercase:
        words = [normalize_token(w, lowercase) if normalize else w.lower() for w in words]
    return Example(tuple(words), label)


def sentence_examples(
    trees: Iterable[Tree],
    granularity: str = "fine",
    normalize: bool = True,
    lowercase: bool = False,
) -> list[Example]:
    """One example per tree with the root's label (neutral dropped if binary)."""
    examples = (_example(t, granularity, normalize, lowercase) for t in trees)
    return [e for e in examples if e is not None]


def phrase_examples(
    trees: Iterable[Tree],
    granularity: str = "fine",
    normalize: bool = True,
    lowercase: bool = False,
) -> list[Example]:
    """One example per node of every tree, each distinct token sequence once.

    Nodes are visited tree by tree, pre-order, so each sentence comes first
    and is followed by its phrases; a phrase seen before (in any tree) is
    skipped. SST's phrase labels come from one phrase dictionary, so a
    repeated phrase carries the same label wherever it occurs.
    """
    seen: set[tuple[str, ...]] = set()
    out: list[Example] = []
    for tree in trees:
        for node in tree.subtrees():
            ex = _example(node, granularity, normalize, lowercase)
            if ex is not None and ex.tokens not in seen:
                seen.add(ex.tokens)
                out.append(ex)
    return out


def load_sst(
    split: str,
    granularity: str = "fine",
    phrases: bool = False,
    mirror: str | Path | None = None,
    cache_dir: str | Path | None = None,
    download: bool = True,
    normalize: bool = True,
    lowercase: bool = False,
) -> list[Example]:
    """Examples of one SST split from the verified mirror/cache/web copy.

    ``phrases=True`` gives phrase-level examples (meant for train; dev and
    test are always evaluated at sentence level).
    """
    if split not in SST_FILES:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    trees = read_trees(resolve(SST_FILES[split], mirror, cache_dir, download))
    build = phrase_examples if phrases else sentence_examples
    return build(trees, granularity, normalize, lowercase)


# --------------------------------------------------------------------------- #
# Batches
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors has no single truth value
class Batch:
    """Padded sentences, time-major like the recurrent layers.

    ``tokens`` (T, B) long, padded with ``pad_id`` after each sentence;
    ``mask`` (T, B) bool, True on real tokens; ``labels`` (B,) long.
    """

    tokens: Tensor
    mask: Tensor
    labels: Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.tokens.to(device), self.mask.to(device), self.labels.to(device))


@dataclass(frozen=True, eq=False)
class EncodedExamples:
    """Examples as vocabulary ids, encoded once, in one flat array: example i's ids are
    ``ids[starts[i] : starts[i] + lengths[i]]`` (int64 arrays); ``labels`` (N,) long."""

    ids: np.ndarray  # (total tokens,)
    starts: np.ndarray  # (N,)
    lengths: np.ndarray  # (N,)
    labels: Tensor

    def __len__(self) -> int:
        return len(self.lengths)


def encode_examples(examples: Sequence[Example], vocab: Vocab) -> EncodedExamples:
    """Each example's token ids, and the labels (a training set is encoded once, not per batch)."""
    if any(len(e.tokens) < 1 for e in examples):
        raise ValueError("every example needs at least one token")
    lengths = np.array([len(e.tokens) for e in examples], dtype=np.int64)
    ids = np.array([i for e in examples for i in vocab.encode(e.tokens)], dtype=np.int64)
    return EncodedExamples(ids, np.cumsum(lengths) - lengths, lengths,
                           torch.tensor([e.label for e in examples], dtype=torch.long))


def collate(encoded: EncodedExamples, index: Sequence[int], pad_id: int = 0) -> Batch:
    """The examples ``index`` of ``encoded``, right-padded::

        tokens[:, b] = ids of example index[b], then pad_id up to the longest
        mask[t, b]   = t < len(example index[b])

    One gather from the flat ids in NumPy: per-example tensors padded one by one
    (torch's pad_sequence) took 3-6x as long, 4,978 times an SST epoch
    (experiments/bench/sst_epoch/2026-12-01/scan_collate/).
    """
    if not len(index):
        raise ValueError("a batch needs at least one example")
    rows = np.asarray(index, dtype=np.int64)  # (B,)
    lengths = encoded.lengths[rows]
    t = np.arange(lengths.max())[:, None]  # (T, 1)
    mask = t < lengths  # (T, B)
    at = np.where(mask, encoded.starts[rows] + t, 0)  # padding reads id 0, then is replaced
    tokens = np.where(mask, encoded.ids[at], pad_id)
    return Batch(torch.from_numpy(tokens), torch.from_numpy(mask), encoded.labels[torch.from_numpy(rows)])


def make_batch(examples: Sequence[Example], vocab: Vocab, pad_id: int = 0) -> Batch:
    """Encode and right-pad ``examples`` (:func:`collate` of all of them)."""
    if not examples:
        raise ValueError("make_batch needs at least one example")
    return collate(encode_examples(examples, vocab), range(len(examples)), pad_id)


def bucket_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator | None = None
) -> list[list[int]]:
    """Index batches of similar length, in random order (as the authors batch).

    Indices are shuffled (when ``generator`` is given), stably sorted by
    length, cut into consecutive runs of ``batch_size``, and the runs are
    shuffled; without a generator the order is deterministic (for evaluation).
    Sorting keeps padding small; shuffling first varies the batches per epoch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(lengths)
    order = torch.randperm(n, generator=generator).tolist() if generator is not None else range(n)
    order = sorted(order, key=lambda i: lengths[i])
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if generator is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return batches
