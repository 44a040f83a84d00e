"""Two sets of runs compared on one metric, with a verdict that respects their spread.

    python -m knn.tools.compare --a DIR [DIR ...] --b DIR [DIR ...] --metric test_rmse
                                [--names A B] [--lower-is-better | --higher-is-better]
                                [--per-epoch valid_ppl] [--out PREFIX]

Each side is every ``result.json`` below its folders: a trainer's run (the metric read
as ``metrics[split][name]``, ``test_rmse`` -> ``metrics.test.rmse``) or a peer's run that
stores it at top level (``experiments/peers/chemprop/run.py``: ``test_rmse``). Per side:
n, mean ± sample std (n - 1), the best of n beside it, and where its runs trained
(each part's hardware and torch version), and each run's epochs, steps and wall time
where its ``result.json`` records them. ``--per-epoch valid_ppl`` adds a table of that
metric after each full epoch, one row per run, read from the ``metrics.jsonl`` beside
each ``result.json``. The verdict of A against B:

* ``ahead`` / ``behind``: the means differ by more than the larger of the two stds;
* ``within the spread``: they differ by no more than that (seed noise could flip them);
* with one run on each side there is no spread: ``ahead (one run each, no spread
  measured)`` and so on;
* with one run on one side only, that side's spread is unknown and the other's stands
  in: ``ahead (spread measured on one side only)`` and so on.

Runs whose wall-clock budgets differ in minutes, hardware or threads
(``budgeted 30 min on CPU (AMD EPYC), 1 thread(s)`` against ``... on CPU (Intel Xeon) ...``)
are refused, on one side or across the two: they bought different numbers of steps.

The same function judges every stated comparison in the project's tables
(:mod:`knn.tools.cep_table`'s chemprop reference too), so a sentence in a README is the
generated line, not typed. With ``--out`` it writes ``PREFIX.md`` and ``PREFIX.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from knn.tools import results


def metric_of(result: dict[str, Any], name: str) -> float:
    """``test_rmse`` of a trainer's result (``metrics.test.rmse``) or of a peer's (top level)."""
    if name in result:
        return float(result[name])
    split, _, metric = name.partition("_")
    try:
        return float(result["metrics"][split][metric])
    except (KeyError, TypeError):
        raise KeyError(f"no {name} in this result (neither top level nor metrics.{split}.{metric})") from None


def summary(values: list[float], higher_is_better: bool) -> dict[str, Any]:
    """n, mean, sample std (None for one value) and the best of n."""
    if not values:
        raise ValueError("no runs on one side of the comparison")
    return {"n": len(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else None,
            "best": max(values) if higher_is_better else min(values), "values": list(values)}


def verdict(a: dict[str, Any], b: dict[str, Any], higher_is_better: bool) -> str:
    """A's standing against B (:func:`summary` dicts); see the module docstring."""
    diff = a["mean"] - b["mean"]
    better = diff > 0 if higher_is_better else diff < 0
    word = "level" if diff == 0 else "ahead" if better else "behind"
    within = results.within_spread(a["mean"], b["mean"], [a["std"], b["std"]])
    if within is None:
        return f"{word} (one run each, no spread measured)"
    standing = "within the spread" if within else word
    if a["std"] is None or b["std"] is None:
        return f"{standing} (spread measured on one side only)"
    return standing


def fmt(side: dict[str, Any], digits: int) -> str:
    """``0.9316 ± 0.0319 (n=3; best 0.8977)``, or the one value with ``(n=1)``."""
    mean = f"{side['mean']:.{digits}f}"
    if side["std"] is None:
        return f"{mean} (n=1)"
    return f"{mean} ± {side['std']:.{digits}f} (n={side['n']}; best {side['best']:.{digits}f})"


def line(name_a: str, a: dict[str, Any], name_b: str, b: dict[str, Any], metric: str,
         higher_is_better: bool, digits: int = 4) -> str:
    """One generated sentence: both sides, mean ± std first, best of n beside, the verdict."""
    return (f"{metric} ({'higher' if higher_is_better else 'lower'} is better): {name_a} "
            f"{fmt(a, digits)} against {name_b} {fmt(b, digits)}: "
            f"**{verdict(a, b, higher_is_better)}**")


def collect(folders: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(path, result) of every ``result.json`` below ``folders`` (a folder may be the file)."""
    found = []
    for folder in map(Path, folders):
        files = [folder] if folder.is_file() else sorted(folder.rglob("result.json"))
        found += [(str(f), json.loads(f.read_text())) for f in files]
    return found


def where(result: dict[str, Any]) -> str:
    """Where a run trained: a trainer's segments (:mod:`knn.train.segments`), or a peer's
    recorded CPU and torch."""
    if "metrics" in result:
        return results.where(result)
    cpu = (result.get("machine") or {}).get("cpu_model")
    torch_version = result.get("torch_version")
    return ", ".join(x for x in (f"CPU ({cpu})" if cpu else None,
                                 f"torch {torch_version}" if torch_version else None) if x) \
        or "not recorded"


def budgets(sides: list[list[tuple[str, dict[str, Any]]]]) -> list[str]:
    """The distinct wall-clock budgets, with what spent them, among the trainer runs of both
    sides (:func:`knn.tools.results.budget`): more than one means steps bought by
    different budgets, whose pooling or comparison says nothing about the models."""
    found = (results.budget(r) for runs in sides for _, r in runs if "metrics" in r)
    return sorted({b for b in found if b})


def run_sizes(name: str, runs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """``- A's runs: seed 0: 9 epochs, 7,703 steps, 30.3 min``; None when no run records
    its steps (a peer's)."""
    parts = [f"seed {r.get('seed')}: {r.get('epochs')} epochs, {r['steps']:,} steps, "
             f"{r['wall_seconds'] / 60:.1f} min" for _, r in runs
             if r.get("steps") is not None and r.get("wall_seconds") is not None]
    return f"- {name}'s runs: {'; '.join(parts)}" if parts else None


def per_epoch(names: list[str], sides: list[list[tuple[str, dict[str, Any]]]], metric: str,
              digits: int) -> list[str]:
    """A Markdown table of ``metric`` (``valid_ppl``: ``valid.ppl`` of each ``metrics.jsonl``
    line) after each full epoch, one row per run; an epoch a run did not finish is ``-``."""
    split, _, key = metric.partition("_")
    rows = []
    for name, runs in zip(names, sides):
        for path, result in runs:
            logged = results.epochs(Path(path).parent)
            values = {e["epoch"]: e[split][key] for e in logged
                      if not e.get("partial") and key in (e.get(split) or {})}
            rows.append((f"{name}, seed {result.get('seed')}", values))
    last = max((max(v) for _, v in rows if v), default=None)
    if last is None:
        raise KeyError(f"no metrics.jsonl with full epochs beside the result.json files for {metric}")
    header = ["run", *(str(e + 1) for e in range(last + 1))]
    lines = [f"{metric} after each full epoch:", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for label, values in rows:
        cells = [f"{values[e]:.{digits}f}" if e in values else "-" for e in range(last + 1)]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--a", nargs="+", required=True, help="folders of side A's runs")
    parser.add_argument("--b", nargs="+", required=True, help="folders of side B's runs")
    parser.add_argument("--metric", nargs="+", default=["test_rmse"],
                        help="metrics, e.g. test_rmse test_mae (default test_rmse)")
    parser.add_argument("--names", nargs=2, default=["A", "B"], metavar=("A", "B"))
    direction = parser.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", action="store_true")
    direction.add_argument("--lower-is-better", action="store_true", help="the default")
    parser.add_argument("--digits", type=int, default=4)
    parser.add_argument("--per-epoch", metavar="METRIC",
                        help="also tabulate METRIC (e.g. valid_ppl) after each full epoch")
    parser.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    args = parser.parse_args(argv)
    if missing := [f for f in (*args.a, *args.b) if not Path(f).exists()]:
        print(f"error: no such folder or file: {', '.join(missing)}", file=sys.stderr)
        return 1
    sides = [collect(args.a), collect(args.b)]
    for name, runs, folders in zip(args.names, sides, (args.a, args.b)):
        if not runs:
            print(f"error: no result.json for {name} under {', '.join(folders)}", file=sys.stderr)
            return 1
    if len(spent := budgets(sides)) > 1:
        print(f"error: the runs' wall-clock budgets differ in minutes, hardware or threads "
              f"({' | '.join(spent)}); pass folders of runs with one budget", file=sys.stderr)
        return 1
    higher = args.higher_is_better
    lines, data = [], []
    for metric in args.metric:
        try:
            a, b = (summary([metric_of(r, metric) for _, r in runs], higher) for runs in sides)
        except KeyError as err:
            print(f"error: {err.args[0]}", file=sys.stderr)
            return 1
        lines.append("- " + line(args.names[0], a, args.names[1], b, metric, higher, args.digits))
        data.append({"metric": metric, "a": a, "b": b, "verdict": verdict(a, b, higher)})
    places = [sorted({where(r) for _, r in runs}) for runs in sides]
    lines += [f"- where {name} ran: {'; '.join(p)}" for name, p in zip(args.names, places)]
    lines += [size for size in (run_sizes(n, runs) for n, runs in zip(args.names, sides)) if size]
    if args.per_epoch:
        try:
            lines += ["", *per_epoch(args.names, sides, args.per_epoch, args.digits)]
        except KeyError as err:
            print(f"error: {err.args[0]}", file=sys.stderr)
            return 1
    command = shlex.join(["python", "-m", "knn.tools.compare", *(sys.argv[1:] if argv is None else argv)])
    files = [[p for p, _ in runs] for runs in sides]
    text = "\n".join([f"Generated by `{command}` (mean ± sample std, best of n beside it; "
                      "within the spread: the means differ by no more than the larger std):",
                      "", *lines]) + "\n"
    print(text, end="")
    if args.out:
        from knn.io import write_json, write_text

        write_text(Path(f"{args.out}.md"), text)
        write_json({"command": command, "names": args.names, "files": files, "where": places,
                    "higher_is_better": higher, "comparisons": data}, Path(f"{args.out}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
