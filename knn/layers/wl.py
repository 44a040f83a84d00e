r"""Weisfeiler-Lehman kernel network (Lei et al. 2017, Section 3.4; gated: Section 4).

Each iteration l = 1..L reads the current node labels h^{(l-1)} twice: a
random-walk kernel layer (n = 2 in the paper) turns them into a graph
vector, and a relabelling (the continuous Weisfeiler-Lehman step) turns
them into the next labels:

.. math::

    h^{(0)}_v &= \mathrm{relu}(W_0 f_v)
        \qquad\text{(an input embedding, as in the authors' code)} \\
    c^{(l)}_1[v] &= W^{(1)} h^{(l-1)}_v \\
    c^{(l)}_j[v] &= W^{(j)} h^{(l-1)}_v ⊙ \sum_{u∈N(v)} λ_{u,v} ⊙ c^{(l)}_{j-1}[u] ⊙ B^{(j)} e_{uv},
        \qquad 1 < j \le n \\
    h^{(l)}_G &= \sum_v c^{(l)}_n[v] \\
    h^{(l)}_v &= \mathrm{relu}\Big(U_1 h^{(l-1)}_v + U_2 \sum_{u∈N(v)}
        \mathrm{relu}\big(V [h^{(l-1)}_u, e_{uv}] + b_V\big) + b_U\Big) \\
    h_G &= h^{(L)}_G \;\;(\texttt{readout="last"}, \text{ the authors' code})
        \quad\text{or}\quad \sum_{l=1}^{L} h^{(l)}_G \;\;(\texttt{"sum"}, \text{ the paper's text})

U_1, U_2, V are shared across iterations (the paper). W^{(j)}, B^{(j)} and
the gate are shared too when ``share_kernel`` (the authors' code, one
"WL" variable scope reused by every iteration); otherwise each iteration has
its own, the paper's W^{(l,j)}. λ is 1 (its scale is absorbed in W), or the
edge gate λ_{u,v} = 10·sigmoid(U_u h_u + U_v h_v + U_e e_uv + b) when gated.

Bond features: the authors multiply a linear map of e_uv into every
neighbour message of the kernel (B^{(j)} e_uv above) and concatenate e_uv to
the neighbour label inside the relabelling (V [h_u, e_uv]).

h^{(L)} is never read by the readout (iteration L's graph vector uses
h^{(L-1)}), so the last relabelling is skipped.

Shapes: f (V, d_in), e (E, d_e), h^{(l)} (V, d), c_j (V, d), h_G (G, d).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from knn.featurize.graph import BatchMolGraph
from knn.layers.random_walk import RandomWalkConfig, RandomWalkKernelLayer, normal_linear

READOUTS = ("last", "sum")


@dataclass
class WLConfig:
    """A Weisfeiler-Lehman kernel network. ``hidden`` has no default: the models' presets
    (conf/model/*.yaml) size it."""

    hidden: int
    depth: int = 4                # iterations L
    n: int = 2                    # walk length of the per-iteration kernel
    readout: str = "last"         # "last": h_G^{(L)} (authors' code); "sum": Σ_l h_G^{(l)} (paper)
    gated: bool = False           # edge gates λ_{u,v} (Section 4)
    gate_scale: float = 10.0      # λ_{u,v} = gate_scale · sigmoid(...) (authors: 10)
    share_kernel: bool = True     # one kernel layer for all iterations (authors' code)

    def __post_init__(self) -> None:
        checks = [
            (self.hidden >= 1, f"hidden must be >= 1, got {self.hidden}"),
            (self.depth >= 1, f"depth must be >= 1, got {self.depth}"),
            (self.n >= 1, f"n must be >= 1, got {self.n}"),
            (self.readout in READOUTS, f"readout must be one of {READOUTS}, got {self.readout!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


class WLRelabel(nn.Module):
    """r(v) = relu(U_1 h_v + U_2 Σ_{u∈N(v)} relu(V [h_u, e_uv] + b_V) + b_U): (V, d) -> (V, d)."""

    def __init__(self, d: int, bond_dim: int) -> None:
        super().__init__()
        # Blocks of the authors' V = [V_h, V_e] and U = [U_1, U_2], initialised as the whole matrices.
        self.V_h = normal_linear(d, d, fan_in=d + bond_dim)  # V acting on h_u, with b_V
        self.V_e = normal_linear(bond_dim, d, bias=False, fan_in=d + bond_dim) if bond_dim else None
        self.U_1 = normal_linear(d, d, fan_in=2 * d)         # with b_U
        self.U_2 = normal_linear(d, d, bias=False, fan_in=2 * d)

    def forward(self, h: Tensor, graph: BatchMolGraph, e: Tensor | None = None) -> Tensor:
        z = graph.gather_atoms(h @ self.V_h.weight.t())  # (V, D, d)
        if self.V_e is not None:
            z = z + graph.gather_bonds(self.V_e(e))
        label = torch.relu(z + self.V_h.bias) * graph.nbr_mask.unsqueeze(-1).to(z.dtype)  # 0 at padding
        return torch.relu(self.U_1(h) + self.U_2(label.sum(1)))


class WLKernelNet(nn.Module):
    """The encoder of the Weisfeiler-Lehman kernel network; equations in the module docstring."""

    def __init__(self, d_in: int, bond_dim: int, cfg: WLConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.hidden
        self.embed = normal_linear(d_in, d, bias=False)  # W_0
        kernel_cfg = RandomWalkConfig(
            n=cfg.n,
            decay="gated" if cfg.gated else "constant",
            decay_value=1.0,
            gate_scale=cfg.gate_scale,
            bond_dim=bond_dim,
        )
        n_kernels = 1 if cfg.share_kernel else cfg.depth
        self.kernels = nn.ModuleList(RandomWalkKernelLayer(d, d, kernel_cfg) for _ in range(n_kernels))
        self.relabel = WLRelabel(d, bond_dim)

    def forward(self, graph: BatchMolGraph) -> tuple[Tensor, list[Tensor]]:
        """Returns h_G (G, d) and the labels [h^{(0)}, ..., h^{(L-1)}], each (V, d)."""
        f, e = graph.atom_features, graph.bond_features
        h = torch.relu(self.embed(f))  # h^{(0)}
        labels, graph_states = [h], []
        for l in range(self.cfg.depth):
            kernel = cast(RandomWalkKernelLayer, self.kernels[0 if self.cfg.share_kernel else l])
            graph_states.append(kernel.graph_state(h, graph, e))  # h_G^{(l+1)} from h^{(l)}
            if l + 1 < self.cfg.depth:
                h = self.relabel(h, graph, e)
                labels.append(h)
        h_G = graph_states[-1] if self.cfg.readout == "last" else torch.stack(graph_states).sum(0)
        return h_G, labels
