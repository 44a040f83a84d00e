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

* the paper's ordering (gated WLN ≤ WLN < ELBP < NFP < mean predictor), pair
  by pair on the mean test RMSE, only between rows of one protocol, judged per
  protocol. A closed-form row of the ``full`` protocol (the mean predictor's
  fit, which has no training schedule to compress) counts under every
  protocol. A pair whose means differ by no more than the larger of the two
  stds is flagged "within spread" (still judged yes/no by the means);
* the chemprop reference (read from ``experiments/peers/chemprop/``: the peer
  runs' ``result.json`` files over its seeds, else the ``reported.json`` measurement) and the
  target, judged on the ``wln_tuned`` row when one exists, else the
  ``wln`` row (the full protocol's, else the one with the most runs; ties: the
  lower mean validation RMSE): mean test RMSE below chemprop's, mean test MAE
  below chemprop's, mean whole-run molecules/s at or above chemprop's, compared
  only when the runs and the peer run recorded the same CPU (else the target
  stays open). Nearly like for like: chemprop's rate is its molecules trained
  over its whole ``chemprop train`` command, so ours is the molecules trained
  over the run's wall time (validation every epoch and testing included), not
  the table's rate of training updates alone. Ours still leaves out start-up and
  featurization, done once before the trainer's clock starts, which chemprop's
  includes: a small bias in our favour;
* every run of every row: seed, validation and test RMSE, best epoch, device,
  commit, folder and command.

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json`` (the rows,
each with its aggregates and its runs, and the judgements); it always prints
the Markdown.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from knn.paths import REPO_ROOT
from knn.tools import compare, results

#: Table 3's rows, top to bottom (variant names of conf/experiment/cep/), then ours.
ORDER = ("mean", "wl_kernel", "emf", "nfp", "elbp", "wln", "gated_wln", "wln_tuned")
#: Row labels of variants without a row in the paper.
OWN_ROWS = {"wln_tuned": "WLN tuned on validation (ours)"}
#: The paper's ordering to check, as (better or equal, worse, strict) pairs.
ORDERING = (("gated_wln", "wln", False), ("wln", "elbp", True), ("elbp", "nfp", True),
            ("nfp", "mean", True))
ORDERING_TEXT = "gated WLN ≤ WLN < ELBP < NFP < mean predictor"
#: The chemprop target is judged on the first of these variants that has a row.
TARGET_VARIANTS = ("wln_tuned", "wln")
#: Protocol labels (knn.train.protocol): a run of its experiment as configured; a run of
#: a few batches, whose numbers mean nothing.
FULL, SMOKE = "full", "smoke (limited batches)"
#: Config keys that change the data a model sees: a protocol naming one gets no
#: closed-form stand-in from the full protocol (see :func:`_under`).
DATA_KEYS = ("task.data.", "task.limit_train_items", "task.featurizer", "task.standardize")
#: The chemprop peer run: ``result.json`` written by ``make peer-chemprop``, else the
#: measurement reported earlier (``reported.json``), both beside each other.
PEER_DIR = REPO_ROOT / "experiments" / "peers" / "chemprop"


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def chemprop_reference(peer_dir: Path | None = None) -> dict[str, Any] | None:
    """The chemprop reference over its seeds, read from its data files; None when there are
    none (e.g. an installed package without the repository's ``experiments/``).

    The measured peer runs (``result.json`` for seed 0, ``seed<N>/result.json`` for the
    others; full 50-epoch runs only) give ``test_rmse`` and ``test_mae`` as means over the
    seeds, with ``*_std`` (None for one run), ``test_rmse_values``/``test_mae_values``,
    ``n_runs`` and ``seeds``; the rest (params, version, machine, molecules/s) is seed 0's. Without
    them, ``reported.json`` (one reported measurement) stands in."""
    folder = peer_dir or PEER_DIR
    files = [f for f in [folder / "result.json", *sorted(folder.glob("seed*/result.json"))]
             if f.is_file()]
    measured = [r for r in (json.loads(f.read_text()) for f in files) if r.get("full_run", True)]
    if measured:
        ref, origin, shown = dict(measured[0]), "measured by make peer-chemprop", _shown(folder)
    elif (folder / "reported.json").is_file():
        ref = json.loads((folder / "reported.json").read_text())
        measured, origin, shown = [ref], "reported, not re-run here", _shown(folder / "reported.json")
    else:
        return None
    # the metrics over the seeds; molecules/s stays seed 0's, measured on the CPU `machine`
    # names (the seeds may have run on different machines)
    for key in ("test_rmse", "test_mae"):
        values = [r[key] for r in measured if r.get(key) is not None]
        if values:
            ref[key] = statistics.fmean(values)
            ref[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else None
            ref[f"{key}_values"] = values
    ref["n_runs"], ref["seeds"] = len(measured), [r.get("seed", 0) for r in measured]
    ref.setdefault("name", f"chemprop {ref.get('chemprop_version', '')} default D-MPNN")
    return {**ref, "origin": origin, "file": shown}


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
    trained, wall = timed.get("molecules"), r["wall_seconds"]
    return {"seed": r["seed"], "valid_rmse": valid["rmse"], "valid_mae": valid.get("mae"),
            "test_rmse": test["rmse"], "test_mae": test["mae"],
            # the authors test their last epoch's weights, not the best validation epoch's
            "test_rmse_last": ((r.get("metrics_last") or {}).get("test") or {}).get("rmse"),
            "wall_seconds": wall,
            "molecules_per_second": timed.get("molecules_per_second"),
            "whole_run_molecules_per_second": trained / wall if trained and wall else None,
            "epochs": r["epochs"], "steps": r["steps"], "best_epoch": r["best_epoch"],
            "draws": draws(r),
            "device": r.get("device"), "cpu_model": results.cpu_model(r),
            "git_commit": r.get("git_commit"),
            "command": r.get("command"), "run_dir": r.get("run_dir")}


def draws(r: dict[str, Any]) -> str:
    """How the run drew its training molecules, from its config: molecules per epoch and
    whether re-sampled toward rare targets (the authors') or uniformly; ``-`` for a
    closed-form fit. The protocol label alone does not say it: ``full`` is the run's own
    experiment, e.g. 100,000 re-sampled for ``cep/wln`` but 24,000 uniform for
    ``cep/wln_tuned``."""
    if (r.get("extra") or {}).get("fitted_parameters") is not None:
        return "-"
    task = (r.get("config") or {}).get("task") or {}
    if "samples_per_epoch" not in task:
        return "not recorded"
    n = task["samples_per_epoch"]
    return (f"{n:,}" if n else "one pass") + (", re-sampled" if task.get("resample") else ", uniform")


def row(variant: str, protocol: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    """One row: the aggregates over ``members`` (the variant's runs under ``protocol``)
    and the runs themselves, sorted by seed."""
    members = sorted(members, key=lambda r: (r["seed"], r.get("run_dir", "")))
    runs = [_run(r) for r in members]
    # The honest model-selection number: the test RMSE of the best validation run.
    best = min(range(len(runs)), key=lambda i: (runs[i]["valid_rmse"], runs[i]["seed"], i))
    chosen, paper = members[best], members[0].get("paper") or {}
    test_rmse, test_rmse_std = results.mean_std([r["test_rmse"] for r in runs])
    test_mae, test_mae_std = results.mean_std([r["test_mae"] for r in runs])
    rates = [r["molecules_per_second"] for r in runs if r["molecules_per_second"] is not None]
    last = [r["test_rmse_last"] for r in runs if r["test_rmse_last"] is not None]
    whole = [r["whole_run_molecules_per_second"] for r in runs
             if r["whole_run_molecules_per_second"] is not None]
    return {
        "variant": variant,
        "protocol": protocol,
        "model": chosen["model"],
        "paper_row": paper.get("row") or OWN_ROWS.get(variant, variant),
        "paper_rmse": paper.get("value"),
        "paper_params": paper.get("params"),
        "n_runs": len(runs),
        "seeds": [r["seed"] for r in runs],
        "test_rmse_mean": test_rmse, "test_rmse_std": test_rmse_std,
        "test_mae_mean": test_mae, "test_mae_std": test_mae_std,
        "valid_rmse_mean": statistics.fmean(r["valid_rmse"] for r in runs),
        "best_valid": {k: runs[best][k] for k in ("seed", "valid_rmse", "test_rmse", "run_dir")},
        "test_rmse_last_mean": statistics.fmean(last) if last else None,
        "n_runs_last": len(last),
        "params": results.params(chosen),
        "closed_form": (chosen.get("extra") or {}).get("fitted_parameters") is not None,
        "wall_seconds_mean": statistics.fmean(r["wall_seconds"] for r in runs),
        "molecules_per_second_mean": statistics.fmean(rates) if rates else None,
        "whole_run_molecules_per_second_mean": statistics.fmean(whole) if whole else None,
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


def _under(rows: list[dict[str, Any]], variant: str, protocol: str) -> dict[str, Any] | None:
    """The variant's row comparable with ``protocol``: its own, else a full closed-form
    row (a fit without a training schedule, which no schedule change would alter) unless
    ``protocol`` changes the data the fit would see."""
    mine = [r for r in rows if r["variant"] == variant]
    own = next((r for r in mine if r["protocol"] == protocol), None)
    if own is not None or any(key in protocol for key in DATA_KEYS):
        return own
    return next((r for r in mine if r["closed_form"] and r["protocol"] == FULL), None)


def _check(better: dict[str, Any], worse: dict[str, Any], strict: bool,
           protocol: str) -> dict[str, Any]:
    a, b = better["test_rmse_mean"], worse["test_rmse_mean"]
    return {"pair": f"{better['variant']} {'<' if strict else '≤'} {worse['variant']}",
            "protocol": protocol, "holds": a < b if strict else a <= b,
            "within_spread": results.within_spread(  # None: one run each, one draw
                a, b, [better["test_rmse_std"], worse["test_rmse_std"]]),
            "means": [a, b], "stds": [better["test_rmse_std"], worse["test_rmse_std"]],
            "n_runs": [better["n_runs"], worse["n_runs"]],
            "protocols": [better["protocol"], worse["protocol"]]}


def ordering(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The paper's pairwise ordering on the mean test RMSE over seeds, judged per protocol
    (between rows of that protocol only, see :func:`_under`). ``verdicts``: one per
    protocol with at least one pair checked, with ``complete`` (every pair checked),
    ``holds`` (complete and every pair holds) and the ``checks``."""
    verdicts = []
    for protocol in sorted({r["protocol"] for r in rows} - {SMOKE}):
        checks = []
        for better, worse, strict in ORDERING:
            a, b = _under(rows, better, protocol), _under(rows, worse, protocol)
            # Skip pairs with a missing side, and pairs of stand-ins only (judged under
            # their own protocol).
            if a and b and protocol in (a["protocol"], b["protocol"]):
                checks.append(_check(a, b, strict, protocol))
        if checks:
            complete = len(checks) == len(ORDERING)
            verdicts.append({"protocol": protocol, "complete": complete, "checks": checks,
                             "holds": complete and all(c["holds"] for c in checks)})
    return {"claim": ORDERING_TEXT, "basis": "mean test RMSE over seeds", "verdicts": verdicts}


def _verdict(v: dict[str, Any]) -> str:
    if not all(c["holds"] for c in v["checks"]):
        return "does not hold"
    return "holds" if v["complete"] else "holds on the pairs checked (missing rows)"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _pm(mean: float, std: float | None) -> str:
    return results.pm("rmse", mean, std)


def _side(c: dict[str, Any], i: int) -> str:
    """One side of a check: ``mean ± std (n=3)``, naming a stand-in's own protocol."""
    other = "" if c["protocols"][i] == c["protocol"] else f", {c['protocols'][i]} closed form"
    return f"{_pm(c['means'][i], c['stds'][i])} (n={c['n_runs'][i]}{other})"


def ordering_lines(order: dict[str, Any]) -> list[str]:
    """The ordering as Markdown: a heading line, then one item per protocol."""
    lines = [f"Paper's ordering, {order['claim']}, on the mean test RMSE over n seeds "
             "(n per row), judged within each protocol:", ""]
    for v in order["verdicts"]:
        checks = ", ".join(
            f"{c['pair']} {_yes(c['holds'])} ({_side(c, 0)} vs {_side(c, 1)}"
            + {True: "; within spread", False: "", None: "; one run each, no spread measured"}[
                c["within_spread"]] + ")" for c in v["checks"])
        lines.append(f"- {v['protocol']}: **{_verdict(v)}**: {checks}.")
    return lines + (["- no pair of rows under one protocol."] if not order["verdicts"] else [])


def target_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row the chemprop target is judged on: of the first of :data:`TARGET_VARIANTS`
    with rows other than smoke runs, the ``full`` protocol's row, else the one with the
    most runs (ties: the lower mean validation RMSE; never chosen on test data)."""
    for variant in TARGET_VARIANTS:
        mine = [r for r in rows if r["variant"] == variant and r["protocol"] != SMOKE]
        if mine:
            return min(mine, key=lambda r: (r["protocol"] != FULL, -r["n_runs"],
                                            r["valid_rmse_mean"]))
    return None


def versus_chemprop(rows: list[dict[str, Any]],
                    ref: dict[str, Any] | None) -> dict[str, Any] | None:
    """The chemprop target on :func:`target_row`: mean test RMSE and MAE over seeds below
    chemprop's (``ref``), mean whole-run molecules/s (chemprop's is its whole command's) at
    or above; None without a row or reference.

    Throughput is compared only where every run of the row and the peer run recorded the
    same CPU (``throughput_holds`` None otherwise: rates from two machines say nothing),
    and ``holds`` needs all three."""
    r = target_row(rows)
    if r is None or ref is None:
        return None
    rate = r["whole_run_molecules_per_second_mean"]
    rmse = r["test_rmse_mean"] < ref["test_rmse"]
    mae = r["test_mae_mean"] < ref["test_mae"]
    sides = {m: (compare.summary([x[m] for x in r["runs"]], higher_is_better=False),
                 compare.summary(ref.get(f"{m}_values") or [ref[m]], higher_is_better=False))
             for m in ("test_rmse", "test_mae")}
    peer_cpu = results.cpu_model(ref)
    same_cpu = peer_cpu is not None and r["cpu_models"] == [peer_cpu]
    speed = (rate is not None and rate >= ref["molecules_per_second"]) if same_cpu else None
    return {"variant": r["variant"], "protocol": r["protocol"], "n_runs": r["n_runs"],
            "cpu_models": [r["cpu_models"], peer_cpu],
            "test_rmse": [r["test_rmse_mean"], ref["test_rmse"]], "rmse_holds": rmse,
            "test_rmse_std": r["test_rmse_std"],
            "test_mae": [r["test_mae_mean"], ref["test_mae"]], "mae_holds": mae,
            "test_mae_std": r["test_mae_std"],
            "molecules_per_second": [rate, ref["molecules_per_second"]],
            "throughput_holds": speed, "holds": rmse and mae and speed is True,
            # each metric's standing with both sides' spread (knn.tools.compare)
            "sides": sides, "verdicts": {m: compare.verdict(a, b, False) for m, (a, b) in sides.items()}}


def _throughput(vs: dict[str, Any]) -> str:
    if vs["throughput_holds"] is not None:
        return _yes(vs["throughput_holds"])
    mine, peer = vs["cpu_models"]
    return (f"not compared: measured on {', '.join(mine)} against {peer or 'an unrecorded CPU'}; "
            "rerun make peer-chemprop beside the runs")


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


def reference_lines(rows: list[dict[str, Any]], c: dict[str, Any] | None) -> list[str]:
    """The chemprop reference and its target judged on ``rows`` (:func:`versus_chemprop`),
    as one paragraph; nothing without a reference."""
    if c is None:
        return []
    seeds = f", seeds {', '.join(map(str, c['seeds']))}" if c.get("seeds") else ""
    line = (f"Reference ({c['name']}, same split, {c['origin']}, `{c['file']}`{seeds}): "
            f"test RMSE {_pm(c['test_rmse'], c.get('test_rmse_std'))}, "
            f"MAE {_pm(c['test_mae'], c.get('test_mae_std'))}, {c['params']:,} parameters, "
            f"{c['molecules_per_second']:.0f} molecules/s over its whole training "
            "command. Target: the tuned WLN (else WLN), mean over seeds, below "
            "its mean test RMSE and MAE at equal or higher throughput, both sides counted "
            "nearly the same way: molecules trained over the run's wall time (ours "
            "without start-up and featurization).")
    vs = versus_chemprop(rows, c)
    if vs is None:
        return [line]
    (rmse, ref_rmse), (mae, ref_mae) = vs["test_rmse"], vs["test_mae"]
    rate, ref_rate = vs["molecules_per_second"]
    verdict = ("met" if vs["holds"] else "not met" if False in (
        vs["rmse_holds"], vs["mae_holds"], vs["throughput_holds"]) else "open")
    line += (f" {vs['variant']} ({vs['protocol']}, mean over {vs['n_runs']} seed(s)): "
             f"**{verdict}**: test RMSE {_pm(rmse, vs['test_rmse_std'])} vs {ref_rmse:.4f} "
             f"({_yes(vs['rmse_holds'])}), MAE {_pm(mae, vs['test_mae_std'])} vs {ref_mae:.4f} "
             f"({_yes(vs['mae_holds'])}), {_num(rate, '.0f')} vs {ref_rate:.0f} "
             f"whole-run molecules/s ({_throughput(vs)}).")
    names = (f"{vs['variant']}", "chemprop")
    spread = [compare.line(names[0], a, names[1], b, m, False) for m, (a, b) in vs["sides"].items()]
    return [line, "", "With both sides' spread (`knn.tools.compare`):", "",
            *[f"- {s}" for s in spread]]


def markdown(rows: list[dict[str, Any]], peer_dir: Path | None = None) -> str:
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
    lines += ordering_lines(ordering(rows)) + [""]
    lines += reference_lines(rows, chemprop_reference(peer_dir))
    lines += ["", PAPER_NOTE, "",
              "Wall time is the trainer's (training, validation, the closed-form fit), not data "
              "loading; molecules/s counts whole training updates (collate, forward, backward, "
              "step), not validation.", "", "Runs (every run of every row):", ""]
    for r in rows:
        for x in r["runs"]:
            last = "" if x["test_rmse_last"] is None else \
                f" (last epoch's weights: {x['test_rmse_last']:.4f})"
            lines.append(f"- {r['variant']}, {r['protocol']}, seed {x['seed']}: valid RMSE "
                         f"{x['valid_rmse']:.4f}, test RMSE {x['test_rmse']:.4f}{last}, best epoch "
                         f"{x['best_epoch']}, {x['device']}, commit {x['git_commit']}, "
                         f"{x['run_dir']}: `{x['command']}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    def build(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        rows, ref = table(runs), chemprop_reference()
        return markdown(rows), {"rows": rows, "ordering": ordering(rows), "reference": ref,
                                "versus_reference": versus_chemprop(rows, ref), "note": PAPER_NOTE}

    return results.table_main(argv, "knn.tools.cep_table", __doc__, "cep", collect, build)


if __name__ == "__main__":
    sys.exit(main())
