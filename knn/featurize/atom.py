"""Atom and bond feature vectors (Section 5.3: "the same feature set as Duvenaud et al.").

The paper lists the atom features as element, degree, number of attached
hydrogens, implicit valence and an aromaticity indicator, and the bond
features as bond type, conjugated and in-ring. Two presets:

``authors`` (82 atom / 6 bond features): what the authors' CEP code computes
(``graph_knn/*/mol_graph.py`` in taolei87/icml17_knn). Its third field is the
atom's *explicit valence*, not its hydrogen count, and its element list has 62
elements plus an "other" slot. Slots, 0-based:

    ====== ==================== =================================================
    slots  field                values (a value not listed goes to the last slot)
    ====== ==================== =================================================
    0-62   element              :data:`AUTHORS_ELEMENTS` (62 symbols, then "other")
    63-68  degree               0, 1, 2, 3, 4, 5 (>= 5 shares slot 68)
    69-74  explicit valence     1, 2, 3, 4, 5, 6 (0 or > 6 share slot 74)
    75-80  implicit valence     0, 1, 2, 3, 4, 5 (> 5 shares slot 80)
    81     aromatic             1 if the atom is aromatic
    ====== ==================== =================================================

``duvenaud`` (62 atom / 6 bond features): Duvenaud et al. (2015)'s list: 43
elements plus "other", degree 0-5, total hydrogens 0-4, implicit valence
0-5, aromatic.

Bond slots (both presets): 0 single, 1 double, 2 triple, 3 aromatic (any
other bond type sets none of 0-3, as in the authors' code), 4 conjugated,
5 in a ring.

RDKit deprecated ``Atom.GetExplicitValence``/``GetImplicitValence``; the
valences here come from ``Atom.GetValence(Chem.ValenceType.EXPLICIT /
IMPLICIT)``, which return the same numbers without a warning per atom.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from rdkit import Chem

AUTHORS_ELEMENTS: tuple[str, ...] = (
    "C", "N", "O", "S", "F", "Si", "P", "Cl", "Br", "Mg", "Na", "Ca", "Fe", "As", "Al",
    "I", "B", "V", "K", "Tl", "Yb", "Sb", "Sn", "Ag", "Pd", "Co", "Se", "Ti", "Zn", "H",
    "Li", "Ge", "Cu", "Au", "Ni", "Cd", "In", "Mn", "Zr", "Cr", "Pt", "Hg", "Pb", "W",
    "Ru", "Nb", "Re", "Te", "Rh", "Tc", "Ba", "Bi", "Hf", "Mo", "U", "Sm", "Os", "Ir",
    "Ce", "Gd", "Ga", "Cs", "other",
)  # 63 slots
DUVENAUD_ELEMENTS: tuple[str, ...] = AUTHORS_ELEMENTS[:43] + ("other",)  # 44 slots

#: Atom properties a feature field can read, by name.
ATOM_PROPERTIES: dict[str, Callable[[Chem.Atom], Hashable]] = {
    "element": lambda a: a.GetSymbol(),
    "degree": lambda a: a.GetDegree(),
    "explicit_valence": lambda a: a.GetValence(Chem.ValenceType.EXPLICIT),
    "implicit_valence": lambda a: a.GetValence(Chem.ValenceType.IMPLICIT),
    "total_hs": lambda a: a.GetTotalNumHs(),
    "aromatic": lambda a: a.GetIsAromatic(),
}

_BT = Chem.BondType
#: Bond properties a feature field can read, by name.
BOND_PROPERTIES: dict[str, Callable[[Chem.Bond], Hashable]] = {
    "bond_type": lambda b: b.GetBondType(),
    "conjugated": lambda b: b.GetIsConjugated(),
    "in_ring": lambda b: b.IsInRing(),
}


@dataclass(frozen=True)
class Field:
    """One block of slots: the one-hot of ``prop`` over ``choices``.

    ``unknown="last"``: a value not in ``choices`` lights the last slot (the
    "other" slot). ``unknown="none"``: it lights no slot. A field with
    ``choices=(True,)`` is a single 0/1 flag.
    """

    prop: str
    choices: tuple
    unknown: str = "last"

    def __post_init__(self) -> None:
        if self.unknown not in ("last", "none"):
            raise ValueError(f"unknown must be 'last' or 'none', got {self.unknown!r}")

    def __len__(self) -> int:
        return len(self.choices)

    def slot(self, value: Hashable) -> int:
        """Offset of the lit slot within this field, or -1 for none."""
        try:
            return self.choices.index(value)
        except ValueError:
            return len(self.choices) - 1 if self.unknown == "last" else -1


def _flag(prop: str) -> Field:
    return Field(prop, (True,), unknown="none")


@dataclass(frozen=True)
class Featurizer:
    """A concatenation of :class:`Field` one-hots over atoms or bonds.

    ``featurizer(obj)`` is the plain reference: a float32 vector of length
    ``len(featurizer)``. :meth:`slots` gives the lit slot indices instead, the
    form the fast molecule featurizer scatters in one numpy call.
    """

    fields: tuple[Field, ...]
    properties: str = "atom"  # which property table: "atom" or "bond"

    def __post_init__(self) -> None:
        table = self._table()
        for f in self.fields:
            if f.prop not in table:
                raise ValueError(f"unknown {self.properties} property {f.prop!r}; known: {sorted(table)}")

    def _table(self) -> dict[str, Callable]:
        return ATOM_PROPERTIES if self.properties == "atom" else BOND_PROPERTIES

    def __len__(self) -> int:
        return sum(len(f) for f in self.fields)

    @cached_property
    def _plan(self) -> tuple[tuple[Callable, dict, int], ...]:
        """Per field: (property getter, {value: slot}, slot for other values or -1)."""
        table, plan, offset = self._table(), [], 0
        for f in self.fields:
            lookup = {c: offset + k for k, c in enumerate(f.choices)}
            other = offset + len(f) - 1 if f.unknown == "last" else -1
            plan.append((table[f.prop], lookup, other))
            offset += len(f)
        return tuple(plan)

    def slots(self, obj) -> list[int]:
        """Indices of the slots set to 1 for ``obj`` (an RDKit atom or bond)."""
        out = []
        for get, lookup, other in self._plan:
            k = lookup.get(get(obj), other)
            if k >= 0:
                out.append(k)
        return out

    def __call__(self, obj) -> np.ndarray:
        x = np.zeros(len(self), dtype=np.float32)
        x[self.slots(obj)] = 1.0
        return x

    def names(self) -> list[str]:
        """One readable name per slot, e.g. ``"element=Se"``, ``"degree=3"``."""
        return [f"{f.prop}={c}" if len(f) > 1 else f.prop for f in self.fields for c in f.choices]

    def settings(self) -> dict:
        """Plain description (for cache keys and checkpoints)."""
        return {
            "properties": self.properties,
            "fields": [[f.prop, [str(c) for c in f.choices], f.unknown] for f in self.fields],
        }


AUTHORS_ATOM = Featurizer((
    Field("element", AUTHORS_ELEMENTS),
    Field("degree", (0, 1, 2, 3, 4, 5)),
    Field("explicit_valence", (1, 2, 3, 4, 5, 6)),
    Field("implicit_valence", (0, 1, 2, 3, 4, 5)),
    _flag("aromatic"),
))
DUVENAUD_ATOM = Featurizer((
    Field("element", DUVENAUD_ELEMENTS),
    Field("degree", (0, 1, 2, 3, 4, 5)),
    Field("total_hs", (0, 1, 2, 3, 4)),
    Field("implicit_valence", (0, 1, 2, 3, 4, 5)),
    _flag("aromatic"),
))
BOND = Featurizer((
    Field("bond_type", (_BT.SINGLE, _BT.DOUBLE, _BT.TRIPLE, _BT.AROMATIC), unknown="none"),
    _flag("conjugated"),
    _flag("in_ring"),
), properties="bond")

#: Named (atom, bond) featurizer presets.
PRESETS: dict[str, tuple[Featurizer, Featurizer]] = {
    "authors": (AUTHORS_ATOM, BOND),
    "duvenaud": (DUVENAUD_ATOM, BOND),
}
