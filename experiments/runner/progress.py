"""The progress record of a run still training, copied into the results tree.

    .venv/bin/python experiments/runner/progress.py <run dir> <results folder>

Long runs (the Table 1 20m rows) span several working sessions, and their run folders live
outside the repository, on one machine. So that none of a run's history is lost if the
machine is replaced, each session copies into ``<results folder>`` the run's
``PAUSED_AT.txt`` (every start, pause and resume, with its commit), ``metrics.jsonl`` (one
line per epoch), ``train.log``, and writes ``progress.json``: where the last checkpoint is
(epoch, batch, step), the epochs finished, the best validation so far and its epoch, the
training seconds so far and the segments (:mod:`knn.train.segments`). A finished run's
``result.json`` replaces the record (``run_one.sh`` copies are then the result). Every
file is written atomically.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from knn.io import write_json
from knn.train import checkpoint

COPIED = ("PAUSED_AT.txt", "metrics.jsonl", "train.log")


def record(run_dir: Path) -> dict:
    """The progress of ``run_dir`` from its last checkpoint and its metrics."""
    state = checkpoint.load(run_dir / checkpoint.LAST)
    p = state["progress"]
    lines = (run_dir / "metrics.jsonl").read_text().splitlines() \
        if (run_dir / "metrics.jsonl").is_file() else []
    epochs = [json.loads(line) for line in lines if line.strip()]
    events = (run_dir / "PAUSED_AT.txt").read_text().splitlines() \
        if (run_dir / "PAUSED_AT.txt").is_file() else []
    cfg = state["config"]
    return {
        "status": "finished" if (run_dir / "result.json").is_file() else "training, not finished",
        "variant": cfg.get("variant"), "seed": cfg.get("seed"),
        "checkpoint": {"epoch": p["epoch"], "batch": p["batch"], "step": p["step"]},
        "epochs_finished": p["epoch"], "max_epochs": cfg["train"]["max_epochs"],
        "best_valid": p["best"], "best_epoch": p["best_epoch"],
        "training_seconds": round(p["elapsed"], 1),
        "last_epoch": epochs[-1] if epochs else None,
        "segments": state.get("segments"),
        "events": events,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    run_dir, dest = Path(argv[0]), Path(argv[1])
    if not (run_dir / checkpoint.LAST).is_file():
        print(f"error: {run_dir} has no {checkpoint.LAST}", file=sys.stderr)
        return 1
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (run_dir / name).is_file():
            tmp = dest / f".{name}.tmp"
            shutil.copyfile(run_dir / name, tmp)
            tmp.replace(dest / name)
    progress = record(run_dir)
    write_json(progress, dest / "progress.json")
    print(f"{dest}: epoch {progress['checkpoint']['epoch']} batch {progress['checkpoint']['batch']}"
          f" (step {progress['checkpoint']['step']}), best valid {progress['best_valid']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
