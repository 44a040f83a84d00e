"""Feature vectors written out by hand (authors' 82/6 preset and Duvenaud's 62/6).

Authors' atom slots: element 0-62 (C 0, N 1, O 2, S 3, Si 5, Se 26, other 62),
degree d -> 63 + d, explicit valence k -> 68 + k (k = 1..6; others 74),
implicit valence k -> 75 + k, aromatic 81.
Bond slots: single 0, double 1, triple 2, aromatic 3, conjugated 4, in ring 5.
"""
import numpy as np
import pytest
from rdkit import Chem

from knn.featurize import AUTHORS_ATOM, BOND, DUVENAUD_ATOM, MolFeaturizer


def vec(slots, size=82):
    x = np.zeros(size, dtype=np.float32)
    x[list(slots)] = 1
    return x


def atoms(smiles, featurizer=AUTHORS_ATOM):
    return np.stack([featurizer(a) for a in Chem.MolFromSmiles(smiles).GetAtoms()])


def bonds(smiles):
    return np.stack([BOND(b) for b in Chem.MolFromSmiles(smiles).GetBonds()])


# Hand-derived per-atom lit slots.
CH3 = {0, 64, 69, 78}           # C, degree 1, explicit valence 1, implicit valence 3 (3 H)
CH2 = {0, 65, 70, 77}           # C, degree 2, explicit valence 2, implicit valence 2
OH = {2, 64, 69, 76}            # O, degree 1, explicit valence 1, implicit valence 1
AROM_CH = {0, 65, 71, 76, 81}   # aromatic C-H: degree 2, explicit 1.5+1.5 = 3, implicit 1
AROM_C3 = {0, 66, 72, 75, 81}   # aromatic C with 3 ring/substituent bonds: explicit 4, implicit 0
AROM_N = {1, 65, 71, 75, 81}    # pyridine-type N: degree 2, explicit 3, implicit 0
SINGLE = [1, 0, 0, 0, 0, 0]
AROMATIC = [0, 0, 0, 1, 1, 1]


def test_sizes_and_names():
    assert len(AUTHORS_ATOM) == 82 and len(DUVENAUD_ATOM) == 62 and len(BOND) == 6
    assert MolFeaturizer.preset("authors").atom_dim == 82
    names = AUTHORS_ATOM.names()
    assert names[0] == "element=C" and names[26] == "element=Se" and names[62] == "element=other"
    assert names[63] == "degree=0" and names[69] == "explicit_valence=1" and names[75] == "implicit_valence=0"
    assert names[81] == "aromatic"


def test_ethanol_full_vector_of_oxygen():
    o = [0, 0, 1] + [0] * 60          # element: O
    o += [0, 1, 0, 0, 0, 0]           # degree 1
    o += [1, 0, 0, 0, 0, 0]           # explicit valence 1
    o += [0, 1, 0, 0, 0, 0]           # implicit valence 1 (the H of OH)
    o += [0]                          # not aromatic
    np.testing.assert_array_equal(atoms("CCO")[2], np.array(o, dtype=np.float32))


def test_ethanol():
    np.testing.assert_array_equal(atoms("CCO"), np.stack([vec(CH3), vec(CH2), vec(OH)]))
    np.testing.assert_array_equal(bonds("CCO"), np.array([SINGLE, SINGLE], dtype=np.float32))


def test_benzene():
    np.testing.assert_array_equal(atoms("c1ccccc1"), np.stack([vec(AROM_CH)] * 6))
    np.testing.assert_array_equal(bonds("c1ccccc1"), np.array([AROMATIC] * 6, dtype=np.float32))


def test_pyridine():
    expected = [vec(AROM_CH)] * 3 + [vec(AROM_N)] + [vec(AROM_CH)] * 2
    np.testing.assert_array_equal(atoms("c1ccncc1"), np.stack(expected))
    np.testing.assert_array_equal(bonds("c1ccncc1"), np.array([AROMATIC] * 6, dtype=np.float32))


def test_selenium_cep_molecule():
    # A CEP molecule: selenophene - isoquinoline, joined by a single (conjugated, non-ring) bond.
    smiles = "c1ccc([se]1)-c1cc2ccccc2cn1"
    # Se: degree 2, explicit valence 2 (RDKit gives the two-coordinate aromatic Se its
    # normal valence 2, not 1.5 + 1.5), implicit valence 0, aromatic
    se = {26, 65, 70, 75, 81}
    expected = [AROM_CH] * 3 + [AROM_C3, se, AROM_C3, AROM_CH, AROM_C3] + [AROM_CH] * 4 + [AROM_C3, AROM_CH, AROM_N]
    np.testing.assert_array_equal(atoms(smiles), np.stack([vec(s) for s in expected]))
    b = bonds(smiles)
    np.testing.assert_array_equal(b[4], np.array([1, 0, 0, 0, 1, 0], dtype=np.float32))  # the inter-ring bond
    np.testing.assert_array_equal(np.delete(b, 4, axis=0), np.array([AROMATIC] * 16, dtype=np.float32))


def test_silicon_cep_molecule():
    mol = Chem.MolFromSmiles("C1C=CC=C1C1=Cc2ccccc2[SiH2]1")
    si = mol.GetAtomWithIdx(13)
    # Si, degree 2, explicit valence 4 (two bonds + two written H), implicit 0, not aromatic
    np.testing.assert_array_equal(AUTHORS_ATOM(si), vec({5, 65, 72, 75}))
    ring_ch2 = mol.GetAtomWithIdx(0)  # sp3 CH2 of the cyclopentadiene
    np.testing.assert_array_equal(AUTHORS_ATOM(ring_ch2), vec(CH2))
    double = mol.GetBondWithIdx(1)  # C1=C2 in the cyclopentadiene: double, conjugated, ring
    np.testing.assert_array_equal(BOND(double), np.array([0, 1, 0, 0, 1, 1], dtype=np.float32))


def test_values_outside_the_lists_go_to_the_last_slot():
    np.testing.assert_array_equal(atoms("[Xe]")[0], vec({62, 63, 74, 75}))  # other element, valence 0 -> 74
    np.testing.assert_array_equal(atoms("C")[0], vec({0, 63, 74, 79}))     # methane: explicit valence 0
    sf6 = atoms("FS(F)(F)(F)(F)F")[1]
    np.testing.assert_array_equal(sf6, vec({3, 68, 74, 75}))  # degree 6 -> slot of 5; valence 6 -> 74
    assert BOND(Chem.MolFromSmiles("C#N").GetBondWithIdx(0))[2] == 1


def test_duvenaud_preset_ethanol():
    # element 0-43 (O 2), degree 44-49, total H 50-54, implicit valence 55-60, aromatic 61
    expected = [vec({0, 45, 53, 58}, 62), vec({0, 46, 52, 57}, 62), vec({2, 45, 51, 56}, 62)]
    np.testing.assert_array_equal(atoms("CCO", DUVENAUD_ATOM), np.stack(expected))


def test_no_rdkit_deprecation_messages(capfd):
    MolFeaturizer.preset("authors")("c1ccc([se]1)-c1cc2ccccc2cn1")
    MolFeaturizer.preset("duvenaud")("C1C=CC=C1C1=Cc2ccccc2[SiH2]1")
    out, err = capfd.readouterr()
    assert "DEPRECATION" not in out + err


def test_unknown_property_is_rejected():
    from knn.featurize import Featurizer, Field

    with pytest.raises(ValueError, match="unknown atom property"):
        Featurizer((Field("charge", (0, 1)),))
