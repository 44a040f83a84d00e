"""The results report: the paper's Tables 1-3 and Figure 2 next to ours, with figures.

    python -m knn.tools.report [--results ROOT [ROOT ...]] [--bench experiments/bench/layers.json]
                         [--out experiments/report] [--readme README.md]

Every experiment config (``conf/experiment/<task>/<name>.yaml``) is a row of
its table, run or not: the paper's row name, number and size come from the
config's ``paper:`` field (composed with Hydra, so inherited experiments
resolve), never from code or from the runs. The runs come from the results
registry (:mod:`knn.tools.results`) under the roots (default ``experiments/results``;
Hydra's ``outputs/`` and ``multirun/`` work too); those of one experiment with
one label (the protocol label each run records, derived from its config,
see :mod:`knn.train.protocol`: full, budgeted, cut, modified, smoke; and the
data or vectors substituted for the paper's) make one row: the best test value over their n
seeds (the paper's "best of runs" protocol), the mean ± sample std when
n > 1, the trained parameters, and a link to their folder. A row without a finished run
says "no result" (a run still training has none yet; "failed" when only failed runs
exist); failed runs get their own section, and runs of no experiment config are listed
at the end.

Writes ``OUT/README.md`` and beside it ``fig2_decay_variants.png`` (Figure 2:
test perplexity per decay variant, ours next to the paper's),
``curves_<task>.png`` (validation metric per epoch, one line per run, dashed
for a protocol other than full, from ``metrics.jsonl``) and ``bench_ratios.png`` (the layer benchmark's
ratios). The Markdown holds no timestamp: the same files give the same report.
``--readme FILE`` also writes the tables' rows that have runs into FILE,
between :data:`README_BEGIN` and :data:`README_END`, so the README's results
are generated too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knn.paths import REPO_ROOT
from knn.tools import cep_table, judge, sst_table
from knn.tools.results import (
    RESULTS_ROOT,
    aggregate,
    collect,
    collect_failed,
    epochs,
    fmt_metric,
    markdown,
    pm,
    protocol,
    run_key,
)
from knn.tools.rows import (  # noqa: F401  (GLOVE_6B_SST, SST_VECTORS: the names a report uses)
    CEP_SUBSET,
    GLOVE_6B_SST,
    SST_VECTORS,
    Experiment,
    experiments,
    per_seed,
    table_rows,
)

BENCH = "experiments/bench/layers.json"
REPORT = "experiments/report"
FIG2_PNG, BENCH_PNG = "fig2_decay_variants.png", "bench_ratios.png"

#: What the protocol, departures and where-it-ran columns mean (report and README).
COLUMNS = ("Protocol: `full` means the experiment file ran unchanged, not that it matches the "
           "paper; anything else (budgeted, cut, modified) is not the experiment's own protocol "
           "either. Departures from the paper: every known difference between the row and the "
           "paper's setup, one per entry: those its experiment file declares "
           "(`paper.departures`, each with its measured effect or \"not measured\"), data or "
           "vectors substituted, a run that did not train in one place with the pinned torch, "
           "and provenance its runs lack, separated by ·; \"none known\" is not a claim of equality. Where it "
           "ran: the hardware and torch version of each part of the runs (`segments` in "
           "result.json).")
#: Rows in the paper's order (variant names); configs not listed follow, sorted.
TABLE1_ORDER = ("const_5m", "learned_5m", "gated_5m", "lstm_5m",
                "gated_20m", "gated_vd_20m", "gated_vd_4layer_20m", "lstm_20m")
FIG2_ORDER = ("fig2_cnn", "fig2_const", "fig2_learned", "fig2_gated_x", "fig2_gated_xh", "lstm_5m")


@dataclass(frozen=True)
class Section:
    """One table of the report: which experiments of ``task`` it holds, in which order."""

    title: str
    task: str
    order: tuple[str, ...]
    accepts: Callable[[Experiment], bool]
    figure2: bool = False  # draw its rows as the Figure 2 bar chart


SECTIONS = (
    Section("Table 1 (PTB): test perplexity, lower is better", "ptb", TABLE1_ORDER,
            lambda e: e.paper.get("table") != "Figure 2"),
    Section("Figure 2 (PTB, 5m parameters): test perplexity per decay variant", "ptb", FIG2_ORDER,
            lambda e: e.variant in FIG2_ORDER or e.paper.get("table") == "Figure 2", figure2=True),
    Section("Table 2 (SST): test accuracy (%), higher is better", "sst", sst_table.ORDER,
            lambda e: True),
    Section("Table 3 (CEP): test RMSE (PCE units), lower is better", "cep", cep_table.ORDER,
            lambda e: True),
)


def section_rows(section: Section, exps: list[Experiment], runs: list[dict[str, Any]],
                 failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The section's rows (:func:`knn.tools.rows.table_rows`), in its order."""
    return table_rows(section.task, exps, runs, failed, section.accepts, section.order)


def _size(n: int | None) -> str:
    """A parameter count as the paper writes it: 5m, 0.26m, 540k, 1."""
    if n is None:
        return "-"
    if n >= 100_000:
        return f"{n / 1e6:g}m"
    return f"{n / 1e3:g}k" if n >= 1000 else str(n)


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _shown(path: Path) -> str:
    """A path as the report names it: relative to the repository when inside it."""
    try:
        return path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _link(run_dirs: list[str], out: Path) -> str:
    """A Markdown link, relative to ``out``, to the runs' folder (their common parent)."""
    target = Path(os.path.commonpath([str(Path(d).resolve()) for d in run_dirs]))
    return f"[{_shown(target)}]({Path(os.path.relpath(target, out.resolve())).as_posix()})"


def _paper_cell(paper: dict[str, Any]) -> str:
    value = paper.get("value")
    text = "-" if value is None else str(value)
    return f"{text} ({paper['protocol']})" if paper.get("protocol") else text


def table_markdown(section: Section, rows: list[dict[str, Any]], out: Path) -> list[str]:
    """The section's heading and table; Table 3 ends with chemprop's peer row."""
    lines = [f"## {section.title}", "",
             "| paper row | experiment | paper | ours: best of n | ours: mean ± std | n | params "
             "| paper params | protocol | departures from the paper | where it ran | runs |",
             "|" + "---|" * 12]
    for row in rows:
        e, g = row["experiment"], row["group"]
        name = e.paper.get("row", e.variant)
        if e.paper.get("granularity"):
            name += f" ({e.paper['granularity']})"
        failed = f" + {row['failed']} failed" if row["failed"] else ""
        if g is None:
            ours = ["failed" if row["failed"] else "no result", "-", f"0{failed}", "-"]
            runs = "-"
        else:
            m = g["metric"]
            spread = pm(m, g["test_mean"], g["test_std"]) if g["n_runs"] > 1 else "-"
            ours = [fmt_metric(m, g["best_test"]["test"]), spread, f"{g['n_runs']}{failed}",
                    f"{g['params']:,}"]
            runs = _link([r["run_dir"] for r in g["runs"]], out)
        cells = [name, f"`{e.name}`", _paper_cell(e.paper), *ours, _size(e.paper.get("params")),
                 row["protocol"], " · ".join(row["departures"]) or "none known", row["where"], runs]
        lines.append("| " + " | ".join(map(_cell, cells)) + " |")
    peers = chemprop_cells(out) if section.task == "cep" else []
    lines += ["| " + " | ".join(map(_cell, peer)) + " |" for peer in peers]
    return lines + [""]


def chemprop_cells(out: Path) -> list[list[str]]:
    """Table 3's peer row: chemprop's default D-MPNN on the same split, read from its result
    file (:func:`knn.tools.cep_table.chemprop_reference`); none without that file."""
    ref = cep_table.chemprop_reference()
    if ref is None:
        return []
    protocol = f"peer ({ref['origin']}): its defaults, {ref.get('epochs', '?')} epochs, the same split"
    path = REPO_ROOT / ref["file"]
    folder = str(path if path.is_dir() else path.parent)
    values = ref.get("test_rmse_values") or [ref["test_rmse"]]
    spread = pm("rmse", ref["test_rmse"], ref.get("test_rmse_std")) if len(values) > 1 else "-"
    return [[f"{ref['name']} (not in the paper)", "-", "-", f"{min(values):.4f}", spread,
             str(len(values)), f"{ref['params']:,}", "-", protocol, CEP_SUBSET,
             per_seed(ref["where"]), _link([folder], out)]]


def cep_notes() -> list[str]:
    """Below Table 3: chemprop's reference (its target is judged with the others) and the
    note on the data."""
    reference = cep_table.reference_lines(cep_table.chemprop_reference())
    return (reference + [""] if reference else []) + [cep_table.PAPER_NOTE, ""]


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure2(rows: list[dict[str, Any]], path: Path) -> bool:
    """Bars of test perplexity per Figure 2 row: the paper's where its text gives a number,
    ours (best of n) per label. Returns False, writing nothing, when no row has a run."""
    labels = sorted({r["label"] for r in rows if r["group"]})
    if not labels:
        return False
    plt = _pyplot()
    variants = list(dict.fromkeys(r["experiment"].variant for r in rows))
    names = {r["experiment"].variant: r["experiment"].paper.get("row", r["experiment"].variant)
             for r in rows}
    series = {"paper (text)": {r["experiment"].variant: r["experiment"].paper.get("value")
                               for r in rows}}
    for lab in labels:
        series[f"ours, {lab}"] = {r["experiment"].variant: r["group"]["best_test"]["test"]
                                  for r in rows if r["group"] and r["label"] == lab}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j, v in enumerate(variants)
              if values.get(v) is not None]
        heights = [values[v] for v in variants if values.get(v) is not None]
        bars = ax.bar(xs, heights, width, label=name, color="0.7" if i == 0 else f"C{i - 1}")
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(variants)), [names[v] for v in variants], fontsize=9)
    ax.set_ylabel("test perplexity (lower is better)")
    ax.set_title("Figure 2: decay variants at 5m parameters, PTB")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def curves(task: str, runs: list[dict[str, Any]], path: Path) -> bool:
    """Validation metric per epoch, one line per run (one colour per variant; dashed when the
    run's protocol is not ``full``). Epochs, not minutes, on the x axis: runs on a GPU and on
    CPU cores then share one scale. Returns False, writing nothing, when no run of ``task``
    has a ``metrics.jsonl``."""
    mine = sorted((r for r in runs if r["task"] == task),
                  key=lambda r: (r["variant"], r["seed"], r["run_dir"]))
    logged = [(r, e) for r in mine if (e := epochs(r["run_dir"]))]
    if not logged:
        return False
    plt = _pyplot()
    variants = sorted({r["variant"] for r, _ in logged})
    cmap = plt.get_cmap("tab10" if len(variants) <= 10 else "tab20")
    metric = logged[0][0]["metric"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labelled: set[str] = set()
    for run, rows in logged:
        full = protocol(run).startswith("full")
        label = run["variant"] if full else f"{run['variant']} (not full protocol)"
        ax.plot([e["epoch"] + 1 for e in rows], [e["valid"][metric] for e in rows],
                marker="o", markersize=2, linestyle="-" if full else "--",
                color=cmap(variants.index(run["variant"])),
                label=None if label in labelled else label)
        labelled.add(label)
    ax.set_xlabel("epochs trained")
    ax.set_ylabel(f"validation {metric}")
    ax.set_title(f"{task}: validation {metric} during training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def bench_machine(bench: dict[str, Any]) -> str:
    """``N threads, <CPU>`` of a benchmark file: its ``machine`` (knn.train.provenance), or
    the flat ``threads`` / ``cpu_model`` that files written before it hold."""
    machine = bench.get("machine") or {}
    threads = machine.get("torch_threads", bench.get("threads"))
    return f"{threads} threads, {machine.get('cpu_model', bench.get('cpu_model'))}"


def bench_figure(bench: dict[str, Any], path: Path) -> None:
    """Two panels of bars per layer variant, one per benchmark shape: nn.LSTM's time over
    ours (above 1: ours is faster) and ours over its GEMM floor (1: only the GEMMs)."""
    plt = _pyplot()
    cases = bench["cases"]
    variants = list(dict.fromkeys(c["variant"] for c in cases))
    shapes = list(dict.fromkeys(c["shape"]["name"] for c in cases))
    panels = (("ratio_vs_lstm", "nn.LSTM ms / ours ms (above 1: ours faster)"),
              ("ratio_vs_floor", "ours ms / GEMM floor ms (1: the floor)"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    width = 0.8 / len(shapes)
    for ax, (key, title) in zip(axes, panels):
        for i, shape in enumerate(shapes):
            by_variant = {c["variant"]: c[key] for c in cases if c["shape"]["name"] == shape}
            xs = [j + (i - (len(shapes) - 1) / 2) * width for j, v in enumerate(variants)
                  if v in by_variant]
            bars = ax.bar(xs, [by_variant[v] for v in variants if v in by_variant], width,
                          label=f"{shape} shape")
            ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(variants)), variants, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Layer forward+backward, torch {bench.get('torch_version')}, "
                 f"{bench_machine(bench)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_markdown(bench: dict[str, Any], bench_path: Path, out: Path) -> list[str]:
    """The benchmark section: its ratios as a table and the figure."""
    link = Path(os.path.relpath(bench_path.resolve(), out.resolve())).as_posix()
    lines = ["## Layer benchmark", "",
             f"From [{_shown(bench_path.resolve())}]({link}) ({bench.get('timed')}, "
             f"{bench_machine(bench)}).", "",
             "| shape (T, B, width) | variant | nn.LSTM / ours | ours / GEMM floor |",
             "|---|---|---|---|"]
    for c in bench["cases"]:
        s = c["shape"]
        lines.append(f"| {s['name']} ({s['T']}, {s['B']}, {s['width']}) | {c['variant']} | "
                     f"{c['ratio_vs_lstm']:.2f}x | {c['ratio_vs_floor']:.2f}x |")
    return lines + ["", f"![layer benchmark ratios]({BENCH_PNG})", ""]


def failed_markdown(failed: list[dict[str, Any]], out: Path) -> list[str]:
    """The failed runs, one table row each with its error, folder and command."""
    lines = ["## Failed runs", ""]
    if not failed:
        return lines + ["None.", ""]
    lines += ["| task | variant | seed | error | run | command |", "|---|---|---|---|---|---|"]
    for f in sorted(failed, key=run_key):
        cells = [f.get("task", "?"), f.get("variant", "?"), f.get("seed", "?"),
                 f.get("error", "?"), _link([f["run_dir"]], out), f"`{f.get('command', '?')}`"]
        lines.append("| " + " | ".join(map(_cell, cells)) + " |")
    return lines + [""]


def build(roots: list[Path], bench_path: Path | None, out: Path, command: str) -> list[Path]:
    """Write ``out/README.md`` and the figures from the runs under ``roots``; return the
    files written."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [out / FIG2_PNG, out / BENCH_PNG, *out.glob("curves_*.png")]:
        old.unlink(missing_ok=True)  # a figure whose data is gone must not linger
    runs, failed, exps = collect(*roots), collect_failed(*roots), experiments()
    written = []
    lines = ["# Results report", "",
             f"Generated from the run files by `{command}`; do not edit (`make report` "
             "rewrites it). Paper numbers come from the experiment configs' `paper:` fields.", "",
             f"{len(runs)} finished and {len(failed)} failed runs under "
             + ", ".join(f"`{_shown(r.resolve())}`" for r in roots) + ". "
             "Ours: the best test value over the n seeds of a row (the paper's protocol, which "
             "selects on test data), and the mean ± sample std when n > 1. " + COLUMNS, ""]
    for section in SECTIONS:
        rows = section_rows(section, exps, runs, failed)
        lines += table_markdown(section, rows, out)
        if section.figure2 and figure2(rows, out / FIG2_PNG):
            written.append(out / FIG2_PNG)
            lines += [f"![Figure 2 comparison]({FIG2_PNG})", "",
                      "Grey: the paper's number where its text gives one (Figure 2 itself is a "
                      "bar chart without numbers); colours: ours, best of n, per protocol.", ""]
        lines += judge.markdown(rows)
        if section.task == "cep":
            lines += cep_notes()
        if section.task == "sst" and (sst := [r for r in runs if r["task"] == "sst"]):
            lines += sst_table.falls_markdown(sst, level=3).splitlines() + [""]
    lines += ["## Learning curves", ""]
    for task in sorted({r["task"] for r in runs}):
        png = out / f"curves_{task}.png"
        if curves(task, runs, png):
            written.append(png)
            lines += [f"![{task} learning curves]({png.name})", ""]
    if not any(p.name.startswith("curves_") for p in written):
        lines += ["No run with a `metrics.jsonl`.", ""]
    if bench_path is not None:
        bench = json.loads(bench_path.read_text())
        bench_figure(bench, out / BENCH_PNG)
        written.append(out / BENCH_PNG)
        lines += bench_markdown(bench, bench_path, out)
    lines += failed_markdown(failed, out)
    known = {(e.task, e.variant) for e in exps}
    others = [r for r in runs if (r["task"], r["variant"]) not in known]
    if others:
        lines += [markdown(aggregate(others), "Other runs (no experiment config)")]
    readme = out / "README.md"
    readme.write_text("\n".join(lines).rstrip("\n") + "\n")
    return [readme, *written]


#: The README's generated block lies between these two lines.
README_BEGIN = "<!-- results: generated by `make report`; do not edit -->"
README_END = "<!-- results: end -->"


def headline(roots: list[Path], readme_dir: Path) -> list[str]:
    """The paper's tables cut to the rows that have runs, links relative to ``readme_dir``,
    each followed by its judgements, Table 3 also by chemprop's reference (Figure 2's table and chart are
    in the full report only)."""
    runs, failed, exps = collect(*roots), collect_failed(*roots), experiments()
    lines: list[str] = []
    for section in (s for s in SECTIONS if not s.figure2):
        rows = [r for r in section_rows(section, exps, runs, failed) if r["group"] is not None]
        if rows:
            lines += [line.replace("## ", "#### ", 1) if line.startswith("## ") else line
                      for line in table_markdown(section, rows, readme_dir)]
        if rows:
            lines += judge.markdown(rows)
        if rows and section.task == "cep":  # the peer the judged target names
            reference = cep_table.reference_lines(cep_table.chemprop_reference())
            lines += reference + [""] if reference else []
    return [COLUMNS, "", *lines] if lines else ["No runs yet.", ""]


def update_readme(readme: Path, lines: list[str]) -> None:
    """Replace the text between :data:`README_BEGIN` and :data:`README_END` in ``readme``."""
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{readme}: no generated-results markers ({README_BEGIN} ... {README_END})")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    readme.write_text(head + README_BEGIN + "\n\n" + "\n".join(lines).rstrip("\n") + "\n\n"
                      + README_END + tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", default=[RESULTS_ROOT],
                        help=f"folders searched for result.json and failed.json ({RESULTS_ROOT})")
    parser.add_argument("--bench", default=BENCH,
                        help=f"layer benchmark JSON of knn.tools.bench ({BENCH}); skipped when absent")
    parser.add_argument("--out", default=REPORT, help=f"report folder ({REPORT})")
    parser.add_argument("--readme", help="also rewrite this file's generated-results block "
                        "(make report: README.md)")
    args = parser.parse_args(argv)
    roots, bench, out = [Path(r) for r in args.results], Path(args.bench), Path(args.out)
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"error: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 1
    if not bench.is_file():
        print(f"note: no benchmark file {bench}; the report has no benchmark section",
              file=sys.stderr)
    shown_roots = " ".join(_shown(r.resolve()) for r in roots)
    command = (f"python -m knn.tools.report --results {shown_roots} --bench {_shown(bench.resolve())} "
               f"--out {_shown(out.resolve())}")
    for path in build(roots, bench if bench.is_file() else None, out, command):
        print(path)
    if args.readme:
        readme = Path(args.readme)
        try:
            update_readme(readme, headline(roots, readme.resolve().parent))
        except (OSError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
