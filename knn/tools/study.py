"""A one-factor-at-a-time study as a table: each run against a base run.

    python -m knn.tools.study STUDY_DIR [--base NAME] [--out PREFIX]

Every ``result.json`` below ``STUDY_DIR`` is one run; the run in the folder
``NAME`` (default ``base``) is the reference. A run's factor is what its
config changes from the base run's (:func:`knn.train.protocol.differences`,
so seeds, threads, paths and checkpointing do not count), e.g.
``model.readout=sum``; an ensemble of runs (``python -m knn.tools.ensemble``) is
one row, ``ensemble of 3 (seeds 0,1,2)``. Per run: the factor, every validation and test metric
the run recorded, the change of the task's metric on validation against the
base (the study selects on validation only; test is shown, never used to
choose), wall time, training throughput (``extra.throughput``, where the task
records it: molecules/s for the graph tasks), epochs, seed and commit. Rows
follow the base's validation metric, best first.

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json`` (the rows with the
table's provenance: command, commit, machine); it always prints the Markdown.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from knn.errors import ConfigError
from knn.io import write_json, write_text
from knn.tools import results
from knn.train.protocol import differences, format_value
from knn.train.provenance import provenance


def factor(run: dict[str, Any], base: dict[str, Any]) -> str:
    """What ``run``'s config changes from ``base``'s, as overrides; ``base`` when nothing; an
    ensemble (:mod:`knn.tools.ensemble`) is named as such, with its seeds."""
    changed = ", ".join(f"{k}={format_value(v)}" for k, v in differences(run["config"], base["config"]))
    if "ensemble" in run:
        members = run["ensemble"]["members"]
        label = f"ensemble of {len(members)} (seeds {','.join(str(m['seed']) for m in members)})"
        return label + (f", {changed}" if changed else "")
    return changed or "base"


def rows(study_dir: str | Path, base_name: str = "base") -> list[dict[str, Any]]:
    """One dict per run below ``study_dir``, best validation metric first."""
    runs = results.collect(study_dir)
    bases = [r for r in runs if Path(r["run_dir"]).name == base_name]
    if len(bases) != 1:
        raise ConfigError(f"{study_dir}: expected one run in a folder named {base_name!r}, "
                          f"found {len(bases)}")
    base = bases[0]
    metric = base["metric"]
    sign = 1.0 if results.higher_is_better(base["task"]) else -1.0
    out = []
    for r in runs:
        throughput = ((r.get("extra") or {}).get("throughput") or {}).get("molecules_per_second")
        out.append({
            "run": Path(r["run_dir"]).name,
            "factor": factor(r, base),
            "metric": metric,
            "valid": r["metrics"]["valid"],
            "test": r["metrics"]["test"],
            "valid_change": r["metrics"]["valid"][metric] - base["metrics"]["valid"][metric],
            "wall_seconds": r["wall_seconds"],
            "molecules_per_second": throughput,
            "epochs": r.get("epochs"),
            "seed": r.get("seed"),
            "git_commit": r.get("git_commit"),
            "command": r.get("command"),
        })
    return sorted(out, key=lambda row: -sign * row["valid"][metric])


def _seeds(seed: int | list[int] | None) -> str:
    return ",".join(map(str, seed)) if isinstance(seed, list) else str(seed)


def markdown(table: list[dict[str, Any]]) -> str:
    """The study table and the command of each run."""
    names = sorted({k for row in table for k in row["valid"]})
    metric = table[0]["metric"] if table else ""
    head = (["run", "factor"] + [f"valid {m}" for m in names] + [f"test {m}" for m in names]
            + [f"Δ valid {metric} vs base", "wall min", "molecules/s", "epochs", "seed", "commit"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        cells = [row["run"], f"`{row['factor']}`"]
        cells += [results.fmt_metric(m, row[split][m]) if m in row[split] else "-"
                  for split in ("valid", "test") for m in names]
        cells += [f"{row['valid_change']:+.4f}", f"{row['wall_seconds'] / 60:.1f}",
                  "-" if row["molecules_per_second"] is None else f"{row['molecules_per_second']:.0f}",
                  str(row["epochs"]), _seeds(row["seed"]), str(row["git_commit"])[:12]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Commands:", ""] + [f"- {row['run']}: `{row['command']}`" for row in table]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.study", description=__doc__.split("\n")[0])
    parser.add_argument("study_dir")
    parser.add_argument("--base", default="base", help="folder name of the reference run (default: base)")
    parser.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    args = parser.parse_args(argv)
    try:
        table = rows(args.study_dir, args.base)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = markdown(table)
    print(text, end="")
    if args.out:
        command = shlex.join(["python", "-m", "knn.tools.study", *(sys.argv[1:] if argv is None else argv)])
        payload = {**provenance(command), "base": args.base, "runs": table}  # before any write
        write_text(Path(f"{args.out}.md"), text)
        write_json(payload, Path(f"{args.out}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
