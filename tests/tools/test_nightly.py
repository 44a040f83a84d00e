"""knn.tools.nightly on the smoke preset: bands, a deliberately failing one, exit codes, artifacts.

The checks train on the PTB-format fixture (``tests/fixtures/ptb``), so no data mirror is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from knn.tools import nightly

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ptb"


@pytest.fixture(autouse=True)
def data_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' PTB id cache in tmp_path ($KNN_DATA_CACHE reaches the training subprocesses)."""
    monkeypatch.setenv("KNN_DATA_CACHE", str(tmp_path / "cache"))


def write_expected(path: Path, checks: list[dict]) -> Path:
    path.write_text("# test expectations\n" + yaml.safe_dump({"checks": checks}))
    return path


def smoke_check(name: str, band: list[float] | None = None, **extra) -> dict:
    return {"name": name, "metric": "test.ppl", "band": band, "seeds": [0, 1, 2],
            "expected": None if band is None else sum(band) / 2,
            "args": ["experiment=ptb/gated_5m", "debug=smoke", "device=cpu", "threads=1",
                     "task.limit_train_batches=null", "train.max_epochs=4", "train.lr=0.5",
                     f"task.data.dir={FIXTURE}"], **extra}


def test_nightly_records_bands_passes_and_fails(tmp_path: Path, ptb_fixture) -> None:
    expected = write_expected(tmp_path / "expected.yaml", [smoke_check("smoke")])
    # 1. --record needs a reason, then runs seeds 0, 1, 2 and stores mean, band, history.
    with pytest.raises(SystemExit, match="--why"):
        nightly.main(["--expected", str(expected), "--record"])
    assert nightly.main(["--expected", str(expected), "--out", str(tmp_path / "n1"), "--record",
                         "--why", "first measurement"]) == 0
    [check] = yaml.safe_load(expected.read_text())["checks"]
    values = check["values"]
    assert len(values) == 3 and len(set(values)) == 3  # three seeds, three numbers
    assert check["expected"] == pytest.approx(sum(values) / 3, abs=1e-4)
    lo, hi = check["band"]
    assert lo <= min(values) and max(values) <= hi  # the band holds every recorded seed
    # Four epochs at lr 0.5 on the fixture learn context for every seed (at the smoke
    # preset's 2 epochs and lr 1, seed 1 stalled at ppl 29 on an Intel Xeon while seeds
    # 0 and 2 reached 24, too wide a band): far better than the train unigram
    # predictor (test ppl 36.2; uniform 47), and the recorded baseline says so.
    assert hi < 0.85 * ptb_fixture.unigram_ppl() and check["constant_baseline"] > hi
    assert check["history"][-1]["why"] == "first measurement"
    assert check["measured_on"]["command"].startswith("python -m knn.tools.nightly --expected")
    assert expected.read_text().startswith("# test expectations\n")

    # 2. Seed 0 again lands in its band; a band set 10% too low (a "suspiciously
    # better" past) and a crashing run both fail: exit status 1.
    crash = smoke_check("crash", [0.5, 1.5])
    crash["args"] = [*crash["args"], "train.lr=nan"]
    low = [lo * 0.9 - 1, lo * 0.9]
    write_expected(expected, [smoke_check("same", [lo, hi]), smoke_check("too_good", low), crash])
    assert nightly.main(["--expected", str(expected), "--out", str(tmp_path / "n2")]) == 1
    report = json.loads((tmp_path / "n2" / "nightly.json").read_text())
    status = {c["name"]: (c["status"], c["note"]) for c in report["checks"]}
    assert status["same"] == ("pass", "")
    assert status["too_good"][0] == "FAIL" and status["too_good"][1].startswith("outside [")
    assert status["crash"] == ("FAIL", "exit 1: error: loss is nan at step 2 (epoch 0, batch 1); "
                               f"stopped, last good checkpoint: none")
    table = (tmp_path / "n2" / "nightly.md").read_text()
    assert table.startswith("# Nightly: 1 passed, 2 failed")
    assert "| too_good | test.ppl |" in table and "| FAIL |" in table

    # 3. Only the passing check: exit status 0.
    assert nightly.main(["--expected", str(expected), "--out", str(tmp_path / "n3"),
                         "--only", "same"]) == 0


def test_record_refuses_a_band_near_the_constant_predictor(tmp_path: Path, ptb_fixture) -> None:
    """One training step learns nothing: its band cannot be told from the unigram model."""
    check = smoke_check("untrained")
    check["args"] = [*check["args"], "train.max_steps=1"]
    expected = write_expected(tmp_path / "expected.yaml", [check])
    assert nightly.main(["--expected", str(expected), "--out", str(tmp_path / "n"), "--record",
                         "--why", "test"]) == 1
    assert "band" not in yaml.safe_load(expected.read_text())["checks"][0] or \
        yaml.safe_load(expected.read_text())["checks"][0]["band"] is None


def test_bad_expectations_file(tmp_path: Path) -> None:
    both = {**smoke_check("x"), "bench": {"variant": "v", "shape": "ptb", "field": "f"}}
    with pytest.raises(SystemExit, match="needs exactly one of metric, bench"):
        nightly.load_checks(write_expected(tmp_path / "e.yaml", [both]))
    few = {**smoke_check("y"), "seeds": [0, 1]}
    with pytest.raises(SystemExit, match="at least 3 seeds"):
        nightly.load_checks(write_expected(tmp_path / "f.yaml", [few]))


def test_band_from_spread_and_floor() -> None:
    mean, band = nightly.band_from([100.0, 102.0, 104.0], "training")  # std 2
    assert mean == 102.0 and band == pytest.approx([96.0, 108.0])  # 3 std
    mean, band = nightly.band_from([100.0, 100.0, 100.0], "training")
    assert band == pytest.approx([98.0, 102.0])  # the 2% floor
    assert nightly.band_from([2.0, 2.0, 2.0], "bench")[1] == pytest.approx([1.8, 2.2])


def test_training_judged_both_sides_and_against_the_baseline() -> None:
    check = nightly.Check(name="c", expected=200.0, band=[190.0, 210.0], metric="valid.ppl")
    assert nightly.judge(check, 205.0, "") == ("pass", "")
    assert nightly.judge(check, 189.0, "")[0] == "FAIL"
    assert nightly.judge(check, 211.0, "")[0] == "FAIL"
    assert nightly.judge(check, 205.0, "", baseline=204.0)[1].startswith("no better than")
    unmeasured = nightly.Check(name="c", metric="valid.ppl")
    assert nightly.judge(unmeasured, 1.0, "") == ("FAIL", "no band recorded (run with --record)")
    acc = nightly.Check(name="a", expected=40.0, band=[38.0, 42.0], metric="valid.acc")
    assert acc.higher_is_better and nightly.judge(acc, 39.0, "", baseline=25.0) == ("pass", "")


def test_bench_is_one_sided() -> None:
    faster = nightly.Check(name="b", expected=2.0, band=[1.8, 2.2],
                           bench={"variant": "v", "shape": "ptb", "field": "ratio_vs_lstm"})
    assert nightly.judge(faster, 1.7, "")[0] == "FAIL"  # slower than the band
    assert nightly.judge(faster, 3.0, "") == ("pass", "")  # faster: fine
    assert nightly.judge(faster, 4.5, "")[1].startswith("suspicious")
    # a band recorded wide (a busy machine) still passes a 2x slowdown, but flags it
    wide = nightly.Check(name="w", expected=2.0, band=[0.9, 2.2],
                         bench={"variant": "v", "shape": "ptb", "field": "ratio_vs_lstm"})
    assert nightly.judge(wide, 1.0, "") == ("pass", "suspicious: 0.50x the expected speed")
    assert nightly.judge(wide, 1.5, "") == ("pass", "")  # 0.75x: within the threshold
    floor = nightly.Check(name="f", expected=2.0, band=[1.8, 2.2],
                          bench={"variant": "v", "shape": "sst", "field": "ratio_vs_floor"})
    assert nightly.judge(floor, 2.3, "")[0] == "FAIL"  # ours / floor grew: slower
    assert nightly.judge(floor, 1.6, "") == ("pass", "")  # faster, within the threshold


def test_committed_expectations_are_complete() -> None:
    """Every committed check has a band from >= 3 values and sits apart from its baseline."""
    _, checks = nightly.load_checks(nightly.EXPECTED)
    spec = yaml.safe_load(nightly.EXPECTED.read_text())
    for check, raw in zip(checks, spec["checks"]):
        assert check.band is not None and len(raw["values"]) >= 3, check.name
        assert raw["history"] and raw["history"][-1]["why"], check.name
        if raw.get("constant_baseline") is not None:
            worse = check.band[0] if check.higher_is_better else check.band[1]
            assert nightly._better(check, worse, raw["constant_baseline"]), check.name
