"""SMILES -> MolGraph: the fast path equals the per-atom reference; invalid SMILES."""
import pytest
import torch

from knn.featurize import InvalidMolecule, MolFeaturizer, parse_smiles

SMILES = [
    "CCO", "c1ccccc1", "c1ccncc1", "O", "[Na+].[Cl-]", "FS(F)(F)(F)(F)F", "C#N",
    "c1ccc([se]1)-c1cc2ccccc2cn1", "C1C=CC=C1C1=Cc2ccccc2[SiH2]1",
    "[nH]1c(cc2c3nsnc3c3c4ccccc4oc3c12)-c1ccco1",
    "c1cc2c3cocc3c3c4[SiH2]C(=Cc4ncc3c2[se]1)c1scc2C=CCc12",
]


@pytest.mark.parametrize("preset", ["authors", "duvenaud"])
def test_fast_path_equals_reference(preset):
    f = MolFeaturizer.preset(preset)
    for s in SMILES:
        a, b = f(s), f.reference(s)
        assert torch.equal(a.atom_features, b.atom_features), s
        assert torch.equal(a.bond_features, b.bond_features), s
        assert torch.equal(a.bond_index, b.bond_index), s
        assert a.atom_features.dtype == torch.float32 and a.atom_features.shape[1] == f.atom_dim


def test_graph_shapes():
    g = MolFeaturizer.preset()("CCO")
    assert g.atom_features.shape == (3, 82) and g.bond_features.shape == (2, 6)
    assert g.bond_index.tolist() == [[0, 1], [1, 2]]


@pytest.mark.parametrize("bad, reason", [("", "empty"), ("   ", "empty"), ("C1CC", "unparseable"), ("xyz", "unparseable")])
def test_invalid_smiles(bad, reason, capfd):
    with pytest.raises(InvalidMolecule, match=reason):
        parse_smiles(bad)
    assert "SMILES Parse Error" not in capfd.readouterr().err  # RDKit's log is silenced


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown featurizer preset"):
        MolFeaturizer.preset("nope")


def test_settings_differ_between_presets():
    assert MolFeaturizer.preset("authors").settings() != MolFeaturizer.preset("duvenaud").settings()
