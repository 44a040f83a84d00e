"""Graph containers: the padded lists of the module docstring's picture, and aggregation."""
import torch

from knn.featurize import BatchMolGraph, MolFeaturizer, MolGraph

F = MolFeaturizer.preset("authors")


def test_water_then_ethanol_matches_the_picture():
    b = BatchMolGraph.from_graphs([F("O"), F("CCO")])
    assert (b.num_graphs, b.num_atoms, b.num_bonds) == (2, 4, 2)
    assert b.atom_nbrs.tolist() == [[4, 4], [2, 4], [1, 3], [2, 4]]
    assert b.bond_nbrs.tolist() == [[2, 2], [0, 2], [0, 1], [1, 2]]
    assert b.nbr_mask.tolist() == [[False, False], [True, False], [True, True], [True, False]]
    assert b.atom_graph.tolist() == [0, 1, 1, 1]
    assert b.graph_atoms.tolist() == [[0, 4, 4], [1, 2, 3]]
    assert b.graph_mask.tolist() == [[True, False, False], [True, True, True]]
    assert b.bond_index.tolist() == [[1, 2], [2, 3]]


def test_sums_over_neighbours_and_atoms():
    b = BatchMolGraph.from_graphs([F("O"), F("CCO")])
    x = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    assert b.sum_neighbors(x).squeeze(1).tolist() == [0.0, 100.0, 1010.0, 100.0]
    assert b.sum_atoms(x).squeeze(1).tolist() == [1.0, 1110.0]
    e = torch.tensor([[1.0], [2.0]])
    assert b.gather_bonds(e).squeeze(-1).tolist() == [[0, 0], [1, 0], [1, 2], [2, 0]]


def test_single_graph_without_bonds():
    b = BatchMolGraph.from_graphs([F("[Na+]")])
    assert b.atom_nbrs.shape == (1, 1) and not b.nbr_mask.any()
    assert b.sum_neighbors(torch.ones(1, 3)).tolist() == [[0.0, 0.0, 0.0]]


def test_neighbours_listed_in_bond_order():
    g = MolGraph(torch.eye(4), torch.tensor([[2, 0], [0, 1], [3, 0]]), torch.zeros(3, 1))
    b = BatchMolGraph.from_graphs([g])
    assert b.atom_nbrs[0].tolist() == [2, 1, 3] and b.bond_nbrs[0].tolist() == [0, 1, 2]


def test_permute_atoms():
    g = F("CCO")
    p = g.permute_atoms(torch.tensor([2, 0, 1]))  # new atom 0 is old atom 2 (O)
    assert torch.equal(p.atom_features[0], g.atom_features[2])
    assert p.bond_index.tolist() == [[1, 2], [2, 0]]


def test_to_casts_features_only():
    b = BatchMolGraph.from_graphs([F("CCO")]).to("cpu", torch.float64)
    assert b.atom_features.dtype == torch.float64 and b.bond_features.dtype == torch.float64
    assert b.atom_nbrs.dtype == torch.long


def test_molgraph_checks_shapes():
    import pytest

    with pytest.raises(ValueError, match="outside"):
        MolGraph(torch.zeros(2, 3), torch.tensor([[0, 2]]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="bond_index"):
        MolGraph(torch.zeros(2, 3), torch.tensor([[0, 1]]), torch.zeros(2, 1))


# --------------------------------------------------------------------------- #
# Gradients of the gathers: a fixed summation order (bit-identical runs)
# --------------------------------------------------------------------------- #

#: Rings and branches: atoms of degree 3 and 4, whose gradients sum 3-4 terms.
MOLECULES = ["c1ccc2ccccc2c1", "CC(C)(C)O", "c1ccc(-c2ccccc2)cc1", "CCN(CC)CC", "C1CCNCC1",
             "NC(=O)c1ccccc1", "c1ccc2[nH]ccc2c1", "CC(C)C"]


def test_gather_gradient_is_the_scatter_sum():
    """dx[r] = Σ_{p: index[p] = r} dy[p]: the gradient of plain indexing, padding dropped."""
    from knn.featurize.graph import gather_rows

    gen = torch.Generator().manual_seed(0)
    index = torch.randint(0, 7, (5, 3), generator=gen)  # 6 = padding for 6 rows
    x = torch.randn(6, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    dy = torch.randn(5, 3, 4, dtype=torch.float64, generator=gen)
    y = gather_rows(x, index)
    assert torch.equal(y, torch.cat([x, x.new_zeros(1, 4)])[index])
    (dx,) = torch.autograd.grad(y, x, dy)
    (expected,) = torch.autograd.grad(torch.cat([x, x.new_zeros(1, 4)])[index], x, dy)
    assert torch.allclose(dx, expected, rtol=0, atol=1e-12)


def _gradients(threads: int) -> list[torch.Tensor]:
    """Gradients through the gathers with ``threads`` threads: every gather of BatchMolGraph
    for 64 molecules, and :func:`gather_rows` with 600 rows read ~4 times each at random
    places, d = 200 (where plain indexing's backward, a multi-threaded scatter-add with
    atomic adds, gave other bits at every call)."""
    from knn.featurize.graph import gather_rows

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        b = BatchMolGraph.from_graphs([F(s) for s in MOLECULES * 8])
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(b.num_atoms, 256, generator=gen, requires_grad=True)
        e = torch.randn(b.num_bonds, 256, generator=gen, requires_grad=True)
        out = (b.gather_atoms(x) * b.gather_bonds(e)).sum(1)  # (V, d)
        out = b.sum_atoms(out * b.sum_neighbors(x))  # (G, d)
        grads = list(torch.autograd.grad(out.pow(2).sum(), (x, e)))
        index = torch.randint(0, 601, (600, 4), generator=gen)
        z = torch.randn(600, 200, generator=gen, requires_grad=True)
        dy = torch.randn(600, 4, 200, generator=gen)
        return grads + list(torch.autograd.grad(gather_rows(z, index), z, dy))
    finally:
        torch.set_num_threads(previous)


def test_gradients_are_bit_identical_over_runs_and_thread_counts():
    """A regression once seen: a same-seed run differed in the last bits (scatter-add
    with atomic adds, in thread order). Now every run and thread count gives the same bits."""
    first = _gradients(threads=1)
    for threads in (2, 2, 2, 1):
        again = _gradients(threads)
        assert all(torch.equal(a, b) for a, b in zip(first, again)), f"threads={threads}"


def test_gather_rows_shapes_and_padding():
    """Any trailing shape; index n reads a zero row, also when x has no rows at all."""
    from knn.featurize.graph import gather_rows

    x = torch.arange(24.0).view(3, 2, 4)
    y = gather_rows(x, torch.tensor([[2, 3, 0], [3, 3, 1]]))
    assert y.shape == (2, 3, 2, 4) and torch.equal(y[0, 0], x[2]) and torch.equal(y[1, 2], x[1])
    assert not y[0, 1].any() and not y[1, :2].any()
    b = BatchMolGraph.from_graphs([F("[Na+]")])  # no bonds: E = 0
    assert b.gather_bonds(torch.zeros(0, 5, requires_grad=True)).shape == (1, 1, 5)
