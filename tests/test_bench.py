"""The benchmark's bookkeeping (not its timings: no wall-clock limits in tests)."""
import json

import pytest

from knn import bench


def test_run_reports_every_case_with_consistent_ratios(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "SHAPES", {"tiny": (3, 2, 8)})
    monkeypatch.setattr(bench, "LINEAR_SHAPES", {"tiny_product": (128, 64, 96)})
    result = bench.run(reps=2)
    assert {c["variant"] for c in result["cases"]} == set(bench.VARIANTS)
    for c in result["cases"]:
        assert c["ratio_vs_lstm"] == pytest.approx(c["lstm_ms"] / c["ms"], rel=0.05)  # ms are rounded to 1 µs
        assert c["ratio_vs_floor"] == pytest.approx(c["ms"] / c["floor_ms"], rel=0.05)  # ms are rounded to 1 µs
    for key in ("torch_version", "threads", "cpu_model"):
        assert result[key]
    table = bench.to_markdown(result)
    assert table.count("| tiny (3, 2, 8) |") == len(bench.VARIANTS)
    (product,) = result["linear"]
    assert (product["M"], product["K"], product["N"]) == (128, 64, 96)
    assert product["ratio_aten_vs_knn"] == pytest.approx(product["aten_ms"] / product["knn_ms"], rel=0.05)
    assert "| tiny_product (128, 64, 96) |" in table
    out = tmp_path / "layers.json"
    bench.write_atomic(out, json.dumps(result))
    assert json.loads(out.read_text())["cases"] == result["cases"]


def test_time_ms_interleaves_steps():
    calls = []
    medians = bench.time_ms({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, reps=3, warmup=1)
    assert set(medians) == {"a", "b"}
    assert calls == ["a", "b"] * 4  # warm-up, then alternating reps
