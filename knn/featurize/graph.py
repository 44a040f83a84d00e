"""The graph containers: the only contract between featurisation and the networks.

:class:`MolGraph` is one graph (a molecule, or any small undirected graph in
tests). :class:`BatchMolGraph` is a list of them joined into one disjoint
graph, with padded neighbour lists so that every sum over neighbours or over
a graph's atoms is a gather followed by a sum over a fixed axis.

Determinism. The forward pass of such a sum has a fixed order; its backward
pass is where the order could depend on thread scheduling. The gradient of a
gather ``x[index]`` is a scatter-add into ``x``'s rows. For advanced indexing
that is ``index_put_(..., accumulate=True)``, which on CPU with several
threads adds with atomic operations in whatever order the threads run
(PyTorch lists it among the nondeterministic ops): same-seed runs would differ
in the last bits within the first epoch and visibly at the end (test RMSEs
0.689 / 0.663 / 0.671 over three runs of one mol_csv command). The gathers here
(:func:`gather_rows`) use ``index_select`` instead, whose gradient is
``index_add_``: on CPU it adds the rows serially, in index order, whatever the
thread count (PyTorch lists ``index_add_`` as nondeterministic on CUDA only).
So on CPU the gradients, and a whole same-seed run with the same thread
count, are bit-identical (tests/featurize/test_graph.py, tests/test_same_seed.py).
On a GPU both scatter-adds use atomics; bit-identical GPU runs need
``train.deterministic=true`` (:func:`knn.train.rng.set_deterministic`).

A picture of the padded neighbour lists for ethanol (C0-C1-O2, bonds b0 =
C0-C1, b1 = C1-O2) batched after water (O0; no bonds), so V = 4, E = 2, D = 2::

    atom  graph  atom_nbrs   bond_nbrs   nbr_mask
    0 O     0    [4, 4]      [2, 2]      [F, F]     padding: atom V=4, bond E=2
    1 C     1    [2, 4]      [0, 2]      [T, F]
    2 C     1    [1, 3]      [0, 1]      [T, T]
    3 O     1    [2, 4]      [1, 2]      [T, F]

    graph_atoms = [[0, 4, 4], [1, 2, 3]]   graph_mask = [[T, F, F], [T, T, T]]

Neighbours of an atom are listed in the order of the bonds' indices.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor


def _pad(x: Tensor) -> Tensor:
    """Append one zero row, the target of every padding index."""
    return torch.cat([x, x.new_zeros((1,) + x.shape[1:])])


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` with zeros where ``index == len(x)`` (padding): (n, ...) -> (*index.shape, ...).

    Forward y[p] = x[index[p]]; backward dx[r] = Σ_{p: index[p] = r} dy[p],
    summed serially in the order of p on CPU (``index_select``'s gradient,
    ``index_add_``; module docstring), so bit-identical from run to run
    whatever the thread count.
    """
    rows = _pad(x).index_select(0, index.reshape(-1))  # (P, ...), P = index.numel()
    return rows.view(index.shape + x.shape[1:])


@dataclass
class MolGraph:
    """One graph.

    Attributes:
        atom_features: (V, F_a) float32, one row per atom.
        bond_index: (E, 2) int64, the two atom indices of each (undirected) bond.
        bond_features: (E, F_b) float32, one row per bond.
    """

    atom_features: Tensor
    bond_index: Tensor
    bond_features: Tensor

    def __post_init__(self) -> None:
        V, E = self.atom_features.shape[0], self.bond_index.shape[0]
        if self.atom_features.dim() != 2 or self.bond_features.dim() != 2:
            raise ValueError("atom_features and bond_features must be 2-D")
        if self.bond_index.shape != (E, 2) or self.bond_features.shape[0] != E:
            raise ValueError(
                f"bond_index must be (E, 2) and bond_features (E, F_b); got "
                f"{tuple(self.bond_index.shape)} and {tuple(self.bond_features.shape)}"
            )
        if E and (int(self.bond_index.min()) < 0 or int(self.bond_index.max()) >= V):
            raise ValueError(f"bond_index refers to atoms outside 0..{V - 1}")

    @property
    def num_atoms(self) -> int:
        return self.atom_features.shape[0]

    @property
    def num_bonds(self) -> int:
        return self.bond_index.shape[0]

    def permute_atoms(self, perm: Tensor) -> MolGraph:
        """The same graph with atom i of the result being atom ``perm[i]`` of this one."""
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(len(perm))
        return MolGraph(self.atom_features[perm], inverse[self.bond_index], self.bond_features)


@dataclass
class BatchMolGraph:
    """G graphs as one disjoint graph of V atoms and E bonds; D = max degree (>= 1).

    Attributes:
        atom_features: (V, F_a) float.
        bond_features: (E, F_b) float.
        bond_index:    (E, 2) int64, atom indices into the batch.
        atom_nbrs:     (V, D) int64, neighbours of each atom; padding = V.
        bond_nbrs:     (V, D) int64, the bond to each of those neighbours; padding = E.
        nbr_mask:      (V, D) bool, True at real neighbours.
        atom_graph:    (V,) int64, the graph each atom belongs to.
        graph_atoms:   (G, N) int64, the atoms of each graph (N = largest graph); padding = V.
        graph_mask:    (G, N) bool, True at real atoms.
        num_graphs:    G.
    """

    atom_features: Tensor
    bond_features: Tensor
    bond_index: Tensor
    atom_nbrs: Tensor
    bond_nbrs: Tensor
    nbr_mask: Tensor
    atom_graph: Tensor
    graph_atoms: Tensor
    graph_mask: Tensor
    num_graphs: int

    @classmethod
    def from_graphs(cls, graphs: list[MolGraph]) -> BatchMolGraph:
        """Join ``graphs`` (in order) into one disjoint graph."""
        if not graphs:
            raise ValueError("cannot batch an empty list of graphs")
        n_atoms = torch.tensor([g.num_atoms for g in graphs])
        n_bonds = torch.tensor([g.num_bonds for g in graphs])
        G, V, E = len(graphs), int(n_atoms.sum()), int(n_bonds.sum())
        atom_offset = torch.cumsum(n_atoms, 0) - n_atoms  # (G,)
        bond_index = torch.cat([g.bond_index for g in graphs]).long()  # (E, 2), local
        bond_index = bond_index + torch.repeat_interleave(atom_offset, n_bonds).unsqueeze(1)
        atom_features = torch.cat([g.atom_features for g in graphs])
        bond_features = torch.cat([g.bond_features for g in graphs])

        # Each bond seen from both ends: (receiver v, sender u, bond b), sorted by (v, b).
        bond_id = torch.arange(E).repeat(2)
        receiver = torch.cat([bond_index[:, 1], bond_index[:, 0]])
        sender = torch.cat([bond_index[:, 0], bond_index[:, 1]])
        order = torch.argsort(receiver * max(E, 1) + bond_id, stable=True)
        receiver, sender, bond_id = receiver[order], sender[order], bond_id[order]
        degree = torch.bincount(receiver, minlength=V)  # (V,)
        D = max(int(degree.max()) if V else 0, 1)
        first = torch.cumsum(degree, 0) - degree  # position of each atom's first entry
        rank = torch.arange(2 * E) - first[receiver]  # slot within the atom's list
        atom_nbrs = torch.full((V, D), V, dtype=torch.long)
        bond_nbrs = torch.full((V, D), E, dtype=torch.long)
        atom_nbrs[receiver, rank] = sender
        bond_nbrs[receiver, rank] = bond_id

        atom_graph = torch.repeat_interleave(torch.arange(G), n_atoms)  # (V,)
        N = max(int(n_atoms.max()), 1)
        graph_atoms = torch.full((G, N), V, dtype=torch.long)
        graph_atoms[atom_graph, torch.arange(V) - atom_offset[atom_graph]] = torch.arange(V)
        return cls(
            atom_features=atom_features,
            bond_features=bond_features,
            bond_index=bond_index,
            atom_nbrs=atom_nbrs,
            bond_nbrs=bond_nbrs,
            nbr_mask=atom_nbrs < V,
            atom_graph=atom_graph,
            graph_atoms=graph_atoms,
            graph_mask=graph_atoms < V,
            num_graphs=G,
        )

    @property
    def num_atoms(self) -> int:
        return self.atom_features.shape[0]

    @property
    def num_bonds(self) -> int:
        return self.bond_index.shape[0]

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> BatchMolGraph:
        """Move every tensor to ``device``; cast the feature tensors to ``dtype`` if given."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Tensor):
                v = v.to(device, dtype=dtype) if dtype is not None and v.is_floating_point() else v.to(device)
            out[f.name] = v
        return BatchMolGraph(**out)

    # ---- deterministic aggregation ---------------------------------------- #

    @staticmethod
    def _pad(x: Tensor) -> Tensor:
        """Append one zero row, the target of every padding index."""
        return _pad(x)

    def gather_atoms(self, x: Tensor) -> Tensor:
        """x: (V, ...) per-atom values -> (V, D, ...) at each atom's neighbours; 0 at padding."""
        return gather_rows(x, self.atom_nbrs)

    def gather_bonds(self, e: Tensor) -> Tensor:
        """e: (E, ...) per-bond values -> (V, D, ...) at each atom's bonds; 0 at padding."""
        return gather_rows(e, self.bond_nbrs)

    def sum_neighbors(self, x: Tensor) -> Tensor:
        """Σ_{u∈N(v)} x[u]: (V, d) -> (V, d)."""
        return self.gather_atoms(x).sum(1)

    def sum_atoms(self, x: Tensor) -> Tensor:
        """Σ_{v∈G} x[v] per graph: (V, d) -> (G, d)."""
        return gather_rows(x, self.graph_atoms).sum(1)
