"""knn.tools.compare: the verdict respects both sides' spread; trainer and peer files alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.tools import compare


def side(*values: float) -> dict:
    return compare.summary(list(values), higher_is_better=False)


def test_verdict_uses_the_larger_std() -> None:
    ours, peer = side(0.90, 0.94, 0.98), side(0.92, 0.93, 0.94)  # stds 0.04 and 0.01
    assert compare.verdict(ours, peer, False) == "within the spread"  # 0.01 apart <= 0.04
    assert compare.verdict(side(0.50, 0.52), side(0.67, 0.68), False) == "ahead"
    assert compare.verdict(side(0.67, 0.68), side(0.50, 0.52), False) == "behind"
    assert compare.verdict(side(0.5), side(0.6), False) == "ahead (one run each, no spread measured)"
    assert compare.verdict(side(0.5), side(0.6), True) == "behind (one run each, no spread measured)"
    # One side of one run: the other side's std (0.01) stands in, and the verdict says so.
    assert compare.verdict(side(0.50), side(0.60, 0.62), False) == \
        "ahead (spread measured on one side only)"
    assert compare.verdict(side(0.605), side(0.60, 0.62), False) == \
        "within the spread (spread measured on one side only)"


def test_summary_and_line() -> None:
    s = side(0.5337, 0.4897, 0.5170)
    assert s["n"] == 3 and s["best"] == 0.4897 and s["mean"] == pytest.approx(0.51346667)
    assert s["std"] == pytest.approx(0.022212, abs=1e-6)
    text = compare.line("WLN", s, "chemprop", side(0.6724), "test_rmse", False)
    assert text == ("test_rmse (lower is better): WLN 0.5135 ± 0.0222 (n=3; best 0.4897) "
                    "against chemprop 0.6724 (n=1): **ahead (spread measured on one side only)**")


def test_cli_reads_trainer_and_peer_results(tmp_path: Path, capsys) -> None:
    for seed, rmse in enumerate((0.50, 0.52)):
        (tmp_path / "a" / f"seed{seed}").mkdir(parents=True)
        (tmp_path / "a" / f"seed{seed}" / "result.json").write_text(
            json.dumps({"metrics": {"test": {"rmse": rmse}}}))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "result.json").write_text(json.dumps({"test_rmse": 0.67}))
    out = tmp_path / "cmp"
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"),
                         "--names", "ours", "peer", "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    [c] = data["comparisons"]
    assert c["verdict"] == "ahead (spread measured on one side only)"
    assert c["a"]["n"] == 2 and c["b"]["values"] == [0.67]
    assert "ours 0.5100 ± 0.0141 (n=2; best 0.5000) against peer 0.6700 (n=1)" in capsys.readouterr().out
    assert data["where"] == [["not recorded"], ["not recorded"]]  # the fakes record no device
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "nowhere")]) == 1
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"),
                         str(tmp_path / "nowhere")]) == 1  # not silently left out
    assert "no such folder or file" in capsys.readouterr().err
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"),
                         "--metric", "test_mae"]) == 1  # a one-line error, no traceback


def test_per_epoch_table_and_run_sizes(tmp_path: Path, capsys) -> None:
    curves = {"a": [100.0, 90.0, 85.5], "b": [110.0, 95.25]}  # b stopped after two epochs
    for name, values in curves.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(
            {"seed": 0, "metrics": {"test": {"ppl": values[-1]}}, "epochs": len(values),
             "steps": 830 * len(values) + 7, "wall_seconds": 1800.0}))
        logged = [{"epoch": e, "valid": {"ppl": v}} for e, v in enumerate(values)]
        logged.append({"epoch": len(values), "partial": True, "valid": {"ppl": 1.0}})
        (tmp_path / name / "metrics.jsonl").write_text("\n".join(map(json.dumps, logged)) + "\n")
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"), "--metric",
                         "test_ppl", "--names", "KNN", "LSTM", "--digits", "1",
                         "--per-epoch", "valid_ppl"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "- KNN's runs: seed 0: 3 epochs, 2,497 steps, 30.0 min" in out
    assert "- LSTM's runs: seed 0: 2 epochs, 1,667 steps, 30.0 min" in out
    # full epochs only (the partial evaluation's 1.0 is left out), numbered from 1
    assert out[-4:] == ["| run | 1 | 2 | 3 |", "|---|---|---|---|",
                        "| KNN, seed 0 | 100.0 | 90.0 | 85.5 |", "| LSTM, seed 0 | 110.0 | 95.2 | - |"]
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"), "--metric",
                         "test_ppl", "--per-epoch", "valid_acc"]) == 1  # one line, no traceback


def test_cli_refuses_runs_whose_wall_clock_budgets_differ(tmp_path: Path, capsys) -> None:
    def write(folder: str, cpu: str, minutes: int = 30) -> None:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "result.json").write_text(json.dumps(
            {"metrics": {"test": {"ppl": 90.0}}, "device": "cpu", "protocol": f"budgeted {minutes} min",
             "machine": {"cpu_model": cpu, "torch_threads": 1}}))
    write("amd", "AMD EPYC")
    write("intel", "Intel Xeon")
    write("intel_b", "Intel Xeon")
    write("intel_20", "Intel Xeon", minutes=20)
    argv = ["--metric", "test_ppl"]
    assert compare.main(["--a", str(tmp_path / "intel"), "--b", str(tmp_path / "intel_b"), *argv]) == 0
    capsys.readouterr()
    for a, b in (("amd", "intel"), ("intel_20", "intel")):  # across the two sides
        assert compare.main(["--a", str(tmp_path / a), "--b", str(tmp_path / b), *argv]) == 1
        assert "wall-clock budgets differ" in capsys.readouterr().err
    # pooled on one side
    assert compare.main(["--a", str(tmp_path / "amd"), str(tmp_path / "intel"),
                         "--b", str(tmp_path / "intel_b"), *argv]) == 1
    assert "budgeted 30 min on CPU (AMD EPYC), 1 thread(s) | budgeted 30 min on CPU (Intel Xeon)" \
        in capsys.readouterr().err
