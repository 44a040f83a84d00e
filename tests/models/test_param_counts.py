"""Each PTB experiment's model has the paper's parameter budget (within 5%).

Models are built on the meta device: shapes only, no memory, no init cost.
"""

from __future__ import annotations

import pytest
import torch

from knn.tasks.lm import MODELS
from knn.train.config import experiment_names, resolve_config, to_dataclass
from knn.train.loop import count_params

PTB_VOCAB = 10_000


def build_on_meta(cfg) -> torch.nn.Module:
    cls, _ = MODELS[cfg.model.name]
    with torch.device("meta"):
        return cls(PTB_VOCAB, to_dataclass(cfg.model))


@pytest.mark.parametrize("experiment", experiment_names("ptb"))
def test_params_within_5_percent(compose_cfg, experiment: str) -> None:
    cfg = resolve_config(compose_cfg([f"experiment={experiment}"]))
    n = count_params(build_on_meta(cfg))
    target = cfg.paper.params
    assert abs(n - target) / target < 0.05, f"{experiment}: {n:,} parameters vs paper {target:,}"


def test_gated_5m_count_by_hand(compose_cfg) -> None:
    """d=355, 3 layers of 4d²+2d, tied V·d embedding, V output biases."""
    cfg = resolve_config(compose_cfg(["experiment=ptb/gated_5m"]))
    d = 355
    assert count_params(build_on_meta(cfg)) == 3 * (4 * d * d + 2 * d) + PTB_VOCAB * d + PTB_VOCAB
