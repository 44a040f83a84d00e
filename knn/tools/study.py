"""A one-factor-at-a-time study as a table: each run against a base run.

    python -m knn.tools.study STUDY_DIR [--base NAME] [--include RUN_DIR ...] [--out PREFIX]

Every ``result.json`` below ``STUDY_DIR`` is one run, named by its folder's path below
``STUDY_DIR``; the run named ``NAME`` (default ``base``; an included run's name, below,
works too) is the reference. A run's factor is what its
config changes from the base run's (:func:`knn.train.protocol.differences`,
so seeds, threads, paths and checkpointing do not count), e.g.
``model.readout=sum``; an ensemble of runs (``python -m knn.tools.ensemble``) is
one row, ``ensemble of 3 (seeds 0,1,2)``. Per run: the factor, every validation and test metric
the run recorded, the change of the task's metric on validation against the
base (the study selects on validation only; test is shown, never used to
choose), wall time, training throughput (``extra.throughput``, where the task
records it: molecules/s for the graph tasks), epochs, the best epoch, the parameter count,
seed, commit and the CPU it ran on
(throughputs from two machines do not compare). Rows
follow the base's validation metric, best first.

A factor run with several seeds (folders such as ``dropout_0.1``, ``dropout_0.1_seed1``; the
base's own seeds are factor ``base``) is then summarised over them, in a second table: the
mean ± sample std of each metric, the change of the mean validation metric against the
base's mean, and whether that change is within the seed spread (no larger than the larger
std of the two rows; not measured while either row has one seed). A single run's best epoch
is the minimum of a noisy validation curve, so factors are compared on these means.
:func:`select` then names the study's choice, on validation only: the best mean among
factors with at least three seeds that beat the base's mean by more than the seed spread,
else the base. It is final once the study is declared complete (``--complete``: every
planned run is in) and no factor with fewer seeds still looks better (printed, and
``selected`` in the JSON; a test holds the tuned experiment config to a final choice).

``--include RUN_DIR`` (repeatable) adds runs from outside the study folder, e.g. a results
tree's rows that differ from the base by one factor (Table 3's WLN seeds are the base with
re-sampling on); they are named ``<parent>/<folder>`` (``wln/seed1``). The base may be one of
them: a study of one change to a Table row's seed keeps only the changed run.

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json`` (the rows with the
table's provenance: command, commit, machine); it always prints the Markdown.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from knn.errors import ConfigError
from knn.io import write_json, write_text
from knn.tools import results
from knn.train.protocol import differences, flatten, format_value, upgrade
from knn.train.provenance import provenance


def changes(run: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """What ``run``'s config changes from ``base``'s, as ``{dotted key: value}``; keys renamed
    since either run are read under today's names (:func:`knn.train.protocol.upgrade`)."""
    run_cfg, base_cfg = upgrade(run["config"]), upgrade(base["config"])
    base_keys = flatten(base_cfg)
    # A key the base's (older) code did not have yet, left null (off), changes nothing.
    return {k: v for k, v in differences(run_cfg, base_cfg) if k in base_keys or v is not None}


def factor(run: dict[str, Any], base: dict[str, Any]) -> str:
    """:func:`changes` as overrides; ``base`` when nothing; an ensemble
    (:mod:`knn.tools.ensemble`) is named as such, with its seeds."""
    changed = ", ".join(f"{k}={format_value(v)}" for k, v in changes(run, base).items())
    if "ensemble" in run:
        members = run["ensemble"]["members"]
        label = f"ensemble of {len(members)} (seeds {','.join(str(m['seed']) for m in members)})"
        return label + (f", {changed}" if changed else "")
    return changed or "base"


def rows(study_dir: str | Path, base_name: str = "base",
         include: tuple[str | Path, ...] = ()) -> list[dict[str, Any]]:
    """One dict per run below ``study_dir`` and in the ``include`` folders, best validation
    metric first."""
    root = Path(study_dir).resolve()
    runs = [{**r, "run": Path(r["run_dir"]).resolve().relative_to(root).as_posix()}
            for r in results.collect(study_dir)]
    included = [{**r, "run": f"{Path(r['run_dir']).parent.name}/{Path(r['run_dir']).name}"}
                for r in results.collect(*include)]
    names = [r["run"] for r in runs + included]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"{study_dir}: two runs share the name {twice[0]!r}; give the study's "
                          f"own run another folder name than the included <parent>/<folder>")
    bases = [r for r in runs + included if r["run"] == base_name]
    if len(bases) != 1:
        raise ConfigError(f"{study_dir}: expected one run named {base_name!r} (a folder below it, "
                          f"or an included run's <parent>/<folder>), found {len(bases)}")
    base = bases[0]
    metric = base["metric"]
    sign = 1.0 if results.higher_is_better(base["task"]) else -1.0
    out = []
    for r in runs + included:
        throughput = ((r.get("extra") or {}).get("throughput") or {}).get("molecules_per_second")
        out.append({
            "run": r["run"],
            "task": r["task"],
            "factor": factor(r, base),
            "changes": changes(r, base),
            "ensemble": "ensemble" in r,
            "metric": metric,
            "valid": r["metrics"]["valid"],
            "test": r["metrics"]["test"],
            "valid_change": r["metrics"]["valid"][metric] - base["metrics"]["valid"][metric],
            "wall_seconds": r["wall_seconds"],
            "molecules_per_second": throughput,
            "epochs": r.get("epochs"),
            "best_epoch": r.get("best_epoch"),
            "params": r.get("params"),
            "seed": r.get("seed"),
            "git_commit": r.get("git_commit"),
            "cpu_model": results.cpu_model(r),
            "command": r.get("command"),
        })
    return sorted(out, key=lambda row: -sign * row["valid"][metric])


def by_factor(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``table``'s single runs grouped by factor: n, seeds, mean ± std of every metric, and the
    mean validation metric's change against the base's (``spread``: :func:`results.within_spread`,
    None while either has one seed).
    Best mean validation metric first; ensembles are left out (they are no seed)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in table:
        if not row["ensemble"]:
            groups.setdefault(row["factor"], []).append(row)
    if not table or "base" not in groups:
        return []
    metric = table[0]["metric"]
    sign = 1.0 if results.higher_is_better(table[0]["task"]) else -1.0
    summary = []
    for name, runs in groups.items():
        stats = {split: {m: results.mean_std([r[split][m] for r in runs])
                         for m in runs[0][split]} for split in ("valid", "test")}
        rates = [r["molecules_per_second"] for r in runs if r["molecules_per_second"] is not None]
        summary.append({"factor": name, "changes": runs[0]["changes"], "runs": sorted(r["run"] for r in runs),
                        "seeds": sorted(r["seed"] for r in runs), "n": len(runs), "metric": metric,
                        **stats, "molecules_per_second": statistics.fmean(rates) if rates else None})
    base_mean, base_std = next(g for g in summary if g["factor"] == "base")["valid"][metric]
    for g in summary:
        mean, std = g["valid"][metric]
        g["valid_change"] = mean - base_mean
        # A single run's draw is no spread: judged only when both rows have several seeds.
        g["spread"] = (results.within_spread(mean, base_mean, [std, base_std])
                       if std is not None and base_std is not None else None)
    return sorted(summary, key=lambda g: -sign * g["valid"][metric][0])


#: Seeds a factor (and the base) needs before :func:`select` may choose it.
MIN_SEEDS = 3


def select(summary: list[dict[str, Any]], complete: bool = False,
           min_seeds: int = MIN_SEEDS) -> dict[str, Any] | None:
    """The study's choice on validation only, from :func:`by_factor`'s ``summary``.

    A factor with ``min_seeds`` seeds or more is *judged*; one with fewer is *pending* (it
    needs more seeds) when its mean beats the base's by more than the seed spread, else
    *screened out* (one draw no better than the base's seeds is not worth replicating).
    ``leading`` is the judged factor with the best mean that beats the base beyond the spread,
    else the base (None while the base has fewer than ``min_seeds`` seeds). The choice is
    ``final`` only when the study is ``complete`` (every planned run is in: the author says
    so) and nothing is pending. Returns None without a base; else ``{"leading": group or None,
    "final": bool, "judged", "pending", "screened_out": [factor names]}``.
    """
    base = next((g for g in summary if g["factor"] == "base"), None)
    if base is None:
        return None
    metric = base["metric"]
    base_mean, base_std = base["valid"][metric]
    ahead = summary[:summary.index(base)]  # summary is sorted best mean first

    def beats_base(g: dict[str, Any]) -> bool:
        mean, std = g["valid"][metric]
        return g in ahead and results.within_spread(mean, base_mean, [std, base_std]) is False

    others = [g for g in summary if g is not base]
    judged = [g for g in others if g["n"] >= min_seeds]
    pending = [g for g in others if g["n"] < min_seeds and beats_base(g)]
    screened = [g for g in others if g["n"] < min_seeds and not beats_base(g)]
    leading = next((g for g in judged if beats_base(g)), base) if base["n"] >= min_seeds else None
    return {"leading": leading, "final": complete and leading is not None and not pending,
            **{key: [g["factor"] for g in groups] for key, groups in
               (("judged", judged), ("pending", pending), ("screened_out", screened))}}


def _signed(metric: str, change: float) -> str:
    """A change of ``metric`` with its sign, in the metric's format (+0.0123 RMSE, +1.25 acc)."""
    return ("-" if change < 0 else "+") + results.fmt_metric(metric, abs(change))


def _seeds(seed: int | list[int] | None) -> str:
    return ",".join(map(str, seed)) if isinstance(seed, list) else str(seed)


def markdown(table: list[dict[str, Any]], complete: bool = False) -> str:
    """The study table and the command of each run."""
    names = sorted({k for row in table for k in row["valid"]})
    metric = table[0]["metric"] if table else ""
    head = (["run", "factor"] + [f"valid {m}" for m in names] + [f"test {m}" for m in names]
            + [f"Δ valid {metric} vs base", "wall min", "molecules/s", "epochs", "best epoch (from 0)",
               "params", "seed", "commit", "CPU"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        cells = [row["run"], f"`{row['factor']}`"]
        cells += [results.fmt_metric(m, row[split][m]) if m in row[split] else "-"
                  for split in ("valid", "test") for m in names]
        cells += [_signed(metric, row["valid_change"]), f"{row['wall_seconds'] / 60:.1f}",
                  "-" if row["molecules_per_second"] is None else f"{row['molecules_per_second']:.0f}",
                  str(row["epochs"]), "-" if row["best_epoch"] is None else str(row["best_epoch"]),
                  "-" if row["params"] is None else f"{row['params']:,}", _seeds(row["seed"]),
                  str(row["git_commit"])[:12], row["cpu_model"] or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    summary = by_factor(table)
    lines += _factor_lines(summary) + _selection_lines(summary, complete)
    lines += ["", "Commands:", ""] + [f"- {row['run']}: `{row['command']}`" for row in table]
    return "\n".join(lines) + "\n"


def _factor_lines(summary: list[dict[str, Any]]) -> list[str]:
    """The by-factor table, when some factor has more than one seed."""
    if not any(g["n"] > 1 for g in summary):
        return []
    metric = summary[0]["metric"]
    names = list(summary[0]["test"])
    head = (["factor", "n", "seeds", f"valid {metric}", f"Δ valid {metric} vs base", "spread"]
            + [f"test {m}" for m in names] + ["molecules/s"])
    lines = ["", f"Over seeds (mean ± sample std), best mean validation {metric} first:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    spread = {True: "within", False: "beyond", None: "not measured (one seed)"}
    for g in summary:
        cells = [f"`{g['factor']}`", str(g["n"]), _seeds(g["seeds"]),
                 results.pm(metric, *g["valid"][metric]),
                 "-" if g["factor"] == "base" else _signed(metric, g["valid_change"]),
                 "-" if g["factor"] == "base" else spread[g["spread"]]]
        cells += [results.pm(m, *g["test"][m]) for m in names]
        cells.append("-" if g["molecules_per_second"] is None else f"{g['molecules_per_second']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _selection_lines(summary: list[dict[str, Any]], complete: bool) -> list[str]:
    """What :func:`select` chooses, or what it waits for."""
    choice = select(summary, complete)
    if choice is None:
        return []
    base = next(g for g in summary if g["factor"] == "base")
    lines = ["", f"Selection on validation only (the best mean over >= {MIN_SEEDS} seeds that beats "
                 f"the base's beyond the seed spread; else the base):"]
    if choice["leading"] is None:
        lines.append(f"- no leader yet: the base has {base['n']} of {MIN_SEEDS} seeds")
    else:
        lines.append(f"- leading: `{choice['leading']['factor']}`")
    if choice["final"]:
        lines.append("- final: the study is complete and nothing is pending")
    else:
        reasons = [text for text, on in (("planned runs are still to come (no --complete)", not complete),
                                         ("pending factors need more seeds", choice["pending"])) if on]
        lines.append("- not final: " + "; ".join(reasons or ["the base needs more seeds"]))
    for key, meaning in (("judged", f"{MIN_SEEDS}+ seeds"), ("pending", "beat the base on fewer seeds"),
                         ("screened_out", "fewer seeds, not better than the base beyond its spread")):
        lines.append(f"- {key.replace('_', ' ')} ({meaning}): "
                     + (", ".join(f"`{f}`" for f in choice[key]) or "none"))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.study", description=__doc__.split("\n")[0])
    parser.add_argument("study_dir")
    parser.add_argument("--base", default="base",
                        help="the reference run: its folder below STUDY_DIR, or an included run's "
                             "<parent>/<folder> (default: base)")
    parser.add_argument("--include", action="append", default=[], metavar="RUN_DIR",
                        help="a run (or tree of runs) from outside STUDY_DIR; repeatable")
    parser.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    parser.add_argument("--complete", action="store_true",
                        help="every planned run is in: the selection may be final")
    args = parser.parse_args(argv)
    try:
        table = rows(args.study_dir, args.base, tuple(args.include))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = markdown(table, args.complete)
    print(text, end="")
    if args.out:
        command = shlex.join(["python", "-m", "knn.tools.study", *(sys.argv[1:] if argv is None else argv)])
        summary = by_factor(table)
        payload = {**provenance(command), "base": args.base, "runs": table,  # before any write
                   "by_factor": summary, "selected": select(summary, args.complete)}
        write_text(Path(f"{args.out}.md"), text)
        write_json(payload, Path(f"{args.out}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
