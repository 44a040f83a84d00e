"""Shared fixtures: compose configs like the CLI does, and a tiny PTB stand-in."""

from __future__ import annotations

import random
from typing import Callable

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from knn.data.ptb import PTBCorpus, build_corpus
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
