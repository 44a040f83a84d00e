"""knn.tools.report: paper tables from configs and runs, failed runs, figures."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from knn.tools import report
from knn.train.config import experiment_names

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_result(task: str, variant: str, seed: int, valid: float, test: float, **extra) -> dict:
    metric = {"ptb": "ppl", "sst": "acc", "cep": "rmse"}[task]
    more = {"mae": 0.5} if task == "cep" else {}
    return {"task": task, "model": "m", "variant": variant, "params": 5_000_123 + seed,
            "metric": metric, "seed": seed,
            "metrics": {"valid": {metric: valid, **more}, "test": {metric: test, **more}},
            "best_epoch": 1, "epochs": 2, "steps": 20, "stop_reason": "patience",
            "wall_seconds": 90.0, "device": "cpu", "budgeted": False, "budget_minutes": None,
            "protocol": "full",  # the trainer's derived label (knn.train.protocol)
            "command": f"python -m knn.train experiment={task}/{variant} seed={seed}",
            "paper": {"table": "Table 1", "value": 999.9},  # stale: the report must not use it
            "config": {"task": {}}, **extra}


def write_run(root: Path, result: dict, epochs: list[float] | None = None) -> Path:
    d = root / result["task"] / result["variant"] / f"seed{result['seed']}"
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps(result))
    if epochs:
        metric = result["metric"]
        (d / "metrics.jsonl").write_text("".join(
            json.dumps({"epoch": i, "valid": {metric: v}, "elapsed": 60.0 * (i + 1)}) + "\n"
            for i, v in enumerate(epochs)))
    return d


def fake_results(root: Path) -> None:
    write_run(root, run_result("ptb", "gated_5m", 0, 80.0, 78.0), epochs=[120.0, 80.0])
    write_run(root, run_result("ptb", "gated_5m", 1, 79.0, 76.0), epochs=[110.0, 79.0])
    write_run(root, run_result("ptb", "fig2_const", 0, 90.0, 88.5, budgeted=True,
                               budget_minutes=30.0, stop_reason="max_minutes",
                               protocol="budgeted 30 min"),
              epochs=[130.0, 90.0])
    write_run(root, run_result("ptb", "my_variant", 0, 99.0, 98.0, paper=None))  # no config
    write_run(root, run_result("sst", "gated_fine", 0, 50.0, 49.5))  # no metrics.jsonl
    write_run(root, run_result("cep", "wl_kernel", 0, 1.5, 1.6, params=0,
                               extra={"fitted_parameters": 46_255}), epochs=[1.5])
    write_run(root, run_result("cep", "wln", 0, 1.0, 1.1, config={"task": {
        "samples_per_epoch": 100_000, "resample": True}}))
    write_run(root, run_result("cep", "gated_wln", 0, 1.0, 1.2, config={"task": {
        "samples_per_epoch": 100_000, "resample": True}}))
    failed = root / "sst" / "const_fine" / "seed3"
    failed.mkdir(parents=True)
    (failed / "failed.json").write_text(json.dumps({
        "task": "sst", "model": "knn_sst", "variant": "const_fine", "seed": 3, "status": "failed",
        "error": "RuntimeError: CUDA out of memory | tried 2 GiB",
        "command": "python -m knn.train experiment=sst/const_fine seed=3"}))


def fake_bench(path: Path) -> Path:
    cases = [{"variant": v, "shape": {"name": s, "T": 35, "B": 20, "width": 355},
              "ratio_vs_lstm": r, "ratio_vs_floor": 1.5}
             for v, r in (("n1_gated_xh_highway", 1.07), ("n2_mult_gated_xh", 0.85))
             for s in ("ptb", "sst")]
    path.write_text(json.dumps({"torch_version": "2.x", "threads": 2, "cpu_model": "test",
                                "timed": "forward+backward", "cases": cases}))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The report of the fake tree (configs composed once for the module's tests)."""
    tmp = tmp_path_factory.mktemp("report")
    fake_results(tmp / "results")
    bench = fake_bench(tmp / "layers.json")
    exps = report.experiments()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "experiments", lambda: exps)
        assert report.main(["--results", str(tmp / "results"), "--bench", str(bench),
                            "--out", str(tmp / "out")]) == 0
        text = (tmp / "out" / "README.md").read_text()
        assert report.main(["--results", str(tmp / "results"), "--bench", str(bench),
                            "--out", str(tmp / "out")]) == 0
        yield tmp / "out", text


def table_row(md: str, experiment: str, section: str) -> str:
    """The line of ``experiment`` in the section whose heading starts with ``section``."""
    part = md.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return next(line for line in part.splitlines() if f"| `{experiment}` |" in line)


def cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_every_experiment_config_is_a_row_with_the_configs_paper_number(
        built: tuple[Path, str]) -> None:
    out, md = built
    for name in experiment_names():
        assert f"| `{name}` |" in md, name
    assert "999.9" not in md  # result.json's stale paper field is not used
    gated = cells(table_row(md, "ptb/gated_5m", "Table 1"))
    assert gated[:7] == ["Kernel NN (gated λ)", "`ptb/gated_5m`", "73.6", "76.00",
                         "77.00 ± 1.41", "2", "5,000,123"]
    assert gated[7:9] == ["5m", "full"]
    # the experiment file's declared departures, then what the runs lack (the fakes: both)
    declared = report.experiments()
    [e] = [x for x in declared if x.name == "ptb/gated_5m"]
    assert e.paper["departures"] and gated[9] == " · ".join(
        [*e.paper["departures"], "machine, ops not recorded (2 of 2 runs)"])
    assert gated[10] == "CPU"  # where: derived from each result's own device (no segments)
    runs = (out.parent / "results/ptb/gated_5m").resolve().as_posix()  # both seeds' parent
    assert gated[11] == f"[{runs}](../results/ptb/gated_5m)"
    not_run = cells(table_row(md, "ptb/gated_vd_20m", "Table 1"))
    assert not_run[1:5] == ["`ptb/gated_vd_20m`", "65.5", "no result", "-"] and not_run[7] == "20m"
    t1 = md.split("## Table 1", 1)[1].split("\n## ", 1)[0]
    assert t1.index("`ptb/const_5m`") < t1.index("`ptb/learned_5m`") < t1.index("`ptb/gated_5m`")
    assert "`ptb/fig2_const`" not in t1  # Figure 2's rows have their own table


def test_protocol_labels_and_substitutions(built: tuple[Path, str]) -> None:
    _, md = built
    fig2 = cells(table_row(md, "ptb/fig2_const", "Figure 2"))
    assert fig2[2:4] == ["84.3", "88.50"] and fig2[8] == "budgeted 30 min on CPU"  # what spent it
    sst = cells(table_row(md, "sst/gated_fine", "Table 2"))
    assert sst[0] == "Kernel NN, gated λ (fine)" and sst[2] == "53.2 (best of 5 runs)"
    assert sst[8] == "full" and sst[9].startswith(report.SST_VECTORS[report.GLOVE_6B_SST])
    unrun_sst = cells(table_row(md, "sst/gated_binary", "Table 2"))
    assert unrun_sst[3] == "no result" and unrun_sst[8] == "-"
    assert report.SST_VECTORS[report.GLOVE_6B_SST] in unrun_sst[9]
    cep = cells(table_row(md, "cep/wl_kernel", "Table 3"))
    assert cep[2:4] == ["0.204", "1.6000"] and cep[6] == "46,255"  # closed form: fitted size
    assert cep[8] == "full" and report.CEP_SUBSET in cep[9]
    # a trained CEP row says how it drew its molecules, which "full" alone does not
    wln = cells(table_row(md, "cep/wln", "Table 3"))
    assert wln[8] == "full; draws per epoch: 100,000, re-sampled" and report.CEP_SUBSET in wln[9]
    assert report.cep_table.PAPER_NOTE in md
    # Every table is judged below it from its experiment files (knn.tools.judge): the
    # declared order on the mean test value, within a label.
    table3 = md.split("## Table 3", 1)[1]
    assert ("- the paper's order `cep/gated_wln` before `cep/wln` (0.1043 vs 0.1058; full; draws "
            "per epoch: 100,000, re-sampled; " + report.CEP_SUBSET + "): ours 1.2000 (n=1) against "
            "1.1000 (n=1): **behind (one run each, no spread measured)**") in table3
    # Table 2: the declared target on its one gated run, and the authors' rule
    table2 = md.split("## Table 2", 1)[1].split("\n## ", 1)[0]
    assert ("- target `sst/gated_fine` (full; " + report.SST_VECTORS[report.GLOVE_6B_SST]
            + "): best of 1 49.50 (seed 0) at or above the project's bound (limit 48.00): "
            "**met**") in table2
    assert "### The authors' second stopping rule" in table2


def test_failed_and_other_runs(built: tuple[Path, str]) -> None:
    out, md = built
    row = cells(table_row(md, "sst/const_fine", "Table 2"))
    assert row[3] == "failed" and row[5] == "0 + 1 failed"
    failed = md.split("## Failed runs", 1)[1].split("\n## ", 1)[0]
    [line] = [x for x in failed.splitlines() if x.startswith("| sst")]
    error = "RuntimeError: CUDA out of memory \\| tried 2 GiB"  # the pipe escaped
    assert cells(line)[:4] == ["sst", "const_fine", "3", error]
    assert "(../results/sst/const_fine/seed3)" in line
    assert "`python -m knn.train experiment=sst/const_fine seed=3`" in line
    other = md.split("## Other runs (no experiment config)", 1)[1]
    assert "| ptb | my_variant |" in other


def test_table3_ends_with_chemprops_row_from_its_result_file(built: tuple[Path, str]) -> None:
    _, md = built
    ref = json.loads((report.REPO_ROOT / "experiments/peers/chemprop/result.json").read_text())
    table = md.split("## Table 3", 1)[1].split("\n\n", 2)[1].splitlines()
    row = cells(table[-1])
    assert row[0].startswith("chemprop 2.3.1 default D-MPNN")
    values = [json.loads(f.read_text())["test_rmse"] for f in
              [report.REPO_ROOT / "experiments/peers/chemprop/result.json",
               *sorted((report.REPO_ROOT / "experiments/peers/chemprop").glob("seed*/result.json"))]]
    assert float(row[3]) == pytest.approx(min(values), abs=5e-5)  # best of n, as ours
    assert row[6] == f"{ref['params']:,}" and row[5] == str(len(values))
    assert "the same split" in row[8] and row[9] == report.CEP_SUBSET
    assert row[11].endswith("/experiments/peers/chemprop)")
    where = report.cep_table.chemprop_reference()["where"]  # each seed's machine, as recorded
    assert row[10] == (next(iter(where.values())) if len(set(where.values())) == 1 else
                       "; ".join(f"seed {s}: {w}" for s, w in sorted(where.items())))
    # below the table, chemprop's reference, over its seeds (its target is cep/wln_tuned's,
    # which has no run here: not judged)
    notes = md.split("## Table 3", 1)[1]
    mean = report.cep_table.chemprop_reference()
    assert f"test RMSE {mean['test_rmse']:.4f} ± {mean['test_rmse_std']:.4f}" in notes
    assert "- target `cep/wln_tuned`" not in notes


def test_links_resolve_and_output_is_deterministic(built: tuple[Path, str]) -> None:
    out, md = built
    assert (out / "README.md").read_text() == md  # the second build wrote the same text
    targets = re.findall(r"\]\(([^)]+)\)", md)
    assert len(targets) > 5
    for target in targets:
        assert (out / target).exists(), target


def test_figures_are_png_files(built: tuple[Path, str]) -> None:
    out, md = built
    for name in ("fig2_decay_variants.png", "curves_ptb.png", "curves_cep.png", "bench_ratios.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC, name
        assert f"]({name})" in md
    assert not (out / "curves_sst.png").exists()  # its only run has no metrics.jsonl
    assert "| ptb (35, 20, 355) | n2_mult_gated_xh | 0.85x | 1.50x |" in md


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert report.main(["--results", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_readme_block_is_rewritten_between_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n{report.README_BEGIN}\nold numbers\n{report.README_END}\n\nafter\n")
    report.update_readme(readme, ["| a | b |", "", "x"])
    text = readme.read_text()
    assert "old numbers" not in text and "| a | b |" in text and text.endswith("\n\nafter\n")
    report.update_readme(readme, ["y"])  # idempotent shape: markers kept
    assert text.count(report.README_BEGIN) == 1 and "x" not in readme.read_text()
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="no generated-results markers"):
        report.update_readme(tmp_path / "bare.md", ["y"])


def test_readme_headline_holds_the_papers_tables_only() -> None:
    """The README's block: Tables 1-3 with runs; Figure 2 stays in the full report."""
    repo = Path(__file__).resolve().parents[2]
    lines = report.headline([repo / "experiments" / "results"], repo)
    titles = [line for line in lines if line.startswith("#### ")]
    assert titles and all(t.startswith("#### Table ") for t in titles)
    assert not any("Figure 2" in line for line in lines)


def test_where_seeds_ran_is_said_once_when_they_agree_else_seed_by_seed() -> None:
    assert report.per_seed({0: "CPU (A)", 1: "CPU (A)"}) == "CPU (A)"
    assert report.per_seed({1: "CPU (B)", 0: "CPU (A)"}) == "seed 0: CPU (A); seed 1: CPU (B)"
