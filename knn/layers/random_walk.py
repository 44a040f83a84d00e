r"""Random-walk graph-kernel layers (Lei et al. 2017, Sections 3.1-3.3 and 4).

A layer compares the walks of a graph with learned "reference walks"
L_{n,k} whose i-th node carries row k of W^{(i)}. Its node states are
(Eq. rw_nn and its generalisation in Section 3.2)

.. math::

    c_1[v] &= W^{(1)} f_v \\
    c_j[v] &= W^{(j)} f_v \circ \sum_{u \in N(v)} λ_{u,v} ⊙ σ(c_{j-1}[u]) ⊙ B^{(j)} e_{uv},
              \qquad 1 < j \le n \\
    h_G    &= σ_{out}\Big(\sum_v c_n[v]\Big)

with ∘ = ⊙ (``mapping="multiplicative"``) or + (``"additive"``), σ the
``activation`` (identity gives Eq. rw_nn exactly), and λ_{u,v}

* ``decay="constant"``: the scalar λ (``decay_value``);
* ``decay="gated"`` (Section 4): λ_{u,v} = s · sigmoid(U_u f_u + U_v f_v + U_e e_{uv} + b),
  a vector per directed edge; the paper has s = 1 and no bond term, the
  authors' gated WLN has s = 10 (``gate_scale``) and the bond term.

Bond features (``bond_dim > 0``) enter as in the authors' WLN: each
neighbour message is multiplied element-wise by a linear map of the bond's
features, B^{(j)} e_{uv} (no bias). With ``bond_dim = 0`` the factor is 1.
Theorem 3: with constant λ, identity σ, ⊙ and no bond features,
Σ_v c_n[v][k] = K_W^n(G, L_{n,k}) (checked against
:func:`knn.kernels.random_walk.random_walk_kernel` in the tests).

Shapes: f (V, d_in) atom inputs, e (E, bond_dim) bond inputs, c_j (V, d),
h_G (G, d); neighbour sums go through the padded lists of
:class:`~knn.featurize.graph.BatchMolGraph` (fixed summation order; on CPU
gradients included).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from knn.featurize.graph import BatchMolGraph

ACTIVATIONS = {
    "identity": lambda x: x,
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}
MAPPINGS = ("multiplicative", "additive")
DECAYS = ("constant", "gated")


def normal_init_(weight: Tensor, fan_in: int | None = None) -> Tensor:
    """The authors' initialiser: N(0, s²), s = min(1/sqrt(fan_in), 0.1).

    ``fan_in`` defaults to the weight's input width; pass the width of the
    whole matrix when this weight is one block of a larger one in the authors' code.
    """
    fan_in = weight.shape[-1] if fan_in is None else fan_in
    std = min(1.0 / math.sqrt(fan_in), 0.1) if fan_in else 0.1
    with torch.no_grad():
        return weight.normal_(0.0, std)


def normal_linear(d_in: int, d_out: int, bias: bool = True, fan_in: int | None = None) -> nn.Linear:
    """A new ``nn.Linear`` layer with :func:`normal_init_` weights and zero bias (the layer,
    not the product: that is :func:`knn.ops.linear.linear`)."""
    layer = nn.Linear(d_in, d_out, bias=bias)
    normal_init_(layer.weight, fan_in)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {tuple(ACTIVATIONS)}")
    return ACTIVATIONS[name]


@dataclass
class RandomWalkConfig:
    """Which member of the random-walk kernel family a layer computes."""

    n: int = 2                         # walk length (nodes): states c_1..c_n
    mapping: str = "multiplicative"    # W f_v ⊙ Σ..., or "additive": W f_v + Σ...
    activation: str = "identity"       # σ on c_{j-1}[u] before aggregation
    decay: str = "constant"            # constant λ, or "gated" λ_{u,v} (Section 4)
    decay_value: float = 1.0           # λ when constant
    gate_scale: float = 1.0            # s in λ_{u,v} = s·sigmoid(...) (authors: 10)
    bond_dim: int = 0                  # > 0: messages multiplied by B^{(j)} e_uv (authors' WLN)

    def __post_init__(self) -> None:
        checks = [
            (self.n >= 1, f"n must be >= 1, got {self.n}"),
            (self.mapping in MAPPINGS, f"mapping must be one of {MAPPINGS}, got {self.mapping!r}"),
            (self.activation in ACTIVATIONS, f"activation must be one of {tuple(ACTIVATIONS)}, got {self.activation!r}"),
            (self.decay in DECAYS, f"decay must be one of {DECAYS}, got {self.decay!r}"),
            (self.bond_dim >= 0, f"bond_dim must be >= 0, got {self.bond_dim}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


class RandomWalkKernelLayer(nn.Module):
    """One random-walk kernel layer; equations in the module docstring.

    Parameters (names mirror the math): ``weight`` stacks W^{(1)}..W^{(n)}
    as (n·d, d_in); ``bond_weight`` stacks B^{(2)}..B^{(n)} as
    ((n-1)·d, bond_dim); the gate has ``gate_u`` (U_u, no bias), ``gate_v``
    (U_v with b) and ``gate_e`` (U_e, no bias).
    """

    def __init__(self, d_in: int, d: int, cfg: RandomWalkConfig) -> None:
        super().__init__()
        self.d_in, self.d, self.cfg = d_in, d, cfg
        self.act = activation(cfg.activation)
        self.weight = nn.Parameter(normal_init_(torch.empty(cfg.n * d, d_in)))
        self.bond_weight = (
            nn.Parameter(normal_init_(torch.empty((cfg.n - 1) * d, cfg.bond_dim)))
            if cfg.bond_dim and cfg.n > 1 else None
        )
        gated = cfg.decay == "gated"
        self.gate_u = normal_linear(d_in, d, bias=False) if gated else None
        self.gate_v = normal_linear(d_in, d) if gated else None
        self.gate_e = normal_linear(cfg.bond_dim, d, bias=False) if gated and cfg.bond_dim else None

    def edge_decay(self, f: Tensor, graph: BatchMolGraph, e: Tensor | None = None) -> Tensor | float:
        """λ_{u,v} for u = each atom's padded neighbours: (V, D, d), or the scalar λ."""
        if self.cfg.decay == "constant":
            return self.cfg.decay_value
        assert self.gate_u is not None and self.gate_v is not None  # decay == "gated"
        z = graph.gather_atoms(self.gate_u(f)) + self.gate_v(f).unsqueeze(1)  # (V, D, d)
        if self.gate_e is not None:
            z = z + graph.gather_bonds(self.gate_e(e))
        return self.cfg.gate_scale * torch.sigmoid(z)

    def forward(self, f: Tensor, graph: BatchMolGraph, e: Tensor | None = None) -> list[Tensor]:
        """f: (V, d_in); e: (E, bond_dim) if bond_dim. Returns [c_1, ..., c_n], each (V, d)."""
        if self.cfg.bond_dim and e is None:
            raise ValueError("this layer was built with bond_dim > 0: pass bond features e")
        n, d = self.cfg.n, self.d
        proj = (f @ self.weight.t()).view(-1, n, d)  # (V, n, d): W^{(j)} f_v
        lam = self.edge_decay(f, graph, e) if n > 1 else 0.0  # read only when n > 1
        bond = (e @ self.bond_weight.t()).view(-1, n - 1, d) \
            if self.bond_weight is not None and e is not None else None  # e: checked above
        states = [proj[:, 0]]
        for j in range(1, n):
            msg = graph.gather_atoms(self.act(states[-1]))  # (V, D, d): σ(c_{j-1}[u]), 0 at padding
            if bond is not None:
                msg = msg * graph.gather_bonds(bond[:, j - 1])  # ⊙ B^{(j)} e_uv
            if isinstance(lam, Tensor):
                agg = (lam * msg).sum(1)
            else:
                agg = lam * msg.sum(1)  # (V, d)
            mult = self.cfg.mapping == "multiplicative"
            states.append(proj[:, j] * agg if mult else proj[:, j] + agg)
        return states

    def graph_state(self, f: Tensor, graph: BatchMolGraph, e: Tensor | None = None) -> Tensor:
        """Σ_v c_n[v]: (G, d), before the output activation."""
        return graph.sum_atoms(self(f, graph, e)[-1])


class DeepRandomWalkNet(nn.Module):
    r"""L stacked random-walk kernel layers (Section 3.3, deep graph kernel NN).

    .. math::

        c^{(l)}_1[v] &= W^{(l,1)} h^{(l-1)}[v] \\
        c^{(l)}_j[v] &= W^{(l,j)} h^{(l-1)}[v] \circ λ \sum_{u∈N(v)} σ(c^{(l)}_{j-1}[u]) \\
        h^{(l)}[v]   &= σ(U^{(l)} c^{(l)}_n[v]), \qquad h^{(0)}[v] = f_v \\
        h_G          &= \sum_v h^{(L)}[v]

    Shapes: f (V, d_in), h^{(l)} (V, d), h_G (G, d).
    """

    def __init__(self, d_in: int, d: int, depth: int, cfg: RandomWalkConfig, out_activation: str = "relu") -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.layers = nn.ModuleList(RandomWalkKernelLayer(d_in if l == 0 else d, d, cfg) for l in range(depth))
        self.U = nn.ModuleList(normal_linear(d, d, bias=False) for _ in range(depth))
        self.out_act = activation(out_activation)

    def forward(self, f: Tensor, graph: BatchMolGraph, e: Tensor | None = None) -> tuple[Tensor, list[Tensor]]:
        """Returns h_G (G, d) and the node states [h^{(1)}, ..., h^{(L)}], each (V, d)."""
        h, hs = f, []
        for layer, U in zip(self.layers, self.U):
            h = self.out_act(U(layer(h, graph, e)[-1]))
            hs.append(h)
        return graph.sum_atoms(h), hs
