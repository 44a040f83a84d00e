"""Graph-level regressors for molecules (Section 5.3, Table 3).

Every model maps a :class:`~knn.featurize.graph.BatchMolGraph` to (G,)
predictions. The neural ones share the authors' head on a graph vector h_G:

    ŷ = w · relu(W_o h_G + b_o) + b

The models, named as in :data:`knn.models.MODELS`; each one's preset (sizes,
variant) is ``conf/model/<name>.yaml``, and the parameter counts are at those
presets with the authors' 82 atom / 6 bond features:

    =========== ============================================= ==============
    name        class                                         parameters
    =========== ============================================= ==============
    wln         :class:`WLNRegressor`                         259,601
    gated_wln   :class:`WLNRegressor` (``gated: true``)       263,376
    nfp         :class:`~.graph_baselines.NFPRegressor`       261,146
    elbp        :class:`~.graph_baselines.LoopyBPRegressor`   256,256
    emf         :class:`~.graph_baselines.MeanFieldRegressor` 261,801
    mean        :class:`~.graph_baselines.MeanPredictor`      1
    wl_kernel   :class:`~.graph_baselines.WLSubtreeRidge`     vocabulary + 1
    =========== ============================================= ==============

Table 3 gives 0.26m parameters to WLN, gated WLN, NFP and ELBP. The authors'
script default width gives that size to the *gated* WLN, the one their
``nntrain.py`` trains; the plain WLN at that width has 0.20m, so the plain
WLN's preset is wider, to match the table's size.

Every config's ``atom_dim`` and ``bond_dim`` are None until the featurizer's
sizes are filled in (:func:`knn.tasks.molecules.build_regressor` does it): the
data decides them, so no preset does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from knn.featurize.graph import BatchMolGraph
from knn.layers.wl import WLConfig, WLKernelNet
from knn.models.heads import RegressionHead
from knn.ops.dropout import Dropout


@dataclass
class WLNConfig:
    """Weisfeiler-Lehman kernel network regressor (see :mod:`knn.layers.wl`): the ``model.*``
    schema of ``wln`` and of ``gated_wln`` (``name: gated_wln``, ``gated: true``). Its
    defaults are conf/model/wln.yaml's (a test keeps them equal)."""

    name: str = "wln"
    atom_dim: int | None = None  # None: from the featurizer
    bond_dim: int | None = None
    hidden: int = 200
    depth: int = 4
    n: int = 2
    readout: str = "last"
    gated: bool = False
    gate_scale: float = 10.0
    share_kernel: bool = True
    dropout: float = 0.0  # on h_G before the head, training only (not in the paper)

    def wl(self) -> WLConfig:
        return WLConfig(
            hidden=self.hidden, depth=self.depth, n=self.n, readout=self.readout,
            gated=self.gated, gate_scale=self.gate_scale, share_kernel=self.share_kernel,
        )


def feature_dims(cfg: Any) -> tuple[int, int]:
    """``(cfg.atom_dim, cfg.bond_dim)`` of a graph model's config; ValueError (one line) while
    they are None, i.e. not yet filled in from the featurizer."""
    if cfg.atom_dim is None or cfg.bond_dim is None:
        raise ValueError(f"{cfg.name}: atom_dim and bond_dim are None; set them to the "
                         f"featurizer's sizes (MolFeaturizer.atom_dim, .bond_dim)")
    return cfg.atom_dim, cfg.bond_dim


class WLNRegressor(nn.Module):
    """WLN (or gated WLN) encoder + regression head: BatchMolGraph -> (G,)."""

    def __init__(self, cfg: WLNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = WLKernelNet(*feature_dims(cfg), cfg.wl())
        self.head = RegressionHead(cfg.hidden, cfg.hidden)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, graph: BatchMolGraph) -> Tensor:
        h_G, _ = self.encoder(graph)  # (G, hidden)
        if self.cfg.dropout:  # skipped at 0 so that runs without it draw no random numbers
            h_G = self.dropout(h_G)
        return self.head(h_G)
