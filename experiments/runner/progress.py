"""The progress record of a run still training, copied into the results tree.

    .venv/bin/python experiments/runner/progress.py <run dir> <results folder>

Long runs (the Table 1 20m rows) span several working sessions, and their run folders live
outside the repository, on one machine. So that none of a run's history is lost if the
machine is replaced, each session copies into ``<results folder>`` the run's
``PAUSED_AT.txt`` (every start, pause and resume, with its commit), ``metrics.jsonl`` (one
line per epoch), ``train.log``, and writes ``progress.json``: where the last checkpoint is
(epoch, batch, step), the epochs finished, the best validation so far and its epoch, the
training seconds so far and the segments (:mod:`knn.train.segments`).

Run on a finished run (its run dir holds ``result.json``), the same command lands it: it
copies ``result.json`` with the three files and removes ``progress.json``, so the folder
holds the result, and the tables regenerated from it show the row. Every file is written
atomically.

A run that had to start again (its machine went away with its checkpoints) is a new run:
the record it replaces moves to ``<results folder>/superseded/<its first start>/`` and the
new ``progress.json`` lists it under ``superseded``, so an attempt that was given up is
never silently dropped from the row's history.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from knn.io import write_json
from knn.train import checkpoint

COPIED = ("PAUSED_AT.txt", "metrics.jsonl", "train.log")
RESULT = "result.json"
SUPERSEDED = "superseded"


def read_events(run_dir: Path) -> list[str]:
    """The lines of ``run_dir``'s ``PAUSED_AT.txt`` (every start and stop), or none."""
    path = run_dir / "PAUSED_AT.txt"
    return path.read_text().splitlines() if path.is_file() else []


def first_start(events: list[str]) -> str | None:
    """The first ``started ...`` line of a run's ``PAUSED_AT.txt``: what names one run."""
    return next((e for e in events if e.startswith("started ")), None)


def set_aside(dest: Path, run_events: list[str]) -> list[dict]:
    """Move ``dest``'s record of an earlier run of the row (one whose first start is not
    this run's) to ``dest/superseded/``; return the superseded attempts' summaries."""
    old_file = dest / "progress.json"
    old = json.loads(old_file.read_text()) if old_file.is_file() else None
    earlier = list(old.get(SUPERSEDED, [])) if old else []
    if old is None or first_start(old["events"]) == first_start(run_events):
        return earlier
    # "started 2026-12-02 13:46 UTC at b38116e" -> "2026-12-02_1346"
    stamp = "_".join(first_start(old["events"]).split()[1:3]).replace(":", "")
    where = dest / SUPERSEDED / stamp
    where.mkdir(parents=True, exist_ok=True)
    for name in (*COPIED, "progress.json"):
        if (dest / name).is_file():
            (dest / name).replace(where / name)
    summary = {"record": f"{SUPERSEDED}/{stamp}", "events": old["events"],
               "checkpoint": old["checkpoint"], "best_valid": old["best_valid"],
               "best_epoch": old["best_epoch"]}
    print(f"{dest}: the record of the run that started {stamp} moved to {where}")
    return [*earlier, summary]


def record(run_dir: Path) -> dict:
    """The progress of ``run_dir`` from its last checkpoint and its metrics."""
    state = checkpoint.load(run_dir / checkpoint.LAST)
    p = state["progress"]
    lines = (run_dir / "metrics.jsonl").read_text().splitlines() \
        if (run_dir / "metrics.jsonl").is_file() else []
    epochs = [json.loads(line) for line in lines if line.strip()]
    events = read_events(run_dir)
    cfg = state["config"]
    return {
        "status": "training, not finished",
        "variant": cfg.get("variant"), "seed": cfg.get("seed"),
        "checkpoint": {"epoch": p["epoch"], "batch": p["batch"], "step": p["step"]},
        "epochs_finished": p["epoch"], "max_epochs": cfg["train"]["max_epochs"],
        "best_valid": p["best"], "best_epoch": p["best_epoch"],
        "training_seconds": round(p["elapsed"], 1),
        "last_epoch": epochs[-1] if epochs else None,
        "segments": state.get("segments"),
        "events": events,
    }


def copy_files(run_dir: Path, dest: Path, names: tuple[str, ...]) -> None:
    """Copy ``names`` that exist in ``run_dir`` into ``dest``, each atomically."""
    for name in names:
        if (run_dir / name).is_file():
            tmp = dest / f".{name}.tmp"
            shutil.copyfile(run_dir / name, tmp)
            tmp.replace(dest / name)


def land(run_dir: Path, dest: Path) -> None:
    """Replace ``dest``'s progress record by the finished run's files (an earlier attempt's
    record, one with another first start, moves to ``superseded/`` first)."""
    set_aside(dest, read_events(run_dir))
    copy_files(run_dir, dest, (*COPIED, RESULT))
    (dest / "progress.json").unlink(missing_ok=True)
    print(f"{dest}: landed the finished run ({RESULT}, {', '.join(COPIED)});"
          " regenerate the tables that read this folder")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    run_dir, dest = Path(argv[0]), Path(argv[1])
    if (run_dir / RESULT).is_file():
        dest.mkdir(parents=True, exist_ok=True)
        land(run_dir, dest)
        return 0
    if not (run_dir / checkpoint.LAST).is_file():
        print(f"error: {run_dir} has neither {RESULT} nor {checkpoint.LAST}", file=sys.stderr)
        return 1
    dest.mkdir(parents=True, exist_ok=True)
    progress = record(run_dir)
    progress[SUPERSEDED] = set_aside(dest, progress["events"])
    copy_files(run_dir, dest, COPIED)
    write_json(progress, dest / "progress.json")
    print(f"{dest}: epoch {progress['checkpoint']['epoch']} batch {progress['checkpoint']['batch']}"
          f" (step {progress['checkpoint']['step']}), best valid {progress['best_valid']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
