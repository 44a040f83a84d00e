"""Table 3 (CEP) over seeds, from training runs' ``result.json`` files.

    python -m knn.tools.cep_table RUNS [RUNS ...] [--out experiments/results/cep/table3]

Every ``result.json`` below the given folders whose task is ``cep`` is one
run. The runs of one variant (``experiment=cep/<variant>``) under one protocol
label (:func:`knn.tools.results.protocol`, e.g. ``full`` for the authors'
schedule, ``modified (task.samples_per_epoch=24000)`` for the labelled 24k
compression) form one row; runs under different protocols are never averaged
together. Rows follow Table 3's order, then ``wln_tuned`` (the WLN tuned on
validation, ours, not in the paper), then protocol. Per row:

* n runs and their seeds;
* test RMSE and test MAE (PCE units) as mean ± sample std over the runs (the
  std only when n > 1), and the mean validation RMSE;
* the test RMSE of the run with the best validation RMSE (ties: lowest seed);
* the mean test RMSE of the last epoch's weights (``metrics_last``), which the
  authors' scripts test instead of the best validation epoch's, over the runs
  that recorded it;
* the paper's RMSE; trained parameters (closed-form models: the fitted size);
* mean training wall time and mean training throughput (molecules/s, from
  ``result["extra"]["throughput"]``); epochs and steps (a range when the runs
  differ); the protocol.

Below the table:

* the orderings and targets the CEP experiment files declare, judged by
  :mod:`knn.tools.judge` (``paper.better_than``: gated WLN before WLN before ELBP before
  NFP before the mean predictor; ``cep/wln_tuned``'s ``paper.target``: better than the
  chemprop peer's mean test RMSE and MAE at an equal or higher whole-run rate);
* the chemprop reference (read from ``experiments/peers/chemprop/``: the peer
  runs' ``result.json`` files over its seeds, else the ``reported.json`` measurement).
  Its rate counts the molecules trained over its whole ``chemprop train`` command, so the
  target counts ours over the run's wall time (validation every epoch and testing
  included), not the table's rate of training updates alone. Ours still leaves out
  start-up and featurization, done once before the trainer's clock starts, which
  chemprop's includes: a small bias in our favour;
* every run of every row: seed, validation and test RMSE, best epoch, device,
  commit, folder and command.

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json`` (the rows,
each with its aggregates and its runs, and the judgements); it always prints
the Markdown.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from knn.tools import judge, results
from knn.tools.rows import draws, experiments, table_rows

#: Table 3's rows, top to bottom (variant names of conf/experiment/cep/), then ours.
ORDER = ("mean", "wl_kernel", "emf", "nfp", "elbp", "wln", "gated_wln", "wln_tuned")
#: Row labels of variants without a row in the paper.
OWN_ROWS = {"wln_tuned": "WLN tuned on validation (ours)"}
#: The chemprop peer run: ``result.json`` written by ``make peer-chemprop``, else the
#: measurement reported earlier (``reported.json``), both beside each other.
PEER_DIR = judge.PEERS / "chemprop"


def chemprop_reference(peer_dir: Path | None = None) -> dict[str, Any] | None:
    """The chemprop reference over its seeds (:func:`knn.tools.judge.peer`), named as the
    table shows it; None without its data files."""
    ref = judge.peer("chemprop", peer_dir or PEER_DIR)
    if ref is not None and ref["name"] == f"chemprop {ref.get('chemprop_version', '')}".strip():
        ref["name"] += " default D-MPNN"
    return ref


PAPER_NOTE = ("The paper's RMSEs are on 2.3M CEP molecules with Dai et al. (2016)'s split; "
              "ours are on the public 29,978-molecule subset with the project's fixed 80/10/10 "
              "split, so the paper's column is a reference, not a target.")


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every CEP training run's ``result.json`` under ``roots`` (a root may be one file), with
    ``run_dir``; ensembles of runs (:mod:`knn.tools.ensemble`) are no Table 3 row."""
    return [r for r in results.select(results.collect(*roots), task="cep") if "ensemble" not in r]


def _run(r: dict[str, Any]) -> dict[str, Any]:
    """What the table keeps of one run."""
    valid, test = r["metrics"]["valid"], r["metrics"]["test"]
    timed = (r.get("extra") or {}).get("throughput") or {}
    return {"seed": r["seed"], "valid_rmse": valid["rmse"], "valid_mae": valid.get("mae"),
            "test_rmse": test["rmse"], "test_mae": test["mae"],
            # the authors test their last epoch's weights, not the best validation epoch's
            "test_rmse_last": ((r.get("metrics_last") or {}).get("test") or {}).get("rmse"),
            "wall_seconds": r["wall_seconds"],
            "molecules_per_second": timed.get("molecules_per_second"),
            "whole_run_molecules_per_second": judge.whole_run_rate(r, "molecules"),
            "epochs": r["epochs"], "steps": r["steps"], "best_epoch": r["best_epoch"],
            "draws": draws(r),
            "device": r.get("device"), "cpu_model": results.cpu_model(r),
            "threads": results.threads(r),
            "where": results.where(r), "git_commit": r.get("git_commit"),
            "timeline": results.timeline(r["run_dir"]) if r.get("run_dir") else [],
            "command": r.get("command"), "run_dir": r.get("run_dir")}


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def row(variant: str, protocol: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    """One row: the registry's aggregates over ``members`` (the variant's runs under
    ``protocol``, :func:`knn.tools.results.aggregate`: mean ± std of the test RMSE, the
    best-validation run, parameters), Table 3's own columns, and the runs, sorted by seed."""
    [g] = results.aggregate(members)  # sorts by seed; the best validation run: ties, lowest seed
    members = sorted(members, key=lambda r: (r["seed"], r["run_dir"]))
    runs = [_run(r) for r in members]
    best = g["seeds"].index(g["selected"]["seed"])
    paper = members[0].get("paper") or {}
    test_mae, test_mae_std = results.mean_std([r["test_mae"] for r in runs])
    last = [r["test_rmse_last"] for r in runs if r["test_rmse_last"] is not None]
    return {
        "variant": variant,
        "protocol": protocol,
        "model": g["model"],
        "paper_row": paper.get("row") or OWN_ROWS.get(variant, variant),
        "paper_rmse": paper.get("value"),
        "paper_params": paper.get("params"),
        "n_runs": g["n_runs"],
        "seeds": g["seeds"],
        "test_rmse_mean": g["test_mean"], "test_rmse_std": g["test_std"],
        "test_mae_mean": test_mae, "test_mae_std": test_mae_std,
        "valid_rmse_mean": g["valid_mean"],
        "best_valid": {k: runs[best][k] for k in ("seed", "valid_rmse", "test_rmse", "run_dir")},
        "test_rmse_last_mean": _mean(last),
        "n_runs_last": len(last),
        "params": g["params"],
        "closed_form": (members[best].get("extra") or {}).get("fitted_parameters") is not None,
        "wall_seconds_mean": g["wall_seconds"]["mean"],
        "molecules_per_second_mean": _mean([r["molecules_per_second"] for r in runs]),
        "whole_run_molecules_per_second_mean":
            _mean([r["whole_run_molecules_per_second"] for r in runs]),
        "cpu_models": sorted({r["cpu_model"] or "an unrecorded CPU" for r in runs}),
        "epochs": sorted({r["epochs"] for r in runs}),
        "steps": sorted({r["steps"] for r in runs}),
        "draws": sorted({r["draws"] for r in runs}),
        "runs": runs,
    }


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (variant, protocol), in :data:`ORDER` (others after, by name), then
    by protocol."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["variant"], results.protocol(r)), []).append(r)
    rank = {v: i for i, v in enumerate(ORDER)}
    keys = sorted(groups, key=lambda k: (rank.get(k[0], len(ORDER)), k[0], k[1]))
    return [row(variant, protocol, groups[variant, protocol]) for variant, protocol in keys]


def _pm(mean: float, std: float | None) -> str:
    return results.pm("rmse", mean, std)


def _last(r: dict[str, Any]) -> str:
    """The row's mean test RMSE with the last epoch's weights; ``(n=k)`` when only k runs
    recorded it."""
    if r["test_rmse_last_mean"] is None:
        return "-"
    some = "" if r["n_runs_last"] == r["n_runs"] else f" (n={r['n_runs_last']})"
    return f"{r['test_rmse_last_mean']:.4f}{some}"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _span(values: list[int]) -> str:
    """``51`` or, when runs differ, ``48-51``, with thousands separators."""
    return f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}-{values[-1]:,}"


def reference_lines(c: dict[str, Any] | None) -> list[str]:
    """The chemprop reference as one paragraph; nothing without a reference. Its target is
    declared in ``cep/wln_tuned`` (``paper.target.peer``) and judged by
    :mod:`knn.tools.judge`."""
    if c is None:
        return []
    seeds = f", seeds {', '.join(map(str, c['seeds']))}" if c.get("seeds") else ""
    return [f"Reference ({c['name']}, same split, {c['origin']}, `{c['file']}`{seeds}): "
            f"test RMSE {_pm(c['test_rmse'], c.get('test_rmse_std'))}, "
            f"MAE {_pm(c['test_mae'], c.get('test_mae_std'))}, {c['params']:,} parameters, "
            f"{c['molecules_per_second']:.0f} molecules/s over its whole training command "
            "(ours, in the judged target: molecules trained over the run's wall time, without "
            "start-up and featurization, which chemprop's count includes)."]


def markdown(rows: list[dict[str, Any]], judged: list[str] | None = None,
             peer_dir: Path | None = None) -> str:
    """Table 3 from :func:`table`'s rows, the ``judged`` lines (:func:`knn.tools.judge.markdown`),
    the chemprop reference and every run."""
    lines = [
        "## Table 3 (CEP): test RMSE, PCE units, over seeds", "",
        "| Table 3 row | variant | runs (seeds) | test RMSE mean ± std | test MAE mean ± std "
        "| valid RMSE mean | test RMSE of best-valid run (seed) | test RMSE, last epoch's "
        "weights (mean) | paper RMSE | params "
        "| wall min (mean) | molecules/s (mean) | epochs (steps) | molecules per epoch, draws "
        "| protocol |",
        "|" + "---|" * 15,
    ]
    for r in rows:
        params = f"{r['params']:,}" + (" (fitted)" if r["closed_form"] else "")
        best = r["best_valid"]
        lines.append("| " + " | ".join([
            r["paper_row"], r["variant"], f"{r['n_runs']} ({', '.join(map(str, r['seeds']))})",
            _pm(r["test_rmse_mean"], r["test_rmse_std"]),
            _pm(r["test_mae_mean"], r["test_mae_std"]), f"{r['valid_rmse_mean']:.4f}",
            f"{best['test_rmse']:.4f} ({best['seed']})", _last(r), _num(r["paper_rmse"], ".4f"),
            params,
            f"{r['wall_seconds_mean'] / 60:.1f}", _num(r["molecules_per_second_mean"], ".0f"),
            f"{_span(r['epochs'])} ({_span(r['steps'])})", "; ".join(r["draws"]), r["protocol"],
        ]) + " |")
    lines += ["", "std: sample standard deviation over the row's runs (none for one run). "
              "Runs under different protocols are separate rows, never averaged. Every run is "
              "tested on its best validation epoch's weights; the authors' scripts test the "
              "last epoch's instead, which runs from commit 7c03db6 on also report "
              "(`metrics_last`; n of the row's runs in brackets where not all have it).", ""]
    lines += judged or []
    lines += reference_lines(chemprop_reference(peer_dir))
    lines += ["", PAPER_NOTE, "",
              "Wall time is the trainer's (training, validation, the closed-form fit), not data "
              "loading; molecules/s counts whole training updates (collate, forward, backward, "
              "step), not validation.", "", "Runs (every run of every row):", ""]
    for r in rows:
        lines += [run_line(r, x) for x in r["runs"]]
    return "\n".join(lines) + "\n"


def run_line(row: dict[str, Any], x: dict[str, Any]) -> str:
    """One run under the table: scores, best epoch, training time and rate, where and from
    which commit it ran, the runner's start/pause/finish times, its folder and command."""
    last = "" if x["test_rmse_last"] is None else \
        f" (last epoch's weights: {x['test_rmse_last']:.4f})"
    rate = "" if x["molecules_per_second"] is None else \
        f", {x['molecules_per_second']:,.0f} molecules/s"
    threads = "" if x["threads"] is None else f", {x['threads']}"
    when = f" [{'; '.join(x['timeline'])}]" if x["timeline"] else ""
    return (f"- {row['variant']}, {row['protocol']}, seed {x['seed']}: valid RMSE "
            f"{x['valid_rmse']:.4f}, test RMSE {x['test_rmse']:.4f}{last}, best epoch "
            f"{x['best_epoch']}, {x['wall_seconds']:,.0f} s{rate}, {x['where'] or x['device']}"
            f"{threads}, commit {x['git_commit']}{when}, {x['run_dir']}: `{x['command']}`")


def main(argv: list[str] | None = None) -> int:
    def build(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        found = table_rows("cep", experiments(), runs, [], order=ORDER)
        reference = chemprop_reference()
        peers = {"chemprop": reference}
        judged = {"targets": judge.targets(found), "ordering": judge.ordering(found),
                  "versus_peers": judge.versus_peers(found, peers)}
        shown = table(runs)
        return markdown(shown, judge.markdown(found, peers)), {
            "rows": shown, "judged": judged, "reference": reference, "note": PAPER_NOTE}

    return results.table_main(argv, "knn.tools.cep_table", __doc__, "cep", collect, build)


if __name__ == "__main__":
    sys.exit(main())
