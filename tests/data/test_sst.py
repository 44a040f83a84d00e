"""Tests for knn.data.sst: the tree parser, label views, phrases and batches."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from knn.data import mirror, sst
from knn.data.mirror import DataError
from knn.data.sst import (
    Example,
    Tree,
    binary_label,
    bucket_batches,
    collate,
    encode_examples,
    load_sst,
    make_batch,
    normalize_token,
    parse_tree,
    phrase_examples,
    read_trees,
    sentence_examples,
)
from knn.data.vocab import Vocab

ROCK = "(3 (2 (2 The) (2 Rock)) (4 (2 rocks) (2 .)))"
# Shares "The Rock" with ROCK; its root is neutral.
SHARED = "(2 (2 (2 The) (2 Rock)) (1 (1 sigh) (2 -RRB-)))"
TOY_FILES = {
    "train": f"{ROCK}\n{SHARED}\n",
    "dev": "(1 (0 Awful) (2 .))\n",
    "test": "(4 (4 Great) (2 1\\/2))\n",
}


def test_parse_tree_builds_labels_and_leaves():
    tree = parse_tree(ROCK)
    assert tree.label == 3 and not tree.is_leaf
    assert tree.leaves() == ["The", "Rock", "rocks", "."]
    assert tree.children[0] == Tree(2, (Tree(2, word="The"), Tree(2, word="Rock")))
    # pre-order: root, left subtree and its leaves, right subtree and its leaves
    assert [n.label for n in tree.subtrees()] == [3, 2, 2, 2, 4, 2, 2]


def test_parse_tree_keeps_no_break_space_inside_a_token():
    # SST has "2\xa01\/2"; str.split() would cut it in two.
    assert parse_tree("(2 (2 2\xa01\\/2) (2 hours))").leaves() == ["2\xa01\\/2", "hours"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("(3 (2 The) (2 Rock)", "unbalanced parentheses"),
        ("(3 (2 The) (2 Rock)))", "after the end of the tree"),
        ("(3 (The) (2 Rock))", "expected a label 0-4 after '\\(', got 'The'"),
        ("((2 The) (2 Rock))", "node without a label"),
        ("(7 (2 The) (2 Rock))", "got '7'"),
        ("(3 (2 ) (2 Rock))", "empty node"),
        ("(3 (2 The Rock))", "leaf holds 2 words"),
        ("(3 The (2 Rock))", "mixes words"),
        ("The Rock", "expected '\\(' at token 1"),
    ],
)
def test_malformed_trees_name_file_and_line(tmp_path: Path, line: str, message: str):
    path = tmp_path / "bad.txt"
    path.write_text(f"{ROCK}\n\n{line}\n")  # the bad tree is on line 3
    with pytest.raises(DataError, match=f"bad.txt:3: .*{message}"):
        read_trees(path)


def test_binary_label_mapping():
    assert [binary_label(y) for y in range(5)] == [0, 0, None, 1, 1]
    with pytest.raises(ValueError):
        binary_label(5)


def test_sentence_examples_fine_and_binary():
    trees = [parse_tree(ROCK), parse_tree(SHARED)]
    fine = sentence_examples(trees, "fine")
    assert fine == [
        Example(("The", "Rock", "rocks", "."), 3),
        Example(("The", "Rock", "sigh", ")"), 2),
    ]
    assert sentence_examples(trees, "binary") == [Example(("The", "Rock", "rocks", "."), 1)]


def test_phrase_examples_drop_duplicates_in_order():
    trees = [parse_tree(ROCK), parse_tree(SHARED)]
    phrases = phrase_examples(trees, "fine")
    assert [(" ".join(e.tokens), e.label) for e in phrases] == [
        ("The Rock rocks .", 3),
        ("The Rock", 2),
        ("The", 2),
        ("Rock", 2),
        ("rocks .", 4),
        ("rocks", 2),
        (".", 2),
        # second tree: "The Rock", "The", "Rock" already seen
        ("The Rock sigh )", 2),
        ("sigh )", 1),
        ("sigh", 1),
        (")", 2),
    ]
    binary = phrase_examples(trees, "binary")
    assert [(" ".join(e.tokens), e.label) for e in binary] == [
        ("The Rock rocks .", 1), ("rocks .", 1), ("sigh )", 0), ("sigh", 0),
    ]


def test_normalize_token_undoes_ptb_escapes():
    assert [normalize_token(t) for t in ["-LRB-", "-RRB-", "1\\/2", "\\*\\*", "Rock"]] == [
        "(", ")", "1/2", "**", "Rock",
    ]
    assert normalize_token("-LRB-sigh-RRB-") == "-LRB-sigh-RRB-"  # whole tokens only
    assert normalize_token("Rock", lowercase=True) == "rock"


@pytest.fixture
def toy_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A mirror of three tiny tree files, with the checksum table patched to match."""
    root = tmp_path / "mirror"
    (root / "sst" / "trees").mkdir(parents=True)
    table = {}
    for split, text in TOY_FILES.items():
        (root / sst.SST_FILES[split]).write_text(text)
        table[sst.SST_FILES[split]] = hashlib.sha256(text.encode()).hexdigest()
    monkeypatch.setattr(mirror, "CHECKSUMS", table)
    return root


def test_load_sst_from_a_mirror(toy_mirror: Path, tmp_path: Path):
    kw = dict(mirror=toy_mirror, cache_dir=tmp_path / "cache", download=False)
    assert load_sst("test", **kw) == [Example(("Great", "1/2"), 4)]
    assert load_sst("test", normalize=False, **kw) == [Example(("Great", "1\\/2"), 4)]
    assert load_sst("dev", "binary", **kw) == [Example(("Awful", "."), 0)]
    assert len(load_sst("train", phrases=True, **kw)) == 11
    with pytest.raises(ValueError, match="split"):
        load_sst("valid", **kw)


def test_make_batch_pads_time_major():
    vocab = Vocab(["<pad>", "<unk>", "a", "b"])
    batch = make_batch([Example(("a", "b", "zzz"), 1), Example(("b",), 0)], vocab)
    assert batch.tokens.tolist() == [[2, 3], [3, 0], [1, 0]]
    assert batch.mask.tolist() == [[True, True], [True, False], [True, False]]
    assert batch.labels.tolist() == [1, 0]


def test_collate_of_encoded_examples_is_the_batch_of_those_examples():
    vocab = Vocab(["<pad>", "<unk>", "a", "b", "c"])
    examples = [Example(tuple("abc"[: 1 + i % 3]) + ("zzz",) * (i % 2), i % 5) for i in range(9)]
    encoded = encode_examples(examples, vocab)
    assert len(encoded) == 9
    for index in ([4, 0, 7], [8], [2, 2, 5, 1]):
        got = collate(encoded, index, pad_id=9)
        # written out by hand: column b is example index[b]'s ids, then pad_id
        ids = [vocab.encode(examples[i].tokens) for i in index]
        T = max(map(len, ids))
        tokens = [[ids[b][t] if t < len(ids[b]) else 9 for b in range(len(index))] for t in range(T)]
        mask = [[t < len(ids[b]) for b in range(len(index))] for t in range(T)]
        assert got.tokens.dtype == torch.long and got.mask.dtype == torch.bool
        assert got.tokens.tolist() == tokens and got.mask.tolist() == mask
        assert got.labels.tolist() == [examples[i].label for i in index]
    assert collate(encoded, [5]).tokens.tolist() == [[2], [3], [4], [1]]  # "a b c zzz": zzz is <unk>
    with pytest.raises(ValueError, match="at least one"):
        collate(encoded, [])
    with pytest.raises(ValueError, match="at least one token"):
        encode_examples([Example((), 0)], vocab)


def test_bucket_batches_cover_every_index_once():
    lengths = [5, 1, 3, 3, 9, 2, 7]
    assert bucket_batches(lengths, 3) == [[1, 5, 2], [3, 0, 6], [4]]  # sorted, deterministic
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    shuffled = bucket_batches(lengths, 3, g())
    assert sorted(i for b in shuffled for i in b) == list(range(7))
    assert shuffled == bucket_batches(lengths, 3, g())  # same seed, same batches
    assert sorted(len(b) for b in shuffled) == [1, 3, 3]
    for b in shuffled:  # each batch is a run of the length order
        assert sorted(lengths[i] for i in b) == [lengths[i] for i in b]


def _real_mirror() -> Path | None:
    for path in mirror._default_mirror_dirs():
        if all((path / f).is_file() for f in sst.SST_FILES.values()):
            return path
    return None


@pytest.mark.skipif(_real_mirror() is None, reason="no data mirror with sst/trees/ found")
def test_real_sst_sentence_counts():
    counts = {
        g: [len(load_sst(s, g, mirror=_real_mirror(), download=False)) for s in sst.SPLITS]
        for g in sst.GRANULARITIES
    }
    assert counts == {"fine": [8544, 1101, 2210], "binary": [6920, 872, 1821]}
