"""Learning-rate schedules match the authors' loop."""

from __future__ import annotations

import pytest

from knn.train.optim import lr_at


def test_decay_after_matches_authors_loop() -> None:
    # Authors: before epoch e (0-based), `if e >= lr_decay_epoch: lr *= lr_decay`.
    lr, expected = 1.0, []
    for epoch in range(15):
        if epoch >= 10:
            lr *= 0.9
        expected.append(lr)
    got = [lr_at(e, 1.0, "decay_after", 0.9, 10) for e in range(15)]
    assert got == pytest.approx(expected)


def test_constant_and_exponential() -> None:
    assert lr_at(7, 0.1, "constant", 0.5, 0) == 0.1
    assert lr_at(3, 1e-3, "exponential", 0.9, 0) == pytest.approx(1e-3 * 0.9**3)
    with pytest.raises(ValueError, match="schedule"):
        lr_at(0, 1.0, "cosine", 0.9, 0)
