"""Table 2 judged from result.json files: the declared targets and orderings (judged by
knn.tools.judge, tests/tools/test_judge.py) between rows of one protocol and vector file, and
the authors' 5-point stopping rule read from each run's metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knn.tools import sst_table
from knn.tools.sst_table import falls, main

GLOVE = "vectors/glove.6B.50d.sst-vocab.txt.gz"


def result(variant: str, seed: int, valid: float, test: float, run_dir: str = "",
           protocol: str = "full", vectors: str = GLOVE, best_epoch: int = 3) -> dict:
    model = "knn_sst" if variant.startswith(("gated_", "const_")) else variant.rsplit("_", 1)[0]
    return {"task": "sst", "model": model, "variant": variant, "seed": seed,
            "params": 1000, "metric": "acc", "protocol": protocol,
            "metrics": {"valid": {"acc": valid}, "test": {"acc": test}},
            "epochs": 10, "best_epoch": best_epoch, "stop_reason": "patience",
            "wall_seconds": 60.0, "device": "cpu", "run_dir": run_dir or f"/runs/{variant}/{seed}",
            "extra": {"vectors": {"file": vectors}}}


def five(variant: str, tests: list[float]) -> list[dict]:
    return [result(variant, s, 80.0 + s, t) for s, t in enumerate(tests)]


def write_metrics(run_dir: Path, valid: list[float], partial_at: int | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"epoch": e, "partial": False, "valid": {"acc": v}} for e, v in enumerate(valid)]
    if partial_at is not None:  # a budget-cut epoch's row, whose dev score is not an epoch's
        rows.insert(partial_at, {"epoch": partial_at, "partial": True, "valid": {"acc": 0.0}})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_falls_follow_the_authors_rule_on_whole_epochs(tmp_path: Path) -> None:
    run_dir = tmp_path / "bilstm_binary" / "seed0"
    # best 80 at epoch 1; 74.9 at epoch 3 is 5.1 below it (cut); 78 at epoch 4 is 2 below
    write_metrics(run_dir, [70.0, 80.0, 76.0, 74.9, 78.0, 81.0], partial_at=2)
    f = falls(result("bilstm_binary", 0, 81.0, 79.0, run_dir=str(run_dir), best_epoch=5))
    assert f["largest_fall"] == pytest.approx(5.1) and f["epoch"] == 3
    assert f["cut_after"] == 3 and f["best_epoch"] == 5 and f["epochs"] == 6

    gated = tmp_path / "gated_binary" / "seed0"
    write_metrics(gated, [80.0, 75.0, 81.0])  # exactly 5 below: the rule needs more than 5
    g = falls(result("gated_binary", 0, 81.0, 80.0, run_dir=str(gated)))
    assert g["largest_fall"] == pytest.approx(5.0) and g["cut_after"] is None
    assert falls(result("gated_fine", 0, 1.0, 1.0, run_dir=str(tmp_path / "none"))) is None

    lines = sst_table.falls_lines([g, f])
    assert lines[0].startswith("- Kernel NN runs (1): the largest fall below the best so far "
                               "is 5.00 points (gated_binary seed 0, epoch 1)")
    assert lines[0].endswith("would have stopped none of them.")
    assert "bilstm_binary seed 0 after epoch 3 (its best dev came at epoch 5)" in lines[1]


def test_cli_writes_the_judgement_and_fails_without_runs(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    runs = (five("gated_fine", [44.0, 44.2, 43.8, 44.1, 43.9]) + five("kim_cnn_fine", [41.0] * 5)
            + [result("bilstm_fine", 0, 80.0, 49.0, vectors="vectors/other.txt"),
               result("const_fine", 0, 80.0, 45.0, protocol="cut at 3 epochs")])
    for r in runs:
        run_dir = tmp_path / "runs" / r["variant"] / f"seed{r['seed']}"
        write_metrics(run_dir, [40.0, 44.0, 43.0])
        (run_dir / "result.json").write_text(json.dumps({**r, "run_dir": None}))
    out = tmp_path / "judged"
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = out.with_suffix(".md").read_text()
    assert text == capsys.readouterr().out
    # sst/gated_fine's declared target and ordering (conf/experiment/sst/gated_fine.yaml)
    assert ("best of 5 44.20 (seed 1) at or above the project's bound (limit 48.00): **not met**"
            in text)
    payload = json.loads(out.with_suffix(".json").read_text())
    assert payload["command"].startswith("python -m knn.tools.sst_table")
    # other vectors and another protocol are other labels: only Kim CNN is compared
    assert [(o["better"], o["worse"], o["verdict"]) for o in payload["ordering"]] == [
        ("sst/gated_fine", "sst/kim_cnn_fine", "ahead")]
    assert len(payload["falls"]) == 12 and payload["falls"][0]["largest_fall"] == 1.0
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 1
    assert "no task=sst result.json" in capsys.readouterr().err
