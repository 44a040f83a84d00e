"""Collect ``result.json`` files under folders and aggregate them over seeds.

    python -m knn.results ROOT [ROOT ...] [--out PREFIX] [--title TITLE]

Every ``result.json`` below the roots is one run (see :mod:`knn.train.loop`);
runs with the same (task, variant) form a group, one row of a paper table.
Per group, on the task's selection metric (``result["metric"]``):

* **selected**: the test value of the run with the best validation value
  (ties: the lowest seed), the honest model-selection number;
* **best test**: the best test value over the runs, the paper's protocol
  ("we report the best results achieved across 5 independent runs"), which
  selects on test data and is optimistic;
* mean ± std (sample std, n - 1) of test and validation values;
* wall time per run, the seeds, and each run's command.

With ``--out PREFIX`` it writes ``PREFIX.md`` (the table, then one line per
run) and ``PREFIX.json`` (the same, as data); it always prints the Markdown.
Task-agnostic: the direction of a metric comes from the task registry.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every ``result.json`` under ``roots`` (a root may be one file), with ``run_dir`` added."""
    runs = []
    for root in map(Path, roots):
        files = [root] if root.is_file() else sorted(root.rglob("result.json"))
        for f in files:
            runs.append({**json.loads(f.read_text()), "run_dir": str(f.parent)})
    return runs


def higher_is_better(task: str) -> bool:
    from knn.tasks import TASKS  # here: importing the tasks pulls in torch

    return TASKS[task].higher_is_better


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    std = statistics.stdev(values) if len(values) > 1 else None
    return statistics.fmean(values), std


def _protocol(runs: list[dict[str, Any]]) -> str:
    """full / budgeted N min / cut at steps / smoke, from what the runs record."""
    parts = set()
    for r in runs:
        task_cfg = r.get("config", {}).get("task", {})
        if task_cfg.get("limit_train_batches") or task_cfg.get("limit_eval_batches"):
            parts.add("smoke (limited batches)")
        elif r.get("budgeted"):
            parts.add(f"budgeted {r.get('budget_minutes')} min")
        elif r.get("stop_reason") == "max_steps":
            parts.add("cut at max_steps")
        else:
            parts.add("full")
    return ", ".join(sorted(parts))


def aggregate(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per (task, variant), in the order first seen; see the module docstring."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["variant"]), []).append(r)
    rows = []
    for (task, variant), members in groups.items():
        members = sorted(members, key=lambda r: (r["seed"], r["run_dir"]))
        metric = members[0]["metric"]
        sign = 1.0 if higher_is_better(task) else -1.0
        valid = [r["metrics"]["valid"][metric] for r in members]
        test = [r["metrics"]["test"][metric] for r in members]
        chosen = max(range(len(members)), key=lambda i: (sign * valid[i], -i))
        best = max(range(len(members)), key=lambda i: (sign * test[i], -i))
        test_mean, test_std = _mean_std(test)
        valid_mean, valid_std = _mean_std(valid)
        walls = [r["wall_seconds"] for r in members]
        rows.append({
            "task": task,
            "variant": variant,
            "model": members[0]["model"],
            "metric": metric,
            "higher_is_better": sign > 0,
            "n_runs": len(members),
            "seeds": [r["seed"] for r in members],
            "selected": {"test": test[chosen], "valid": valid[chosen],
                         "seed": members[chosen]["seed"]},
            "best_test": {"test": test[best], "seed": members[best]["seed"]},
            "test_mean": test_mean, "test_std": test_std,
            "valid_mean": valid_mean, "valid_std": valid_std,
            "wall_seconds": {"mean": statistics.fmean(walls), "min": min(walls), "max": max(walls)},
            "protocol": _protocol(members),
            "paper": members[0].get("paper"),
            "runs": [{"seed": r["seed"], "valid": v, "test": t, "wall_seconds": r["wall_seconds"],
                      "epochs": r.get("epochs"), "best_epoch": r.get("best_epoch"),
                      "stop_reason": r.get("stop_reason"), "device": r.get("device"),
                      "git_commit": r.get("git_commit"), "command": r.get("command"),
                      "run_dir": r["run_dir"]}
                     for r, v, t in zip(members, valid, test)],
        })
    return rows


def _pm(mean: float, std: float | None) -> str:
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def markdown(rows: list[dict[str, Any]], title: str | None = None) -> str:
    """The table (one row per group) and a list of the runs behind it."""
    lines = [f"## {title}", ""] if title else []
    lines += [
        "| task | variant | model | runs (seeds) | test of best-valid run | best test of n "
        "(paper's protocol) | test mean ± std | valid mean ± std | paper | wall min/run "
        "(mean, min-max) | protocol |",
        "|" + "---|" * 11,
    ]
    for g in rows:
        paper = (g["paper"] or {}).get("value")
        w = g["wall_seconds"]
        cells = [
            g["task"], g["variant"], g["model"],
            f"{g['n_runs']} ({', '.join(map(str, g['seeds']))})",
            f"{g['selected']['test']:.2f} (seed {g['selected']['seed']})",
            f"{g['best_test']['test']:.2f} (seed {g['best_test']['seed']})",
            _pm(g["test_mean"], g["test_std"]), _pm(g["valid_mean"], g["valid_std"]),
            "-" if paper is None else str(paper),
            f"{_minutes(w['mean'])} ({_minutes(w['min'])}-{_minutes(w['max'])})",
            g["protocol"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        lines += ["", f"Metric: {', '.join(sorted({g['metric'] for g in rows}))}; "
                  "std is the sample standard deviation over runs.", "", "Runs:", ""]
        for g in rows:
            for r in g["runs"]:
                lines.append(
                    f"- {g['variant']} seed {r['seed']}: valid {r['valid']:.2f}, test "
                    f"{r['test']:.2f}, {_minutes(r['wall_seconds'])} min, {r['epochs']} epochs "
                    f"({r['stop_reason']}), {r['device']}: `{r['command']}`")
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], prefix: str | Path, title: str | None = None) -> None:
    """``PREFIX.md`` and ``PREFIX.json``."""
    from knn.train.checkpoint import write_json

    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".md").write_text(markdown(rows, title))
    write_json({"title": title, "groups": rows}, prefix.with_suffix(".json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="folders searched for result.json (or files)")
    parser.add_argument("--out", help="write OUT.md and OUT.json")
    parser.add_argument("--title", help="heading of the Markdown table")
    args = parser.parse_args(argv)
    missing = [r for r in args.roots if not Path(r).exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 1
    runs = collect(*args.roots)
    if not runs:
        print(f"error: no result.json under {', '.join(args.roots)}", file=sys.stderr)
        return 1
    rows = aggregate(runs)
    if args.out:
        write(rows, args.out, args.title)
    print(markdown(rows, args.title), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
