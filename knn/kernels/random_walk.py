"""Random-walk graph kernels by brute-force enumeration of walks.

Independent of the neural layers on purpose: these functions follow the
paper's definitions literally (Section 3.1, Eq. randomwalk; the unified view
of Section 3.2), so tests can check that :mod:`knn.layers.random_walk`
computes them. Exponential in n; meant for graphs of a few nodes.

    P_n(G)       = walks x_1 … x_n with (x_i, x_{i+1}) ∈ E (nodes may repeat)
    K_W^n(G, G') = λ^{n-1} Σ_{x∈P_n(G)} Σ_{y∈P_n(G')} Π_i <f_{x_i}, f'_{y_i}>

An undirected graph has each edge in both directions. The reference walk
L_{n,k} of Theorem 3 is a *directed* path v_1 → … → v_n (so P_n(L_{n,k}) is
the single walk v_1 … v_n, as the appendix proof needs), whose node i
carries row k of W^{(i)}.

Walk weights generalise λ^{n-1}: a graph may carry a weight per directed
edge (the gated decay λ_{u,v} of Section 4, one coordinate of it), and a walk
then weighs Π_i w(x_i, x_{i+1}).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class Graph:
    """A small graph: features (V, d), edges as (u, v) pairs, optional weight per directed edge."""

    features: Tensor
    edges: Sequence[tuple[int, int]]
    directed: bool = False
    edge_weight: Mapping[tuple[int, int], float | Tensor] = field(default_factory=dict)

    def successors(self, u: int) -> list[int]:
        out = [b for a, b in self.edges if a == u]
        if not self.directed:
            out += [a for a, b in self.edges if b == u]
        return out

    def weight(self, u: int, v: int) -> float | Tensor:
        """Weight of stepping u -> v (1 unless given)."""
        return self.edge_weight.get((u, v), 1.0)


def reference_walk(rows: Sequence[Tensor]) -> Graph:
    """L_{n,k}: the directed path whose node i has feature ``rows[i]`` (row k of W^{(i+1)})."""
    return Graph(torch.stack(list(rows)), [(i, i + 1) for i in range(len(rows) - 1)], directed=True)


def walks(g: Graph, n: int) -> Iterator[tuple[int, ...]]:
    """Every walk of n nodes in g (x_1, …, x_n), each (x_i, x_{i+1}) an edge."""
    frontier: list[tuple[int, ...]] = [(v,) for v in range(len(g.features))]
    for _ in range(n - 1):
        frontier = [w + (u,) for w in frontier for u in g.successors(w[-1])]
    yield from frontier


def walk_weight(g: Graph, walk: tuple[int, ...]) -> float | Tensor:
    """Π_i w(x_i, x_{i+1})."""
    out: float | Tensor = 1.0
    for a, b in zip(walk, walk[1:]):
        out = out * g.weight(a, b)
    return out


def random_walk_kernel(g: Graph, h: Graph, n: int, lam: float = 1.0) -> Tensor:
    """K_W^n(g, h) = λ^{n-1} Σ_{x∈P_n(g)} Σ_{y∈P_n(h)} w_g(x) w_h(y) Π_i <f_{x_i}, f_{y_i}>."""
    total = g.features.new_zeros(())
    hw = list(walks(h, n))
    for x in walks(g, n):
        for y in hw:
            prod = walk_weight(g, x) * walk_weight(h, y)
            for a, b in zip(x, y):
                prod = prod * (g.features[a] @ h.features[b])
            total = total + prod
    return lam ** (n - 1) * total


def local_kernel(g: Graph, h: Graph, n: int, lam: float = 1.0) -> Tensor:
    """Σ_{v,v'} K_loc^n(v, v') by the unified-view recursion of Section 3.2:

    K_loc^1(v, v') = <f_v, f_{v'}>;
    K_loc^n(v, v') = <f_v, f_{v'}> · λ Σ_{u∈N(v)} Σ_{u'∈N(v')} K_loc^{n-1}(u, u'),
    where N(v) are the nodes with an edge u -> v. Equals :func:`random_walk_kernel`.
    """
    gram = g.features @ h.features.t()  # (V, V')
    pred_g = [[u for u in range(len(g.features)) if v in g.successors(u)] for v in range(len(g.features))]
    pred_h = [[u for u in range(len(h.features)) if v in h.successors(u)] for v in range(len(h.features))]
    k = gram
    for _ in range(n - 1):
        new = torch.zeros_like(gram)
        for v, us in enumerate(pred_g):
            for v2, us2 in enumerate(pred_h):
                s = sum((k[u, u2] for u in us for u2 in us2), gram.new_zeros(()))
                new[v, v2] = gram[v, v2] * lam * s
        k = new
    return k.sum()
