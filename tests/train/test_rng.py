"""RNG capture/restore round-trips through a weights-only checkpoint."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from knn.train import checkpoint
from knn.train.rng import get_rng_state, seed_everything, set_rng_state


def draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


@pytest.mark.parametrize("map_location", [
    "cpu",
    # A trainer on a GPU loads its checkpoints there, the RNG states with them.
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")),
])
def test_round_trip(tmp_path, map_location) -> None:
    seed_everything(3)
    np.random.randn()  # leave a cached gaussian in numpy's state
    checkpoint.save({"rng": get_rng_state()}, tmp_path / "rng.pt")
    first = draw()
    set_rng_state(checkpoint.load(tmp_path / "rng.pt", map_location=map_location)["rng"])
    assert draw() == first
