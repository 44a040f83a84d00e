"""knn.tools.study: a factor study's runs against its base run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.tools.study import main, markdown, rows


def run(readout: str, resample: bool, seed: int, valid: float, test: float) -> dict:
    config = {"seed": seed, "threads": 1, "run_dir": f"/runs/{readout}",
              "task": {"name": "cep", "resample": resample, "samples_per_epoch": 24000},
              "model": {"name": "wln", "readout": readout}}
    return {"task": "cep", "variant": "wln", "metric": "rmse", "seed": seed, "config": config,
            "metrics": {"valid": {"rmse": valid, "mae": valid / 2}, "test": {"rmse": test, "mae": test / 2}},
            "wall_seconds": 1800.0, "epochs": 51, "git_commit": "abc",
            "command": f"python -m knn.train model.readout={readout}",
            "extra": {"throughput": {"molecules_per_second": 700.0}}}


def study(tmp_path: Path) -> Path:
    for name, r in {"base": run("last", True, 0, 1.03, 1.12),
                    "readout_sum": run("sum", True, 0, 0.99, 1.10),
                    "resample_off": run("last", False, 1, 0.95, 0.96)}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(r))
    return tmp_path


def test_factors_are_config_changes_from_the_base_best_valid_first(tmp_path: Path) -> None:
    table = rows(study(tmp_path))
    assert [r["run"] for r in table] == ["resample_off", "readout_sum", "base"]  # lower RMSE first
    factors = {r["run"]: r["factor"] for r in table}
    # the seed differs too, but a seed is not a factor; run_dir and threads never are
    assert factors == {"base": "base", "readout_sum": "model.readout=sum",
                       "resample_off": "task.resample=false"}
    assert table[0]["valid_change"] == pytest.approx(0.95 - 1.03)
    text = markdown(table)
    assert "| readout_sum | `model.readout=sum` | 0.4950 | 0.9900 | 0.5500 | 1.1000 | -0.0400 |" in text


def test_needs_exactly_one_base(tmp_path: Path, capsys) -> None:
    study(tmp_path)
    assert main([str(tmp_path), "--base", "nothing"]) == 1
    assert "expected one run in a folder named 'nothing'" in capsys.readouterr().err
    assert main([str(tmp_path), "--out", str(tmp_path / "table")]) == 0
    saved = json.loads((tmp_path / "table.json").read_text())
    assert saved["runs"][0]["run"] == "resample_off"
    assert saved["command"].startswith("python -m knn.tools.study ") and "git_commit" in saved
