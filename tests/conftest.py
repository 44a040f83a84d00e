"""Shared fixtures: compose configs like the CLI does, a tiny PTB stand-in, the PTB-format
files of ``tests/fixtures/ptb``, and the rule for tests that need the fused op."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from knn.data.ptb import PTBCorpus, build_corpus
from knn.ops import recurrence
from knn.train.config import CONF_DIR


def compose_config(overrides: list[str]) -> DictConfig:
    """``conf/train.yaml`` composed with ``overrides``, as ``python -m knn.train`` would."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


@pytest.fixture
def compose_cfg() -> Callable[[list[str]], DictConfig]:
    return compose_config


def tiny_corpus(seed: int = 0) -> PTBCorpus:
    """A PTB-shaped corpus of 40 word types: ~3k train tokens, ~700 valid/test."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]

    def lines(n: int) -> list[str]:
        tokens: list[str] = []
        for _ in range(n):
            tokens += rng.choices(words, k=rng.randint(3, 12)) + ["<eos>"]
        return tokens

    train = words + ["<eos>"] + lines(400)  # every type occurs in train
    return build_corpus(train, lines(90), lines(90))


@dataclass(frozen=True)
class PTBFixture:
    """PTB-format files made for the tests (``tests/fixtures/ptb``, see its make_fixture.py).

    A model trained on them should beat two constant predictors: the uniform
    one (perplexity = ``vocab_size``) and the train unigram one
    (:meth:`unigram_ppl`, what word frequencies alone reach, no context).
    """

    dir: Path  # ``task.data.dir=<dir>`` runs the PTB task on them, without the data mirror
    vocab_size: int  # word types + <unk> + <eos>: the perplexity of a uniform predictor

    def tokens(self, split: str) -> list[str]:
        from knn.data.ptb import read_tokens

        return read_tokens(self.dir / f"ptb.{split}.txt")

    def unigram_ppl(self, split: str = "test") -> float:
        """Perplexity on ``split`` of the train split's word frequencies (36.2 on test)."""
        counts = Counter(self.tokens("train"))
        total = sum(counts.values())
        target = self.tokens(split)
        return math.exp(-sum(math.log(counts[t] / total) for t in target) / len(target))


PTB_FIXTURE = PTBFixture(Path(__file__).resolve().parent / "fixtures" / "ptb", vocab_size=47)


@pytest.fixture
def ptb_fixture() -> PTBFixture:
    return PTB_FIXTURE


@pytest.fixture
def fake_ptb(monkeypatch: pytest.MonkeyPatch) -> PTBCorpus:
    """Make the PTB task load :func:`tiny_corpus` instead of the real files."""
    corpus = tiny_corpus()
    monkeypatch.setattr("knn.tasks.lm.load_corpus", lambda data: corpus)
    return corpus


@pytest.fixture
def train_smoke(fake_ptb: PTBCorpus) -> Callable[..., dict]:
    """``train_smoke(run_dir, *overrides)``: a ``debug=smoke`` run on the tiny corpus."""
    from knn.train import train

    def run(run_dir, *overrides: str) -> dict:
        args = ["debug=smoke", f"run_dir={run_dir}", *overrides]
        return train(compose_config(args), overrides=args)

    return run


def require_fused(device_type: str) -> None:
    """Return if the fused op of ``device_type`` is built; otherwise skip or fail the test.

    Fails (with the build's error and output) when the compilers the build
    needs are on PATH, ``KNN_FUSED`` is not ``0`` and the build failed anyway:
    a broken C++/CUDA source or toolchain must not pass CI as a page of skips.
    Skips, saying why, with ``KNN_FUSED=0``, without a compiler, or for CUDA
    without a GPU (see :func:`knn.ops.recurrence.fused_status`).
    """
    status = recurrence.fused_status(device_type)
    if status.state == "built":
        return
    if status.state == "failed":
        log = recurrence._fused_logs.get(device_type, "")
        pytest.fail(f"the fused {device_type} op failed to build although its compilers are on PATH "
                    f"({status.detail}); fix the build, or set KNN_FUSED=0 to test without it. "
                    f"Build output (tail):\n{log}", pytrace=False)
    pytest.skip(f"fused {device_type} op not run here: {status}")


@pytest.fixture(name="require_fused")
def require_fused_fixture() -> Callable[[str], None]:
    """:func:`require_fused`, for tests to call with the device type they need."""
    return require_fused
