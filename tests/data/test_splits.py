"""Train/valid/test splits: split files, split columns, random splits and their checks."""
import csv
import json

import numpy as np
import pytest

from knn.data.mirror import DataError
from knn.data.splits import check_split, column_split, load_split, random_split, read_split_column


def write_csv(path, rows, header=("smiles", "y", "fold")):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_splits(tmp_path):
    s = random_split(10, seed=1)
    assert sorted(np.concatenate(list(s.values())).tolist()) == list(range(10))
    assert [len(s[k]) for k in ("train", "valid", "test")] == [8, 1, 1]
    assert all((random_split(10, seed=1)[k] == s[k]).all() for k in s)
    (tmp_path / "s.json").write_text(json.dumps({"train": [0, 2], "valid": [1], "test": [3]}))
    assert load_split(tmp_path / "s.json")["train"].tolist() == [0, 2]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataError, match="cannot read split file"):
        load_split(tmp_path / "bad.json")


def test_split_column_accepts_synonyms_in_any_case(tmp_path):
    path = write_csv(tmp_path / "m.csv", [("C", "1", "train"), ("CC", "2", "Valid"), ("CCC", "3", " dev "),
                                          ("CCO", "4", "TEST"), ("CCN", "5", "val")])
    assert read_split_column(path, "fold") == {0: "train", 1: "valid", 2: "valid", 3: "test", 4: "valid"}
    split = column_split(path, "fold")
    assert {k: v.tolist() for k, v in split.items()} == {"train": [0], "valid": [1, 2, 4], "test": [3]}


def test_split_column_errors_are_one_line(tmp_path):
    path = write_csv(tmp_path / "m.csv", [("C", "1", "train"), ("CC", "2", "holdout")])
    with pytest.raises(DataError, match=r"row 1 \(line 3\): split value 'holdout' in column 'fold'"):
        read_split_column(path, "fold")
    with pytest.raises(DataError, match="no split column 'part'; columns present: smiles, y, fold"):
        read_split_column(path, "part")


def test_check_split_rejects_unknown_and_shared_rows():
    split = {"train": np.array([0, 1]), "valid": np.array([2]), "test": np.array([3])}
    check_split(split, range(4), "file s.json", "m.csv")
    with pytest.raises(DataError, match="^split file s.json: test names row 3, which is not a data "
                                        "row of m.csv$"):
        check_split(split, range(3), "file s.json", "m.csv")
    split["test"] = np.array([1])
    with pytest.raises(DataError, match="row 1 is in more than one split"):
        check_split(split, range(4), "file s.json", "m.csv")
