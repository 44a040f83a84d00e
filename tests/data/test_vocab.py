"""Tests for knn.data.vocab.Vocab: id order, unknown tokens, round trips."""

from __future__ import annotations

import io

import pytest
import torch

from knn.data.vocab import Vocab

TOKENS = "b a c a b d <unk> e".split()


def test_order_is_specials_then_frequency_then_first_occurrence():
    vocab = Vocab.build(TOKENS, specials=("<unk>", "<pad>"))
    # b and a both occur twice, b first; c, d, e once each in order of appearance.
    assert vocab.itos == ("<unk>", "<pad>", "b", "a", "c", "d", "e")
    assert [vocab[t] for t in vocab.itos] == list(range(len(vocab)))


def test_build_is_deterministic():
    specials = ("<unk>",)
    assert Vocab.build(TOKENS, specials) == Vocab.build(iter(TOKENS), specials)


def test_max_size_counts_specials_and_min_freq_drops_rare():
    assert Vocab.build(TOKENS, specials=("<unk>",), max_size=3).itos == ("<unk>", "b", "a")
    assert Vocab.build(TOKENS, specials=("<unk>",), min_freq=2).itos == ("<unk>", "b", "a")
    with pytest.raises(ValueError, match="smaller than"):
        Vocab.build(TOKENS, specials=("<unk>", "<pad>"), max_size=1)


def test_unknown_maps_to_unk_when_present():
    vocab = Vocab.build(TOKENS, specials=("<unk>",))
    assert vocab["zebra"] == vocab["<unk>"] == vocab.unk_id == 0
    assert "zebra" not in vocab and "b" in vocab


def test_unknown_without_unk_is_a_clear_key_error():
    vocab = Vocab.build("x y".split())
    assert vocab.unk_id is None
    with pytest.raises(KeyError, match="'zebra' is not in the vocabulary of 2 types"):
        vocab["zebra"]


def test_duplicate_tokens_are_rejected():
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "b", "a"])


def test_encode_and_lookup_round_trip():
    vocab = Vocab.build(TOKENS, specials=("<unk>",))
    ids = vocab.encode(["a", "e", "b"])
    assert vocab.lookup_tokens(ids) == ["a", "e", "b"]
    assert vocab.lookup_tokens(torch.tensor(ids)) == ["a", "e", "b"]


def test_dict_round_trip_survives_weights_only_checkpoint():
    vocab = Vocab.build(TOKENS, specials=("<unk>",))
    buf = io.BytesIO()
    torch.save({"vocab": vocab.to_dict()}, buf)
    buf.seek(0)
    restored = Vocab.from_dict(torch.load(buf, weights_only=True)["vocab"])
    assert restored == vocab and restored.unk_id == vocab.unk_id
