"""Protocol labels derived from a run's config against its experiment's (knn.train.protocol)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hydra import initialize_config_dir

from knn.train import loop
from knn.train.config import CONF_DIR, reference_config
from knn.train.protocol import (CUSTOM, FULL, SMOKE, differences, experiment_of, upgrade,
                                experiment_of_command, group_choices, protocol_label)

EXPERIMENTS = ("ptb/gated_5m", "sst/gated_fine", "cep/wln")


@pytest.fixture(scope="module")
def refs() -> dict[str | None, dict[str, Any]]:
    """The resolved configs of the experiments used here, and the default composition (None)."""
    return {name: reference_config(name) for name in (*EXPERIMENTS, None)}


def changed(cfg: dict[str, Any], **values: Any) -> dict[str, Any]:
    """A copy of ``cfg`` with dotted keys set, e.g. ``changed(cfg, **{"train.lr": 0.5})``."""
    out = copy.deepcopy(cfg)
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node = out
        for key in parents:
            node = node[key]
        node[leaf] = value
    return out


def label(refs, experiment: str | None, stop_reason: str = "max_epochs", **values: Any) -> str:
    """The label of ``experiment`` with ``values`` changed, stopped by ``stop_reason``."""
    return protocol_label(changed(refs[experiment], **values), refs[experiment], stop_reason,
                          experiment)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("stop_reason", ["max_epochs", "patience"])
def test_the_experiment_itself_is_full(refs, experiment: str, stop_reason: str) -> None:
    assert label(refs, experiment, stop_reason) == FULL


@pytest.mark.parametrize(("key", "value"), [
    ("threads", 1), ("device", "cpu"), ("seed", 4), ("keep_freed_memory", False),
    ("train.progress", False), ("train.log_minutes", None), ("train.checkpoint_every", 200),
    ("train.resume", True),
    ("train.deterministic", True), ("run_dir", "/tmp/run"), ("task.data.mirror", "/mirror"),
    ("task.data.cache_dir", "/cache"), ("variant", "renamed"), ("paper", None),
])
def test_keys_that_cannot_change_a_number_are_not_named(refs, key: str, value: Any) -> None:
    assert label(refs, "ptb/gated_5m", **{key: value}) == FULL


def test_molecule_run_paths_are_not_named(refs) -> None:
    assert label(refs, "cep/wln", **{"run_dir": "/tmp/run", "task.data.mirror": "/m",
                                     "task.data.cache_dir": "/c"}) == FULL


@pytest.mark.parametrize(("experiment", "key", "value", "shown"), [
    ("ptb/gated_5m", "task.eval_batch_size", 10, "10"),
    ("ptb/gated_5m", "task.bptt", 70, "70"),
    ("ptb/gated_5m", "train.patience", None, "null"),
    ("ptb/gated_5m", "train.weight_decay", 1e-05, "1e-05"),
    ("ptb/gated_5m", "model.hidden", 200, "200"),
    ("ptb/gated_5m", "train.lr", 0.5, "0.5"),
    ("sst/gated_fine", "task.phrases", False, "false"),
    ("sst/gated_fine", "task.vectors.path", "/v/glove.840B.300d.zip", "/v/glove.840B.300d.zip"),
    ("sst/gated_fine", "task.vectors.shared", "split", "split"),
    ("cep/wln", "task.samples_per_epoch", 24000, "24000"),
    ("cep/wln", "task.resample", False, "false"),
])
def test_every_other_difference_is_named(refs, experiment, key, value, shown) -> None:
    assert label(refs, experiment, **{key: value}) == f"modified ({key}={shown})"


def test_differences_in_config_order(refs) -> None:
    got = label(refs, "ptb/gated_5m", **{"train.lr": 0.5, "task.eval_batch_size": 10,
                                         "model.dropout": 0.3})
    assert got == "modified (task.eval_batch_size=10, model.dropout=0.3, train.lr=0.5)"


def test_limits(refs) -> None:
    ref = refs["ptb/gated_5m"]["train"]
    assert label(refs, "ptb/gated_5m", "max_minutes", **{"train.max_minutes": 30.0}) == \
        "budgeted 30 min"
    assert label(refs, "ptb/gated_5m", "max_minutes", **{"train.max_minutes": 30.0,
                                                         "task.eval_batch_size": 10}) == \
        "budgeted 30 min; modified (task.eval_batch_size=10)"
    assert label(refs, "ptb/gated_5m", "max_steps", **{"train.max_steps": 200}) == \
        "cut at 200 steps"
    # A limit that did not stop the run changed nothing.
    assert label(refs, "ptb/gated_5m", "max_epochs", **{"train.max_minutes": 600.0}) == FULL
    assert label(refs, "ptb/gated_5m", "patience", **{"train.max_steps": 10 ** 9}) == FULL


def test_max_epochs_below_is_a_cut_above_is_a_modification(refs) -> None:
    below = refs["sst/gated_fine"]["train"]["max_epochs"] - 1
    above = refs["sst/gated_fine"]["train"]["max_epochs"] + 1
    assert label(refs, "sst/gated_fine", **{"train.max_epochs": below}) == f"cut at {below} epochs"
    # Stopped by patience before the lower limit: the limit never bound.
    assert label(refs, "sst/gated_fine", "patience", **{"train.max_epochs": below}) == FULL
    for stop in ("max_epochs", "patience"):
        assert label(refs, "sst/gated_fine", stop, **{"train.max_epochs": above}) == \
            f"modified (train.max_epochs={above})"
    assert label(refs, "sst/gated_fine", "max_minutes", **{"train.max_epochs": above,
                                                           "train.max_minutes": 5}) == \
        f"budgeted 5 min; modified (train.max_epochs={above})"


def test_smoke_outranks_everything(refs) -> None:
    assert label(refs, "ptb/gated_5m", "max_minutes", **{"task.limit_train_batches": 3,
                                                         "train.max_minutes": 1, "model.hidden": 8}) \
        == SMOKE
    assert label(refs, "ptb/gated_5m", **{"task.limit_eval_batches": 3}) == SMOKE


def test_another_model_is_named_once(refs) -> None:
    run = copy.deepcopy(refs["ptb/gated_5m"])
    run["model"] = copy.deepcopy(reference_config("ptb/lstm_5m")["model"])
    assert protocol_label(run, refs["ptb/gated_5m"], "max_epochs", "ptb/gated_5m") == \
        "modified (model=lstm_lm)"


def test_run_without_experiment_is_custom_against_the_default(refs) -> None:
    assert label(refs, None) == CUSTOM == "custom (no experiment)"
    assert label(refs, None, "max_minutes", **{"train.max_minutes": 2, "train.lr": 0.5}) == \
        "custom (no experiment); budgeted 2 min; modified (train.lr=0.5)"
    sst = refs["sst/gated_fine"]
    assert protocol_label(sst, refs[None], "max_epochs", None).startswith(
        "custom (no experiment); modified (task=sst, model=knn_sst, train.optimizer=adam")


def test_run_without_experiment_is_labelled_against_its_own_task_and_model(refs) -> None:
    """task=mol_csv brings its training preset: a run on those defaults names nothing else,
    and a change of them is named alone (against the default composition it would name the
    task's whole preset)."""
    ref = reference_config(None, ["task=mol_csv", "model=gated_wln"])
    assert ref["task"]["name"] == "mol_csv" and ref["model"]["name"] == "gated_wln"
    assert protocol_label(ref, ref, "patience", None) == CUSTOM
    assert protocol_label(changed(ref, **{"train.patience": 10}), ref, "patience", None) == \
        "custom (no experiment); modified (train.patience=10)"
    assert "modified (task=mol_csv, model=gated_wln" in protocol_label(ref, refs[None], "patience", None)


@pytest.mark.parametrize(("tokens", "groups"), [
    (["task=mol_csv", "task.data.path=x.csv", "model=nfp", "seed=1"], ["task=mol_csv", "model=nfp"]),
    (["model=wln", "+model=gated_wln"], ["model=gated_wln"]),
    (["train=molecules", "model.hidden=8"], []),
])
def test_group_choices(tokens: list[str], groups: list[str]) -> None:
    assert group_choices(tokens) == groups


def test_keys_missing_from_an_old_config_are_not_differences(refs) -> None:
    old = copy.deepcopy(refs["sst/gated_fine"])
    del old["task"]["vectors"]["cased"], old["train"]["checkpoint_every"], old["keep_freed_memory"]
    assert protocol_label(old, refs["sst/gated_fine"], "max_epochs", "sst/gated_fine") == FULL
    # A key the reference lacks (removed from the schema since) is named.
    old["task"]["retired_option"] = 3
    assert differences(old, refs["sst/gated_fine"]) == [("task.retired_option", 3)]


@pytest.mark.parametrize(("tokens", "name"), [
    (["experiment=ptb/gated_5m", "seed=1"], "ptb/gated_5m"),
    (["seed=1"], None),
    (["experiment=ptb/gated_5m", "experiment=sst/gated_fine"], "sst/gated_fine"),
    (["+experiment=cep/wln"], "cep/wln"),
    (["experiment=ptb/gated_5m", "~experiment"], None),
    (["experiment=null"], None),
    (["task.experiment=x"], None),
])
def test_experiment_of(tokens: list[str], name: str | None) -> None:
    assert experiment_of(tokens) == name
    assert experiment_of_command("python -m knn.train " + " ".join(tokens)) == name


def test_reference_inside_an_initialised_hydra_is_the_same(refs) -> None:
    """``python -m knn.train`` composes the reference inside @hydra.main's initialised Hydra."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        assert reference_config("ptb/gated_5m") == refs["ptb/gated_5m"]


def test_trainer_labels_against_the_experiment_of_its_overrides(train_smoke, tmp_path, refs,
                                                                 monkeypatch) -> None:
    seen = []
    real = loop.protocol_label

    def spy(run_cfg, reference_cfg, stop_reason, experiment):
        seen.append((reference_cfg, stop_reason, experiment))
        return real(run_cfg, reference_cfg, stop_reason, experiment)

    monkeypatch.setattr(loop, "protocol_label", spy)
    result = train_smoke(tmp_path, "experiment=ptb/gated_5m", "train.max_minutes=1e-9")
    assert seen == [(refs["ptb/gated_5m"], "max_minutes", "ptb/gated_5m")]
    on_disk = json.loads((tmp_path / "result.json").read_text())
    assert on_disk["protocol"] == result["protocol"] == SMOKE
    assert on_disk["experiment"] == "ptb/gated_5m"
    # Without debug=smoke's limits, the same config would be labelled by its differences.
    unlimited = changed(result["config"], **{"task.limit_train_batches": None,
                                             "task.limit_eval_batches": None})
    got = protocol_label(unlimited, refs["ptb/gated_5m"], "max_minutes", "ptb/gated_5m")
    assert got.startswith("budgeted 1e-09 min; modified (task.batch_size=4, task.bptt=8, ")


def test_trainer_without_experiment_labels_against_its_group_choices(train_smoke, tmp_path,
                                                                     monkeypatch) -> None:
    seen = []
    real = loop.protocol_label

    def spy(run_cfg, reference_cfg, stop_reason, experiment):
        seen.append((reference_cfg, experiment))
        return real(run_cfg, reference_cfg, stop_reason, experiment)

    monkeypatch.setattr(loop, "protocol_label", spy)
    train_smoke(tmp_path, "model=lstm_lm")
    assert seen == [(reference_config(None, ["model=lstm_lm"]), None)]


def test_upgrade_reads_a_config_from_before_the_model_registry_under_todays_names():
    """An SST run written before 11ddb37 (flat string-kernel fields, ``d_hidden``) and one
    written after differ only where their values differ."""
    old = {"seed": 0, "model": {"name": "knn_sst", "d_hidden": 200, "n": 2, "decay": "gated_xh",
                                "rnn_dropout": 0.1}}
    new = {"seed": 0, "model": {"name": "knn_sst", "hidden": 200, "init": None,
                                "kernel": {"n": 2, "decay": "gated_xh", "rnn_dropout": 0.2}}}
    assert upgrade(old) == {"seed": 0, "model": {"name": "knn_sst", "hidden": 200, "kernel": {
        "n": 2, "decay": "gated_xh", "rnn_dropout": 0.1}}}
    assert old["model"]["d_hidden"] == 200  # the input is left as it was
    assert upgrade(new) == new
    assert differences(upgrade(new), upgrade(old)) == [("model.init", None),
                                                       ("model.kernel.rnn_dropout", 0.2)]
    assert upgrade({"model": {"name": "wl_kernel", "iterations": 3}}) == {
        "model": {"name": "wl_kernel", "depth": 3}}
    assert upgrade({"task": {"name": "sst"}}) == {"task": {"name": "sst"}}  # no model: nothing to do
