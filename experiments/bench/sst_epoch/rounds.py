"""The before/after table of one or more ``run.sh`` output folders, read from their files.

    python experiments/bench/sst_epoch/rounds.py <run.sh out dir> [<dir> ...]

One row per round: each side's commit (from its ``result.json``), its epoch time
(training plus dev, ``elapsed`` of the epoch's metrics line), its 400-step time,
after / before, and the epoch's train loss and dev accuracy (which a change that
keeps the computation must leave alone up to rounding). Last, the mean of
after / before over all rounds given.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def side(folder: Path, name: str, r: int) -> dict:
    """One side of one round: commit, epoch seconds, ms per step, train loss, dev accuracy."""
    epoch = json.loads((folder / f"{name}_{r}_epoch.jsonl").read_text().splitlines()[-1])
    result = json.loads((folder / f"{name}_{r}_epoch_result.json").read_text())
    step = json.loads((folder / f"{name}_{r}_throughput.json").read_text())
    return {"commit": result["git_commit"][:7], "epoch_s": epoch["elapsed"], "step_ms": step["step_ms"],
            "loss": epoch["train"]["loss"], "dev": epoch["valid"]["acc"]}


def main(folders: list[str]) -> None:
    print("| before | after | round | epoch before (s) | epoch after (s) | after / before "
          "| step before → after (ms) | train loss before → after | dev acc before → after |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for folder in map(Path, folders):
        rounds = sorted(int(p.name.split("_")[1]) for p in folder.glob("before_*_epoch.jsonl"))
        for r in rounds:
            b, a = side(folder, "before", r), side(folder, "after", r)
            ratios.append(a["epoch_s"] / b["epoch_s"])
            print(f"| {b['commit']} | {a['commit']} | {r} | {b['epoch_s']:.1f} | {a['epoch_s']:.1f} "
                  f"| {ratios[-1]:.2f} | {b['step_ms']:.2f} → {a['step_ms']:.2f} "
                  f"| {b['loss']:.5f} → {a['loss']:.5f} | {b['dev']:.2f} → {a['dev']:.2f} |")
    mean = sum(ratios) / len(ratios)
    rounds = "round" if len(ratios) == 1 else "rounds"
    print(f"\nmean after / before over {len(ratios)} {rounds}: {mean:.3f} ({1 / mean:.2f}x faster)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python experiments/bench/sst_epoch/rounds.py <run.sh out dir> [...]")
    main(sys.argv[1:])
