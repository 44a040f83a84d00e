"""Train/valid/test splits of a data file's rows: a split file, a split column, or random.

Rows are 0-based data rows of a CSV (the header is not a row), numbered as
:func:`knn.data.molecules.load_molecule_csv` numbers them. Every function
returns ``{"train": rows, "valid": rows, "test": rows}`` as int64 arrays;
:func:`check_split` checks such a split against the rows a file has.
"""
from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from knn.data.mirror import DataError

SPLITS = ("train", "valid", "test")
#: Accepted values of a split column (lower-cased) -> split.
SPLIT_NAMES = {"train": "train", "valid": "valid", "val": "valid", "validation": "valid",
               "dev": "valid", "test": "test"}


def load_split(path: str | Path) -> dict[str, np.ndarray]:
    """A split file: JSON ``{"train": [rows], "valid": [...], "test": [...]}``."""
    try:
        raw = json.loads(Path(path).read_text())
        split = {k: np.asarray(raw[k], dtype=np.int64) for k in SPLITS}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(f"cannot read split file {path}: {' '.join(str(err).split())}") from None
    return split


def random_split(
    num_rows: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, np.ndarray]:
    """Rows 0..num_rows-1 cut train/valid/test by a seeded permutation (each part sorted)."""
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) < 0:
        raise ValueError(f"fractions must be >= 0 and sum to 1, got {fractions}")
    perm = np.random.RandomState(seed).permutation(num_rows)
    n_train, n_valid = int(num_rows * fractions[0]), int(num_rows * fractions[1])
    parts = (perm[:n_train], perm[n_train : n_train + n_valid], perm[n_train + n_valid :])
    return {k: np.sort(p) for k, p in zip(SPLITS, parts)}


def read_split_column(path: str | Path, column: str) -> dict[int, str]:
    """0-based data row -> "train" | "valid" | "test" from ``column`` of CSV ``path`` (values as
    in :data:`SPLIT_NAMES`, any case). DataError (one line) for a missing column or a value
    that names no split."""
    out = {}
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None) or []
        if column not in header:
            raise DataError(f"{path}: no split column {column!r}; columns present: {', '.join(header)}")
        i = header.index(column)
        for row, record in enumerate(reader):
            if not record:
                continue
            value = record[i].strip() if len(record) > i else ""
            if value.lower() not in SPLIT_NAMES:
                raise DataError(f"{path}: row {row} (line {reader.line_num}): split value {value!r} "
                                f"in column {column!r}; expected one of train, valid, test")
            out[row] = SPLIT_NAMES[value.lower()]
    return out


def column_split(path: str | Path, column: str) -> dict[str, np.ndarray]:
    """The split that ``column`` of CSV ``path`` names (:func:`read_split_column`), rows sorted."""
    by_row = read_split_column(path, column)
    return {s: np.array(sorted(r for r, v in by_row.items() if v == s), dtype=np.int64)
            for s in SPLITS}


def check_split(rows: dict[str, np.ndarray], known: Iterable[int], where: str, source: str) -> None:
    """DataError (one line) when a split names a row that is not among ``known`` (the data rows
    of ``source``, invalid ones included) or puts a row in two parts; ``where`` says where the
    split came from (e.g. ``file split.json``)."""
    known = set(known)
    seen: set[int] = set()
    for s in SPLITS:
        part = set(rows[s].tolist())
        if stray := sorted(part - known):
            raise DataError(f"split {where}: {s} names row {stray[0]}, which is not a data row "
                            f"of {source}")
        if overlap := sorted(part & seen):
            raise DataError(f"split {where}: row {overlap[0]} is in more than one split")
        seen |= part
