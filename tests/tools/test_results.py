"""knn.tools.results: collecting result.json files and aggregating them over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.tools.results import aggregate, collect, collect_failed, listing, main, markdown, select


def result(task: str, variant: str, seed: int, valid: float, test: float, **extra) -> dict:
    metric = {"sst": "acc", "ptb": "ppl"}[task]
    return {"task": task, "variant": variant, "model": "m", "params": 1000, "metric": metric,
            "seed": seed,
            "metrics": {"valid": {metric: valid}, "test": {metric: test}},
            "wall_seconds": 60.0 * (seed + 1), "epochs": 3, "stop_reason": "patience",
            "budgeted": False, "device": "cpu", "command": f"python -m knn.train seed={seed}",
            "protocol": "full",
            "paper": {"value": 53.2, "params": 540_000}, "config": {"task": {}}, **extra}


def write_runs(root: Path, runs: list[dict]) -> Path:
    for i, r in enumerate(runs):
        d = root / r["variant"] / f"run{i}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r))
    return root


SST_RUNS = [  # seed: (valid, test); the best valid (seed 1) is not the best test (seed 2)
    result("sst", "gated_fine", 2, 50.0, 54.0),
    result("sst", "gated_fine", 0, 51.0, 52.0),
    result("sst", "gated_fine", 1, 53.0, 53.0),
    result("sst", "gated_fine", 3, 53.0, 50.0),  # ties seed 1 on valid: the lower seed wins
]


def test_aggregate_selects_on_valid_and_reports_best_test_and_spread(tmp_path: Path) -> None:
    [g] = aggregate(collect(write_runs(tmp_path, SST_RUNS)))
    assert (g["task"], g["variant"], g["n_runs"]) == ("sst", "gated_fine", 4)
    assert g["seeds"] == [0, 1, 2, 3]
    assert g["selected"] == {"test": 53.0, "valid": 53.0, "seed": 1}
    assert g["best_test"] == {"test": 54.0, "seed": 2}
    assert g["test_mean"] == pytest.approx(52.25)
    assert g["test_std"] == pytest.approx(1.707825, abs=1e-6)  # sample std (n - 1)
    assert g["wall_seconds"] == {"mean": 150.0, "min": 60.0, "max": 240.0}
    assert [r["command"] for r in g["runs"]] == [f"python -m knn.train seed={s}" for s in range(4)]
    assert g["protocol"] == "full" and g["paper"] == {"value": 53.2, "params": 540_000}


def test_lower_is_better_metrics_and_groups(tmp_path: Path) -> None:
    runs = [result("ptb", "gated_5m", 0, 80.0, 78.0), result("ptb", "gated_5m", 1, 79.0, 77.5,
                                                               budgeted=True, budget_minutes=30,
                                                               protocol="budgeted 30 min"),
            result("sst", "gated_binary", 0, 90.0, 89.0)]
    runs.append(result("ptb", "gated_5m", 2, 78.0, 76.0, budgeted=True, budget_minutes=30,
                       protocol="budgeted 30 min"))
    rows = {(g["variant"], g["protocol"]): g for g in aggregate(runs_with_dirs(runs))}
    # runs under different protocols are separate rows, never averaged
    assert sorted(rows) == [("gated_5m", "budgeted 30 min on CPU"), ("gated_5m", "full"),
                            ("gated_binary", "full")]
    ptb = rows["gated_5m", "budgeted 30 min on CPU"]
    assert not ptb["higher_is_better"] and ptb["selected"]["seed"] == 2 and ptb["seeds"] == [1, 2]
    assert ptb["best_test"]["test"] == 76.0 and ptb["test_mean"] == pytest.approx(76.75)
    assert rows["gated_5m", "full"]["test_mean"] == 78.0
    assert rows["gated_binary", "full"]["test_std"] is None  # one run: no spread


def test_runs_budgeted_on_different_hardware_or_threads_are_separate_rows() -> None:
    def budgeted(seed: int, cpu: str, threads: int) -> dict:
        return result("ptb", "gated_5m", seed, 90.0 + seed, 88.0 + seed, budgeted=True,
                      budget_minutes=30, protocol="budgeted 30 min; modified (task.eval_batch_size=10)",
                      machine={"cpu_model": cpu, "torch_threads": threads})
    runs = [budgeted(0, "AMD EPYC", 1), budgeted(1, "Intel Xeon", 1), budgeted(2, "Intel Xeon", 1),
            budgeted(3, "Intel Xeon", 2)]
    rows = {g["protocol"]: g["seeds"] for g in aggregate(runs_with_dirs(runs))}
    assert rows == {
        "budgeted 30 min on CPU (AMD EPYC), 1 thread(s); modified (task.eval_batch_size=10)": [0],
        "budgeted 30 min on CPU (Intel Xeon), 1 thread(s); modified (task.eval_batch_size=10)": [1, 2],
        "budgeted 30 min on CPU (Intel Xeon), 2 thread(s); modified (task.eval_batch_size=10)": [3]}


def runs_with_dirs(runs: list[dict]) -> list[dict]:
    return [{**r, "run_dir": f"d{i}"} for i, r in enumerate(runs)]


def test_markdown_and_cli_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_runs(tmp_path / "runs", SST_RUNS)
    assert main([str(root), "--out", str(tmp_path / "out" / "table2"), "--title", "Table 2"]) == 0
    md = (tmp_path / "out" / "table2.md").read_text()
    assert md == capsys.readouterr().out and md.startswith("## Table 2\n")
    row = next(line for line in md.splitlines() if line.startswith("| sst"))
    assert "| 53.00 (seed 1) | 54.00 (seed 2) | 52.25 ± 1.71 |" in row and "| 53.2 |" in row
    assert "2.5 (1.0-4.0)" in row  # wall minutes per run: mean (min-max)
    assert "| 1,000 (540,000) |" in row  # trained parameters (the paper's)
    assert "`python -m knn.train seed=3`" in md
    data = json.loads((tmp_path / "out" / "table2.json").read_text())
    assert data["title"] == "Table 2" and data["groups"][0]["best_test"]["seed"] == 2
    assert markdown([]).startswith("| task |")


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no result.json" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere")]) == 1
    assert "no such file" in capsys.readouterr().err


def write_failed(run_dir: Path, variant: str, seed: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "failed.json").write_text(json.dumps({
        "task": "sst", "model": "knn_sst", "variant": variant, "seed": seed, "status": "failed",
        "error": "ValueError: boom", "command": f"python -m knn.train seed={seed}"}))


def test_failed_runs_are_collected_unless_a_result_supersedes_them(tmp_path: Path) -> None:
    root = write_runs(tmp_path, SST_RUNS[:2])
    write_failed(root / "const_fine" / "run9", "const_fine", 9)
    write_failed(root / "gated_fine" / "run0", "gated_fine", 2)  # its folder finished later
    [failed] = collect_failed(root)
    assert failed["variant"] == "const_fine" and failed["status"] == "failed"
    assert failed["run_dir"] == str(root / "const_fine" / "run9")
    assert [r["seed"] for r in collect(root)] == [2, 0]  # failed.json is never a result
    assert collect_failed(root / "const_fine" / "run9" / "failed.json") == [failed]
    assert collect(root / "const_fine" / "run9" / "failed.json") == []


def test_select_matches_globs_on_task_model_and_variant() -> None:
    runs = runs_with_dirs([result("sst", "gated_fine", 0, 1, 1),
                           result("sst", "const_binary", 0, 1, 1),
                           result("ptb", "gated_5m", 0, 1, 1, model="knn_lm")])
    assert [r["variant"] for r in select(runs, variant="gated_*")] == ["gated_fine", "gated_5m"]
    assert [r["variant"] for r in select(runs, task="sst", variant="*_binary")] == ["const_binary"]
    assert [r["variant"] for r in select(runs, model="knn_*")] == ["gated_5m"]
    assert select(runs) == runs and select(runs, task="cep") == []


def test_listing_one_aligned_line_per_run_failed_included(tmp_path: Path) -> None:
    root = write_runs(tmp_path, [SST_RUNS[0], result("ptb", "gated_5m", 0, 80.0, 78.5,
                                                     budgeted=True, budget_minutes=30.0,
                                                     protocol="budgeted 30 min")])
    write_failed(root / "const_fine" / "run9", "const_fine", 9)
    header, *lines = listing(collect(root) + collect_failed(root))
    assert header.split() == ["task", "model", "variant", "seed", "valid", "test", "protocol",
                              "run_dir"]
    assert [line.split()[:3] for line in lines] == [["ptb", "m", "gated_5m"],
                                                    ["sst", "knn_sst", "const_fine"],
                                                    ["sst", "m", "gated_fine"]]
    ptb, failed, sst = lines
    assert "ppl 80.00  ppl 78.50  budgeted 30 min" in ptb and ptb.endswith("gated_5m/run1")
    assert "FAILED" in failed and failed.endswith("run9  ValueError: boom")
    assert "acc 50.00  acc 54.00  full" in sst
    assert len({line.index(str(root)) for line in (ptb, sst)}) == 1  # the folder column aligns


def test_cli_list_and_filters(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_runs(tmp_path / "runs", SST_RUNS + [result("sst", "gated_binary", 0, 90.0, 89.0)])
    write_failed(root / "const_fine" / "run9", "const_fine", 9)
    assert main([str(root), "--list", "--variant", "*_fine"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 4 + 1 and not any("gated_binary" in line for line in out)
    assert main([str(root), "--variant", "gated_binary"]) == 0
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.startswith("| sst")]
    assert [row.split(" | ")[1] for row in rows] == ["gated_binary"]
    assert main([str(root), "--variant", "const_*"]) == 1  # only a failed run matches
    err = capsys.readouterr().err
    assert "1 failed run(s)" in err and "no result.json matching" in err
    assert main([str(root), "--list", "--task", "cep"]) == 1


def test_group_params_use_a_closed_form_fitted_size() -> None:
    runs = runs_with_dirs([result("sst", "gated_fine", 0, 1, 1, params=0,
                                  extra={"fitted_parameters": 46_255})])
    assert aggregate(runs)[0]["params"] == 46_255


def test_cli_default_root_is_experiments_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    write_runs(tmp_path / "experiments" / "results", SST_RUNS[:1])
    monkeypatch.chdir(tmp_path)
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("experiments/results/gated_fine/run0")


def test_protocol_is_the_recorded_label_or_unlabelled() -> None:
    """The registry shows the label the trainer derived (knn.train.protocol); it no longer
    reads the command line, so a file without the field says so instead of "full"."""
    from knn.tools.results import UNLABELLED, protocol

    labelled = result("ptb", "gated_5m", 0, 80.0, 78.0, budgeted=True, budget_minutes=30.0,
                      protocol="budgeted 30 min; modified (task.eval_batch_size=10)",
                      command="python -m knn.train train.max_minutes=30 task.eval_batch_size=10")
    assert protocol(labelled) == "budgeted 30 min on CPU; modified (task.eval_batch_size=10)"
    old = {k: v for k, v in labelled.items() if k != "protocol"}
    assert protocol(old) == UNLABELLED == "unlabelled"
    groups = aggregate(runs_with_dirs([old, result("ptb", "gated_5m", 1, 79.0, 77.0)]))
    assert [g["protocol"] for g in groups] == ["unlabelled", "full"]


# --------------------------------------------------------------------------
# experiments/migrations/relabel_protocol.py on copies of committed files

REPO = Path(__file__).resolve().parents[2]
MIGRATION = REPO / "experiments" / "migrations" / "relabel_protocol.py"
#: Committed files (copied, never touched) and the label each must get; None: not a result.
COPIED = {
    "results/ptb/full/gated_5m/result.json": "full",
    "results/ptb/equal_budget_30min/fig2_cnn/result.json":
        "budgeted 30 min; modified (task.eval_batch_size=10)",
    "results/cep/schedule_24k/wln/seed0/result.json": "modified (task.samples_per_epoch=24000)",
    "studies/cep/resample_off/wln/result.json":
        "modified (task.samples_per_epoch=24000, task.resample=false)",
    "bench/layers.json": None,
    "bench/throughput_ptb_gated_5m.json": None,
    "nightly/2026-11-27.json": None,
    "results/ptb/equal_budget_30min/table.json": None,
}
PROVENANCE = ("git_commit", "command", "machine", "torch_version", "ops")
MIGRATION_KEYS = {"protocol", "experiment", "provenance_note", *PROVENANCE}


def load_migration():
    import importlib.util

    spec = importlib.util.spec_from_file_location("relabel_protocol", MIGRATION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_migration_relabels_and_adds_provenance_keeping_every_other_field(tmp_path: Path) -> None:
    migration = load_migration()
    for name in COPIED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((REPO / "experiments" / name).read_bytes())
    originals = {name: json.loads((tmp_path / name).read_text()) for name in COPIED}
    assert migration.main([str(tmp_path)]) == 0
    for name, label in COPIED.items():
        before, after = originals[name], json.loads((tmp_path / name).read_text())
        if name.endswith("table.json"):  # not a file the migration knows: untouched
            assert after == before
            continue
        # Nothing but the migration's keys changes; metrics, configs and timings stay.
        assert {k: v for k, v in after.items() if k not in MIGRATION_KEYS} == \
            {k: v for k, v in before.items() if k not in MIGRATION_KEYS}, name
        for key in PROVENANCE:  # present; a value the file had is kept, a missing one is null
            assert after[key] == before.get(key), (name, key)
        if any(key not in before for key in PROVENANCE):
            assert "not recorded at the time" in after["provenance_note"]
        if label is not None:
            assert after["protocol"] == label, name
            assert after["experiment"] == migration.experiment_of_command(before["command"])
    snapshot = {name: (tmp_path / name).read_bytes() for name in COPIED}
    assert migration.main([str(tmp_path)]) == 0  # a second run changes nothing
    assert {name: (tmp_path / name).read_bytes() for name in COPIED} == snapshot


def test_write_takes_provenance_before_it_writes(tmp_path: Path, monkeypatch) -> None:
    """The commit is read before the table is written: rewriting a tracked table must not
    make the table's own provenance say ``-dirty``."""
    import knn.train.provenance as prov
    from knn.tools.results import write

    seen = []
    monkeypatch.setattr(prov, "provenance",
                        lambda command: seen.append((tmp_path / "t.md").exists()) or {"command": command})
    write(aggregate(collect(write_runs(tmp_path / "runs", SST_RUNS))), tmp_path / "t",
          command="python -m knn.tools.results x")
    assert seen == [False]
    assert json.loads((tmp_path / "t.json").read_text())["command"] == "python -m knn.tools.results x"


def test_run_lines_give_commit_machine_and_the_runner_timeline(tmp_path: Path) -> None:
    run = result("sst", "gated_fine", 4, 45.0, 44.0, best_epoch=1, steps=12_345,
                 git_commit="f773262" + "0" * 33 + "-dirty",
                 machine={"cpu_model": "AMD EPYC", "torch_threads": 1})
    root = write_runs(tmp_path / "runs", [run, result("sst", "gated_fine", 5, 46.0, 43.0)])
    (root / "gated_fine" / "run0" / "PAUSED_AT.txt").write_text(
        "started 2026-11-29 11:31 UTC at f773262\nstopped 2026-11-29 11:51 UTC (exit 143)\n\n"
        "started 2026-11-29 12:06 UTC at f773262\nfinished 2026-11-29 13:05 UTC\n")
    [g] = aggregate(collect(root))
    logged, plain = markdown([g]).splitlines()[-2:]
    assert logged == (
        "- gated_fine seed 4: valid 45.00, test 44.00, 5.0 min, 3 epochs, 12,345 steps (patience,"
        " best epoch 1"
        " of 0-2), CPU (AMD EPYC), 1 thread(s), commit f773262-dirty [started 2026-11-29 11:31 UTC"
        " at f773262; stopped 2026-11-29 11:51 UTC (exit 143); started 2026-11-29 12:06 UTC at"
        " f773262; finished 2026-11-29 13:05 UTC]: `python -m knn.train seed=4`")
    # A run without a step count, commit, machine, best epoch or runner log says only what it has.
    assert plain == ("- gated_fine seed 5: valid 46.00, test 43.00, 6.0 min, 3 epochs (patience),"
                     " CPU: `python -m knn.train seed=5`")
