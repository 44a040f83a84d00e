"""experiments/peers/chemprop/run.py without chemprop: reading a CSV and a split, the
refusals that come before any install, and the input files written for chemprop."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "peers" / "chemprop" / "run.py"
TRAINER_SPLIT = REPO / "experiments" / "studies" / "mol_csv_cmet" / "wln" / "split.json"


def load_run() -> ModuleType:
    # a script, not a package module: loaded from its path (it needs only the standard library)
    spec = importlib.util.spec_from_file_location("peer_chemprop_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = load_run()
ROWS = {"train": [0, 2, 3, 5], "valid": [1], "test": [4, 6]}


def write_csv(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def mol_csv(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "mols.csv", ["smiles,id,y"] + [f"{'C' * (i + 1)},m{i},{i / 2}" for i in range(8)])


def test_mirror_and_trainer_split_files_read_alike(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror.json"
    mirror.write_text(json.dumps({"description": "Random 80/10/10 split of the rows of x.csv", **ROWS}))
    trainer = tmp_path / "split.json"
    trainer.write_text(json.dumps({"description": "0-based data rows of x.csv; split random", **ROWS}))
    expected = {"train": ROWS["train"], "val": ROWS["valid"], "test": ROWS["test"]}
    assert run.read_split(mirror, 8) == run.read_split(trainer, 8) == expected


def test_the_committed_trainer_split_reads() -> None:
    split = run.read_split(TRAINER_SPLIT, 1017)  # data/cmet/cmet_pic50.csv has 1,017 rows
    assert [len(split[k]) for k in ("train", "val", "test")] == [813, 101, 103]


@pytest.mark.parametrize(
    "content",
    [
        json.dumps([ROWS]),  # chemprop's own splits-file list, not a split JSON
        json.dumps({"train": [0], "val": [1], "test": [2]}),
        json.dumps({"train": [0], "valid": [], "test": [2]}),
        json.dumps({"train": "0-3", "valid": [4], "test": [5]}),
        "{not json",
    ],
)
def test_malformed_split_is_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(run.PeerError) as err:
        run.read_split(path, 8)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert "train, valid, test" in message


def test_split_outside_the_csv_or_overlapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    path.write_text(json.dumps({**ROWS, "test": [4, 8]}))
    with pytest.raises(run.PeerError, match="outside 0..7"):
        run.read_split(path, 8)
    path.write_text(json.dumps({**ROWS, "test": [4, 5]}))
    with pytest.raises(run.PeerError, match="overlaps"):
        run.read_split(path, 8)


def test_other_data_needs_out_before_any_install(tmp_path: Path) -> None:
    data, split = mol_csv(tmp_path), tmp_path / "split.json"
    split.write_text(json.dumps(ROWS))
    for argv in (
        ["--data-path", str(data), "--split", str(split), "--target-column", "y"],
        ["--split", str(split)],
    ):
        with pytest.raises(run.PeerError, match="need --out") as err:
            run.main(argv)
        assert "\n" not in str(err.value)
    with pytest.raises(run.PeerError, match="needs --split"):
        run.main(["--data-path", str(data), "--out", str(tmp_path / "out")])
    with pytest.raises(run.PeerError, match="CEP measurement"):
        run.main(["--data-path", str(data), "--split", str(split), "--out", str(run.HERE)])


def test_columns_and_targets_are_read(tmp_path: Path) -> None:
    smiles, targets = run.read_targets(mol_csv(tmp_path), "smiles", "y")
    assert smiles == ["C" * (i + 1) for i in range(8)]
    assert targets == [i / 2 for i in range(8)]
    with pytest.raises(run.PeerError, match="expected columns smiles,pic50"):
        run.read_targets(tmp_path / "mols.csv", "smiles", "pic50")


@pytest.mark.parametrize("value", ["abc", "", "nan"])
def test_non_numeric_target_names_its_row(tmp_path: Path, value: str) -> None:
    path = write_csv(tmp_path / "mols.csv", ["smiles,pic50", "C,5.1", "CC,6.0", f"CCC,{value}", "CCCC,4"])
    with pytest.raises(run.PeerError) as err:
        run.read_targets(path, "smiles", "pic50")
    message = str(err.value)
    assert "\n" not in message
    assert f"row 2 (line 4): target {value!r} in column 'pic50'" in message


def test_blank_line_inside_the_data_is_refused(tmp_path: Path) -> None:
    # a trailing blank line numbers no row after it, so it is harmless
    assert run.read_targets(write_csv(tmp_path / "a.csv", ["smiles,PCE", "C,1", ""]))[1] == [1.0]
    with pytest.raises(run.PeerError, match="blank line 3 before row 1"):
        run.read_targets(write_csv(tmp_path / "b.csv", ["smiles,PCE", "C,1", "", "CC,2"]))


def test_chemprop_inputs_carry_the_split_rows(tmp_path: Path) -> None:
    split_json = tmp_path / "split.json"
    split_json.write_text(json.dumps({"description": "trainer", **ROWS}))
    smiles, _ = run.read_targets(mol_csv(tmp_path), "smiles", "y")
    split = run.read_split(split_json, len(smiles))
    splits_path, test_path = run.write_chemprop_inputs(tmp_path / "work", split, smiles, "smiles")
    assert json.loads(splits_path.read_text()) == [{"train": [0, 2, 3, 5], "val": [1], "test": [4, 6]}]
    with open(test_path, newline="") as f:
        assert list(csv.reader(f)) == [["row", "smiles"], ["4", "CCCCC"], ["6", "CCCCCCC"]]


def test_score_reads_the_target_named_column(tmp_path: Path) -> None:
    # chemprop predict names its prediction column after the training target (y here)
    preds = write_csv(tmp_path / "preds.csv", ["row,smiles,y", "4,CCCCC,2.5", "6,CCCCCCC,2.5"])
    metrics = run.score(preds, [i / 2 for i in range(8)], [4, 6], "y")  # targets 2.0, 3.0
    assert metrics == {"test_rmse": 0.5, "test_mae": 0.5, "test_molecules": 2}
