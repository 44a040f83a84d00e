"""RNG capture/restore round-trips through a weights-only checkpoint."""

from __future__ import annotations

import random

import numpy as np
import torch

from knn.train import checkpoint
from knn.train.rng import get_rng_state, seed_everything, set_rng_state


def draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_round_trip(tmp_path) -> None:
    seed_everything(3)
    np.random.randn()  # leave a cached gaussian in numpy's state
    checkpoint.save({"rng": get_rng_state()}, tmp_path / "rng.pt")
    first = draw()
    set_rng_state(checkpoint.load(tmp_path / "rng.pt")["rng"])
    assert draw() == first
