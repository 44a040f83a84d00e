"""knn.tools.judge: the orderings and targets the experiment files declare, judged on runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knn.tools import judge
from knn.tools.results import aggregate, higher_is_better
from knn.tools.rows import Experiment, experiments

MODIFIED = "modified (task.samples_per_epoch=24000)"
DATA = "public subset"
CHEMPROP = {"name": "chemprop test", "origin": "reported", "file": "peers/chemprop", "seeds": [0],
            "test_rmse": 0.925, "test_mae": 0.401, "molecules_per_second": 730,
            "machine": {"cpu_model": "CPU A"}}


def run(task: str, name: str, test: float, seed: int = 0, protocol: str = "full",
        **fields) -> dict:
    """A result.json of ``task``'s metric (ppl or rmse), test MAE half the RMSE; 700 molecules
    trained a second over its 120 s."""
    metric = {"ptb": "ppl", "cep": "rmse", "sst": "acc"}[task]
    values = {metric: test, "mae": test / 2}
    return {"task": task, "variant": name, "model": name, "seed": seed, "metric": metric,
            "metrics": {"valid": values, "test": values}, "params": 1, "wall_seconds": 120.0,
            "protocol": protocol, "run_dir": f"/runs/{name}/{protocol}/{seed}",
            "machine": {"cpu_model": "CPU A"},
            "extra": {"throughput": {"molecules": 700 * 120}}, **fields}


def row(task: str, name: str, paper: dict, tests: list[float], protocol: str = "full",
        **fields) -> dict:
    """A :func:`knn.tools.rows.table_rows` row of experiment ``task/name`` with one run per
    test value (seeds 0, 1, ...); the label is the protocol and :data:`DATA`."""
    members = [run(task, name, t, s, protocol, **fields) for s, t in enumerate(tests)]
    [group] = aggregate(members) if members else [None]
    return {"experiment": Experiment(f"{task}/{name}", task, name, paper, {}), "group": group,
            "members": members, "label": f"{protocol}; {DATA}", "protocol": protocol,
            "substitution": DATA}


def test_declared_order_is_judged_pairwise_with_both_spreads() -> None:
    rows = [row("ptb", "const", {"value": 84.3}, [88.0, 87.0]),
            row("ptb", "gated", {"value": 73.6, "target": {"within": 0.03},
                                 "better_than": ["ptb/learned", "ptb/lstm"]}, [74.0, 76.0]),
            row("ptb", "learned", {"value": 76.8, "better_than": ["ptb/const"]}, [75.0, 77.0])]
    order = judge.ordering(rows)  # ptb/lstm has no row: not judged
    assert [(o["better"], o["worse"], o["verdict"]) for o in order] == [
        ("ptb/gated", "ptb/learned", "within the spread"),  # 75 vs 76, stds 1.41
        ("ptb/learned", "ptb/const", "ahead")]  # 76 vs 87.5
    [t] = judge.targets(rows)
    assert t["experiment"] == "ptb/gated" and t["best"] == 74.0 and t["met"]  # 74 <= 75.81
    text = "\n".join(judge.markdown(rows))
    assert ("best of 2 74.00 (seed 0) within 3% of the paper's 73.6 (limit 75.81): **met**; the "
            "best-validation run's test value 74.00 (seed 0)") in text
    assert ("the paper's order `ptb/learned` before `ptb/const` (76.8 vs 84.3; full; public subset): "
            "ours 76.00 ± 1.41 (n=2; best 75.00) against 87.50 ± 0.71 (n=2; best 87.00): **ahead**") in text


def test_rows_of_other_labels_are_not_compared_and_a_miss_is_not_met() -> None:
    rows = [row("ptb", "gated", {"value": 73.6, "target": {"within": 0.03},
                                 "better_than": ["ptb/learned"]}, [76.0]),
            row("ptb", "learned", {"value": 76.8}, [70.0], protocol="budgeted 30 min")]
    assert judge.ordering(rows) == []
    [t] = judge.targets(rows)
    assert not t["met"] and t["limit"] == 73.6 * 1.03
    assert judge.markdown([row("ptb", "x", {"value": None}, [1.0])]) == []


def test_one_run_each_has_no_spread_and_smoke_rows_are_never_judged() -> None:
    rows = [row("cep", "gated_wln", {"better_than": ["cep/wln"]}, [1.0]),
            row("cep", "wln", {}, [0.9])]
    [o] = judge.ordering(rows)
    assert o["verdict"] == "behind (one run each, no spread measured)"
    smoke = "smoke (limited batches)"
    assert judge.ordering([row("cep", "gated_wln", {"better_than": ["cep/wln"]}, [1.0], smoke),
                           row("cep", "wln", {}, [0.9], smoke)]) == []


def test_a_closed_form_row_stands_in_under_a_schedule_change_but_not_other_data() -> None:
    fitted = {"extra": {"fitted_parameters": 1}}
    mean = row("cep", "mean", {"value": 2.4}, [2.5], **fitted)
    nfp = row("cep", "nfp", {"value": 0.14, "better_than": ["cep/mean"]}, [1.2, 1.3], MODIFIED)
    [o] = judge.ordering([nfp, mean])
    assert o["stand_in"] and o["verdict"] == "ahead (spread measured on one side only)"
    assert "its closed-form fit of the full protocol" in "\n".join(judge.markdown([nfp, mean]))
    other_data = row("cep", "nfp", {"better_than": ["cep/mean"]}, [1.2], "modified (task.data.path=x)")
    assert judge.ordering([other_data, mean]) == []
    trained = row("cep", "mean", {}, [2.5])  # a trained row never stands in
    assert judge.ordering([nfp, trained]) == []


def test_a_bound_of_the_project_is_final_only_with_its_seeds() -> None:
    target = {"best_of": 5, "at_least": 48.0}
    short = row("sst", "gated_fine", {"value": 53.2, "target": target}, [47.0, 46.0])
    [t] = judge.targets([short])
    assert not t["met"] and not t["final"] and t["limit"] == 48.0
    assert ("best of 2 47.00 (seed 0) at or above the project's bound (limit 48.00): **not met so "
            "far (2 of 5 seeds)**") in "\n".join(judge.markdown([short]))
    [t] = judge.targets([row("sst", "gated_fine", {"target": target}, [49.0])])
    assert t["met"] and t["final"]  # met needs no more seeds
    [t] = judge.targets([row("sst", "gated_fine", {"target": target}, [47.0] * 5)])
    assert not t["met"] and t["final"]


def tuned(tests: list[float], **fields) -> dict:
    return row("cep", "wln_tuned", {"target": {"peer": "chemprop", "rate": "molecules",
                                               "metrics": ["test_rmse", "test_mae"]}},
               tests, **fields)


def test_a_peer_target_compares_means_with_both_spreads_and_whole_run_rates() -> None:
    [vs] = judge.versus_peers([tuned([0.90, 0.92])], {"chemprop": CHEMPROP})
    rmse, mae = vs["metrics"]
    assert (rmse["ours"]["mean"], rmse["better"], rmse["verdict"]) == (pytest.approx(0.91), True, "ahead (spread measured on one side only)")
    assert (mae["ours"]["mean"], mae["better"], mae["verdict"]) == (pytest.approx(0.455), False, "behind (spread measured on one side only)")
    assert vs["rate"]["ours"] == pytest.approx(700.0) and vs["rate"]["holds"] is False
    assert vs["met"] is False
    text = "\n".join(judge.markdown([tuned([0.90, 0.92])], {"chemprop": CHEMPROP}))
    assert "against chemprop test (reported, `peers/chemprop`)" in text and "**not met**" in text
    assert ("test_rmse (lower is better): `cep/wln_tuned` 0.9100 ± 0.0141 (n=2; best 0.9000) "
            "against chemprop test 0.9250 (n=1): **ahead (spread measured on one side only)**") in text
    good = {**CHEMPROP, "test_mae": 0.5, "molecules_per_second": 600}
    assert judge.versus_peers([tuned([0.90, 0.92])], {"chemprop": good})[0]["met"] is True
    # met in the mean, but MAE 0.455 ± 0.007 against 0.46 ± 0.03: within the spread
    near = {**good, "test_mae": 0.46, "test_mae_values": [0.43, 0.46, 0.49]}
    assert ("**met in the mean, within the spread on test_mae**" in
            "\n".join(judge.markdown([tuned([0.90, 0.92])], {"chemprop": near})))
    # 700 molecules/s of updates over 120 s, but a 160 s run (validation, testing): 525/s
    slow = tuned([0.90, 0.92], wall_seconds=160.0)
    [vs] = judge.versus_peers([slow], {"chemprop": good})
    assert vs["rate"]["ours"] == pytest.approx(525.0) and vs["met"] is False
    assert judge.versus_peers([tuned([0.9])], {"chemprop": None}) == []  # no peer files


def test_rates_from_two_cpus_leave_the_peer_target_open() -> None:
    good = {**CHEMPROP, "test_mae": 0.5, "molecules_per_second": 600}
    other = tuned([0.90, 0.92], machine={"cpu_model": "CPU B"})
    [vs] = judge.versus_peers([other], {"chemprop": good})
    assert vs["rate"]["holds"] is None and vs["met"] is None
    assert "not compared: ours on CPU B, the peer's on CPU A" in \
        "\n".join(judge.markdown([other], {"chemprop": good}))
    [vs] = judge.versus_peers([tuned([0.9])], {"chemprop": {**good, "machine": None}})
    assert vs["met"] is None


def test_peer_runs_are_the_mean_over_their_seeds(tmp_path: Path) -> None:
    """seed 0's result.json and seed<N>/result.json: means, sample stds and each value; a
    check run (not a full run) is no seed; without files, reported.json; without it, None."""
    assert judge.peer("chemprop", tmp_path) is None
    (tmp_path / "reported.json").write_text(json.dumps({"test_rmse": 0.93, "params": 1}))
    assert judge.peer("chemprop", tmp_path)["origin"].startswith("reported")
    (tmp_path / "result.json").write_text(json.dumps(
        {"test_rmse": 0.90, "test_mae": 0.40, "params": 1, "seed": 0, "full_run": True,
         "molecules_per_second": 300.0, "chemprop_version": "2.3.1"}))
    for seed, rmse, full in ((1, 0.94, True), (2, 0.98, True), (3, 5.0, False)):
        (tmp_path / f"seed{seed}").mkdir()
        (tmp_path / f"seed{seed}" / "result.json").write_text(json.dumps(
            {"test_rmse": rmse, "test_mae": 0.42, "params": 1, "seed": seed, "full_run": full,
             "molecules_per_second": 330.0}))
    ref = judge.peer("chemprop", tmp_path)
    assert ref["seeds"] == [0, 1, 2] and ref["n_runs"] == 3 and ref["name"] == "chemprop 2.3.1"
    assert ref["test_rmse"] == pytest.approx(0.94) and ref["test_rmse_std"] == pytest.approx(0.04)
    assert ref["test_rmse_values"] == [0.90, 0.94, 0.98]
    assert ref["molecules_per_second"] == 300.0  # seed 0's, on the CPU its machine names
    assert ref["where"] == {0: "not recorded", 1: "not recorded", 2: "not recorded"}


def test_every_declaration_in_the_experiment_files_is_the_papers() -> None:
    """``better_than`` names experiments of the same task that the paper's values put behind
    (where both have one); targets use the known forms; the declarations exist."""
    found = {e.name: e for e in experiments()}
    pairs = 0
    for e in found.values():
        for name in e.paper.get("better_than") or []:
            assert name in found and found[name].task == e.task, (e.name, name)
            mine, theirs = e.paper.get("value"), found[name].paper.get("value")
            if mine is not None and theirs is not None:
                assert mine > theirs if higher_is_better(e.task) else mine < theirs, (e.name, name)
            pairs += 1
        target = e.paper.get("target") or {}
        assert set(target) <= {"within", "at_least", "at_most", "best_of", "peer", "metrics",
                               "rate"}, e.name
        if target.get("peer"):
            assert (judge.PEERS / target["peer"]).is_dir(), e.name
    assert pairs >= 15  # the three tables' orderings are declared
    assert found["sst/const_fine"].paper.get("target") is None  # not inherited from gated_fine
