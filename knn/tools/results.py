"""The results registry: runs collected from folders, listed, filtered, aggregated over seeds.

    python -m knn.tools.results [ROOT ...] [--task GLOB] [--model GLOB] [--variant GLOB]
                          [--list] [--out PREFIX] [--title TITLE]

Every ``result.json`` below the roots (default ``experiments/results``;
Hydra's single-run and multirun folders alike) is one run (see
:mod:`knn.train.loop`); every ``failed.json`` is a run that failed (fields
task, model, variant, seed, error, command), unless its folder also holds a
``result.json`` (a later run in the same folder finished). ``--task``,
``--model`` and ``--variant`` keep the runs whose field matches the glob.

``--list`` prints one line per run, failed ones included: task, model,
variant, seed, validation and test metric, protocol (the run's ``protocol``
label, see :mod:`knn.train.protocol`; ``unlabelled`` when it has none; or
FAILED), folder, and for a failed run its error.

Otherwise runs with the same (task, variant, protocol label) form a group, one row
of a paper table: runs under different protocols are never averaged. Per group, on
the task's selection metric (``result["metric"]``):

* **selected**: the test value of the run with the best validation value
  (ties: the lowest seed), the honest model-selection number;
* **best test**: the best test value over the runs, the paper's protocol
  ("we report the best results achieved across 5 independent runs"), which
  selects on test data and is optimistic;
* mean ± std (sample std, n - 1) of test and validation values;
* trained parameters next to the paper's (its experiment's ``paper.params``);
* wall time per run, the seeds, and each run's epochs and steps, command, commit, where
  it trained (each part's hardware and torch version, :mod:`knn.train.segments`) and
  threads, and its start, pause and finish times where the runner logged them
  (``PAUSED_AT.txt`` beside ``result.json``, written by ``experiments/runner/run_one.sh``).

With ``--out PREFIX`` it writes ``PREFIX.md`` (the table, then one line per
run) and ``PREFIX.json`` (the same, as data); it always prints the Markdown,
and says on stderr how many failed runs the roots hold.
Task-agnostic: the direction of a metric comes from the task registry.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knn.io import write_json, write_text

#: Where ``python -m knn.tools.results`` looks when given no root (relative to the working folder).
RESULTS_ROOT = "experiments/results"
RESULT, FAILED = "result.json", "failed.json"
#: The runner's log of a run's starts, pauses and finish (one event per line), if any.
TIMELINE = "PAUSED_AT.txt"
#: The trainer's per-epoch log (:mod:`knn.train.loop`).
METRICS = "metrics.jsonl"


def _files(root: Path, name: str) -> list[Path]:
    """Every file called ``name`` below ``root``; a file root counts as a result unless it
    is a ``failed.json``, and as a failure only if it is one."""
    if root.is_file():
        return [root] if (root.name == FAILED) == (name == FAILED) else []
    return sorted(root.rglob(name))


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every ``result.json`` under ``roots`` (a root may be one file), with ``run_dir`` added."""
    return [{**json.loads(f.read_text()), "run_dir": str(f.parent)}
            for root in map(Path, roots) for f in _files(root, RESULT)]


def collect_failed(*roots: str | Path) -> list[dict[str, Any]]:
    """Every ``failed.json`` under ``roots`` whose folder holds no ``result.json``, with
    ``run_dir`` and ``status: "failed"`` added."""
    return [{**json.loads(f.read_text()), "status": "failed", "run_dir": str(f.parent)}
            for root in map(Path, roots) for f in _files(root, FAILED)
            if not (f.parent / RESULT).exists()]


def select(runs: list[dict[str, Any]], task: str | None = None, model: str | None = None,
           variant: str | None = None) -> list[dict[str, Any]]:
    """The runs whose task, model and variant match the glob patterns (None: any)."""
    patterns = {"task": task, "model": model, "variant": variant}
    return [r for r in runs
            if all(p is None or fnmatch.fnmatchcase(str(r.get(k)), p) for k, p in patterns.items())]


def cpu_model(result: dict[str, Any]) -> str | None:
    """The CPU a run (or a peer run) recorded in its provenance, if any."""
    return (result.get("machine") or {}).get("cpu_model")


def where(result: dict[str, Any]) -> str:
    """Where a run trained, part by part (:func:`knn.train.segments.where`)."""
    from knn.train import segments  # here: keeps this module's import light

    return segments.where(segments.of(result))


def threads(result: dict[str, Any]) -> str | None:
    """The torch threads a run trained with, part by part (:func:`knn.train.segments.threads`)."""
    from knn.train import segments

    return segments.threads(segments.of(result))


def timeline(run_dir: str | Path) -> list[str]:
    """The runner's events for a run ("started ... at <commit>", "stopped ...",
    "finished ..."), oldest first; empty when the run was not made by the runner."""
    path = Path(run_dir) / TIMELINE
    return [line.strip() for line in path.read_text().splitlines() if line.strip()] \
        if path.is_file() else []


def epochs(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's ``metrics.jsonl`` lines, one per evaluation, oldest first ([] when absent)."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def higher_is_better(task: str) -> bool:
    from knn.tasks import TASKS  # here: importing the tasks pulls in torch

    return TASKS[task].higher_is_better


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample std (n - 1); no std for one value, which has no spread."""
    std = statistics.stdev(values) if len(values) > 1 else None
    return statistics.fmean(values), std


def within_spread(a: float, b: float, stds: list[float | None]) -> bool | None:
    """Whether seed noise could flip ``a`` against ``b``: the means are closer than the larger
    std of either side. None when neither side has a std (one run each: one draw)."""
    known = [s for s in stds if s is not None]
    return abs(a - b) <= max(known) if known else None


#: How a run without a ``protocol`` field (written before labels were derived) shows.
UNLABELLED = "unlabelled"


def protocol(run: dict[str, Any]) -> str:
    """The run's protocol label, as the trainer derived it from its config and its
    experiment's (:mod:`knn.train.protocol`; older files: the relabelling migration
    ``experiments/migrations/relabel_protocol.py``); :data:`UNLABELLED` when it has none.

    A wall-clock budget names what spent it, ``budgeted 30 min on CPU (AMD EPYC), 1
    thread(s)`` (:func:`budget_spender`): the same minutes buy different numbers of steps
    on other hardware or threads, so runs budgeted on different ones are never averaged."""
    label = run.get("protocol") or UNLABELLED
    return "; ".join(f"{part} on {budget_spender(run)}" if part.startswith("budgeted ") else part
                     for part in label.split("; "))


def budget(run: dict[str, Any]) -> str | None:
    """The wall-clock budget part of :func:`protocol` (``budgeted 30 min on ...``), if any."""
    return next((p for p in protocol(run).split("; ") if p.startswith("budgeted ")), None)


def budget_spender(run: dict[str, Any]) -> str:
    """The hardware and threads a run trained on (each once, in order of first use)."""
    from knn.train import segments

    parts = segments.of(run)
    spent = " then ".join(dict.fromkeys(segments.hardware(s) for s in parts))
    n = threads(run)
    return f"{spent}, {n}" if n else spent


def fmt_metric(metric: str, value: float) -> str:
    """A metric value as tables show it: 4 decimals for RMSE and MAE, else 2."""
    return f"{value:.4f}" if metric in ("rmse", "mae") else f"{value:.2f}"


def run_key(run: dict[str, Any]) -> tuple:
    """Sort key of a run, completed or failed: task, variant, seed, folder."""
    seed = run.get("seed")
    return (str(run.get("task")), str(run.get("variant")), seed if isinstance(seed, int) else -1,
            run["run_dir"])


def params(run: dict[str, Any]) -> int:
    """The run's trained parameters; a closed-form model's fitted size where it records one."""
    fitted = (run.get("extra") or {}).get("fitted_parameters")
    return run["params"] if fitted is None else fitted


def listing(runs: list[dict[str, Any]]) -> list[str]:
    """A header and one aligned line per run (completed or failed), sorted by task, variant,
    seed and folder; see the module docstring for the columns."""
    rows = [["task", "model", "variant", "seed", "valid", "test", "protocol", "run_dir"]]
    for r in sorted(runs, key=run_key):
        head = [str(r.get(k, "?")) for k in ("task", "model", "variant", "seed")]
        if r.get("status") == "failed":
            rows.append(head + ["-", "-", "FAILED", r["run_dir"], r.get("error", "")])
            continue
        m = r["metric"]
        rows.append(head + [f"{m} {fmt_metric(m, r['metrics'][split][m])}"
                            for split in ("valid", "test")] + [protocol(r), r["run_dir"]])
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    return ["  ".join([c.ljust(w) for c, w in zip(row, widths)] + row[7:]).rstrip()
            for row in rows]


def aggregate(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per (task, variant, protocol), in the order first seen; see the module
    docstring."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["variant"], protocol(r)), []).append(r)
    rows = []
    for (task, variant, label), members in groups.items():
        members = sorted(members, key=lambda r: (r["seed"], r["run_dir"]))
        metric = members[0]["metric"]
        sign = 1.0 if higher_is_better(task) else -1.0
        valid = [r["metrics"]["valid"][metric] for r in members]
        test = [r["metrics"]["test"][metric] for r in members]
        chosen = max(range(len(members)), key=lambda i: (sign * valid[i], -i))
        best = max(range(len(members)), key=lambda i: (sign * test[i], -i))
        test_mean, test_std = mean_std(test)
        valid_mean, valid_std = mean_std(valid)
        walls = [r["wall_seconds"] for r in members]
        rows.append({
            "task": task,
            "variant": variant,
            "model": members[0]["model"],
            "params": params(members[0]),
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
            "protocol": label,
            "paper": members[0].get("paper"),
            "runs": [{"seed": r["seed"], "valid": v, "test": t, "wall_seconds": r["wall_seconds"],
                      "epochs": r.get("epochs"), "steps": r.get("steps"),
                      "best_epoch": r.get("best_epoch"),
                      "stop_reason": r.get("stop_reason"), "device": r.get("device"),
                      "git_commit": r.get("git_commit"), "command": r.get("command"),
                      "cpu_model": cpu_model(r),
                      "threads": threads(r),
                      "where": where(r),
                      "timeline": timeline(r["run_dir"]), "run_dir": r["run_dir"]}
                     for r, v, t in zip(members, valid, test)],
        })
    return rows


def pm(metric: str, mean: float, std: float | None) -> str:
    """``mean ± std`` in the metric's format; the mean alone when there is no spread."""
    text = fmt_metric(metric, mean)
    return text if std is None else f"{text} ± {fmt_metric(metric, std)}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def markdown(rows: list[dict[str, Any]], title: str | None = None) -> str:
    """The table (one row per group) and a list of the runs behind it."""
    lines = [f"## {title}", ""] if title else []
    lines += [
        "| task | variant | model | runs (seeds) | test of best-valid run | best test of n "
        "(paper's protocol) | test mean ± std | valid mean ± std | paper | params (paper) "
        "| wall min/run (mean, min-max) | protocol |",
        "|" + "---|" * 12,
    ]
    for g in rows:
        paper = (g["paper"] or {}).get("value")
        paper_params = (g["paper"] or {}).get("params")
        w, m = g["wall_seconds"], g["metric"]
        cells = [
            g["task"], g["variant"], g["model"],
            f"{g['n_runs']} ({', '.join(map(str, g['seeds']))})",
            f"{fmt_metric(m, g['selected']['test'])} (seed {g['selected']['seed']})",
            f"{fmt_metric(m, g['best_test']['test'])} (seed {g['best_test']['seed']})",
            pm(m, g["test_mean"], g["test_std"]), pm(m, g["valid_mean"], g["valid_std"]),
            "-" if paper is None else str(paper),
            f"{g['params']:,} ({'-' if paper_params is None else f'{paper_params:,}'})",
            f"{_minutes(w['mean'])} ({_minutes(w['min'])}-{_minutes(w['max'])})",
            g["protocol"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        lines += ["", f"Metric: {', '.join(sorted({g['metric'] for g in rows}))}; "
                  "std is the sample standard deviation over runs.", "", "Runs:", ""]
        for g in rows:
            lines += [run_line(g["variant"], g["metric"], r) for r in g["runs"]]
    return "\n".join(lines) + "\n"


def run_line(variant: str, metric: str, run: dict[str, Any]) -> str:
    """One run's line under the table: scores, length, where it ran, when, and its command."""
    best = "" if run.get("best_epoch") is None or run.get("epochs") is None else \
        f", best epoch {run['best_epoch']} of 0-{run['epochs'] - 1}"
    commit = run.get("git_commit") or ""
    short = commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")
    where = ", ".join(str(x) for x in (
        run.get("where") or run["device"],
        run.get("threads"),
        f"commit {short}" if short else None) if x)
    when = f" [{'; '.join(run['timeline'])}]" if run.get("timeline") else ""
    steps = "" if run.get("steps") is None else f", {run['steps']:,} steps"
    return (f"- {variant} seed {run['seed']}: valid {fmt_metric(metric, run['valid'])}, test "
            f"{fmt_metric(metric, run['test'])}, {_minutes(run['wall_seconds'])} min, "
            f"{run['epochs']} epochs{steps} ({run['stop_reason']}{best}), {where}{when}: "
            f"`{run['command']}`")


def write(rows: list[dict[str, Any]], prefix: str | Path, title: str | None = None,
          command: str = "") -> None:
    """``PREFIX.md`` and ``PREFIX.json`` (with the provenance of this table: the command
    that made it, commit, machine), each written atomically."""
    from knn.train.provenance import provenance  # here: it imports torch, which a table needs not

    prefix = Path(prefix)
    # Provenance before any write: a rewritten, tracked PREFIX.md would make the tree dirty.
    payload = {**provenance(command), "title": title, "groups": rows}
    write_text(prefix.with_suffix(".md"), markdown(rows, title))
    write_json(payload, prefix.with_suffix(".json"))


def table_main(argv: list[str] | None, module: str, doc: str, task: str,
               collect_runs: Callable[..., list[dict[str, Any]]],
               build: Callable[[list[dict[str, Any]]], tuple[str, dict[str, Any]]]) -> int:
    """The command line of a paper table's tool (``python -m MODULE ROOT ... [--out PREFIX]``):
    the runs ``collect_runs(*roots)`` finds, ``build(runs)`` as Markdown (printed, and
    written to ``PREFIX.md``) and data (``PREFIX.json``, with the provenance of this
    command); 1 with a one-line error when the roots hold no run of ``task``."""
    from knn.train.provenance import provenance  # here: it imports torch, which a table needs not

    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", help="run folders (searched for result.json) or files")
    parser.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    args = parser.parse_args(argv)
    runs = collect_runs(*args.roots)
    if not runs:
        print(f"error: no task={task} result.json under {', '.join(args.roots)}", file=sys.stderr)
        return 1
    text, data = build(runs)
    print(text, end="")
    if args.out:
        command = shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])
        # Provenance before any write: the rewritten, tracked PREFIX.md would make the tree dirty.
        payload = {**provenance(command), **data}
        write_text(Path(f"{args.out}.md"), text)
        write_json(payload, Path(f"{args.out}.json"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.results",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=[RESULTS_ROOT],
                        help=f"folders searched for result.json and failed.json, or files "
                             f"(default: {RESULTS_ROOT})")
    parser.add_argument("--task", help="keep runs whose task matches this glob")
    parser.add_argument("--model", help="keep runs whose model matches this glob")
    parser.add_argument("--variant", help="keep runs whose variant matches this glob")
    parser.add_argument("--list", action="store_true",
                        help="one line per run (failed ones included) instead of the table")
    parser.add_argument("--out", help="write OUT.md and OUT.json")
    parser.add_argument("--title", help="heading of the Markdown table")
    args = parser.parse_args(argv)
    missing = [r for r in args.roots if not Path(r).exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 1
    where = dict(task=args.task, model=args.model, variant=args.variant)
    runs = select(collect(*args.roots), **where)
    failed = select(collect_failed(*args.roots), **where)
    if args.list:
        if not runs and not failed:
            print(f"error: no matching run under {', '.join(args.roots)}", file=sys.stderr)
            return 1
        print("\n".join(listing(runs + failed)))
        return 0
    if failed:
        print(f"note: {len(failed)} failed run(s) not in the table (see --list)", file=sys.stderr)
    if not runs:
        which = " matching the filters" if any(where.values()) else ""
        print(f"error: no result.json{which} under {', '.join(args.roots)}", file=sys.stderr)
        return 1
    rows = aggregate(runs)
    if args.out:
        argv_shown = sys.argv[1:] if argv is None else argv
        write(rows, args.out, args.title, shlex.join(["python", "-m", "knn.tools.results", *argv_shown]))
    print(markdown(rows, args.title), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
