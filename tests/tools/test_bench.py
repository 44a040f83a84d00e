"""The benchmark's bookkeeping (not its timings: no wall-clock limits in tests)."""
import json
from pathlib import Path

import pytest

from knn.tools import bench
from knn.io import write_json

COMMAND = "python -m knn.tools.bench --reps 2"


@pytest.fixture
def tiny(monkeypatch):
    """One tiny shape and product: the tests check bookkeeping, not the machine's speed."""
    monkeypatch.setattr(bench, "SHAPES", {"tiny": (3, 2, 8)})
    monkeypatch.setattr(bench, "LINEAR_SHAPES", {"tiny_product": (128, 64, 96)})


def test_run_reports_every_case_with_consistent_ratios(tiny, tmp_path):
    result = bench.run(reps=2, command=COMMAND)
    assert {c["variant"] for c in result["cases"]} == set(bench.VARIANTS)
    for c in result["cases"]:
        assert c["ratio_vs_lstm"] == pytest.approx(c["lstm_ms"] / c["ms"], rel=0.05)  # ms are rounded to 1 µs
        assert c["ratio_vs_floor"] == pytest.approx(c["ms"] / c["floor_ms"], rel=0.05)  # ms are rounded to 1 µs
    # Provenance (knn.train.provenance): what ran, where, from which commit and command.
    assert result["command"] == COMMAND and result["torch_version"]
    assert result["machine"]["cpu_model"] and result["machine"]["torch_threads"] >= 1
    assert result["ops"]["fused_scan"] in (True, False) and result["ops"]["onednn"] in (True, False)
    table = bench.to_markdown(result)
    assert f"{result['machine']['torch_threads']} threads, {result['machine']['cpu_model']}" in table
    assert table.count("| tiny (3, 2, 8) |") == len(bench.VARIANTS)
    (product,) = result["linear"]
    assert (product["M"], product["K"], product["N"]) == (128, 64, 96)
    assert product["ratio_aten_vs_knn"] == pytest.approx(product["aten_ms"] / product["knn_ms"], rel=0.05)
    assert product["knn_library"] == ("onednn" if result["onednn_linear"] else "aten")
    if product["onednn_ms"] is not None:
        assert product["ratio_aten_vs_onednn"] == pytest.approx(
            product["aten_ms"] / product["onednn_ms"], rel=0.05)
    assert "| tiny_product (128, 64, 96) |" in table
    out = tmp_path / "layers.json"
    write_json(result, out)
    assert json.loads(out.read_text())["cases"] == result["cases"]


def test_time_ms_interleaves_steps():
    calls = []
    medians = bench.time_ms({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, reps=3, warmup=1)
    assert set(medians) == {"a", "b"}
    assert calls == ["a", "b"] * 4  # warm-up, then alternating reps


def test_output_path_is_scratch_unless_recorded():
    assert bench.output_path("layers.json", record=False) == Path("outputs/bench/layers.json")
    assert bench.output_path("layers.json", record=True) == Path("experiments/bench/layers.json")
    assert bench.output_path("layers.json", record=True, out="x/y.json") == Path("x/y.json")


@pytest.mark.parametrize(("argv", "written"), [
    (["--reps", "1"], "outputs/bench/layers.json"),
    (["--reps", "1", "--record"], "experiments/bench/layers.json"),
    (["--reps", "1", "--out", "elsewhere/b.json"], "elsewhere/b.json"),
])
def test_main_writes_outside_version_control_unless_recording(tiny, tmp_path, monkeypatch, argv,
                                                              written):
    monkeypatch.chdir(tmp_path)
    bench.main(argv)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted([written, written.replace(".json", ".md")])
    assert json.loads((tmp_path / written).read_text())["command"] == \
        "python -m knn.tools.bench " + " ".join(argv)


def test_record_and_out_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--record", "--out", "x.json"])
    assert "not allowed with" in capsys.readouterr().err
