"""Cased and uncased vector files: detection, lowercase fallback, and the mirror's GloVe 6B."""

from __future__ import annotations

from pathlib import Path

import pytest

from knn.data import mirror
from knn.data.vectors import build_embeddings, detect_cased

UNCASED = "good 1 0 0\nbad 0 1 0\nthe 0 0 1\n"
CASED = "Good 1 1 0\ngood 1 0 0\nbad 0 1 0\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_detect_cased(tmp_path: Path):
    assert detect_cased(write(tmp_path / "u.txt", UNCASED)) is False
    assert detect_cased(write(tmp_path / "c.txt", CASED)) is True
    # Only the first `lines` lines are probed.
    assert detect_cased(write(tmp_path / "late.txt", UNCASED + "Late 1 1 1\n"), lines=3) is False


def test_uncased_file_is_searched_lowercased(tmp_path: Path):
    emb = build_embeddings(["Good", "good", "BAD", "Zebra"], write(tmp_path / "u.txt", UNCASED),
                           normalize=False)
    row = lambda w: emb.vectors[emb.vocab[w]].tolist()  # noqa: E731
    assert row("Good") == row("good") == [1, 0, 0] and row("BAD") == [0, 1, 0]
    c = emb.coverage
    assert (c.found_types, c.total_types, c.exact_types, c.cased) == (3, 4, 1, False)
    assert c.missing == ("Zebra",)
    assert "1 types" in c.summary() and "lowercased" in c.summary()


def test_cased_file_is_exact_and_override_wins(tmp_path: Path):
    path = write(tmp_path / "c.txt", CASED)
    emb = build_embeddings(["Good", "BAD"], path, normalize=False)
    assert emb.coverage.cased and emb.coverage.found_types == 1  # "BAD" is not "bad" here
    assert emb.vectors[emb.vocab["Good"]].tolist() == [1, 1, 0]
    forced = build_embeddings(["Good", "BAD"], path, normalize=False, cased=False)
    assert forced.coverage.found_types == 2  # exact "Good" first, then "bad" for "BAD"
    assert forced.vectors[forced.vocab["Good"]].tolist() == [1, 1, 0]


def _real_mirror() -> Path | None:
    found = [p for p in mirror._default_mirror_dirs() if (p / mirror.GLOVE_6B_SST).is_file()]
    return found[0] if found else None


@pytest.mark.skipif(_real_mirror() is None, reason="no data mirror with the GloVe 6B extract")
def test_mirror_glove_covers_sst_as_its_readme_says():
    """The mirror README: 17,754 distinct vectors, 19,900 types found lowercased, 98.7%."""
    from knn.data.sst import SPLITS, load_sst

    root = _real_mirror()
    tokens = [w for s in SPLITS for e in load_sst(s, mirror=root, download=False) for w in e.tokens]
    emb = build_embeddings(tokens, mirror.resolve(mirror.GLOVE_6B_SST, mirror=root, download=False))
    c = emb.coverage
    assert emb.dim == 50 and not c.cased
    assert (c.found_types, c.distinct) == (19900, 17754)
    assert round(100 * c.token_rate, 1) == 98.7
