"""A small real molecule CSV for trying ``task=mol_csv``: c-Met activities shipped with RDKit.

    python -m data_prep.cmet_example [OUT]   # default: data/cmet/cmet_pic50.csv

RDKit's wheel carries, for its Free-Wilson example, 1,017 c-Met inhibitors from
ChEMBL document CHEMBL2321810 (``rdkit/Contrib/FreeWilson/data/``: SMILES with
ChEMBL ids in ``CHEMBL2321810.smi``, activities in ``CHEMBL2321810_act.csv``).
This joins the two by id into ``smiles,chembl_id,pic50`` (the ``Act`` column,
a -log10 activity) so it needs no download. Every id of one file must appear
in the other, else a one-line error.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import rdkit

from knn.io import write_text
from knn.paths import REPO_ROOT

DATA = Path(rdkit.__file__).parent / "Contrib" / "FreeWilson" / "data"
DEFAULT_OUT = REPO_ROOT / "data" / "cmet" / "cmet_pic50.csv"


def rows(data: Path = DATA) -> list[tuple[str, str, str]]:
    """(smiles, chembl id, activity) for every molecule, in the .smi file's order."""
    smiles = [line.split() for line in (data / "CHEMBL2321810.smi").read_text().splitlines() if line.strip()]
    with open(data / "CHEMBL2321810_act.csv", newline="") as f:
        activity = {r["Name"]: r["Act"] for r in csv.DictReader(f)}
    missing = [cid for _, cid in smiles if cid not in activity]
    if missing or len(activity) != len(smiles):
        raise SystemExit(f"error: {data}: ids without an activity or a SMILES ({missing[:3]} ...)")
    return [(smi, cid, activity[cid]) for smi, cid in smiles]


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    lines = ["smiles,chembl_id,pic50"] + [",".join(r) for r in rows()]
    write_text(out, "\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} molecules to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
