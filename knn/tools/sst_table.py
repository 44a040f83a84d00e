"""Table 2 (SST) judged against the project's targets and the paper's ordering, from runs'
``result.json`` files.

    python -m knn.tools.sst_table RUNS [RUNS ...] [--out experiments/results/sst/full/table2_judged]

Every ``result.json`` below the given folders whose task is ``sst`` is one run. Runs are
compared only with runs of the same protocol label (:func:`knn.tools.results.protocol`)
and the same vector file (``result["extra"]["vectors"]["file"]``); within one such
setting the runs of a variant form a row (:func:`knn.tools.results.aggregate`). Per
setting and granularity (fine, binary), on test accuracy:

* **the target**: the gated Kernel NN's best test accuracy over its seeds
  (the paper's "best of 5 runs", which selects on test data) at or above
  the target its experiment file declares (``paper.target``); beside it the test accuracy of its best-dev run, what one would pick
  without the test set;
* **the paper's ordering**: the gated model's mean test accuracy over seeds above each
  baseline's (λ = 0.5, Kim CNN, Bi-LSTM; the last two both in this harness's training
  and on their own papers' protocols), pair by pair. A pair whose means differ by no
  more than the larger std of the two rows is flagged "within spread" (still judged by
  the means). The verdict is final only when all six rows have :data:`SEEDS` seeds;
  before that it reads "so far";
* **the authors' second stopping rule**: their ``sst/main.py`` also stops a run once
  dev accuracy falls more than :data:`DROP` points below its best so far. Checked on
  each run's per-epoch dev accuracy (``metrics.jsonl``; rows of a partial epoch
  skipped): the largest fall and its epoch, and the epoch the rule would have stopped
  the run after, if any (then the run's own best epoch says whether it found its best
  later).

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json``; it always prints the
Markdown.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from knn.tools import results

GRANULARITIES = ("fine", "binary")
#: Table 2's models (variant ``<model>_<granularity>``), the gated Kernel NN first.
GATED, BASELINES = "gated", ("const", "kim_cnn", "bilstm", "kim_cnn_kim2014", "bilstm_tai2015")
NAMES = {"gated": "gated λ", "const": "λ = 0.5", "kim_cnn": "Kim CNN", "bilstm": "Bi-LSTM",
         "kim_cnn_kim2014": "Kim CNN on Kim's protocol",
         "bilstm_tai2015": "Bi-LSTM on Tai et al.'s protocol"}
#: Seeds per row for a final verdict (the paper's "best of 5 runs"); fewer leave it provisional.
SEEDS = 5


@functools.cache
def goal(granularity: str) -> dict[str, Any]:
    """The target declared in the gated row's experiment file (``paper.target``:
    ``{best_of, at_least}``, test accuracy %), composed as the trainer composes it."""
    from knn.train.config import reference_config  # here: composing needs Hydra

    return reference_config(f"sst/{GATED}_{granularity}")["paper"]["target"]
#: The authors' second stopping rule: dev accuracy more than this many points below its best.
DROP = 5.0


def vectors(run: dict[str, Any]) -> str:
    """The vector file the run recorded using; ``-`` when it recorded none."""
    return ((run.get("extra") or {}).get("vectors") or {}).get("file") or "-"


def _groups(runs: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The runs per (protocol, vector file), the runs that may be compared, sorted by key."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((results.protocol(r), vectors(r)), []).append(r)
    return dict(sorted(groups.items()))


def _rows(members: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["variant"]: row for row in results.aggregate(members)}


def settings(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """Rows by variant, per (protocol, vector file)."""
    return {key: _rows(members) for key, members in _groups(runs).items()}


def target(rows: dict[str, dict[str, Any]], granularity: str) -> dict[str, Any] | None:
    """The target on the gated row of ``granularity``; None without that row."""
    gated = rows.get(f"{GATED}_{granularity}")
    if gated is None:
        return None
    best, at_least = gated["best_test"], goal(granularity)["at_least"]
    return {"granularity": granularity, "target": at_least, "n_runs": gated["n_runs"],
            "best_test": best["test"], "best_seed": best["seed"],
            "selected_test": gated["selected"]["test"], "selected_seed": gated["selected"]["seed"],
            "met": best["test"] >= at_least, "gap": at_least - best["test"]}


def ordering(rows: dict[str, dict[str, Any]], granularity: str) -> dict[str, Any]:
    """The gated row's mean test accuracy against each baseline row of ``granularity``."""
    gated, checks = rows.get(f"{GATED}_{granularity}"), []
    for model in BASELINES:
        other = rows.get(f"{model}_{granularity}")
        if gated is None or other is None:
            continue
        means = [gated["test_mean"], other["test_mean"]]
        stds = [gated["test_std"], other["test_std"]]
        checks.append({"baseline": model, "holds": means[0] > means[1],
                       "within_spread": results.within_spread(means[0], means[1], stds),
                       "means": means, "stds": stds, "n_runs": [gated["n_runs"], other["n_runs"]]})
    seeds = {m: (rows.get(f"{m}_{granularity}") or {}).get("n_runs", 0)
             for m in (GATED, *BASELINES)}
    short = [f"{NAMES[m]} has {n} of {SEEDS} seeds" for m, n in seeds.items() if n < SEEDS]
    return {"granularity": granularity, "checks": checks, "short": short, "complete": not short,
            "holds": bool(checks) and all(c["holds"] for c in checks)}


def falls(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's dev accuracy against its best so far, epoch by epoch, under the authors'
    second stopping rule (see the module docstring); None without a ``metrics.jsonl``."""
    metric = run["metric"]
    epochs = {e["epoch"]: e["valid"][metric] for e in results.epochs(run["run_dir"])
              if not e.get("partial") and metric in (e.get("valid") or {})}
    if not epochs:
        return None
    best, largest, at, cut = float("-inf"), 0.0, None, None
    for epoch in sorted(epochs):
        best = max(best, epochs[epoch])  # the authors update their best before the check
        fall = best - epochs[epoch]
        if fall > largest:
            largest, at = fall, epoch
        if cut is None and fall > DROP:
            cut = epoch
    return {"variant": run["variant"], "seed": run["seed"], "largest_fall": largest,
            "epoch": at, "cut_after": cut, "best_epoch": run.get("best_epoch"),
            "epochs": len(epochs)}


def judge(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (protocol, vectors): targets, orderings and every run's falls."""
    judged = []
    for (label, vecs), mine in _groups(runs).items():
        rows = _rows(mine)
        judged.append({
            "protocol": label, "vectors": vecs,
            "targets": [t for g in GRANULARITIES if (t := target(rows, g)) is not None],
            "orderings": [ordering(rows, g) for g in GRANULARITIES],
            "falls": [f for r in sorted(mine, key=results.run_key) if (f := falls(r)) is not None],
        })
    return judged


def _side(model: str, c: dict[str, Any], i: int) -> str:
    return (f"{NAMES[model]} {results.pm('acc', c['means'][i], c['stds'][i])} "
            f"(n={c['n_runs'][i]})")


def _verdict(o: dict[str, Any]) -> str:
    if not o["checks"]:
        return f"not judged ({'; '.join(o['short'])})"
    text = "holds" if o["holds"] else "does not hold"
    return text if o["complete"] else f"{text} so far ({'; '.join(o['short'])})"


def target_line(t: dict[str, Any]) -> str:
    verdict = "met" if t["met"] else f"missed by {t['gap']:.2f}" + (
        "" if t["n_runs"] >= SEEDS else f" so far ({t['n_runs']} of {SEEDS} seeds)")
    best, chosen = (results.fmt_metric("acc", t[k]) for k in ("best_test", "selected_test"))
    return (f"- {t['granularity']}: best of {t['n_runs']} {best} (seed {t['best_seed']}) against "
            f"≥ {t['target']:.1f}: **{verdict}**; the best-dev run's test accuracy {chosen} "
            f"(seed {t['selected_seed']}).")


def ordering_line(o: dict[str, Any]) -> str:
    g = o["granularity"]
    pairs = "; ".join(
        f"above {NAMES[c['baseline']]}: {'yes' if c['holds'] else 'NO'} "
        f"({_side(GATED, c, 0)} vs {_side(c['baseline'], c, 1)}"
        + {True: ", within spread", False: "", None: ", one run each, no spread measured"}[
            c["within_spread"]] + ")" for c in o["checks"])
    return f"- {g}: **{_verdict(o)}**" + (f": {pairs}." if pairs else ".")


def falls_lines(found: list[dict[str, Any]]) -> list[str]:
    """The largest fall over the Kernel NN runs and over the baselines' runs, and every run
    the rule would have stopped."""
    lines = []
    kernel_nn = [f["variant"].startswith((f"{GATED}_", "const_")) for f in found]
    for title, wanted in (("Kernel NN runs", True), ("baseline runs", False)):
        mine = [f for f, k in zip(found, kernel_nn) if k == wanted]
        if not mine:
            continue
        top = max(mine, key=lambda f: f["largest_fall"])
        cut = [f for f in mine if f["cut_after"] is not None]
        lines.append(
            f"- {title} ({len(mine)}): the largest fall below the best so far is "
            f"{top['largest_fall']:.2f} points ({top['variant']} seed {top['seed']}, epoch "
            f"{top['epoch']}); the rule would have stopped "
            + (", ".join(f"{f['variant']} seed {f['seed']} after epoch {f['cut_after']} "
                         f"(its best dev came at epoch {f['best_epoch']})" for f in cut)
               if cut else "none of them") + ".")
    return lines


def markdown(judged: list[dict[str, Any]], level: int = 2) -> str:
    """The judgements under a heading of ``level`` (one level deeper per setting)."""
    lines = ["#" * level + " Table 2 (SST) judged: the project's targets, the paper's ordering, "
             "the authors' 5-point rule", ""]
    for j in judged:
        lines += ["#" * (level + 1) + f" Protocol {j['protocol']}, vectors `{j['vectors']}`", "",
                  "Target (`paper.target` of the gated experiment files): the gated Kernel "
                  f"NN's best test accuracy of {goal('fine')['best_of']} seeds at or above "
                  f"{goal('fine')['at_least']:.1f} (fine) and {goal('binary')['at_least']:.1f} "
                  "(binary).", ""]
        lines += [target_line(t) for t in j["targets"]] or ["- no gated run yet."]
        lines += ["", f"The paper's ordering: the gated Kernel NN's mean test accuracy over "
                  f"seeds above each baseline's (final with {SEEDS} seeds per row):", ""]
        lines += [ordering_line(o) for o in j["orderings"]]
        lines += ["", f"The authors' second stopping rule (stop once dev accuracy falls more "
                  f"than {DROP:.0f} points below its best so far), not part of this "
                  "protocol, checked on each run's dev accuracy per epoch:", ""]
        lines += falls_lines(j["falls"]) or ["- no run with a `metrics.jsonl`."]
        lines.append("")
    return "\n".join(lines)


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every SST run's ``result.json`` under ``roots`` (a root may be one file), with
    ``run_dir``."""
    return results.select(results.collect(*roots), task="sst")


def main(argv: list[str] | None = None) -> int:
    def build(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        judged = judge(runs)
        return markdown(judged), {"judged": judged}

    return results.table_main(argv, "knn.tools.sst_table", __doc__, "sst", collect, build)


if __name__ == "__main__":
    sys.exit(main())
