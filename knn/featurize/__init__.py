"""Molecule featurisation: feature presets, the graph containers, SMILES -> graph."""

from knn.featurize.atom import (
    AUTHORS_ATOM,
    AUTHORS_ELEMENTS,
    BOND,
    DUVENAUD_ATOM,
    DUVENAUD_ELEMENTS,
    PRESETS,
    Featurizer,
    Field,
)
from knn.featurize.graph import BatchMolGraph, MolGraph
from knn.featurize.molecule import InvalidMolecule, MolFeaturizer, parse_smiles

__all__ = [
    "AUTHORS_ATOM",
    "AUTHORS_ELEMENTS",
    "BOND",
    "DUVENAUD_ATOM",
    "DUVENAUD_ELEMENTS",
    "PRESETS",
    "BatchMolGraph",
    "Featurizer",
    "Field",
    "InvalidMolecule",
    "MolFeaturizer",
    "MolGraph",
    "parse_smiles",
]
