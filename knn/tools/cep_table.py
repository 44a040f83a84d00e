"""Table 3 (CEP) rows from training runs' ``result.json`` files.

    python -m knn.tools.cep_table RUNS [RUNS ...] [--out experiments/results/cep/table3]

Every ``result.json`` below the given folders whose task is ``cep`` is one
run; runs of one variant (``experiment=cep/<variant>``) form one row, and
when there are several (seeds, reruns) the one with the best validation RMSE
is shown. Rows follow Table 3's order. Per row: test RMSE and MAE (PCE
units), validation RMSE, the paper's RMSE, trained parameters (for the
closed-form models the fitted size), training wall time, training
throughput (molecules/s, from ``result["extra"]["throughput"]``), epochs
and steps, and how the run was cut or changed (``results.protocol``). Below the table:
whether the paper's ordering holds, the chemprop reference (read from
``experiments/peers/chemprop/``: the peer run's ``result.json``, else the
``reported.json`` measurement) and whether WLN meets it, and each run's
command, seed, device and commit.

With ``--out PREFIX`` it writes ``PREFIX.md`` and ``PREFIX.json``; it always
prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from knn.tools import results
from knn.io import write_json, write_text
from knn.paths import REPO_ROOT
from knn.train.provenance import provenance

#: Table 3's rows, top to bottom (variant names of conf/experiment/cep/).
ORDER = ("mean", "wl_kernel", "emf", "nfp", "elbp", "wln", "gated_wln")
#: The paper's ordering to check, as (better or equal, worse, strict) pairs.
ORDERING = (("gated_wln", "wln", False), ("wln", "elbp", True), ("elbp", "nfp", True),
            ("nfp", "mean", True))
ORDERING_TEXT = "gated WLN ≤ WLN < ELBP < NFP < mean predictor"
#: The chemprop peer run: ``result.json`` written by ``make peer-chemprop``, else the
#: measurement reported in the issues (``reported.json``), both beside each other.
PEER_DIR = REPO_ROOT / "experiments" / "peers" / "chemprop"


def chemprop_reference(peer_dir: Path | None = None) -> dict[str, Any] | None:
    """The chemprop reference row (test RMSE/MAE, params, molecules/s, and where it came
    from), read from its data file; None when neither file exists (e.g. an installed
    package without the repository's ``experiments/``)."""
    for name, origin in (("result.json", "measured by make peer-chemprop"),
                         ("reported.json", "reported in issues #5/#20, not re-run here")):
        path = (peer_dir or PEER_DIR) / name
        if path.is_file():
            ref = json.loads(path.read_text())
            ref.setdefault("name", f"chemprop {ref.get('chemprop_version', '')} default D-MPNN")
            return {**ref, "origin": origin, "file": str(path.relative_to(REPO_ROOT))
                    if path.is_relative_to(REPO_ROOT) else str(path)}
    return None


PAPER_NOTE = ("The paper's RMSEs are on 2.3M CEP molecules with Dai et al. (2016)'s split; "
              "ours are on the public 29,978-molecule subset with the project's fixed 80/10/10 "
              "split, so the paper's column is a reference, not a target.")


def collect(*roots: str | Path) -> list[dict[str, Any]]:
    """Every CEP ``result.json`` under ``roots`` (a root may be one file), with ``run_dir``."""
    return results.select(results.collect(*roots), task="cep")


def row(variant: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The variant's row from its run with the best validation RMSE (ties: lowest seed)."""
    runs = sorted(runs, key=lambda r: (r["metrics"]["valid"]["rmse"], r["seed"], r.get("run_dir", "")))
    r, extra = runs[0], runs[0].get("extra") or {}
    return {
        "variant": variant,
        "model": r["model"],
        "paper_row": (r.get("paper") or {}).get("row", variant),
        "paper_rmse": (r.get("paper") or {}).get("value"),
        "paper_params": (r.get("paper") or {}).get("params"),
        "test_rmse": r["metrics"]["test"]["rmse"],
        "test_mae": r["metrics"]["test"]["mae"],
        "valid_rmse": r["metrics"]["valid"]["rmse"],
        "params": results.params(r),
        "closed_form": extra.get("fitted_parameters") is not None,
        "wall_seconds": r["wall_seconds"],
        "molecules_per_second": (extra.get("throughput") or {}).get("molecules_per_second"),
        "fit_seconds": extra.get("fit_seconds"),
        "epochs": r["epochs"],
        "steps": r["steps"],
        "best_epoch": r["best_epoch"],
        "protocol": results.protocol(r),
        "n_runs": len(runs),
        "seed": r["seed"],
        "device": r.get("device"),
        "git_commit": r.get("git_commit"),
        "command": r.get("command"),
        "run_dir": r.get("run_dir"),
    }


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_variant.setdefault(r["variant"], []).append(r)
    rank = {v: i for i, v in enumerate(ORDER)}
    variants = sorted(by_variant, key=lambda v: (rank.get(v, len(ORDER)), v))
    return [row(v, by_variant[v]) for v in variants]


def ordering(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Which of the paper's pairwise orderings hold on test RMSE (pairs with both rows)."""
    rmse = {r["variant"]: r["test_rmse"] for r in rows}
    checks = []
    for better, worse, strict in ORDERING:
        if better in rmse and worse in rmse:
            a, b = rmse[better], rmse[worse]
            checks.append({"pair": f"{better} {'<' if strict else '≤'} {worse}",
                           "holds": a < b if strict else a <= b, "values": [a, b]})
    complete = len(checks) == len(ORDERING)
    return {"claim": ORDERING_TEXT, "complete": complete, "checks": checks,
            "holds": complete and all(c["holds"] for c in checks)}


def versus_chemprop(rows: list[dict[str, Any]],
                    ref: dict[str, Any] | None) -> dict[str, Any] | None:
    """Issue 5's target: WLN's test RMSE at or below chemprop's (``ref``), at equal or
    higher training throughput (molecules/s); None without a WLN row or a reference."""
    wln = next((r for r in rows if r["variant"] == "wln"), None)
    if wln is None or ref is None:
        return None
    rate = wln["molecules_per_second"]
    accuracy = wln["test_rmse"] <= ref["test_rmse"]
    speed = rate is not None and rate >= ref["molecules_per_second"]
    return {"test_rmse": [wln["test_rmse"], ref["test_rmse"]], "rmse_holds": accuracy,
            "molecules_per_second": [rate, ref["molecules_per_second"]],
            "throughput_holds": speed, "holds": accuracy and speed}


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def markdown(rows: list[dict[str, Any]], peer_dir: Path | None = None) -> str:
    lines = [
        "## Table 3 (CEP): test RMSE, PCE units", "",
        "| Table 3 row | variant | test RMSE | test MAE | valid RMSE | paper RMSE | params "
        "| wall min | molecules/s | epochs (steps) | protocol |",
        "|" + "---|" * 11,
    ]
    for r in rows:
        params = f"{r['params']:,}" + (" (fitted)" if r["closed_form"] else "")
        lines.append("| " + " | ".join([
            r["paper_row"], r["variant"], f"{r['test_rmse']:.4f}", f"{r['test_mae']:.4f}",
            f"{r['valid_rmse']:.4f}", _num(r["paper_rmse"], ".4f"), params,
            f"{r['wall_seconds'] / 60:.1f}", _num(r["molecules_per_second"], ".0f"),
            f"{r['epochs']} ({r['steps']:,})", r["protocol"],
        ]) + " |")
    order = ordering(rows)
    verdict = ("holds" if order["holds"] else "does not hold" if order["complete"]
               else "not checked (missing rows)")
    lines += ["", f"Paper's ordering, {order['claim']}: **{verdict}**"
              + ("" if not order["checks"] else ": " + ", ".join(
                  f"{c['pair']} {'yes' if c['holds'] else 'NO'} ({c['values'][0]:.4f} vs "
                  f"{c['values'][1]:.4f})" for c in order["checks"])) + ".", ""]
    c = chemprop_reference(peer_dir)
    if c is not None:
        lines += [f"Reference ({c['name']}, same split, {c['origin']}, `{c['file']}`): test RMSE "
                  f"{c['test_rmse']}, MAE {c['test_mae']}, {c['params']:,} parameters, "
                  f"{c['molecules_per_second']:.0f} molecules/s. Target: WLN at or below its RMSE "
                  "at equal or higher throughput."]
    vs = versus_chemprop(rows, c)
    if vs is not None:
        (ours, theirs), (rate, ref_rate) = vs["test_rmse"], vs["molecules_per_second"]
        lines[-1] += (f" WLN: **{'met' if vs['holds'] else 'not met'}**: test RMSE {ours:.4f} vs "
                      f"{theirs} ({'yes' if vs['rmse_holds'] else 'NO'}), {_num(rate, '.0f')} vs "
                      f"{ref_rate} molecules/s ({'yes' if vs['throughput_holds'] else 'NO'}).")
    lines += ["", PAPER_NOTE, "",
              "Wall time is the trainer's (training, validation, the closed-form fit), not data "
              "loading; molecules/s counts whole training updates (collate, forward, backward, "
              "step), not validation.", "", "Runs (selected run per row):", ""]
    for r in rows:
        lines.append(f"- {r['variant']}: seed {r['seed']}, {r['n_runs']} run(s), best epoch "
                     f"{r['best_epoch']}, {r['device']}, commit {r['git_commit']}, "
                     f"{r['run_dir']}: `{r['command']}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.cep_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", help="run folders (searched for result.json) or files")
    parser.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    args = parser.parse_args(argv)
    runs = collect(*args.roots)
    if not runs:
        print(f"error: no task=cep result.json under {', '.join(args.roots)}", file=sys.stderr)
        return 1
    rows = table(runs)
    text = markdown(rows)
    print(text, end="")
    if args.out:
        out = Path(args.out)
        ref = chemprop_reference()
        command = shlex.join(["python", "-m", "knn.tools.cep_table",
                              *(sys.argv[1:] if argv is None else argv)])
        # Provenance before any write: the rewritten table3.md would make the tree dirty.
        payload = {**provenance(command), "rows": rows, "ordering": ordering(rows),
                   "reference": ref,
                   "versus_reference": versus_chemprop(rows, ref),
                   "note": PAPER_NOTE}
        write_text(Path(f"{out}.md"), text)
        write_json(payload, Path(f"{out}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
