"""Fixtures shared by the model tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch


@pytest.fixture
def extent() -> Callable[[torch.Tensor, float], float]:
    """max |w| / bound: at most 1 for a uniform ±bound draw, and near 1 for a large one
    (how the init tests tell one draw's bound from another's)."""
    return lambda w, bound: w.abs().max().item() / bound
