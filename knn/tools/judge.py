"""A paper table's rows judged from data: the orderings and targets its experiment files declare.

Everything judged is declared in the experiment files' ``paper:`` field, so a new table
needs configs, not code:

* **an ordering**: ``paper.better_than: [<experiment>, ...]``, the rows the paper reports
  this one better than (``tests/tools/test_judge.py`` checks every declaration against
  the paper's values). Each pair is judged on our runs' mean test value with both sides'
  spread (:func:`knn.tools.compare.verdict`): the paper's better row ``ahead``,
  ``behind`` or ``within the spread``. Only rows of one label (protocol and substitution,
  :func:`knn.tools.rows.label`) are compared, with one exception: a closed-form row (a
  fit without a training schedule, ``extra.fitted_parameters``) of the ``full`` protocol
  stands in under any label on the same data whose protocol changes the schedule only;
* **a target**, ``paper.target``, on the best test value of n:
  ``within: f`` (within the fraction f of the paper's value), ``at_least: x`` or
  ``at_most: x`` (a bound of the project's own, e.g. where a substitution puts the
  paper's value out of reach); ``best_of: n``: the seeds a final verdict needs (with
  fewer a miss reads "so far"). Beside it: the test value of the run with the best
  validation value, what one would pick without the test set;
* **a peer target**, ``paper.target.peer: <name>``: the row's mean over seeds against the
  peer's runs (:func:`peer`: ``experiments/peers/<name>/``) on each of ``metrics``,
  better in the mean and judged with both spreads; with ``rate: <count>``, also the
  row's whole-run rate (``extra.throughput[<count>]`` over the run's wall time) at or
  above the peer's ``<count>_per_second``, compared only when both ran on one CPU (rates
  from two machines say nothing). Met when every mean is better and the rate holds (said
  to be "in the mean" only where a metric is within the spread); open while the rate
  cannot be compared.

Rows are :func:`knn.tools.rows.table_rows` dicts: ``experiment`` (with its ``paper``),
``group`` (:func:`knn.tools.results.aggregate`), ``members`` (the runs), ``label``,
``protocol`` and ``substitution``. Smoke runs are never judged.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from knn.paths import REPO_ROOT
from knn.tools import compare, results
from knn.tools.results import fmt_metric

#: Config keys that change the data a model sees: a protocol naming one gets no
#: closed-form stand-in from the full protocol.
DATA_KEYS = ("task.data.", "task.limit_train_items", "task.featurizer", "task.standardize")
#: Where the peers' runs are (``experiments/peers/<name>/``).
PEERS = REPO_ROOT / "experiments" / "peers"


def _judged(row: dict[str, Any]) -> bool:
    return row["group"] is not None and not row["group"]["protocol"].startswith("smoke")


def _side(group: dict[str, Any]) -> dict[str, Any]:
    return compare.summary([r["test"] for r in group["runs"]], group["higher_is_better"])


def _closed_form(row: dict[str, Any]) -> bool:
    return all((r.get("extra") or {}).get("fitted_parameters") is not None for r in row["members"])


def counterpart(rows: list[dict[str, Any]], name: str, row: dict[str, Any]) -> dict[str, Any] | None:
    """Experiment ``name``'s row comparable with ``row``: of its label, else its closed-form
    ``full`` row on the same data when ``row``'s protocol changes the schedule only."""
    mine = [r for r in rows if r["experiment"].name == name and _judged(r)]
    own = next((r for r in mine if r["label"] == row["label"]), None)
    if own is not None or any(key in row["group"]["protocol"] for key in DATA_KEYS):
        return own
    return next((r for r in mine if _closed_form(r) and r["group"]["protocol"] == "full"
                 and r["substitution"] == row["substitution"]), None)


def ordering(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each declared pair (``paper.better_than``) with runs on both sides: ``better`` and
    ``worse`` experiment names, their paper values, our sides, the verdict, the label and
    ``stand_in`` (the worse side is a closed-form row of another label)."""
    judged = []
    for row in filter(_judged, rows):
        e = row["experiment"]
        for name in e.paper.get("better_than") or []:
            other = counterpart(rows, name, row)
            if other is None:
                continue
            higher = row["group"]["higher_is_better"]
            a, b = _side(row["group"]), _side(other["group"])
            judged.append({"label": row["label"], "better": e.name, "worse": name,
                           "paper": [e.paper.get("value"), other["experiment"].paper.get("value")],
                           "ours": [a, b], "verdict": compare.verdict(a, b, higher),
                           "metric": row["group"]["metric"],
                           "stand_in": other["label"] != row["label"]})
    return judged


def _limit(target: dict[str, Any], paper_value: float | None, higher: bool) -> float | None:
    if target.get("within") is not None and paper_value is not None:
        return paper_value * (1 - target["within"] if higher else 1 + target["within"])
    return target.get("at_least" if higher else "at_most")


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with runs whose experiment declares a bound (``within``, ``at_least``,
    ``at_most``): its best of n against the bound, whether it is met, and whether the
    verdict is final (``best_of`` seeds run)."""
    judged = []
    for row in filter(_judged, rows):
        e, g = row["experiment"], row["group"]
        target, higher = e.paper.get("target") or {}, g["higher_is_better"]
        limit = _limit(target, e.paper.get("value"), higher)
        if limit is None:
            continue
        best = g["best_test"]
        met = best["test"] >= limit if higher else best["test"] <= limit
        judged.append({"experiment": e.name, "label": row["label"], "target": target,
                       "paper": e.paper.get("value"), "limit": limit, "best": best["test"],
                       "best_seed": best["seed"], "selected": g["selected"], "n_runs": g["n_runs"],
                       "metric": g["metric"], "met": met,
                       "final": met or g["n_runs"] >= target.get("best_of", 0)})
    return judged


def peer(name: str, folder: Path | None = None) -> dict[str, Any] | None:
    """A peer's runs, read from its data files; None when there are none (e.g. an installed
    package without the repository's ``experiments/``).

    The measured runs (``result.json`` for seed 0, ``seed<N>/result.json`` for the others;
    full runs only) give ``test_rmse`` and ``test_mae`` (any top-level ``test_*``) as means
    over the seeds, with ``*_std`` (None for one run) and ``*_values``, ``n_runs`` and
    ``seeds``, and ``where`` each seed ran; the rest (params, version, machine, rates) is
    seed 0's. Without them,
    ``reported.json`` (one reported measurement) stands in."""
    folder = folder or PEERS / name
    files = [f for f in [folder / "result.json", *sorted(folder.glob("seed*/result.json"))]
             if f.is_file()]
    measured = [r for r in (json.loads(f.read_text()) for f in files) if r.get("full_run", True)]
    if measured:
        ref, origin, shown = dict(measured[0]), f"measured by make peer-{name}", folder
    elif (folder / "reported.json").is_file():
        ref = json.loads((folder / "reported.json").read_text())
        measured, origin, shown = [ref], "reported, not re-run here", folder / "reported.json"
    else:
        return None
    for key in [k for k in ref if k.startswith("test_") and isinstance(ref[k], float)]:
        values = [r[key] for r in measured if r.get(key) is not None]
        ref[key] = statistics.fmean(values)
        ref[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else None
        ref[f"{key}_values"] = values
    ref["n_runs"], ref["seeds"] = len(measured), [r.get("seed", 0) for r in measured]
    ref["where"] = {r.get("seed", 0): compare.where(r) for r in measured}  # each seed's machine
    ref.setdefault("name", f"{name} {ref.get(f'{name}_version', '')}".strip())
    file = shown.relative_to(REPO_ROOT) if shown.is_relative_to(REPO_ROOT) else shown
    return {**ref, "origin": origin, "file": str(file)}


def whole_run_rate(run: dict[str, Any], count: str) -> float | None:
    """``extra.throughput[count]`` (e.g. molecules trained) over the run's wall time
    (validation and testing included, as a peer's whole command counts them)."""
    done, wall = ((run.get("extra") or {}).get("throughput") or {}).get(count), run["wall_seconds"]
    return done / wall if done and wall else None


def versus_peers(rows: list[dict[str, Any]], peers: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each row with runs whose experiment declares ``target.peer``: per metric both sides
    and the verdict, the rate comparison and whether the target is met (True), missed
    (False) or open (None). ``peers``: name -> :func:`peer` result, read when absent."""
    judged = []
    for row in filter(_judged, rows):
        target = row["experiment"].paper.get("target") or {}
        if not target.get("peer"):
            continue
        name = target["peer"]
        ref = peers.get(name) if peers is not None else peer(name)
        if ref is None:
            continue
        higher = row["group"]["higher_is_better"]
        metrics = []
        for m in target.get("metrics") or [f"test_{row['group']['metric']}"]:
            ours = compare.summary([compare.metric_of(r, m) for r in row["members"]], higher)
            theirs = compare.summary(ref.get(f"{m}_values") or [ref[m]], higher)
            better = ours["mean"] > theirs["mean"] if higher else ours["mean"] < theirs["mean"]
            metrics.append({"metric": m, "higher_is_better": higher, "ours": ours, "peer": theirs,
                            "better": better,
                            "verdict": compare.verdict(ours, theirs, higher)})
        rate = None
        if target.get("rate"):
            count = target["rate"]
            mine = [x for r in row["members"] if (x := whole_run_rate(r, count)) is not None]
            cpus = sorted({results.cpu_model(r) or "an unrecorded CPU" for r in row["members"]})
            peer_cpu, peer_rate = results.cpu_model(ref), ref.get(f"{count}_per_second")
            ours_rate = statistics.fmean(mine) if mine else None
            same = peer_cpu is not None and cpus == [peer_cpu] and None not in (ours_rate, peer_rate)
            rate = {"count": count, "ours": ours_rate, "peer": peer_rate, "cpus": [cpus, peer_cpu],
                    "holds": (ours_rate >= peer_rate) if same else None}  # type: ignore[operator]
        means = all(m["better"] for m in metrics)
        met = False if not means or (rate and rate["holds"] is False) else \
            None if rate and rate["holds"] is None else True
        judged.append({"experiment": row["experiment"].name, "label": row["label"],
                       "peer": {k: ref[k] for k in ("name", "origin", "file", "seeds")},
                       "metrics": metrics, "rate": rate, "met": met})
    return judged


def _digits(metric: str) -> int:
    """The decimals :func:`knn.tools.results.fmt_metric` shows (``test_rmse`` or ``rmse``)."""
    return len(fmt_metric(metric.removeprefix("test_"), 0.0).split(".")[1])


def _target_line(t: dict[str, Any]) -> str:
    m, target = t["metric"], t["target"]
    bound = (f"within {target['within']:.0%} of the paper's {t['paper']}"
             if target.get("within") is not None else
             f"at or {'above' if 'at_least' in target else 'below'} the project's bound")
    verdict = "met" if t["met"] else "not met" if t["final"] else \
        f"not met so far ({t['n_runs']} of {target['best_of']} seeds)"
    chosen = t["selected"]
    return (f"- target `{t['experiment']}` ({t['label']}): best of {t['n_runs']} "
            f"{fmt_metric(m, t['best'])} (seed {t['best_seed']}) {bound} "
            f"(limit {fmt_metric(m, t['limit'])}): **{verdict}**; the best-validation run's "
            f"test value {fmt_metric(m, chosen['test'])} (seed {chosen['seed']})")


def _peer_line(p: dict[str, Any]) -> str:
    peer_ = p["peer"]
    parts = [compare.line(f"`{p['experiment']}`", m["ours"], peer_["name"], m["peer"], m["metric"],
                          m["higher_is_better"], _digits(m["metric"])) for m in p["metrics"]]
    r = p["rate"]
    if r:
        mine, theirs = r["cpus"]
        standing = ("yes" if r["holds"] else "NO") if r["holds"] is not None else \
            f"not compared: ours on {', '.join(mine)}, the peer's on {theirs or 'an unrecorded CPU'}"
        ours = "-" if r["ours"] is None else f"{r['ours']:.0f}"
        parts.append(f"whole-run {r['count']}/s {ours} vs {r['peer']:.0f}, at or above: {standing}")
    verdict = {True: "met", False: "not met", None: "open"}[p["met"]]
    close = [m["metric"] for m in p["metrics"] if m["verdict"].startswith("within the spread")]
    if p["met"] and close:  # better in the mean only: seed noise could flip it
        verdict += f" in the mean, within the spread on {', '.join(close)}"
    return (f"- target `{p['experiment']}` ({p['label']}) against {peer_['name']} "
            f"({peer_['origin']}, `{peer_['file']}`), better in the mean on every metric"
            + (" at an equal or higher rate" if r else "") + f": **{verdict}**; "
            + "; ".join(parts))


def markdown(rows: list[dict[str, Any]], peers: dict[str, Any] | None = None) -> list[str]:
    """The judgements as Markdown lines (none when nothing can be judged)."""
    lines = [_target_line(t) for t in targets(rows)]
    lines += [_peer_line(p) for p in versus_peers(rows, peers)]
    for o in ordering(rows):
        m, (a, b) = o["metric"], o["ours"]
        shown = ["-" if v is None else str(v) for v in o["paper"]]
        stand_in = "; its closed-form fit of the full protocol" if o["stand_in"] else ""
        lines.append(f"- the paper's order `{o['better']}` before `{o['worse']}` ({shown[0]} "
                     f"vs {shown[1]}; {o['label']}{stand_in}): ours {compare.fmt(a, _digits(m))} "
                     f"against {compare.fmt(b, _digits(m))}: **{o['verdict']}**")
    if not lines:
        return []
    return ["Judged from the experiment files (`paper.better_than`, `paper.target`; "
            "`knn.tools.judge`): targets on the best of n; the paper's order and peers on "
            "the mean test value, with both sides' spread (ahead: the paper's better row is "
            "ahead in ours too).", "", *lines, ""]
