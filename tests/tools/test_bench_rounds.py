"""experiments/bench/sst_epoch/rounds.py: the before/after table is read from run.sh's files."""
import importlib.util
import json
from pathlib import Path

ROUNDS = Path(__file__).resolve().parents[2] / "experiments" / "bench" / "sst_epoch" / "rounds.py"


def load_rounds():
    spec = importlib.util.spec_from_file_location("sst_epoch_rounds", ROUNDS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_side(folder: Path, name: str, r: int, commit: str, seconds: float, step_ms: float) -> None:
    """The three files run.sh leaves for one side of one round."""
    lines = [{"epoch": 0, "elapsed": seconds, "train": {"loss": 1.5}, "valid": {"acc": 40.0}}]
    (folder / f"{name}_{r}_epoch.jsonl").write_text("\n".join(json.dumps(l) for l in lines) + "\n")
    (folder / f"{name}_{r}_epoch_result.json").write_text(json.dumps({"git_commit": commit * 40}))
    (folder / f"{name}_{r}_throughput.json").write_text(json.dumps({"step_ms": step_ms}))


def test_table_rows_and_mean_come_from_the_files(tmp_path, capsys):
    for r, (before, after) in enumerate([(100.0, 80.0), (90.0, 45.0)], start=1):
        write_side(tmp_path, "before", r, "a", before, 16.0)
        write_side(tmp_path, "after", r, "b", after, 12.0)
    load_rounds().main([str(tmp_path)])
    out = capsys.readouterr().out
    rows = [l for l in out.splitlines() if l.startswith("| aaaaaaa | bbbbbbb |")]
    assert [row.split(" | ")[2:6] for row in rows] == [["1", "100.0", "80.0", "0.80"],
                                                       ["2", "90.0", "45.0", "0.50"]]
    assert "mean after / before over 2 rounds: 0.650 (1.54x faster)" in out
