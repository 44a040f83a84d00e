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
