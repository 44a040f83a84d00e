"""knn.nightly on the smoke preset: bands, a deliberately failing one, exit codes, artifacts.

The checks train on the PTB-format fixture (``tests/fixtures/ptb``), so no data mirror is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from knn import nightly

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ptb"


@pytest.fixture(autouse=True)
def data_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' PTB id cache in tmp_path ($KNN_DATA_CACHE reaches the training subprocesses)."""
    monkeypatch.setenv("KNN_DATA_CACHE", str(tmp_path / "cache"))


def write_expected(path: Path, checks: list[dict]) -> Path:
    path.write_text("# test expectations\n" + yaml.safe_dump({"checks": checks}))
    return path


def smoke_check(name: str, expected: float | None, tolerance: float = 0.02) -> dict:
    return {"name": name, "metric": "test.ppl", "expected": expected, "tolerance": tolerance,
            "args": ["experiment=ptb/gated_5m", "debug=smoke", "device=cpu", "threads=1",
                     "task.limit_train_batches=null", f"task.data.dir={FIXTURE}"]}


def test_nightly_passes_fails_and_records(tmp_path: Path, ptb_fixture) -> None:
    expected = write_expected(tmp_path / "expected.yaml", [smoke_check("smoke", None)])
    # 1. --record measures the value and stores it (with the command and date).
    assert nightly.main(["--expected", str(expected), "--out", str(tmp_path / "n1"), "--record"]) == 0
    spec = yaml.safe_load(expected.read_text())
    value = spec["checks"][0]["expected"]
    # The recorded value is the run's: two epochs on the fixture learn context, so it beats
    # the train unigram predictor (test ppl 36.2; uniform 47) by 15% (20.78 when written).
    assert value < 0.85 * ptb_fixture.unigram_ppl()
    assert value == pytest.approx(json.loads((tmp_path / "n1" / "nightly.json").read_text())
                                  ["checks"][0]["value"])
    assert spec["checks"][0]["measured_on"]["command"].startswith("python -m knn.nightly --expected")
    assert expected.read_text().startswith("# test expectations\n")

    # 2. The same run again lands in its band; a band set 10% too low (a
    # "suspiciously better" past) and a crashing run both fail: exit status 1.
    crash = smoke_check("crash", 1.0)
    crash["args"] = [*crash["args"], "train.lr=nan"]
    write_expected(expected, [smoke_check("same", value), smoke_check("too_good", value * 0.9), crash])
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


def test_bad_expectations_file(tmp_path: Path) -> None:
    both = {**smoke_check("x", 1.0), "bench": {"variant": "v", "shape": "ptb", "field": "f"}}
    with pytest.raises(SystemExit, match="needs exactly one of metric, bench"):
        nightly.load_checks(write_expected(tmp_path / "e.yaml", [both]))


def test_band_is_symmetric_and_missing_value_fails() -> None:
    check = nightly.Check(name="c", expected=200.0, tolerance=0.05, metric="test.ppl")
    assert check.band == pytest.approx((190.0, 210.0))
    assert nightly.judge(check, 205.0, "") == ("pass", "")
    assert nightly.judge(check, 189.0, "")[0] == "FAIL"
    assert nightly.judge(check, 211.0, "")[0] == "FAIL"
    unmeasured = nightly.Check(name="c", expected=None, tolerance=0.05, metric="test.ppl")
    assert nightly.judge(unmeasured, 1.0, "") == ("FAIL", "no expected value recorded (run with --record)")
