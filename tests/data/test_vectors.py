"""Tests for knn.data.vectors: the streaming reader, its errors, OOV policies, coverage."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from knn.data import mirror
from knn.data.mirror import DataError
from knn.data.vectors import PAD, UNK, build_embeddings, read_vectors

LINES = [
    "the 1 0 0",
    "cat 0 2 0",
    ". . . 0 0 3",  # GloVe 840B has a few tokens with spaces in them
    "dog 3 4 0",
    "cat 9 9 9",  # repeated token: the first row wins
]
TEXT = "\n".join(LINES) + "\n"


def write(path: Path, text: str) -> Path:
    """``text`` to ``path`` as plain, gzip or zip, by the suffix."""
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    elif path.suffix == ".zip":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("vectors.txt", text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["v.txt", "v.txt.gz", "v.zip"])
def test_read_vectors_keeps_only_the_task_vocabulary(tmp_path: Path, name: str):
    found = read_vectors(write(tmp_path / name, TEXT), keep={"cat", ". . .", "bird"})
    assert sorted(found) == [". . .", "cat"]
    np.testing.assert_array_equal(found["cat"], [0, 2, 0])
    np.testing.assert_array_equal(found[". . ."], [0, 0, 3])
    assert found["cat"].dtype == np.float32


def test_read_vectors_word2vec_header_and_crlf(tmp_path: Path):
    path = write(tmp_path / "w2v.txt", "2 3\r\nthe 1 0 0 \r\ncat 0 2 0\r\n")
    found = read_vectors(path)
    assert sorted(found) == ["cat", "the"]
    np.testing.assert_array_equal(found["the"], [1, 0, 0])
    with pytest.raises(DataError, match="w2v.txt:1: header says dim 3, expected 4"):
        read_vectors(path, dim=4)


def test_zip_with_several_members_needs_a_name(tmp_path: Path):
    path = tmp_path / "two.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.txt", "x 1 2\n")
        z.writestr("b.txt", "y 3 4\n")
    with pytest.raises(DataError, match="holds 2 files"):
        read_vectors(path)
    assert list(read_vectors(path, member="b.txt")) == ["y"]
    with pytest.raises(DataError, match="has no member 'c.txt'"):
        read_vectors(path, member="c.txt")


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("dog 3 x 0", "garbled vector values"),
        ("dog 3 4", "2 values, expected 3 \\(wrong dimension\\?\\)"),
        ("dog 3 4 0 5", "4 numeric values, expected 3 \\(wrong dimension\\?\\)"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, bad_line: str, message: str):
    path = write(tmp_path / "bad.txt.gz", f"the 1 0 0\ncat 0 2 0\n{bad_line}\n")
    with pytest.raises(DataError, match=f"bad.txt.gz:3: {message}"):
        read_vectors(path, keep={"dog"})


def test_values_of_rows_not_kept_are_not_parsed(tmp_path: Path):
    # The speed/strictness trade-off the module documents.
    path = write(tmp_path / "v.txt", "the 1 0 0\ndog 3 x 0\n")
    assert list(read_vectors(path, keep={"the"})) == ["the"]


def test_truncated_gzip_is_a_data_error(tmp_path: Path):
    whole = write(tmp_path / "whole.txt.gz", TEXT * 50).read_bytes()
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match="cut.txt.gz: unreadable after line"):
        read_vectors(cut, keep={"cat"})


def test_corrupt_zip_and_missing_file(tmp_path: Path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a readable zip"):
        read_vectors(bad)
    with pytest.raises(DataError, match="does not exist"):
        read_vectors(tmp_path / "nope.txt")


def test_build_embeddings_unk_policy_and_coverage(tmp_path: Path):
    path = write(tmp_path / "v.txt", TEXT)
    tokens = ["the", "cat", "bird", "the", "dog", "bird", "the"]
    emb = build_embeddings(tokens, path, oov="unk", normalize=True)
    assert emb.vocab.itos == (PAD, UNK, "the", "cat", "dog")  # found types by frequency
    assert emb.vocab["bird"] == emb.vocab["never-seen"] == 1  # OOV shares <unk>
    cov = emb.coverage
    assert (cov.found_types, cov.total_types, cov.found_tokens, cov.total_tokens) == (3, 4, 5, 7)
    assert cov.missing == ("bird",)
    assert cov.summary().startswith("3/4 types (75.0%), 5/7 tokens (71.4%)")
    v = emb.vectors
    assert v.shape == (5, 3) and v.dtype == torch.float32
    assert torch.equal(v[0], torch.zeros(3))
    torch.testing.assert_close(v[4], torch.tensor([0.6, 0.8, 0.0]))  # (3,4,0)/5
    torch.testing.assert_close(v.norm(dim=1)[1:], torch.ones(4))  # unk row is unit too
    raw = build_embeddings(tokens, path, normalize=False).vectors
    torch.testing.assert_close(raw[4], torch.tensor([3.0, 4.0, 0.0]))


def test_build_embeddings_zero_and_random_policies(tmp_path: Path):
    path = write(tmp_path / "v.txt", TEXT)
    tokens = ["the", "bird", "fish"]
    zero = build_embeddings(tokens, path, oov="zero")
    assert zero.vocab.itos == (PAD, UNK, "the", "bird", "fish")
    assert torch.equal(zero.vectors[[0, 1, 3, 4]], torch.zeros(4, 3))
    rand = build_embeddings(tokens, path, oov="random", seed=3)
    assert rand.vocab.itos == zero.vocab.itos
    torch.testing.assert_close(rand.vectors[1:].norm(dim=1), torch.ones(4))
    assert not torch.allclose(rand.vectors[3], rand.vectors[4])
    assert torch.equal(rand.vectors, build_embeddings(tokens, path, oov="random", seed=3).vectors)
    with pytest.raises(ValueError, match="oov must be one of"):
        build_embeddings(tokens, path, oov="drop")


def test_shared_vectors_are_counted_and_split(tmp_path: Path):
    # "good" and "bad" share one row, as in a pruned table; "dog" is alone.
    path = write(tmp_path / "v.txt", "good 1 1 0\nbad 1 1 0\ndog 3 4 0\n")
    tokens = ["good", "bad", "dog"]
    keep = build_embeddings(tokens, path, seed=5)
    assert keep.coverage.distinct == 2 and "(2 distinct)" in keep.coverage.summary()
    good, bad, dog = (keep.vocab[w] for w in tokens)
    assert torch.equal(keep.vectors[good], keep.vectors[bad])
    split = build_embeddings(tokens, path, shared="split", seed=5)
    g, b = split.vectors[good], split.vectors[bad]
    torch.testing.assert_close(split.vectors[1:].norm(dim=1), torch.ones(4))
    assert not torch.allclose(g, b)
    shared_dir = torch.tensor([1.0, 1.0, 0.0]) / 2**0.5
    assert g @ shared_dir > 0.3 and b @ shared_dir > 0.3  # half of each is the shared direction
    assert torch.equal(split.vectors[dog], keep.vectors[dog])  # singletons untouched
    assert torch.equal(split.vectors[1], keep.vectors[1])  # and so is the <unk> row
    assert torch.equal(split.vectors, build_embeddings(tokens, path, shared="split", seed=5).vectors)
    with pytest.raises(ValueError, match="shared must be one of"):
        build_embeddings(tokens, path, shared="merge")


def test_build_embeddings_with_no_vector_at_all_fails(tmp_path: Path):
    with pytest.raises(DataError, match="none of the 1 task types"):
        build_embeddings(["bird"], write(tmp_path / "v.txt", TEXT))


VECTORS = "vectors/en_core_web_md-3.8.0.sst-vocab.300d.txt.gz"


def _real_mirror() -> Path | None:
    for path in mirror._default_mirror_dirs():
        if (path / VECTORS).is_file() and (path / "sst" / "trees" / "train.txt").is_file():
            return path
    return None


@pytest.mark.skipif(_real_mirror() is None, reason="no data mirror with the SST vectors found")
def test_real_vectors_cover_sst():
    from knn.data.sst import SPLITS, load_sst

    root = _real_mirror()
    tokens = [w for s in SPLITS for e in load_sst(s, mirror=root, download=False) for w in e.tokens]
    emb = build_embeddings(tokens, mirror.resolve(VECTORS, mirror=root, download=False))
    assert emb.dim == 300
    assert (emb.coverage.found_types, emb.coverage.total_types) == (19863, 21701)
