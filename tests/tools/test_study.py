"""knn.tools.study: a factor study's runs against its base run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from knn.errors import ConfigError
from knn.tools.study import by_factor, changes, main, markdown, rows, select
from knn.train.config import resolve_config


def run(readout: str, resample: bool, seed: int, valid: float, test: float) -> dict:
    config = {"seed": seed, "threads": 1, "run_dir": f"/runs/{readout}",
              "task": {"name": "cep", "resample": resample, "samples_per_epoch": 24000},
              "model": {"name": "wln", "readout": readout}}
    return {"task": "cep", "variant": "wln", "metric": "rmse", "seed": seed, "config": config,
            "metrics": {"valid": {"rmse": valid, "mae": valid / 2}, "test": {"rmse": test, "mae": test / 2}},
            "wall_seconds": 1800.0, "epochs": 51, "best_epoch": 13, "params": 12345, "git_commit": "abc",
            "command": f"python -m knn.train model.readout={readout}",
            "extra": {"throughput": {"molecules_per_second": 700.0}}}


def write_runs(study_dir: Path, runs: dict[str, dict]) -> Path:
    """Each run as ``study_dir/<name>/result.json``."""
    for name, r in runs.items():
        (study_dir / name).mkdir()
        (study_dir / name / "result.json").write_text(json.dumps(r))
    return study_dir


def study(tmp_path: Path) -> Path:
    return write_runs(tmp_path, {"base": run("last", True, 0, 1.03, 1.12),
                                 "readout_sum": run("sum", True, 0, 0.99, 1.10),
                                 "resample_off": run("last", False, 1, 0.95, 0.96)})


def test_factors_are_config_changes_from_the_base_best_valid_first(tmp_path: Path) -> None:
    table = rows(study(tmp_path))
    assert [r["run"] for r in table] == ["resample_off", "readout_sum", "base"]  # lower RMSE first
    factors = {r["run"]: r["factor"] for r in table}
    # the seed differs too, but a seed is not a factor; run_dir and threads never are
    assert factors == {"base": "base", "readout_sum": "model.readout=sum",
                       "resample_off": "task.resample=false"}
    assert table[0]["valid_change"] == pytest.approx(0.95 - 1.03)
    text = markdown(table)
    assert "| readout_sum | `model.readout=sum` | 0.4950 | 0.9900 | 0.5500 | 1.1000 | -0.0400 |" in text
    assert "| 30.0 | 700 | 51 | 13 | 12,345 | 0 | abc | - |" in text  # no CPU recorded


def test_each_row_names_the_cpu_it_ran_on(tmp_path: Path) -> None:
    """Throughputs from two machines do not compare, so every row says where it ran (after the
    epochs, the best epoch and the parameter count)."""
    runs = {"base": run("last", True, 0, 1.03, 1.12), "readout_sum": run("sum", True, 0, 0.99, 1.10)}
    runs["readout_sum"]["machine"] = {"cpu_model": "Intel Xeon"}
    text = markdown(rows(write_runs(tmp_path, runs)))
    assert "| 30.0 | 700 | 51 | 13 | 12,345 | 0 | abc | Intel Xeon |" in text


def test_needs_exactly_one_base(tmp_path: Path, capsys) -> None:
    study(tmp_path)
    assert main([str(tmp_path), "--base", "nothing"]) == 1
    assert "expected one run named 'nothing'" in capsys.readouterr().err
    assert main([str(tmp_path), "--out", str(tmp_path / "table")]) == 0
    saved = json.loads((tmp_path / "table.json").read_text())
    assert saved["runs"][0]["run"] == "resample_off"
    assert saved["command"].startswith("python -m knn.tools.study ") and "git_commit" in saved


def test_seeds_of_a_factor_are_summarised_and_judged_against_the_base_spread(tmp_path) -> None:
    """Two seeds each of the base and of model.readout=sum, one of task.resample=false:
    means and sample stds by factor, the change of the mean validation RMSE, and the
    spread flag (|Δ| against the larger std of the two rows)."""
    runs = {"base": run("last", True, 0, 1.00, 1.10), "base_seed1": run("last", True, 1, 1.04, 1.12),
            "readout_sum": run("sum", True, 0, 0.90, 1.00),
            "readout_sum_seed1": run("sum", True, 1, 0.94, 1.02),
            "resample_off": run("last", False, 0, 1.01, 0.96),
            "depth_6": run("last", True, 0, 1.03, 1.0), "depth_6_seed1": run("last", True, 1, 1.03, 1.0)}
    for name in ("depth_6", "depth_6_seed1"):
        runs[name]["config"]["model"]["depth"] = 6
    summary = by_factor(rows(write_runs(tmp_path, runs)))
    assert [g["factor"] for g in summary] == ["model.readout=sum", "task.resample=false", "base",
                                              "model.depth=6"]
    assert summary[3]["spread"] is True  # 0.01 from the base mean, base std 0.028
    readout = summary[0]
    assert readout["n"] == 2 and readout["seeds"] == [0, 1] and readout["runs"] == [
        "readout_sum", "readout_sum_seed1"]
    mean, std = readout["valid"]["rmse"]
    assert mean == pytest.approx(0.92) and std == pytest.approx(0.02 * 2 ** 0.5)
    assert readout["test"]["mae"][0] == pytest.approx(0.505)
    assert readout["valid_change"] == pytest.approx(0.92 - 1.02)
    assert readout["spread"] is False  # 0.10 apart, stds 0.028: beyond the seed spread
    assert summary[1]["spread"] is None  # one seed: its draw is no spread
    assert summary[1]["valid_change"] == pytest.approx(1.01 - 1.02)
    text = markdown(rows(tmp_path))
    assert "| `model.readout=sum` | 2 | 0,1 | 0.9200 ± 0.0283 | -0.1000 | beyond |" in text


def test_a_key_newer_than_the_base_left_null_is_no_factor(tmp_path: Path) -> None:
    study(tmp_path)
    newer = run("last", True, 2, 1.0, 1.1)
    newer["config"]["train"] = {"ema_decay": None}  # an option the base's commit lacked, off
    averaged = run("last", True, 2, 1.0, 1.1)
    averaged["config"]["train"] = {"ema_decay": 0.999}
    write_runs(tmp_path, {"newer": newer, "averaged": averaged})
    factors = {r["run"]: r["factor"] for r in rows(tmp_path)}
    assert factors["newer"] == "base" and factors["averaged"] == "train.ema_decay=0.999"


def test_no_summary_without_replicated_seeds(tmp_path: Path) -> None:
    assert "Over seeds" not in markdown(rows(study(tmp_path)))


def _seeded_study(tmp_path: Path, valids: dict[str, list[float]]) -> list[dict]:
    """Runs named ``<factor>`` / ``<factor>_seed<k>`` with the given validation RMSEs; factor
    ``base`` is the paper's readout, any other name sets ``model.readout`` to that name."""
    write_runs(tmp_path, {name if seed == 0 else f"{name}_seed{seed}":
                          run("last" if name == "base" else name, True, seed, valid, 1.0)
                          for name, values in valids.items() for seed, valid in enumerate(values)})
    return by_factor(rows(tmp_path))


def test_select_waits_for_the_base_seeds(tmp_path: Path) -> None:
    summary = _seeded_study(tmp_path, {"base": [1.00, 1.02], "sum": [0.80, 0.81, 0.82]})
    choice = select(summary, complete=True)
    assert choice["leading"] is None and choice["final"] is False
    assert "- no leader yet: the base has 2 of 3 seeds" in markdown(rows(tmp_path))


def test_select_takes_the_best_mean_beyond_the_spread_with_enough_seeds(tmp_path: Path) -> None:
    summary = _seeded_study(tmp_path, {
        "base": [1.00, 1.02, 1.04],     # mean 1.02, std 0.02
        "sum": [0.90, 0.92, 0.94],      # 0.10 better: beyond the spread
        "noisy": [0.60, 0.85, 1.10],    # better mean than sum, but its std (0.25) covers its gap
        "close": [1.01],                # one draw within the base's spread: not worth more seeds
    })
    choice = select(summary, complete=True)
    assert choice["leading"]["factor"] == "model.readout=sum" and choice["final"] is True
    assert choice["leading"]["changes"] == {"model.readout": "sum"}
    assert choice["judged"] == ["model.readout=noisy", "model.readout=sum"]  # best mean first
    assert choice["pending"] == [] and choice["screened_out"] == ["model.readout=close"]
    text = markdown(rows(tmp_path), complete=True)
    assert "- leading: `model.readout=sum`\n- final: the study is complete" in text
    assert "- screened out (fewer seeds, not better than the base beyond its spread): `model.readout=close`" in text


def test_a_choice_is_final_only_in_a_complete_study_with_nothing_pending(tmp_path: Path) -> None:
    summary = _seeded_study(tmp_path, {"base": [1.00, 1.02, 1.04], "sum": [0.90, 0.92, 0.94],
                                       "few": [0.50, 0.52]})
    assert select(summary, complete=False)["final"] is False
    choice = select(summary, complete=True)
    assert choice["final"] is False and choice["pending"] == ["model.readout=few"]
    assert choice["leading"]["factor"] == "model.readout=sum"  # among the judged, meanwhile
    text = markdown(rows(tmp_path))
    assert ("- not final: planned runs are still to come (no --complete); pending factors need "
            "more seeds") in text


def test_select_keeps_the_base_when_no_factor_beats_it(tmp_path: Path) -> None:
    summary = _seeded_study(tmp_path, {"base": [1.00, 1.02, 1.04], "sum": [1.01, 1.03, 1.05],
                                       "worse": [1.20, 1.21, 1.22]})
    choice = select(summary, complete=True)
    assert choice["leading"]["factor"] == "base" and choice["leading"]["changes"] == {}
    assert choice["judged"] == ["model.readout=sum", "model.readout=worse"] and choice["final"]


REPO = Path(__file__).resolve().parents[2]
CEP_STUDY = REPO / "experiments" / "studies" / "cep" / "factors"


def test_the_tuned_cep_experiment_is_the_studys_choice(compose_cfg) -> None:
    """``conf/experiment/cep/wln_tuned.yaml`` exists only once the CEP factor study's choice is
    final, and it changes exactly what the choice changes from the study's base run."""
    choice = json.loads((CEP_STUDY / "table.json").read_text())["selected"]
    tuned = REPO / "conf" / "experiment" / "cep" / "wln_tuned.yaml"
    if not choice["final"]:
        assert not tuned.exists(), "cep/wln_tuned written before the study's choice is final"
        return
    base = json.loads((CEP_STUDY / "resample_off" / "result.json").read_text())
    cfg = compose_cfg(["experiment=cep/wln_tuned", "task.samples_per_epoch=24000"])
    config = resolve_config(cfg)
    assert changes({"config": OmegaConf.to_container(config)}, base) == choice["leading"]["changes"]


def test_included_runs_join_the_study_under_their_parent_and_folder(tmp_path: Path) -> None:
    """``--include``: runs outside the study folder (a results tree's seeds) are rows too,
    grouped by their factor like the study's own."""
    (tmp_path / "study").mkdir()
    study(tmp_path / "study")
    tree = tmp_path / "results" / "wln"
    tree.mkdir(parents=True)
    write_runs(tree, {"seed1": run("last", True, 1, 1.05, 1.15), "seed2": run("last", True, 2, 1.07, 1.16)})
    table = rows(tmp_path / "study", "resample_off", include=(tree / "seed1", tree / "seed2"))
    factors = {r["run"]: r["factor"] for r in table}
    assert factors["wln/seed1"] == factors["wln/seed2"] == factors["base"] == "task.resample=true"
    assert main([str(tmp_path / "study"), "--base", "resample_off", "--include", str(tree),
                 "--out", str(tmp_path / "table")]) == 0
    saved = json.loads((tmp_path / "table.json").read_text())
    assert {"wln/seed1", "wln/seed2"} <= {r["run"] for r in saved["runs"]}
    assert "--include" in saved["command"]


def test_mol_csv_trains_the_tuned_architecture_by_default(compose_cfg) -> None:
    """``task=mol_csv`` without ``model=`` builds ``cep/wln_tuned``'s model: what the CEP
    study chose on validation, not the paper's WLN."""
    default = resolve_config(compose_cfg(["task=mol_csv"])).model
    tuned = resolve_config(compose_cfg(["experiment=cep/wln_tuned"])).model
    paper = resolve_config(compose_cfg(["experiment=cep/wln"])).model
    assert OmegaConf.to_container(default) == OmegaConf.to_container(tuned)
    assert OmegaConf.to_container(tuned) != OmegaConf.to_container(paper)


def test_the_base_may_be_an_included_run_and_nested_runs_keep_their_path(tmp_path: Path) -> None:
    """A study of one change to a results tree's seed: the base is that included seed, and the
    study's own run (``<change>/seed0``) is named by its path below the study folder."""
    tree = tmp_path / "results" / "wln"
    tree.mkdir(parents=True)
    write_runs(tree, {"seed0": run("last", True, 0, 1.00, 1.10)})
    (tmp_path / "study" / "readout_sum").mkdir(parents=True)
    write_runs(tmp_path / "study" / "readout_sum", {"seed0": run("sum", True, 0, 0.97, 1.05)})
    table = rows(tmp_path / "study", "wln/seed0", include=(tree / "seed0",))
    factors = {r["run"]: r["factor"] for r in table}
    assert factors == {"wln/seed0": "base", "readout_sum/seed0": "model.readout=sum"}
    assert markdown(table).count("| -0.0300 |") == 1  # RMSE changes keep 4 decimals
    with pytest.raises(ConfigError, match="two runs share the name 'wln/seed0'"):
        rows(tmp_path / "study", "wln/seed0", include=(tree / "seed0", tree / "seed0"))


def test_a_base_from_before_a_key_rename_differs_only_in_what_changed():
    """A Table row's seed written before 11ddb37 (``model.d_hidden``, flat kernel fields) as
    the base of a later run: the factor is the later run's real change, not the renames."""
    base = {"config": {"seed": 0, "model": {"name": "knn_sst", "d_hidden": 200, "decay": "gated_xh"}}}
    run_cfg = {"seed": 0, "model": {"name": "knn_sst", "hidden": 200, "init": "authors",
                                    "kernel": {"decay": "gated_xh"}}}
    assert changes({"config": run_cfg}, base) == {"model.init": "authors"}
