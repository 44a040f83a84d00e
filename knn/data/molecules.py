"""Molecule regression data: CSV -> validated table -> cached graphs -> batches.

The pipeline, each step a function::

    table   = load_molecule_csv(path, "smiles", "PCE", on_invalid="error")
    data    = featurize_table(table, MolFeaturizer.preset("authors"), cache_dir)
    train   = data.select_rows(split["train"])          # file rows -> dataset items
    sampler = ResamplingSampler(train.targets, bin_width=0.05, seed=0)
    batch, y = collate_items([train[i] for i in sampler.batch(epoch, i, 20)])

with the split from :mod:`knn.data.splits` and the sampler from
:mod:`knn.data.sampling`. Rows are 0-based data rows of the CSV (the header is
not a row; row r is on line r + 2 when no field spans lines), the numbering of
the split files.

Invalid rows: an empty, non-numeric or non-finite target (checked by
:func:`load_molecule_csv`) or a SMILES that RDKit cannot parse or that has no
atoms (checked by :func:`featurize_table`). With ``on_invalid="error"`` (the
default) the first one in file order, whatever its kind, raises
:class:`InvalidRowError` with a one-line message naming the row and the value
and ending with the override that skips such rows (its key is the caller's:
``on_invalid_key``); with ``"skip"`` such rows are left out and listed in
``exclusions`` (row, smiles, target, reason), which :func:`write_exclusions`
saves as a CSV beside a run's outputs.

The featurized graphs are cached at ``<cache_dir>/molecules/graphs-<key>.pt``
where the key hashes the CSV's sha256, the two column names, the invalid-row
policy and the featurizer's settings (with the RDKit version). The file holds
plain tensors (``torch.load(weights_only=True)``) and is written atomically.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from knn.data.mirror import DataError, default_cache_dir, sha256_file
from knn.featurize.graph import BatchMolGraph, MolGraph
from knn.featurize.molecule import InvalidMolecule, MolFeaturizer, parse_smiles
from knn.io import atomic_write

log = logging.getLogger(__name__)

ON_INVALID = ("error", "skip")
CACHE_FORMAT = 1
EXCLUSION_COLUMNS = ("row", "smiles", "target", "reason")


def skip_hint(key: str = "on_invalid") -> str:
    """The end of an invalid-row message: the override, as the caller's command spells it."""
    return f"set {key}=skip to leave such rows out"


class InvalidRowError(DataError):
    """An invalid row under ``on_invalid="error"``: ``detail`` names it, ``key`` is the setting
    that skips such rows in the command that failed (the message ends with :func:`skip_hint`)."""

    def __init__(self, detail: str, key: str = "on_invalid") -> None:
        self.detail, self.key = detail, key
        super().__init__(f"{detail}; {skip_hint(key)}")

    def with_key(self, key: str) -> InvalidRowError:
        """The same error, its hint naming ``key`` (e.g. the key as the user's config spells it)."""
        return InvalidRowError(self.detail, key)

    def __reduce__(self) -> tuple:  # pickles (across processes) with its key intact
        return InvalidRowError, (self.detail, self.key)


@dataclass(frozen=True)
class Exclusion:
    """One row left out under ``on_invalid="skip"``."""

    row: int
    smiles: str
    target: str
    reason: str


@dataclass
class MoleculeTable:
    """The valid-target rows of a molecule CSV.

    Attributes:
        smiles:  N SMILES strings (not yet parsed).
        targets: (N,) float64.
        rows:    (N,) int64, each item's 0-based data row in the file.
        path, smiles_column, target_column, on_invalid: where it came from.
        sha256:  the file's checksum.
        exclusions: rows skipped for their target (``on_invalid="skip"``).
    """

    smiles: list[str]
    targets: np.ndarray
    rows: np.ndarray
    path: Path
    smiles_column: str
    target_column: str
    on_invalid: str
    sha256: str
    exclusions: list[Exclusion] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.smiles)


def _check_on_invalid(on_invalid: str) -> None:
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")


def _parse_target(text: str) -> tuple[float | None, str]:
    """(value, "") for a finite number, else (None, reason)."""
    if not text.strip():
        return None, "empty target"
    try:
        value = float(text)
    except ValueError:
        return None, "non-numeric target"
    if not math.isfinite(value):
        return None, "non-finite target"
    return value, ""


def _first_bad_smiles(smiles: Sequence[str], rows: Sequence[int]) -> tuple[int, str, str] | None:
    """(row, SMILES, reason) of the first SMILES RDKit cannot parse, or ``None``."""
    for row, s in zip(rows, smiles):
        try:
            parse_smiles(s)
        except InvalidMolecule as err:
            return row, s, str(err)
    return None


def _smiles_detail(path: Path, row: int, smiles_column: str, reason: str, smiles: str) -> str:
    """How an invalid SMILES is named: file, row, column, reason, value."""
    return f"{path}: row {row} (column {smiles_column!r}): {reason} {smiles!r}"


def load_molecule_csv(
    path: str | Path,
    smiles_column: str = "smiles",
    target_column: str = "PCE",
    on_invalid: str = "error",
    on_invalid_key: str = "on_invalid",
) -> MoleculeTable:
    """Read ``smiles_column`` and ``target_column`` of a CSV with a header row.

    Raises :class:`DataError` (one line) for a missing file or column, and,
    with ``on_invalid="error"``, :class:`InvalidRowError` for the first row
    whose target is empty, non-numeric or non-finite, unless an earlier row
    has an invalid SMILES: then for that row, so that the error names the
    first invalid row in file order. (Only then are SMILES parsed here; on
    success they are checked by :func:`featurize_table`.) ``on_invalid_key``
    is the setting the hint names.
    """
    _check_on_invalid(on_invalid)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"molecule CSV not found: {path}")
    smiles: list[str] = []
    targets: list[float] = []
    rows: list[int] = []
    exclusions: list[Exclusion] = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: empty file, expected a header row")
        for column in (smiles_column, target_column):
            if column not in header:
                raise DataError(f"{path}: no column {column!r}; columns present: {', '.join(header)}")
        i_smiles, i_target = header.index(smiles_column), header.index(target_column)
        width = max(i_smiles, i_target) + 1
        for row, record in enumerate(reader):
            if not record:  # a blank line holds no molecule but keeps its row number
                continue
            s = record[i_smiles] if len(record) >= width else ""
            t = record[i_target] if len(record) >= width else ""
            value, reason = _parse_target(t) if len(record) >= width else (None, "missing fields")
            if value is None:
                if on_invalid == "error":
                    if bad := _first_bad_smiles(smiles, rows):
                        b_row, b_smiles, b_reason = bad
                        detail = _smiles_detail(path, b_row, smiles_column, b_reason, b_smiles)
                    else:
                        detail = (f"{path}: row {row} (line {reader.line_num}): {reason} {t!r} "
                                  f"in column {target_column!r}")
                    raise InvalidRowError(detail, on_invalid_key)
                exclusions.append(Exclusion(row, s, t, reason))
                continue
            smiles.append(s)
            targets.append(value)
            rows.append(row)
    return MoleculeTable(
        smiles=smiles,
        targets=np.asarray(targets, dtype=np.float64),
        rows=np.asarray(rows, dtype=np.int64),
        path=path,
        smiles_column=smiles_column,
        target_column=target_column,
        on_invalid=on_invalid,
        sha256=sha256_file(path),
        exclusions=exclusions,
    )


# --------------------------------------------------------------------------- #
# Featurized dataset
# --------------------------------------------------------------------------- #


class MoleculeDataset(Dataset):
    """Graphs with their targets; item i is ``(graphs[i], targets[i])``.

    Attributes:
        graphs:  N :class:`MolGraph`.
        targets: (N,) float32 tensor.
        rows:    (N,) int64 tensor, file rows.
        smiles:  N strings.
        exclusions: every row left out (target or SMILES), sorted by row.
    """

    def __init__(
        self,
        graphs: list[MolGraph],
        targets: Tensor,
        rows: Tensor,
        smiles: list[str],
        exclusions: list[Exclusion] | None = None,
    ) -> None:
        if not (len(graphs) == len(targets) == len(rows) == len(smiles)):
            raise ValueError("graphs, targets, rows and smiles must have the same length")
        self.graphs, self.targets, self.rows, self.smiles = graphs, targets, rows, smiles
        self.exclusions = sorted(exclusions or [], key=lambda x: x.row)
        self._position = {int(r): i for i, r in enumerate(rows.tolist())}

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> tuple[MolGraph, float]:
        return self.graphs[i], float(self.targets[i])

    def subset(self, positions: Sequence[int] | np.ndarray | Tensor) -> MoleculeDataset:
        """Items at ``positions`` (dataset positions, not file rows)."""
        idx = torch.as_tensor(np.asarray(positions, dtype=np.int64))
        return MoleculeDataset(
            [self.graphs[i] for i in idx.tolist()],
            self.targets[idx],
            self.rows[idx],
            [self.smiles[i] for i in idx.tolist()],
        )

    def positions(self, rows: Sequence[int] | np.ndarray) -> tuple[np.ndarray, list[int]]:
        """Dataset positions of file ``rows``, and the rows that are not in the dataset."""
        found, missing = [], []
        for r in np.asarray(rows, dtype=np.int64).tolist():
            if r in self._position:
                found.append(self._position[r])
            else:
                missing.append(r)
        return np.asarray(found, dtype=np.int64), missing

    def select_rows(self, rows: Sequence[int] | np.ndarray, strict: bool = False) -> MoleculeDataset:
        """The items of file ``rows`` (e.g. a split). Excluded rows are dropped
        (logged); with ``strict`` a row not in the dataset is a :class:`DataError`."""
        pos, missing = self.positions(rows)
        if missing:
            message = (
                f"{len(missing)} of {len(pos) + len(missing)} requested rows are not in the "
                f"data set (first: row {missing[0]})"
            )
            if strict:
                raise DataError(message)
            log.warning("%s; they were excluded as invalid", message)
        return self.subset(pos)


def write_exclusions(exclusions: Sequence[Exclusion], path: str | Path) -> Path:
    """Write ``exclusions`` as a CSV with columns row, smiles, target, reason (atomically)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(EXCLUSION_COLUMNS)
    for x in sorted(exclusions, key=lambda x: x.row):
        writer.writerow([x.row, x.smiles, x.target, x.reason])
    path = Path(path)
    with atomic_write(path) as f:
        f.write(buf.getvalue().encode())
    return path


def featurize_smiles(
    smiles: Sequence[str],
    featurizer: MolFeaturizer,
    on_invalid: str = "error",
    labels: Sequence[str] | _RowLabels | None = None,
    on_invalid_key: str = "on_invalid",
) -> tuple[list[MolGraph], list[int], list[tuple[int, str]]]:
    """Graphs of the valid SMILES, their positions in ``smiles``, and (position, reason) of the rest.

    With ``on_invalid="error"`` the first invalid SMILES raises :class:`InvalidRowError`
    naming it by ``labels[i]`` (default ``"item i"``) and hinting ``on_invalid_key=skip``.
    """
    _check_on_invalid(on_invalid)
    graphs, kept, bad = [], [], []
    for i, s in enumerate(smiles):
        try:
            graphs.append(featurizer(parse_smiles(s)))
        except InvalidMolecule as err:
            if on_invalid == "error":
                label = labels[i] if labels is not None else f"item {i}"
                raise InvalidRowError(f"{label}: {err} {s!r}", on_invalid_key) from None
            bad.append((i, str(err)))
            continue
        kept.append(i)
    return graphs, kept, bad


def count_bondless(graphs: Sequence[MolGraph]) -> int:
    """How many of ``graphs`` have no bond (one heavy atom, as methane or water, or only
    single-atom ions).

    A walk of length n >= 2 needs a bond, so a WL kernel network's graph vector
    h_G = Σ_v c_n[v] is 0 for such a molecule: all of them get the one prediction of
    h_G = 0 (the paper's kernel has no walk of length 1). Models that read single atoms
    (NFP, ELBP) are not affected.
    """
    return sum(g.num_bonds == 0 for g in graphs)


def bondless_note(n: int, total: int, where: str) -> str:
    """The one-line warning for :func:`count_bondless`'s ``n`` of ``total`` molecules."""
    return (f"{where}: {n} of {total} molecules have no bond (e.g. one heavy atom); a WL "
            "kernel network (model=wln, wln_tuned, gated_wln) sees no walk in them and gives "
            "them all one prediction")


def _cache_key(table: MoleculeTable, featurizer: MolFeaturizer) -> str:
    material = json.dumps(
        {
            "format": CACHE_FORMAT,
            "sha256": table.sha256,
            "columns": [table.smiles_column, table.target_column],
            "on_invalid": table.on_invalid,
            "featurizer": featurizer.settings(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()


def _pack_rows(x: Tensor) -> dict[str, Tensor]:
    """A feature matrix for the cache: its distinct rows and one row id per row.

    Molecule feature rows repeat a lot (CEP's 829k atoms have 12 distinct
    rows). For 0/1 features the distinct rows are found on the bit-packed
    bytes, which is much faster than ``torch.unique(x, dim=0)``.
    """
    if x.shape[0] and bool(((x == 0) | (x == 1)).all()):
        packed = np.ascontiguousarray(np.packbits(x.numpy().astype(bool), axis=1))
        keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        return {"vocab": x[torch.from_numpy(first)], "ids": torch.from_numpy(inverse.astype(np.int32))}
    return {"dense": x}


def _unpack_rows(blob: dict[str, Tensor]) -> Tensor:
    return blob["dense"] if "dense" in blob else blob["vocab"][blob["ids"].long()]


def _pack(graphs: list[MolGraph]) -> dict:
    """Graphs as a few flat tensors."""
    return {
        "num_atoms": torch.tensor([g.num_atoms for g in graphs], dtype=torch.int64),
        "num_bonds": torch.tensor([g.num_bonds for g in graphs], dtype=torch.int64),
        "atom_features": _pack_rows(torch.cat([g.atom_features for g in graphs])),
        "bond_features": _pack_rows(torch.cat([g.bond_features for g in graphs])),
        "bond_index": torch.cat([g.bond_index for g in graphs]).to(torch.int32),
    }


def _unpack(blob: dict) -> list[MolGraph]:
    n_atoms, n_bonds = blob["num_atoms"].tolist(), blob["num_bonds"].tolist()
    atoms = _unpack_rows(blob["atom_features"]).split(n_atoms)
    bonds = _unpack_rows(blob["bond_features"]).split(n_bonds)
    index = blob["bond_index"].long().split(n_bonds)
    return [MolGraph(a, i, b) for a, i, b in zip(atoms, index, bonds)]


def _load_cache(path: Path, key: str) -> dict | None:
    if not path.is_file():
        return None
    try:
        blob = torch.load(path, weights_only=True)
        if blob.get("key") != key:
            raise ValueError("key differs from the data file and featurizer settings")
        return blob
    except Exception as err:  # any defect in a cache just means "rebuild"
        log.warning("rebuilding molecule cache %s: %s", path, " ".join(str(err).split()))
        return None


class _RowLabels:
    """``labels[i]`` names table item i by its file row, built only when an error needs it."""

    def __init__(self, table: MoleculeTable) -> None:
        self.table = table

    def __getitem__(self, i: int) -> str:
        t = self.table
        return f"{t.path}: row {int(t.rows[i])} (column {t.smiles_column!r})"


def featurize_table(
    table: MoleculeTable,
    featurizer: MolFeaturizer,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    on_invalid_key: str = "on_invalid",
) -> MoleculeDataset:
    """Parse and featurize every SMILES of ``table``, through the on-disk cache.

    Unparseable SMILES follow ``table.on_invalid`` (the error's hint names
    ``on_invalid_key``). ``cache_dir`` defaults to the data cache of
    :func:`knn.data.mirror.default_cache_dir`.
    """
    key = _cache_key(table, featurizer)
    cache_file = default_cache_dir(cache_dir) / "molecules" / f"graphs-{key[:16]}.pt"
    blob = _load_cache(cache_file, key) if use_cache else None
    if blob is None:
        labels = _RowLabels(table)
        graphs, kept, bad = featurize_smiles(table.smiles, featurizer, table.on_invalid, labels,
                                             on_invalid_key)
        blob = {"key": key, "kept": torch.tensor(kept, dtype=torch.int64), **_pack(graphs)}
        blob["bad_items"] = [i for i, _ in bad]
        blob["bad_reasons"] = [r for _, r in bad]
        if use_cache:
            try:
                with atomic_write(cache_file) as f:
                    torch.save(blob, f)
            except OSError as err:
                log.warning("could not write molecule cache %s: %s", cache_file, err)
    else:
        graphs = _unpack(blob)
    kept = blob["kept"]
    exclusions = list(table.exclusions) + [
        Exclusion(int(table.rows[i]), table.smiles[i], repr(float(table.targets[i])), reason)
        for i, reason in zip(blob["bad_items"], blob["bad_reasons"])
    ]
    if exclusions:
        log.warning("%s: skipped %d invalid rows (on_invalid=skip)", table.path, len(exclusions))
    return MoleculeDataset(
        graphs,
        torch.as_tensor(table.targets[kept.numpy()], dtype=torch.float32),
        torch.as_tensor(table.rows[kept.numpy()]),
        [table.smiles[i] for i in kept.tolist()],
        exclusions,
    )


# --------------------------------------------------------------------------- #
# Batches
# --------------------------------------------------------------------------- #


def collate(graphs: Sequence[MolGraph]) -> BatchMolGraph:
    """Graphs -> one :class:`BatchMolGraph`."""
    return BatchMolGraph.from_graphs(list(graphs))


def collate_items(items: Sequence[tuple[MolGraph, float]]) -> tuple[BatchMolGraph, Tensor]:
    """``(graph, target)`` items (a DataLoader's ``collate_fn``) -> (batch, (G,) float32 targets)."""
    graphs, targets = zip(*items)
    return collate(graphs), torch.tensor(targets, dtype=torch.float32)
