"""Tests for knn.data.ptb: tokenising, the id cache, batch columns and BPTT segments."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from knn.data import mirror, ptb
from knn.data.mirror import DataError
from knn.data.ptb import batchify, bptt_segments, load_ptb, num_segments, read_tokens, segment

TOY = {
    "train": "the cat sat\non the <unk> mat\n",
    "valid": "the cat\n",
    "test": "<unk> sat on the mat\n",
}


def real_ptb_mirror() -> Path | None:
    for path in mirror._default_mirror_dirs():
        if (path / "ptb" / "ptb.train.txt").is_file():
            return path
    return None


@pytest.fixture
def toy_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A mirror of three tiny PTB files, with the checksum table patched to match."""
    root = tmp_path / "mirror"
    (root / "ptb").mkdir(parents=True)
    table = {}
    for split, text in TOY.items():
        (root / ptb.PTB_FILES[split]).write_text(text)
        table[ptb.PTB_FILES[split]] = hashlib.sha256(text.encode()).hexdigest()
    monkeypatch.setattr(mirror, "CHECKSUMS", table)
    return root


def test_read_tokens_appends_eos_per_line(tmp_path: Path):
    path = tmp_path / "t.txt"
    path.write_text(" a  b \n\nc\n")
    assert read_tokens(path) == ["a", "b", "<eos>", "<eos>", "c", "<eos>"]


def test_build_corpus_rejects_tokens_missing_from_train():
    with pytest.raises(DataError, match=r"PTB test has 1 token types missing.*'dog'"):
        ptb.build_corpus(["a", "<eos>"], ["a"], ["dog"])


def test_load_ptb_encodes_with_train_vocab(toy_mirror: Path, tmp_path: Path):
    corpus = load_ptb(mirror=toy_mirror, cache_dir=tmp_path / "cache")
    assert corpus.vocab.itos[:2] == ("<unk>", "<eos>")
    assert corpus.vocab.lookup_tokens(corpus.valid) == ["the", "cat", "<eos>"]
    assert corpus.train.dtype == torch.long and corpus.train.dim() == 1
    assert corpus.train.numel() == 9


def test_load_ptb_reuses_cache(toy_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    first = load_ptb(mirror=toy_mirror, cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "ptb").glob("ptb-ids-*.pt"))) == 1

    def fail(*args: object) -> None:
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(ptb, "build_corpus", fail)
    second = load_ptb(mirror=toy_mirror, cache_dir=tmp_path / "cache")
    assert second.vocab == first.vocab
    for split in ptb.SPLITS:
        assert torch.equal(getattr(second, split), getattr(first, split))


def test_corrupt_cache_is_rebuilt(toy_mirror: Path, tmp_path: Path):
    first = load_ptb(mirror=toy_mirror, cache_dir=tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache" / "ptb").glob("ptb-ids-*.pt")
    cache_file.write_bytes(b"truncated garbage")
    again = load_ptb(mirror=toy_mirror, cache_dir=tmp_path / "cache")
    assert torch.equal(again.train, first.train)
    torch.load(cache_file, weights_only=True)  # rewritten as a valid file


def test_batchify_drops_tail_and_keeps_columns_contiguous():
    data = batchify(torch.arange(26), 4)  # 26 = 4 * 6 + 2 dropped
    assert data.shape == (6, 4)
    assert torch.equal(data[:, 1], torch.arange(6, 12))
    assert torch.equal(data.t().reshape(-1), torch.arange(24))
    with pytest.raises(ValueError, match="cannot fill"):
        batchify(torch.arange(3), 4)


@pytest.mark.parametrize("n_rows,bptt", [(6, 2), (7, 3), (10, 35), (2, 1), (1, 5)])
def test_segments_shift_by_one_and_rebuild_the_stream(n_rows: int, bptt: int):
    stream = torch.arange(n_rows * 3)
    data = batchify(stream, 3)
    pairs = list(bptt_segments(data, bptt))
    assert len(pairs) == num_segments(n_rows, bptt)
    for i, (x, y) in enumerate(pairs):
        assert x.shape == y.shape == (min(bptt, n_rows - 1 - i * bptt), 3)
        assert torch.equal(y[:-1], x[1:])  # y is x one row later
        assert torch.equal(y, x + 1)  # arange stream: each target is the next token
        assert torch.equal(torch.stack(segment(data, i, bptt)), torch.stack((x, y)))
    if pairs:
        # The inputs of all segments, then the last target row, are each column again,
        # and the columns end to end are the stream.
        rebuilt = torch.cat([x for x, _ in pairs] + [pairs[-1][1][-1:]])
        assert torch.equal(rebuilt.t().reshape(-1), stream)


def test_segment_random_access_and_resume():
    data = batchify(torch.arange(40), 2)  # (20, 2): 19 input rows -> 4 segments of bptt 5
    assert num_segments(20, 5) == 4
    x, y = segment(data, 3, 5)  # the last segment: rows 15-18 predict rows 16-19
    assert x.shape == y.shape == (4, 2)
    assert torch.equal(x[0], data[15]) and torch.equal(y[-1], data[19])
    resumed = list(bptt_segments(data, 5, start=2))
    assert len(resumed) == 2 and torch.equal(resumed[0][0], segment(data, 2, 5)[0])
    with pytest.raises(IndexError, match="segment 4 out of range"):
        segment(data, 4, 5)


@pytest.mark.skipif(real_ptb_mirror() is None, reason="no shared data mirror with PTB here")
def test_real_ptb_sizes(tmp_path: Path):
    corpus = load_ptb(mirror=real_ptb_mirror(), cache_dir=tmp_path, download=False)
    assert len(corpus.vocab) == 10_000
    # Train: 887,521 words + 42,068 <eos> (one per line) = 929,589 ids.
    assert corpus.train.numel() == 929_589
    assert int((corpus.train == corpus.vocab["<eos>"]).sum()) == 42_068
    assert (corpus.valid.numel(), corpus.test.numel()) == (73_760, 82_430)


# --------------------------------------------------------------------------- #
# Your own PTB-format files: load_ptb(data_dir=...) / task.data.dir


def write_toy_dir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in TOY.items():
        (folder / f"ptb.{split}.txt").write_text(text)
    return folder


def test_data_dir_is_read_without_checksums_and_logged(tmp_path: Path, monkeypatch, caplog):
    """Files in no checksum table load as they are; the warning names them and their sha256."""
    monkeypatch.setattr(mirror, "CHECKSUMS", {})  # not even the real PTB's entries
    monkeypatch.setattr(mirror, "_default_mirror_dirs", lambda: [])
    folder = write_toy_dir(tmp_path / "mine")
    with caplog.at_level("WARNING", logger="knn.data.ptb"):
        corpus = load_ptb(cache_dir=tmp_path / "cache", data_dir=folder, download=False)
    assert corpus.vocab.lookup_tokens(corpus.valid) == ["the", "cat", "<eos>"]
    sha = hashlib.sha256(TOY["train"].encode()).hexdigest()
    assert f"PTB-format files from {folder}, not checksum-verified (sha256 train {sha[:12]}" in caplog.text


def test_data_dir_cache_follows_the_files(tmp_path: Path):
    """The id cache is keyed by the files' content: an edited file is re-read, not served stale."""
    folder = write_toy_dir(tmp_path / "mine")
    first = load_ptb(cache_dir=tmp_path / "cache", data_dir=folder)
    (folder / "ptb.test.txt").write_text("the cat sat\n")
    second = load_ptb(cache_dir=tmp_path / "cache", data_dir=folder)
    assert first.test.numel() == 6 and second.test.numel() == 4
    assert len(list((tmp_path / "cache" / "ptb").glob("ptb-ids-*.pt"))) == 2


def test_data_dir_missing_a_split_is_one_line(tmp_path: Path):
    folder = write_toy_dir(tmp_path / "mine")
    (folder / "ptb.valid.txt").unlink()
    with pytest.raises(DataError, match=r"^PTB-format data folder .*mine lacks .*ptb\.valid\.txt \("
                                        r"task\.data\.dir needs ptb\.train\.txt, ptb\.valid\.txt, "
                                        r"ptb\.test\.txt\)$"):
        load_ptb(cache_dir=tmp_path / "cache", data_dir=folder)


def test_fixture_is_a_closed_ptb_set_made_by_its_script(tmp_path: Path, ptb_fixture):
    """tests/fixtures/ptb: its script regenerates it byte for byte; every valid/test word is
    in train (load_ptb checks), with the vocabulary size and sizes the tests rely on."""
    import importlib.util
    import shutil

    for f in ptb_fixture.dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    spec = importlib.util.spec_from_file_location("make_fixture", tmp_path / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for split in ptb.SPLITS:
        (tmp_path / f"ptb.{split}.txt").unlink()
    module.main()
    for split in ptb.SPLITS:
        name = f"ptb.{split}.txt"
        assert (tmp_path / name).read_bytes() == (ptb_fixture.dir / name).read_bytes(), name
    corpus = load_ptb(cache_dir=tmp_path / "cache", data_dir=ptb_fixture.dir)
    assert len(corpus.vocab) == ptb_fixture.vocab_size == 47
    assert (corpus.train.numel(), corpus.valid.numel(), corpus.test.numel()) == (2815, 374, 402)
    assert corpus.train.numel() > 300 * 2 * 4  # test_kill_resume: 300 batches of 2 x 4
    assert ptb_fixture.unigram_ppl() == pytest.approx(36.2, abs=0.05)
