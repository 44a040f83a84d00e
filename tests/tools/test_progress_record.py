"""The runner's progress record: a run that starts again never drops the record of the
attempt it replaces."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _progress_module():
    spec = importlib.util.spec_from_file_location("progress", ROOT / "experiments/runner/progress.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _old_record(dest: Path, events: list[str]) -> None:
    dest.mkdir(parents=True)
    (dest / "PAUSED_AT.txt").write_text("\n".join(events) + "\n")
    (dest / "metrics.jsonl").write_text('{"epoch": 0}\n')
    (dest / "progress.json").write_text(json.dumps({
        "events": events, "checkpoint": {"epoch": 3, "batch": 110, "step": 2600},
        "best_valid": 125.3, "best_epoch": 2}))


def test_a_new_run_moves_the_earlier_attempts_record_aside(tmp_path: Path) -> None:
    progress = _progress_module()
    dest = tmp_path / "gated_20m"
    old_events = ["started 2026-12-02 13:46 UTC at b38116e", "stopped 2026-12-02 16:22 UTC (exit 143)"]
    _old_record(dest, old_events)
    earlier = progress.set_aside(dest, ["started 2026-12-03 07:02 UTC at 2401413"])
    moved = dest / "superseded" / "2026-12-02_1346"
    assert sorted(p.name for p in moved.iterdir()) == ["PAUSED_AT.txt", "metrics.jsonl", "progress.json"]
    assert not (dest / "progress.json").exists() and not (dest / "metrics.jsonl").exists()
    assert earlier == [{"record": "superseded/2026-12-02_1346", "events": old_events,
                        "checkpoint": {"epoch": 3, "batch": 110, "step": 2600},
                        "best_valid": 125.3, "best_epoch": 2}]


def test_the_same_run_keeps_its_record_and_the_list_of_earlier_attempts(tmp_path: Path) -> None:
    progress = _progress_module()
    dest = tmp_path / "gated_20m"
    events = ["started 2026-12-03 07:02 UTC at 2401413"]
    _old_record(dest, events)
    listed = [{"record": "superseded/2026-12-02_1346"}]
    record = json.loads((dest / "progress.json").read_text())
    (dest / "progress.json").write_text(json.dumps({**record, "superseded": listed}))
    assert progress.set_aside(dest, [*events, "stopped 2026-12-03 09:20 UTC (exit 143)"]) == listed
    assert (dest / "progress.json").is_file() and not (dest / "superseded").exists()


def _finished_run(run_dir: Path, events: list[str]) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "PAUSED_AT.txt").write_text("\n".join(events) + "\n")
    (run_dir / "metrics.jsonl").write_text('{"epoch": 0}\n{"epoch": 1}\n')
    (run_dir / "train.log").write_text("epoch 1 ...\n")
    (run_dir / "result.json").write_text(json.dumps({"metrics": {"test": {"ppl": 80.1}}}))
    (run_dir / "last.pt").write_bytes(b"checkpoints never reach the results tree")


def test_a_finished_run_replaces_its_own_progress_record(tmp_path: Path) -> None:
    progress = _progress_module()
    events = ["started 2026-12-05 13:29 UTC at 3d9f433", "finished 2026-12-05 21:40 UTC"]
    run_dir, dest = tmp_path / "run", tmp_path / "results" / "lstm_5m" / "seed1"
    _finished_run(run_dir, events)
    _old_record(dest, events[:1])
    assert progress.main([str(run_dir), str(dest)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == [
        "PAUSED_AT.txt", "metrics.jsonl", "result.json", "train.log"]
    for name in ("PAUSED_AT.txt", "metrics.jsonl", "result.json", "train.log"):
        assert (dest / name).read_bytes() == (run_dir / name).read_bytes(), name


def test_a_finished_run_sets_an_earlier_attempts_record_aside(tmp_path: Path) -> None:
    progress = _progress_module()
    run_dir, dest = tmp_path / "run", tmp_path / "gated_vd_20m"
    _finished_run(run_dir, ["started 2026-12-05 12:12 UTC at 3d9f433", "finished 2026-12-06 09:00 UTC"])
    _old_record(dest, ["started 2026-12-04 17:49 UTC at cdbfcea"])
    assert progress.main([str(run_dir), str(dest)]) == 0
    assert (dest / "superseded" / "2026-12-04_1749" / "progress.json").is_file()
    assert (dest / "result.json").is_file() and not (dest / "progress.json").exists()
    assert json.loads((dest / "metrics.jsonl").read_text().splitlines()[1]) == {"epoch": 1}
