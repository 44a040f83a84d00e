"""knn.results: collecting result.json files and aggregating them over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.results import aggregate, collect, main, markdown


def result(task: str, variant: str, seed: int, valid: float, test: float, **extra) -> dict:
    metric = {"sst": "acc", "ptb": "ppl"}[task]
    return {"task": task, "variant": variant, "model": "m", "metric": metric, "seed": seed,
            "metrics": {"valid": {metric: valid}, "test": {metric: test}},
            "wall_seconds": 60.0 * (seed + 1), "epochs": 3, "stop_reason": "patience",
            "budgeted": False, "device": "cpu", "command": f"python -m knn.train seed={seed}",
            "paper": {"value": 53.2}, "config": {"task": {}}, **extra}


def write_runs(root: Path, runs: list[dict]) -> Path:
    for i, r in enumerate(runs):
        d = root / r["variant"] / f"run{i}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r))
    return root


SST_RUNS = [  # seed: (valid, test); the best valid (seed 1) is not the best test (seed 2)
    result("sst", "gated_fine", 2, 50.0, 54.0),
    result("sst", "gated_fine", 0, 51.0, 52.0),
    result("sst", "gated_fine", 1, 53.0, 53.0),
    result("sst", "gated_fine", 3, 53.0, 50.0),  # ties seed 1 on valid: the lower seed wins
]


def test_aggregate_selects_on_valid_and_reports_best_test_and_spread(tmp_path: Path) -> None:
    [g] = aggregate(collect(write_runs(tmp_path, SST_RUNS)))
    assert (g["task"], g["variant"], g["n_runs"]) == ("sst", "gated_fine", 4)
    assert g["seeds"] == [0, 1, 2, 3]
    assert g["selected"] == {"test": 53.0, "valid": 53.0, "seed": 1}
    assert g["best_test"] == {"test": 54.0, "seed": 2}
    assert g["test_mean"] == pytest.approx(52.25)
    assert g["test_std"] == pytest.approx(1.707825, abs=1e-6)  # sample std (n - 1)
    assert g["wall_seconds"] == {"mean": 150.0, "min": 60.0, "max": 240.0}
    assert [r["command"] for r in g["runs"]] == [f"python -m knn.train seed={s}" for s in range(4)]
    assert g["protocol"] == "full" and g["paper"] == {"value": 53.2}


def test_lower_is_better_metrics_and_groups(tmp_path: Path) -> None:
    runs = [result("ptb", "gated_5m", 0, 80.0, 78.0), result("ptb", "gated_5m", 1, 79.0, 77.5,
                                                               budgeted=True, budget_minutes=30),
            result("sst", "gated_binary", 0, 90.0, 89.0)]
    rows = {g["variant"]: g for g in aggregate(runs_with_dirs(runs))}
    ptb = rows["gated_5m"]
    assert not ptb["higher_is_better"] and ptb["selected"]["seed"] == 1
    assert ptb["best_test"]["test"] == 77.5 and ptb["protocol"] == "budgeted 30 min, full"
    assert rows["gated_binary"]["test_std"] is None  # one run: no spread


def runs_with_dirs(runs: list[dict]) -> list[dict]:
    return [{**r, "run_dir": f"d{i}"} for i, r in enumerate(runs)]


def test_markdown_and_cli_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_runs(tmp_path / "runs", SST_RUNS)
    assert main([str(root), "--out", str(tmp_path / "out" / "table2"), "--title", "Table 2"]) == 0
    md = (tmp_path / "out" / "table2.md").read_text()
    assert md == capsys.readouterr().out and md.startswith("## Table 2\n")
    row = next(line for line in md.splitlines() if line.startswith("| sst"))
    assert "| 53.00 (seed 1) | 54.00 (seed 2) | 52.25 ± 1.71 |" in row and "| 53.2 |" in row
    assert "2.5 (1.0-4.0)" in row  # wall minutes per run: mean (min-max)
    assert "`python -m knn.train seed=3`" in md
    data = json.loads((tmp_path / "out" / "table2.json").read_text())
    assert data["title"] == "Table 2" and data["groups"][0]["best_test"]["seed"] == 2
    assert markdown([]).startswith("| task |")


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no result.json" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere")]) == 1
    assert "no such file" in capsys.readouterr().err
