"""Table 3 rows from result.json files: order, selection over seeds, the paper's ordering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.tools import cep_table
from knn.tools.cep_table import chemprop_reference, main, ordering, table, versus_chemprop


def result(variant: str, valid: float, test: float, seed: int = 0, **extra) -> dict:
    fitted = variant in ("mean", "wl_kernel")
    return {
        "task": "cep", "model": variant, "variant": variant, "seed": seed,
        "params": 0 if fitted else 260_000, "metric": "rmse",
        "metrics": {"valid": {"rmse": valid, "mae": valid / 2}, "test": {"rmse": test, "mae": test / 2}},
        "epochs": 1 if fitted else 51, "steps": 0 if fitted else 255_000, "best_epoch": 0,
        "stop_reason": "max_epochs", "budgeted": False, "budget_minutes": None,
        "wall_seconds": 120.0, "device": "cpu", "git_commit": "abc",
        "command": f"python -m knn.train experiment=cep/{variant}",
        "paper": {"table": "Table 3", "row": variant.upper(), "value": 0.1},
        "config": {"task": {"limit_train_batches": None, "limit_eval_batches": None}},
        "extra": {"throughput": {"molecules_per_second": None if fitted else 700.0}, **extra},
    }


def write(root: Path, name: str, r: dict) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "result.json").write_text(json.dumps(r))


def test_rows_in_table_order_best_valid_seed_and_ordering(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [result("gated_wln", 0.50, 0.51), result("wln", 0.52, 0.53), result("elbp", 0.6, 0.61),
            result("nfp", 0.7, 0.71), result("mean", 2.5, 2.57, fitted_parameters=1),
            result("wl_kernel", 1.5, 1.58, fitted_parameters=46_255),
            result("wln", 0.51, 0.60, seed=1)]  # better valid, worse test: selected
    for i, r in enumerate(runs):
        write(tmp_path, f"run{i}", r)
    write(tmp_path, "sst", {**result("wln", 0.1, 0.1), "task": "sst"})  # not a CEP run: ignored
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "reported.json").write_text(json.dumps(
        {"name": "chemprop test", "test_rmse": 0.925, "test_mae": 0.401, "params": 318_000,
         "molecules_per_second": 730}))
    monkeypatch.setattr(cep_table, "PEER_DIR", peers)
    real_provenance, md_written = cep_table.provenance, []
    monkeypatch.setattr(cep_table, "provenance", lambda command: md_written.append(
        (tmp_path / "out" / "table3.md").exists()) or real_provenance(command))
    assert main([str(tmp_path), "--out", str(tmp_path / "out" / "table3")]) == 0
    assert md_written == [False]  # the commit is read before the rewritten table dirties the tree
    data = json.loads((tmp_path / "out" / "table3.json").read_text())
    rows = data["rows"]
    assert [r["variant"] for r in rows] == ["mean", "wl_kernel", "nfp", "elbp", "wln", "gated_wln"]
    wln = rows[4]
    assert (wln["seed"], wln["test_rmse"], wln["n_runs"]) == (1, 0.60, 2)
    assert rows[1]["params"] == 46_255 and rows[1]["closed_form"]
    assert data["ordering"]["holds"] is True  # 0.51 ≤ 0.60 < 0.61 < 0.71 < 2.57
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "| WL_KERNEL | wl_kernel | 1.5800 |" in md and "46,255 (fitted)" in md and "**holds**" in md
    # WLN 0.60 ≤ chemprop's 0.925 but 700 < 730 molecules/s
    assert data["versus_reference"] == {"test_rmse": [0.60, 0.925], "rmse_holds": True,
                                        "molecules_per_second": [700.0, 730],
                                        "throughput_holds": False, "holds": False}
    assert "WLN: **not met**: test RMSE 0.6000 vs 0.925 (yes), 700 vs 730 molecules/s (NO)." in md


def test_ordering_reports_failures_and_missing_rows() -> None:
    rows = table([result("gated_wln", 0.5, 0.7), result("wln", 0.5, 0.6)])
    order = ordering(rows)
    assert not order["complete"] and not order["holds"]
    assert order["checks"] == [{"pair": "gated_wln ≤ wln", "holds": False, "values": [0.7, 0.6]}]
    ref = {"test_rmse": 0.925, "molecules_per_second": 730}
    assert versus_chemprop(table([result("nfp", 0.5, 0.5)]), ref) is None
    assert versus_chemprop(rows, None) is None  # no reference file: nothing to judge
    assert versus_chemprop(rows, ref)["holds"] is False  # 700 molecules/s < 730


def test_chemprop_reference_prefers_the_peer_run(tmp_path: Path) -> None:
    """The measured peer run (result.json) replaces the reported numbers; none: None."""
    assert chemprop_reference(tmp_path) is None
    (tmp_path / "reported.json").write_text(json.dumps({"test_rmse": 0.93, "params": 1}))
    assert chemprop_reference(tmp_path)["origin"].startswith("reported")
    (tmp_path / "result.json").write_text(json.dumps({"test_rmse": 0.91, "params": 1,
                                                      "chemprop_version": "2.3.1"}))
    ref = chemprop_reference(tmp_path)
    assert (ref["test_rmse"], ref["origin"]) == (0.91, "measured by make peer-chemprop")
    assert ref["name"] == "chemprop 2.3.1 default D-MPNN"


def test_committed_reference_file_is_read() -> None:
    ref = chemprop_reference()
    assert ref is not None and ref["params"] == 318_301 and ref["test_rmse"] < 1


def test_no_runs_is_an_error(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no task=cep result.json" in capsys.readouterr().err
