"""Table 2 (SST) judged, from runs' ``result.json`` files: the declared targets and
orderings, and the authors' second stopping rule checked on every run.

    python -m knn.tools.sst_table RUNS [RUNS ...] [--out experiments/results/sst/full/table2_judged]

Every ``result.json`` below the given folders whose task is ``sst`` is one run; the runs
of an experiment with one label (protocol and vector file, :func:`knn.tools.rows.label`)
form a row. Then:

* **the targets and the paper's ordering** the SST experiment files declare
  (``paper.target``: the gated Kernel NN's best test accuracy of 5 seeds at or above the
  project's bound for GloVe 6B 50d; ``paper.better_than``: the gated row before λ = 0.5,
  Kim CNN and Bi-LSTM, the last two both in this harness's training and on their own
  papers' protocols), judged by :mod:`knn.tools.judge` on test accuracy, only between
  rows of one label;
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

import sys
from pathlib import Path
from typing import Any

from knn.tools import judge, results
from knn.tools.rows import experiments, table_rows

#: Table 2's rows, top to bottom (variant names of conf/experiment/sst/).
ORDER = ("kim_cnn_fine", "kim_cnn_kim2014_fine", "bilstm_fine", "bilstm_tai2015_fine",
         "const_fine", "gated_fine", "kim_cnn_binary", "kim_cnn_kim2014_binary",
         "bilstm_binary", "bilstm_tai2015_binary", "const_binary", "gated_binary")
#: The Kernel NN's model name (``result["model"]``); the others are the baselines.
KERNEL_NN = "knn_sst"
#: The authors' second stopping rule: dev accuracy more than this many points below its best.
DROP = 5.0


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
    return {"variant": run["variant"], "seed": run["seed"], "kernel_nn": run["model"] == KERNEL_NN,
            "largest_fall": largest, "epoch": at, "cut_after": cut,
            "best_epoch": run.get("best_epoch"), "epochs": len(epochs)}


def all_falls(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`falls` of every run that logged its epochs, in run order."""
    return [f for r in sorted(runs, key=results.run_key) if (f := falls(r)) is not None]


def falls_lines(found: list[dict[str, Any]]) -> list[str]:
    """The largest fall over the Kernel NN runs and over the baselines' runs, and every run
    the rule would have stopped."""
    lines = []
    for title, wanted in (("Kernel NN runs", True), ("baseline runs", False)):
        mine = [f for f in found if f["kernel_nn"] == wanted]
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


def falls_markdown(runs: list[dict[str, Any]], level: int = 2) -> str:
    """The authors' rule checked on ``runs``, under a heading of ``level``."""
    lines = ["#" * level + " The authors' second stopping rule", "",
             f"Stop once dev accuracy falls more than {DROP:.0f} points below its best so "
             "far (the authors' `sst/main.py`); not part of this protocol, checked on each "
             "run's dev accuracy per epoch:", ""]
    return "\n".join(lines + (falls_lines(all_falls(runs)) or ["- no run with a `metrics.jsonl`."]))


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every SST run's ``result.json`` under ``roots`` (a root may be one file), with
    ``run_dir``."""
    return results.select(results.collect(*roots), task="sst")


def main(argv: list[str] | None = None) -> int:
    def build(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        found = table_rows("sst", experiments(), runs, [], order=ORDER)
        text = "\n".join(["## Table 2 (SST) judged", "", *(judge.markdown(found) or [
            "Nothing to judge: no row with a declared target or ordering has runs.", ""]),
            falls_markdown(runs, level=3)]) + "\n"
        return text, {"targets": judge.targets(found), "ordering": judge.ordering(found),
                      "falls": all_falls(runs)}

    return results.table_main(argv, "knn.tools.sst_table", __doc__, "sst", collect, build)


if __name__ == "__main__":
    sys.exit(main())
