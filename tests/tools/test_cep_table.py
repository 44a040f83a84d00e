"""Table 3 rows from result.json files: rows per (variant, protocol), means over seeds,
the paper's ordering within a protocol, issue #20's target against chemprop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knn.tools import cep_table
from knn.tools.cep_table import (chemprop_reference, main, ordering, ordering_lines, table,
                                 versus_chemprop)

MODIFIED = "modified (task.samples_per_epoch=24000)"
CHEMPROP = {"name": "chemprop test", "test_rmse": 0.925, "test_mae": 0.401, "params": 318_000,
            "molecules_per_second": 730, "machine": {"cpu_model": "CPU A"}}


def result(variant: str, valid: float, test: float, seed: int = 0, protocol: str = "full",
           rate: float = 700.0, extra: dict | None = None, **fields) -> dict:
    """A CEP result.json; test MAE is half the test RMSE; ``rate`` molecules/s both over
    training updates and over the whole run (the 120 s of training are the whole wall time)."""
    fitted = variant in ("mean", "wl_kernel")
    return {
        "task": "cep", "model": variant, "variant": variant, "seed": seed,
        "params": 0 if fitted else 260_000, "metric": "rmse", "protocol": protocol,
        "metrics": {"valid": {"rmse": valid, "mae": valid / 2}, "test": {"rmse": test, "mae": test / 2}},
        "epochs": 1 if fitted else 51, "steps": 0 if fitted else 255_000, "best_epoch": 0,
        "stop_reason": "max_epochs", "budgeted": False, "budget_minutes": None,
        "wall_seconds": 120.0, "device": "cpu", "machine": {"cpu_model": "CPU A"}, "git_commit": "abc",
        "command": f"python -m knn.train experiment=cep/{variant} seed={seed}",
        "paper": {"table": "Table 3", "row": variant.upper(), "value": 0.1},
        "config": {"task": {"limit_train_batches": None, "limit_eval_batches": None}},
        "extra": {"throughput": {"molecules_per_second": None,
                                 "molecules": 0, "seconds": 0.0} if fitted else
                  {"molecules_per_second": rate, "molecules": round(rate * 120), "seconds": 120.0},
                  **(extra or {})},
        **fields,
    }


#: cep/wln_tuned's task: the 24k schedule without re-sampling (its protocol is still "full").
TUNED_CONFIG = {"task": {"samples_per_epoch": 24000, "resample": False,
                         "limit_train_batches": None, "limit_eval_batches": None}}


def write(root: Path, name: str, r: dict) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "result.json").write_text(json.dumps(r))


def test_rows_aggregate_seeds_and_main_writes_them(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [result("gated_wln", 0.50, 0.61), result("elbp", 0.6, 0.70), result("nfp", 0.7, 0.71),
            result("mean", 2.5, 2.57, extra={"fitted_parameters": 1}),
            result("wl_kernel", 1.5, 1.58, extra={"fitted_parameters": 46_255}),
            result("wln", 0.52, 0.60, seed=0, rate=600.0),
            result("wln", 0.51, 0.62, seed=1, rate=700.0),  # best validation
            result("wln", 0.53, 0.67, seed=2, rate=800.0),
            result("wln_tuned", 0.40, 0.90, seed=0, rate=740.0, paper=None, config=TUNED_CONFIG),
            result("wln_tuned", 0.41, 0.92, seed=1, rate=760.0, paper=None, config=TUNED_CONFIG)]
    for i, r in enumerate(runs):
        write(tmp_path, f"run{i}", r)
    write(tmp_path, "sst", {**result("wln", 0.1, 0.1), "task": "sst"})  # not a CEP run: ignored
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "reported.json").write_text(json.dumps(CHEMPROP))
    monkeypatch.setattr(cep_table, "PEER_DIR", peers)
    import knn.train.provenance as prov

    real_provenance, md_written = prov.provenance, []
    monkeypatch.setattr(prov, "provenance", lambda command: md_written.append(
        (tmp_path / "out" / "table3.md").exists()) or real_provenance(command))
    assert main([str(tmp_path), "--out", str(tmp_path / "out" / "table3")]) == 0
    assert md_written == [False]  # the commit is read before the rewritten table dirties the tree
    data = json.loads((tmp_path / "out" / "table3.json").read_text())
    rows = data["rows"]
    assert [r["variant"] for r in rows] == ["mean", "wl_kernel", "nfp", "elbp", "wln", "gated_wln",
                                            "wln_tuned"]
    wln = rows[4]
    # By hand: mean (0.60 + 0.62 + 0.67) / 3 = 0.63; squared deviations 0.0009 + 0.0001 +
    # 0.0016 = 0.0026, sample variance 0.0026 / 2 = 0.0013.
    assert (wln["n_runs"], wln["seeds"]) == (3, [0, 1, 2])
    assert wln["test_rmse_mean"] == pytest.approx(0.63)
    assert wln["test_rmse_std"] == pytest.approx(0.0013 ** 0.5)
    assert wln["test_mae_mean"] == pytest.approx(0.315)
    assert wln["test_mae_std"] == pytest.approx(0.0013 ** 0.5 / 2)
    assert wln["valid_rmse_mean"] == pytest.approx(0.52)
    assert wln["molecules_per_second_mean"] == pytest.approx(700.0)
    assert wln["best_valid"]["seed"] == 1 and wln["best_valid"]["test_rmse"] == 0.62
    assert [(r["seed"], r["test_rmse"], r["command"]) for r in wln["runs"]] == [
        (s, t, f"python -m knn.train experiment=cep/wln seed={s}")
        for s, t in ((0, 0.60), (1, 0.62), (2, 0.67))]
    assert all(r["run_dir"] and r["git_commit"] == "abc" for r in wln["runs"])
    gated = rows[5]  # a single run: no spread
    assert (gated["n_runs"], gated["test_rmse_std"], gated["test_mae_std"]) == (1, None, None)
    assert rows[1]["params"] == 46_255 and rows[1]["closed_form"]
    assert rows[6]["paper_row"] == "WLN tuned on validation (ours)"
    [verdict] = data["ordering"]["verdicts"]
    assert verdict["protocol"] == "full" and verdict["holds"] is True
    assert [c["pair"] for c in verdict["checks"]] == ["gated_wln ≤ wln", "wln < elbp",
                                                     "elbp < nfp", "nfp < mean"]  # no wln_tuned
    md = (tmp_path / "out" / "table3.md").read_text()
    assert ("| WLN | wln | 3 (0, 1, 2) | 0.6300 ± 0.0361 | 0.3150 ± 0.0180 | 0.5200 "
            "| 0.6200 (1) |") in md
    assert "| GATED_WLN | gated_wln | 1 (0) | 0.6100 | 0.3050 | 0.5000 | 0.6100 (0) |" in md
    # the draws column, from each run's config: the protocol label "full" alone does not say it
    assert [r["draws"] for r in rows] == [["-"], ["-"], *[["not recorded"]] * 4, ["24,000, uniform"]]
    assert "| 51 (255,000) | 24,000, uniform | full |" in md
    assert "46,255 (fitted)" in md and "mean test RMSE over n seeds (n per row)" in md
    assert "- full: **holds**: gated_wln ≤ wln yes (0.6100 (n=1) vs 0.6300 ± 0.0361 (n=3); " \
           "within spread), wln < elbp yes (0.6300 ± 0.0361 (n=3) vs 0.7000 (n=1))," in md
    for s in (0, 1, 2):  # every run is listed
        assert f"- wln, full, seed {s}: valid RMSE" in md
    # the chemprop target judged on the tuned WLN: 0.91 < 0.925, 0.455 ≥ 0.401, 750 ≥ 730 molecules/s
    vs = data["versus_reference"]
    assert (vs["variant"], vs["protocol"], vs["n_runs"]) == ("wln_tuned", "full", 2)
    assert vs["test_rmse"] == [pytest.approx(0.91), 0.925] and vs["rmse_holds"] is True
    assert vs["test_mae"] == [pytest.approx(0.455), 0.401] and vs["mae_holds"] is False
    assert vs["molecules_per_second"] == [pytest.approx(750.0), 730]
    assert vs["throughput_holds"] is True and vs["holds"] is False
    assert ("wln_tuned (full, mean over 2 seed(s)): **not met**: test RMSE 0.9100 ± 0.0141 vs "
            "0.9250 (yes), MAE 0.4550 ± 0.0071 vs 0.4010 (NO), 750 vs 730 whole-run molecules/s "
            "(yes).") in md
    # with both sides' spread: chemprop's one run has none, ours 0.0141: 0.015 apart is more
    assert vs["verdicts"] == {"test_rmse": "ahead", "test_mae": "behind"}
    assert ("- test_rmse (lower is better): wln_tuned 0.9100 ± 0.0141 (n=2; best 0.9000) against "
            "chemprop 0.9250 (n=1): **ahead**") in md


def test_protocols_are_separate_rows_and_ordering_is_judged_within_one() -> None:
    rows = table([result("wln", 0.5, 0.50), result("gated_wln", 0.5, 0.60),
                  result("wln", 0.5, 0.70, seed=0, protocol=MODIFIED),
                  result("wln", 0.5, 0.80, seed=1, protocol=MODIFIED),
                  result("gated_wln", 0.5, 0.60, protocol=MODIFIED),
                  result("nfp", 0.5, 1.0, protocol=MODIFIED),
                  result("mean", 2.5, 2.5, extra={"fitted_parameters": 1})])
    assert [(r["variant"], r["protocol"], r["n_runs"]) for r in rows] == [
        ("mean", "full", 1), ("nfp", MODIFIED, 1), ("wln", "full", 1), ("wln", MODIFIED, 2),
        ("gated_wln", "full", 1), ("gated_wln", MODIFIED, 1)]
    assert rows[2]["test_rmse_mean"] == 0.50  # the full run is not averaged with the others
    assert rows[3]["test_rmse_mean"] == pytest.approx(0.75)
    full, modified = ordering(rows)["verdicts"]
    assert full["protocol"] == "full" and not full["complete"] and not full["holds"]
    assert [(c["pair"], c["holds"], c["means"]) for c in full["checks"]] == [
        ("gated_wln ≤ wln", False, [0.60, 0.50])]
    assert modified["protocol"] == MODIFIED and not modified["complete"]
    assert [(c["pair"], c["holds"], c["protocol"]) for c in modified["checks"]] == [
        ("gated_wln ≤ wln", True, MODIFIED), ("nfp < mean", True, MODIFIED)]
    # The mean predictor's closed-form fit has no schedule: it stands in under MODIFIED.
    assert modified["checks"][1]["protocols"] == [MODIFIED, "full"]
    text = "\n".join(ordering_lines(ordering(rows)))
    assert ("- full: **does not hold**: gated_wln ≤ wln NO (0.6000 (n=1) vs 0.5000 (n=1); "
            "one run each, no spread measured).") in text
    assert f"- {MODIFIED}: **holds on the pairs checked (missing rows)**" in text
    assert "2.5000 (n=1, full closed form)" in text
    # No tuned WLN: the full protocol's WLN row is judged, though MODIFIED has more runs.
    vs = versus_chemprop(rows, CHEMPROP)
    assert (vs["variant"], vs["protocol"], vs["n_runs"]) == ("wln", "full", 1)


def test_within_spread_and_target_row_choice() -> None:
    rows = table([result("wln", 0.5, t, seed=s) for s, t in enumerate((1.0, 1.1, 1.2))]
                 + [result("gated_wln", 0.5, 1.15), result("elbp", 0.5, 1.5)])
    checks = ordering(rows)["verdicts"][0]["checks"]
    assert rows[1]["variant"] == "wln" and rows[1]["test_rmse_std"] == pytest.approx(0.1)
    # |1.15 - 1.10| = 0.05 ≤ 0.1 (wln's std): judged NO by the means, but within spread
    assert [(c["pair"], c["holds"], c["within_spread"]) for c in checks] == [
        ("gated_wln ≤ wln", False, True), ("wln < elbp", True, False)]
    assert "gated_wln ≤ wln NO (1.1500 (n=1) vs 1.1000 ± 0.1000 (n=3); within spread)" in \
        "\n".join(ordering_lines(ordering(rows)))
    # Two single runs: no spread measured, and the text says so
    single = ordering(table([result("gated_wln", 0.5, 1.0), result("wln", 0.5, 1.0)]))
    assert single["verdicts"][0]["checks"][0]["within_spread"] is None
    assert "one run each, no spread measured" in "\n".join(ordering_lines(single))
    # The full protocol's row is judged, even with fewer runs; among others the most runs,
    # ties on validation (never on test): here the modified row, valid 0.4 < 0.5.
    tie = table([result("wln", 0.5, 0.95, protocol="cut at 3 epochs"),
                 result("wln", 0.4, 0.99, protocol=MODIFIED)])
    vs = versus_chemprop(tie, CHEMPROP)
    assert (vs["protocol"], vs["test_rmse"], vs["rmse_holds"]) == (MODIFIED, [0.99, 0.925], False)
    full = table([result("wln", 0.5, 1.2, protocol="full")]
                 + [result("wln", 0.4, 0.9, seed=s, protocol=MODIFIED) for s in range(3)])
    assert versus_chemprop(full, CHEMPROP)["protocol"] == "full"
    tie = table([result("wln", 0.5, 0.95), result("wln", 0.5, 0.90, protocol=MODIFIED)])
    vs = versus_chemprop(tie, CHEMPROP)
    assert vs["mae_holds"] is False and vs["throughput_holds"] is False  # 0.45 ≥ 0.401; 700 < 730
    assert versus_chemprop(table([result("nfp", 0.5, 0.5)]), CHEMPROP) is None
    assert versus_chemprop(tie, None) is None  # no reference file: nothing to judge
    assert ordering(table([result("nfp", 0.5, 0.5)]))["verdicts"] == []


def test_throughput_is_compared_on_one_cpu_only(tmp_path: Path) -> None:
    """Rates from two machines are no comparison: the target stays open on throughput, and
    says why, unless every run and the peer run recorded the same CPU."""
    rows = table([result("wln_tuned", 0.4, 0.90, seed=s, rate=900.0, paper=None) for s in (0, 1)]
                 + [result("wln_tuned", 0.4, 0.90, seed=2, rate=900.0, paper=None,
                           machine={"cpu_model": "CPU B"})])
    good = {**CHEMPROP, "test_mae": 0.5}  # RMSE and MAE both beaten
    vs = versus_chemprop(rows, good)
    assert vs["throughput_holds"] is None and vs["holds"] is False
    assert vs["cpu_models"] == [["CPU A", "CPU B"], "CPU A"]
    assert versus_chemprop(rows, {**good, "machine": None})["throughput_holds"] is None
    same = table([result("wln_tuned", 0.4, 0.90, seed=s, rate=900.0, paper=None) for s in (0, 1)])
    assert versus_chemprop(same, good)["holds"] is True
    (tmp_path / "result.json").write_text(json.dumps(good))
    assert ("**open**: test RMSE 0.9000 ± 0.0000 vs 0.9250 (yes), MAE 0.4500 ± 0.0000 vs 0.5000 (yes), "
            "900 vs 730 whole-run molecules/s (not compared: measured on CPU A, CPU B against CPU A; rerun "
            "make peer-chemprop beside the runs).") in cep_table.markdown(rows, tmp_path)


def test_throughput_counts_the_whole_run_like_chemprops() -> None:
    """chemprop's rate is over its whole command, so ours is over the run's wall time:
    validation and testing count, and a fast update rate alone does not meet the target."""
    runs = [result("wln_tuned", 0.4, 0.90, seed=s, rate=900.0, paper=None) for s in (0, 1)]
    for r in runs:  # 900 molecules/s of updates, but 120 s of training in a 160 s run
        r["wall_seconds"] = 160.0
    vs = versus_chemprop(table(runs), {**CHEMPROP, "test_mae": 0.5})
    assert vs["molecules_per_second"] == [pytest.approx(675.0), 730]
    assert vs["throughput_holds"] is False and vs["holds"] is False
    assert table(runs)[0]["molecules_per_second_mean"] == 900.0  # the table's column


def test_last_epochs_test_rmse_is_a_column_over_the_runs_that_have_it() -> None:
    """The authors test the last epoch's weights: that mean is shown beside ours, over the
    runs that recorded ``metrics_last`` (older runs did not)."""
    runs = [result("wln", 0.5, 1.0, seed=0), result("wln", 0.5, 1.1, seed=1),
            result("wln", 0.5, 1.2, seed=2)]
    runs[1]["metrics_last"] = {"valid": {"rmse": 0.6}, "test": {"rmse": 1.15, "mae": 0.5}}
    runs[2]["metrics_last"] = {"valid": {"rmse": 0.6}, "test": {"rmse": 1.25, "mae": 0.5}}
    md = cep_table.markdown(table(runs), Path("/nonexistent"))
    assert "| 0.5000 | 1.0000 (0) | 1.2000 (n=2) | 0.1000 |" in md
    assert "seed 2: valid RMSE 0.5000, test RMSE 1.2000 (last epoch's weights: 1.2500)" in md
    assert "| 1.0000 (0) | - | 0.1000 |" in cep_table.markdown(table(runs[:1]), Path("/nonexistent"))


def test_chemprop_reference_prefers_the_peer_run(tmp_path: Path) -> None:
    """The measured peer run (result.json) replaces the reported numbers; none: None."""
    assert chemprop_reference(tmp_path) is None
    (tmp_path / "reported.json").write_text(json.dumps({"test_rmse": 0.93, "params": 1}))
    assert chemprop_reference(tmp_path)["origin"].startswith("reported")
    (tmp_path / "result.json").write_text(json.dumps({"test_rmse": 0.91, "params": 1,
                                                      "chemprop_version": "2.3.1"}))
    ref = chemprop_reference(tmp_path)
    assert (ref["test_rmse"], ref["origin"]) == (0.91, "measured by make peer-chemprop")
    assert ref["name"] == "chemprop 2.3.1 default D-MPNN"


def test_committed_reference_file_is_read() -> None:
    ref = chemprop_reference()
    assert ref is not None and ref["params"] == 318_301 and ref["test_rmse"] < 1


def test_no_runs_is_an_error(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no task=cep result.json" in capsys.readouterr().err


def test_no_closed_form_stand_in_where_the_data_differ_and_no_smoke_rows() -> None:
    data = "modified (task.data.path=other.csv)"
    rows = table([result("nfp", 0.5, 1.0, protocol=data),
                  result("mean", 2.5, 2.5, extra={"fitted_parameters": 1}),
                  result("wln", 0.5, 0.1, protocol="smoke (limited batches)"),
                  result("elbp", 0.5, 0.2, protocol="smoke (limited batches)")])
    assert ordering(rows)["verdicts"] == []  # nfp < mean not judged on other data; smoke never
    assert versus_chemprop(rows, CHEMPROP) is None  # a smoke WLN row is no target row


def test_draws_say_how_many_molecules_an_epoch_draws_and_how() -> None:
    task = {"limit_train_batches": None, "limit_eval_batches": None}
    authors = result("wln", 0.5, 0.5, config={"task": {**task, "samples_per_epoch": 100_000,
                                                        "resample": True}})
    one_pass = result("wln", 0.5, 0.5, config={"task": {**task, "samples_per_epoch": None,
                                                         "resample": False}})
    fit = result("mean", 2.5, 2.5, extra={"fitted_parameters": 1})
    assert [cep_table.draws(r) for r in (authors, one_pass, fit)] == [
        "100,000, re-sampled", "one pass, uniform", "-"]


def test_chemprop_reference_is_the_mean_over_its_seeds(tmp_path: Path) -> None:
    """seed 0's result.json and seed<N>/result.json: means, sample stds and each value; a
    check run (not the full 50 epochs) is no seed of the reference."""
    (tmp_path / "result.json").write_text(json.dumps(
        {"test_rmse": 0.90, "test_mae": 0.40, "params": 1, "seed": 0, "full_run": True,
         "molecules_per_second": 300.0}))
    for seed, rmse, full in ((1, 0.94, True), (2, 0.98, True), (3, 5.0, False)):
        (tmp_path / f"seed{seed}").mkdir()
        (tmp_path / f"seed{seed}" / "result.json").write_text(json.dumps(
            {"test_rmse": rmse, "test_mae": 0.42, "params": 1, "seed": seed, "full_run": full,
             "molecules_per_second": 330.0}))
    ref = chemprop_reference(tmp_path)
    assert ref["seeds"] == [0, 1, 2] and ref["n_runs"] == 3
    assert ref["test_rmse"] == pytest.approx(0.94) and ref["test_rmse_std"] == pytest.approx(0.04)
    assert ref["test_rmse_values"] == [0.90, 0.94, 0.98]
    assert ref["molecules_per_second"] == 300.0  # seed 0's, on the CPU its machine names
