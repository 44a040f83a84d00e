"""A paper table's rows judged from data: the paper's ordering and the declared targets.

Both come from the experiment files, not from code, so a new table needs configs only:

* **the paper's ordering**: the rows' ``paper.value`` put them in an order (the metric's
  direction from the task); each pair of neighbours in that order is judged on our runs
  with :func:`knn.tools.compare.verdict` (mean test value, both sides' spread): the
  paper's better row ``ahead``, ``behind`` or ``within the spread``. Only rows of one
  label (protocol and substitution) are compared with each other;
* **a target**: ``paper.target: {within: 0.03}`` asks for the best test value of n
  within 3% of the paper's (above it when lower is better, below when higher is better).

Rows are :func:`knn.tools.report.section_rows` dicts: ``experiment`` (with its ``paper``),
``group`` (:func:`knn.tools.results.aggregate`) and ``label``.
"""

from __future__ import annotations

from typing import Any

from knn.tools import compare
from knn.tools.results import fmt_metric


def _side(group: dict[str, Any]) -> dict[str, Any]:
    return compare.summary([r["test"] for r in group["runs"]], group["higher_is_better"])


def ordering(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per label, the neighbours in the paper's order (rows with runs and a paper value):
    ``better``/``worse`` experiment names, their paper values, our sides and the verdict."""
    judged = []
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["group"] is not None and row["experiment"].paper.get("value") is not None:
            by_label.setdefault(row["label"], []).append(row)
    for label, members in by_label.items():
        higher = members[0]["group"]["higher_is_better"]
        members.sort(key=lambda r: r["experiment"].paper["value"], reverse=higher)
        for better, worse in zip(members, members[1:]):
            pb, pw = better["experiment"].paper["value"], worse["experiment"].paper["value"]
            if pb == pw:
                continue  # the paper does not order them
            a, b = _side(better["group"]), _side(worse["group"])
            judged.append({"label": label, "better": better["experiment"].name,
                           "worse": worse["experiment"].name, "paper": [pb, pw],
                           "ours": [a, b], "verdict": compare.verdict(a, b, higher),
                           "metric": better["group"]["metric"]})
    return judged


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with runs whose experiment declares ``paper.target.within``: its best of n
    against the paper's value moved by that fraction, and whether it is met."""
    judged = []
    for row in rows:
        e, g = row["experiment"], row["group"]
        within = (e.paper.get("target") or {}).get("within")
        if g is None or within is None or e.paper.get("value") is None:
            continue
        higher = g["higher_is_better"]
        limit = e.paper["value"] * (1 - within if higher else 1 + within)
        best = g["best_test"]["test"]
        judged.append({"experiment": e.name, "label": row["label"], "within": within,
                       "paper": e.paper["value"], "limit": limit, "best": best,
                       "n_runs": g["n_runs"], "metric": g["metric"],
                       "met": best >= limit if higher else best <= limit})
    return judged


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The judgements as Markdown lines (none when nothing can be judged)."""
    lines = []
    for t in targets(rows):
        m = t["metric"]
        lines.append(f"- target `{t['experiment']}` ({t['label']}): best of {t['n_runs']} "
                     f"{fmt_metric(m, t['best'])} within {t['within']:.0%} of the paper's "
                     f"{t['paper']} (limit {fmt_metric(m, t['limit'])}): "
                     f"**{'met' if t['met'] else 'not met'}**")
    for o in ordering(rows):
        m, (a, b) = o["metric"], o["ours"]
        lines.append(f"- the paper's order `{o['better']}` before `{o['worse']}` ({o['paper'][0]} "
                     f"vs {o['paper'][1]}; {o['label']}): ours {compare.fmt(a, 2)} against "
                     f"{compare.fmt(b, 2)}: **{o['verdict']}**")
    if not lines:
        return []
    return ["Judged from the experiment files (`paper.value`, `paper.target`; "
            "`knn.tools.judge`): targets on the best of n; the paper's order on the mean "
            "test value, with both sides' spread (ahead: the paper's better row is ahead "
            "in ours too).", "", *lines, ""]
