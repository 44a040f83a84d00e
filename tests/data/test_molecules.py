"""Molecule CSVs: invalid rows, the featurized cache and batches."""
import csv
import logging

import pytest
import torch

import knn.data.molecules as molecules
from knn.data.mirror import DataError
from knn.data.molecules import (
    InvalidRowError,
    collate_items,
    featurize_table,
    load_molecule_csv,
    write_exclusions,
)
from knn.featurize import BatchMolGraph, MolFeaturizer

F = MolFeaturizer.preset("authors")


def write_csv(path, rows, header=("smiles", "PCE")):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


GOOD = [("CCO", "1.5"), ("c1ccccc1", "-0.25"), ("c1ccncc1", "0"), ("c1ccc([se]1)-c1cc2ccccc2cn1", "7.25")]


def test_load_valid_csv(tmp_path):
    t = load_molecule_csv(write_csv(tmp_path / "m.csv", GOOD))
    assert t.smiles == [s for s, _ in GOOD] and t.targets.tolist() == [1.5, -0.25, 0.0, 7.25]
    assert t.rows.tolist() == [0, 1, 2, 3] and not t.exclusions and len(t.sha256) == 64


def test_missing_column_names_it_and_the_columns_present(tmp_path):
    path = write_csv(tmp_path / "m.csv", GOOD)
    with pytest.raises(DataError) as err:
        load_molecule_csv(path, target_column="gap")
    msg = str(err.value)
    assert "'gap'" in msg and "smiles, PCE" in msg and "\n" not in msg


@pytest.mark.parametrize("value, reason", [("", "empty target"), ("abc", "non-numeric target"), ("nan", "non-finite"), ("-inf", "non-finite")])
def test_invalid_target_stops_with_one_line(tmp_path, value, reason):
    path = write_csv(tmp_path / "m.csv", GOOD[:2] + [("CC", value)] + GOOD[2:])
    with pytest.raises(DataError) as err:
        load_molecule_csv(path)
    msg = str(err.value)
    assert "row 2 (line 4)" in msg and reason in msg and repr(value) in msg and "\n" not in msg


def test_invalid_smiles_stops_with_one_line(tmp_path):
    path = write_csv(tmp_path / "m.csv", GOOD[:3] + [("C1CC(", "2.0")] + GOOD[3:])
    table = load_molecule_csv(path)  # targets are fine; SMILES are parsed when featurizing
    with pytest.raises(DataError) as err:
        featurize_table(table, F, tmp_path / "cache")
    msg = str(err.value)
    assert "row 3" in msg and "unparseable SMILES 'C1CC('" in msg and "\n" not in msg


def _rows_with(bad: dict[int, tuple[str, str]], n: int = 1010) -> list[tuple[str, str]]:
    """``n`` valid rows, with ``bad[row]`` in place of those rows."""
    return [bad.get(i, GOOD[i % len(GOOD)]) for i in range(n)]


@pytest.mark.parametrize("first, later, message", [
    ((10, ("C1CC(", "1.0")), (1003, ("CCO", "")), "row 10 (column 'smiles'): unparseable SMILES 'C1CC('"),
    ((10, ("CCO", "")), (1003, ("C1CC(", "1.0")), "row 10 (line 12): empty target '' in column 'PCE'"),
])
def test_error_names_the_first_invalid_row_in_file_order(tmp_path, first, later, message):
    """A bad SMILES at row 10 and an empty target at row 1003 (or the other way round):
    the error is row 10's, whatever the kind of either problem."""
    path = write_csv(tmp_path / "m.csv", _rows_with(dict([first, later])))
    with pytest.raises(InvalidRowError) as err:
        featurize_table(load_molecule_csv(path), F, tmp_path / "cache")
    assert str(err.value) == f"{path}: {message}; set on_invalid=skip to leave such rows out"


def test_skip_counts_both_kinds_in_file_order(tmp_path):
    path = write_csv(tmp_path / "m.csv", _rows_with({10: ("C1CC(", "1.0"), 1003: ("CCO", "")}))
    data = featurize_table(load_molecule_csv(path, on_invalid="skip"), F, tmp_path / "cache")
    assert [(x.row, x.reason) for x in data.exclusions] == [
        (10, "unparseable SMILES"), (1003, "empty target")]
    assert len(data) == 1008


@pytest.mark.parametrize("bad", [("C1CC(", "1.0"), ("CCO", "nan")])
def test_hint_names_the_callers_key(tmp_path, bad):
    """The hint spells the setting as the caller's command does (knn.train: task.data.on_invalid)."""
    path = write_csv(tmp_path / "m.csv", GOOD + [bad])
    with pytest.raises(InvalidRowError) as err:
        table = load_molecule_csv(path, on_invalid_key="task.data.on_invalid")
        featurize_table(table, F, tmp_path / "cache", on_invalid_key="task.data.on_invalid")
    assert str(err.value).endswith("; set task.data.on_invalid=skip to leave such rows out")
    assert err.value.key == "task.data.on_invalid"
    again = err.value.with_key("other.on_invalid")
    assert str(again) == f"{err.value.detail}; set other.on_invalid=skip to leave such rows out"
    assert isinstance(again, DataError)


def test_skip_counts_and_writes_exclusions(tmp_path, caplog):
    rows = [GOOD[0], ("C1CC(", "2.0"), ("CC", "nan"), GOOD[1], ("", "1.0"), ("CCN", "x"), GOOD[2]]
    table = load_molecule_csv(write_csv(tmp_path / "m.csv", rows), on_invalid="skip")
    assert len(table) == 5 and [x.row for x in table.exclusions] == [2, 5]
    with caplog.at_level(logging.WARNING):
        data = featurize_table(table, F, tmp_path / "cache")
    assert "skipped 4 invalid rows" in caplog.text
    assert len(data) == 3 and data.rows.tolist() == [0, 3, 6]
    assert [(x.row, x.reason) for x in data.exclusions] == [
        (1, "unparseable SMILES"), (2, "non-finite target"), (4, "empty SMILES"), (5, "non-numeric target"),
    ]
    out = write_exclusions(data.exclusions, tmp_path / "run" / "exclusions.csv")
    written = list(csv.reader(open(out)))
    assert written[0] == ["row", "smiles", "target", "reason"]
    assert written[1] == ["1", "C1CC(", "2.0", "unparseable SMILES"] and written[3] == ["4", "", "1.0", "empty SMILES"]
    # a split naming excluded rows keeps the valid ones
    assert data.select_rows([0, 1, 6]).rows.tolist() == [0, 6]
    with pytest.raises(DataError, match="1 of 3 requested rows"):
        data.select_rows([0, 1, 6], strict=True)


def test_cache_is_reused_plain_and_keyed(tmp_path, monkeypatch):
    path = write_csv(tmp_path / "m.csv", GOOD)
    table = load_molecule_csv(path)
    first = featurize_table(table, F, tmp_path / "cache")
    files = list((tmp_path / "cache" / "molecules").glob("graphs-*.pt"))
    assert len(files) == 1
    blob = torch.load(files[0], weights_only=True)  # plain data
    assert blob["atom_features"]["vocab"].shape[1] == 82

    def no_featurizing(*a, **k):
        raise AssertionError("featurized again instead of reading the cache")

    monkeypatch.setattr(molecules, "featurize_smiles", no_featurizing)
    again = featurize_table(table, F, tmp_path / "cache")
    for a, b in zip(first.graphs, again.graphs):
        assert torch.equal(a.atom_features, b.atom_features) and torch.equal(a.bond_index, b.bond_index)
        assert torch.equal(a.bond_features, b.bond_features)
    assert torch.equal(first.targets, again.targets)
    monkeypatch.undo()
    # other featurizer settings or other file contents: another cache entry
    featurize_table(table, MolFeaturizer.preset("duvenaud"), tmp_path / "cache")
    write_csv(path, GOOD[:3])
    featurize_table(load_molecule_csv(path), F, tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "molecules").glob("graphs-*.pt"))) == 3


def test_corrupt_cache_is_rebuilt(tmp_path, caplog):
    table = load_molecule_csv(write_csv(tmp_path / "m.csv", GOOD))
    featurize_table(table, F, tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache" / "molecules").glob("graphs-*.pt")
    cache_file.write_bytes(b"not a torch file")
    with caplog.at_level(logging.WARNING):
        data = featurize_table(table, F, tmp_path / "cache")
    assert "rebuilding molecule cache" in caplog.text and len(data) == 4


def test_dataset_items_and_collate(tmp_path):
    data = featurize_table(load_molecule_csv(write_csv(tmp_path / "m.csv", GOOD)), F, tmp_path / "c")
    batch, y = collate_items([data[i] for i in (3, 0)])
    assert isinstance(batch, BatchMolGraph) and batch.num_graphs == 2
    assert y.tolist() == [7.25, 1.5] and batch.num_atoms == 15 + 3
