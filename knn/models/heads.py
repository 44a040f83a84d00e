"""The regression head the authors put on every neural graph model of Table 3.

It sits in its own module because both :mod:`knn.models.graph` (the WLN) and
:mod:`knn.models.graph_baselines` (NFP, mean field, loopy BP) use it, and
:mod:`knn.models.graph` imports the baselines for its model table.
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
