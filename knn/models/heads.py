"""The regression head the authors put on every neural graph model of Table 3.

Both :mod:`knn.models.graph` (the WLN) and :mod:`knn.models.graph_baselines` (NFP,
mean field, loopy BP) use it. It has a module of its own so that the import between
them stays one-way: :mod:`knn.models.graph_baselines` imports :mod:`knn.models.graph`
(``feature_dims``), and :mod:`knn.models.graph` does not import the baselines
(``tests/test_imports.py`` checks the package has no import cycle). The model table
that names both is :data:`knn.models.MODELS`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from knn.layers.random_walk import normal_linear


class RegressionHead(nn.Module):
    """ŷ = w · relu(W_o h_G + b_o) + b: (G, d) -> (G,)."""

    def __init__(self, d: int, d_hidden: int) -> None:
        super().__init__()
        self.hidden = normal_linear(d, d_hidden)
        self.score = normal_linear(d_hidden, 1)

    def forward(self, h_G: Tensor) -> Tensor:
        return self.score(torch.relu(self.hidden(h_G))).squeeze(-1)
