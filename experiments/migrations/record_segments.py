"""One-off migration: the segments (knn.train.segments) of the Table 1 5m runs, from their logs.

    python experiments/migrations/record_segments.py [--dry-run]

These four runs were trained before the trainer kept segments; their ``result.json``
describes only the process that finished them. Their ``PAUSED_AT.txt`` and ``train.log``
(beside each ``result.json`` in ``experiments/results/ptb/full/``) say where each part
trained; this script writes that as ``segments``, each marked ``"recorded": false`` with
the log lines it comes from. Metrics, configs and every other field stay as they are.
Rerunning writes the same files.

``--run-dir`` fills, in a run still training, the unrecorded first segment of a checkpoint
written before segments were kept (the Table 1 20m rows started so) from the segment after
it, when its ``PAUSED_AT.txt`` shows the run did not move in between.

* ``const_5m``: epochs 0-32 and 210 batches of epoch 33 on an H100 in a lent device call
  (torch 2.11.0+cu130, the image's), cut at the call's budget, then resumed from that
  checkpoint on 2 AMD EPYC cores at one thread (torch 2.13.0+cpu). Training seconds of
  the GPU part: epoch 33's ``elapsed`` in ``metrics.jsonl`` (526.66 s) less the CPU's
  time from the resume (08:25:03 in ``train.log``) to epoch 33's end (08:30:16), 313 s.
* ``learned_5m``, ``lstm_5m``: one H100 device call each, start to finish.
* ``gated_5m``: 2 AMD EPYC cores at two threads, paused (SIGKILL after a checkpoint) and
  resumed at epoch 8 batch 760 on the same machine; the split of its training seconds
  between the two parts was not logged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from knn.io import write_json
from knn.paths import REPO_ROOT

ROOT = REPO_ROOT / "experiments" / "results" / "ptb" / "full"
STEPS_PER_EPOCH = 830  # PTB train: 929,589 tokens in 32 columns of BPTT 35
GPU = {"device": "cuda:0 (NVIDIA H100 80GB HBM3)", "torch_version": "2.11.0+cu130",
       "cpu_model": "Intel(R) Xeon(R) Processor", "logical_cores": 16, "torch_threads": 16}
EPYC_1 = {"device": "cpu", "torch_version": "2.13.0+cpu", "cpu_model": "AMD EPYC",
          "logical_cores": 2, "torch_threads": 1}
EPYC_2 = {**EPYC_1, "torch_threads": 2}


def at(epoch: int, batch: int = 0) -> dict[str, int]:
    return {"epoch": epoch, "batch": batch, "step": epoch * STEPS_PER_EPOCH + batch}


def segment(place: dict[str, Any], commit: str, started: str, start: dict[str, int],
            end: dict[str, int], seconds: float | None, source: str) -> dict[str, Any]:
    return {**place, "processes": 1, "git_commit": commit, "started": started, "start": start,
            "end": end, "training_seconds": seconds, "recorded": False, "migrated_from": source}


def segments_of(variant: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    commit, wall, end = result["git_commit"], result["wall_seconds"], at(result["epochs"])
    if variant == "const_5m":
        gpu_seconds = round(526.66 - 313.0, 2)
        return [segment(GPU, commit, "2026-11-27T08:20:40+00:00", at(0), at(33, 210), gpu_seconds,
                        "PAUSED_AT.txt lines 1-2; train.log lines 1-35; metrics.jsonl epoch 33"),
                segment(EPYC_1, commit, "2026-11-27T08:24:58+00:00", at(33, 210), end,
                        round(wall - gpu_seconds, 2), "PAUSED_AT.txt lines 3-4; train.log line 35 on")]
    if variant in ("learned_5m", "lstm_5m"):
        return [segment(GPU, commit, "2026-11-27T08:12:07+00:00", at(0), end, wall,
                        "PAUSED_AT.txt (the first start stopped before training); train.log")]
    if variant == "gated_5m":
        return [segment(EPYC_2, commit, "2026-11-26T08:12:35+00:00", at(0), at(8, 760), None,
                        "train.log lines 1-9; README.md"),
                segment(EPYC_2, commit, "2026-11-26T09:07:07+00:00", at(8, 760), end, None,
                        "train.log line 10 on; the 12,401.75 s of wall_seconds cover both parts")]
    raise ValueError(f"no log reading for {variant}")


def fill_first_from_next(run_dir: Path, started: str, commit: str, dry_run: bool) -> int:
    """A run started before segments were kept and resumed after: its ``last.pt`` holds an
    unrecorded first segment. When the runner's log shows it was not moved in between
    (``PAUSED_AT.txt``: one working session on one machine), that segment ran where the
    next one did: copy the next one's place into it, marked ``"recorded": false``."""
    from knn.train import checkpoint

    path = run_dir / checkpoint.LAST
    state = checkpoint.load(path)
    segs = state.get("segments") or []
    if len(segs) < 2 or segs[0].get("recorded") is not False or segs[0].get("device") is not None:
        print(f"{path}: no unrecorded first segment to fill")
        return 1
    place = {k: segs[1].get(k) for k in ("device", "torch_version", "cpu_model", "logical_cores",
                                         "torch_threads", "processes")}
    segs[0].update(place, git_commit=commit, started=started,
                   migrated_from=f"{run_dir.name}/PAUSED_AT.txt: started {started} at "
                                 f"{commit[:7]}, stopped and resumed on the same machine")
    print(f"{path}: first segment (steps {segs[0]['start']['step']}-{segs[0]['end']['step']}) "
          f"filled from the next: {place['device']}, {place['cpu_model']}")
    if not dry_run:
        checkpoint.save(state, path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    parser.add_argument("--run-dir", type=Path,
                        help="instead: fill a running run's unrecorded first segment (last.pt) "
                             "from the next one; needs --started and --commit")
    parser.add_argument("--started", help="with --run-dir: the first start, ISO UTC")
    parser.add_argument("--commit", help="with --run-dir: the commit of the first start")
    args = parser.parse_args(argv)
    if args.run_dir is not None:
        if not (args.started and args.commit):
            parser.error("--run-dir needs --started and --commit")
        return fill_first_from_next(args.run_dir, args.started, args.commit, args.dry_run)
    for variant in ("const_5m", "learned_5m", "lstm_5m", "gated_5m"):
        path = ROOT / variant / "result.json"
        result = json.loads(path.read_text())
        assert result["steps"] == result["epochs"] * STEPS_PER_EPOCH, path  # the at() arithmetic
        result["segments"] = segments_of(variant, result)
        print(f"{path.relative_to(REPO_ROOT)}: {len(result['segments'])} segment(s)")
        if not args.dry_run:
            write_json(result, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
