"""Every config composes and validates; bad keys and values fail in one line."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from knn.errors import ConfigError
from knn.train.config import experiment_names, resolve_config


def test_experiments_exist() -> None:
    names = experiment_names("ptb")
    table1 = ["gated_5m", "const_5m", "learned_5m", "gated_20m", "gated_vd_20m", "gated_vd_4layer_20m"]
    fig2 = ["fig2_cnn", "fig2_const", "fig2_learned", "fig2_gated_x", "fig2_gated_xh"]
    for name in table1 + fig2 + ["lstm_5m", "lstm_20m"]:
        assert f"ptb/{name}" in names


@pytest.mark.parametrize("experiment", experiment_names())
def test_experiment_resolves(compose_cfg, experiment: str) -> None:
    cfg = resolve_config(compose_cfg([f"experiment={experiment}"]))
    assert cfg.variant == experiment.split("/")[1]
    assert set(cfg.paper) >= {"table", "row", "metric", "value", "params"}


def test_paper_numbers(compose_cfg) -> None:
    """The Table 1 targets and the authors' settings behind them."""
    cfg = resolve_config(compose_cfg(["experiment=ptb/gated_5m"]))
    assert cfg.paper.value == 73.6
    assert (cfg.model.hidden, cfg.model.depth, cfg.model.dropout, cfg.model.kernel.rnn_dropout) == (355, 3, 0.5, 0.0)
    assert (cfg.train.lr, cfg.train.lr_decay, cfg.task.batch_size, cfg.task.bptt) == (1.0, 0.9, 32, 35)
    cfg = resolve_config(compose_cfg(["experiment=ptb/gated_vd_4layer_20m"]))
    assert (cfg.model.hidden, cfg.model.depth, cfg.train.lr_decay, cfg.train.max_epochs) == (860, 4, 0.98, 200)
    assert cfg.paper.value == 63.8


def test_smoke_preset_is_tiny(compose_cfg) -> None:
    cfg = resolve_config(compose_cfg(["experiment=ptb/gated_vd_4layer_20m", "debug=smoke"]))
    assert (cfg.model.hidden, cfg.model.depth) == (8, 2)
    assert cfg.task.limit_train_batches is not None and cfg.train.max_epochs <= 2


@pytest.mark.parametrize("experiment", experiment_names())
def test_one_smoke_preset_sizes_every_model(compose_cfg, experiment: str) -> None:
    """debug=smoke (one file) sets hidden/depth on each model that has them; models
    without one (the mean predictor, Kim's CNN's depth) drop it instead of failing."""
    cfg = resolve_config(compose_cfg([f"experiment={experiment}", "debug=smoke"]))
    for key in ("hidden", "depth"):
        assert cfg.model.get(key, 8 if key == "hidden" else 2) == (8 if key == "hidden" else 2)
    assert cfg.task.limit_train_batches == 3 and cfg.task.batch_size == 4


def test_later_overrides_beat_the_smoke_preset_and_typos_still_fail(compose_cfg) -> None:
    cfg = resolve_config(compose_cfg(["experiment=ptb/gated_5m", "debug=smoke", "model.depth=3"]))
    assert (cfg.model.hidden, cfg.model.depth) == (8, 3)
    with pytest.raises(ConfigError, match="hiden"):
        resolve_config(compose_cfg(["experiment=sst/kim_cnn_fine", "debug=smoke", "+model.hiden=3"]))


def test_unknown_key_is_one_line_error(compose_cfg) -> None:
    cfg = OmegaConf.to_container(compose_cfg([]))
    cfg["train"]["lr_decya"] = 0.5
    with pytest.raises(ConfigError, match="lr_decya") as err:
        resolve_config(cfg)
    assert "\n" not in str(err.value)


def test_wrong_type_is_one_line_error(compose_cfg) -> None:
    with pytest.raises(ConfigError, match=r"train\.lr") as err:
        resolve_config(compose_cfg(["train.lr=fast"]))
    assert "\n" not in str(err.value)


def test_bad_model_value_is_config_error(compose_cfg) -> None:
    with pytest.raises(ConfigError, match="decay must be one of"):
        resolve_config(compose_cfg(["model.kernel.decay=gated"]))


def test_unknown_model_name(compose_cfg) -> None:
    with pytest.raises(ConfigError, match="not a ptb model"):
        resolve_config(compose_cfg(["model.name=transformer"]))


def test_unknown_schedule_is_config_error(compose_cfg) -> None:
    with pytest.raises(ConfigError, match="train: schedule must be one of"):
        resolve_config(compose_cfg(["train.schedule=cosine"]))


@pytest.mark.parametrize("task, model, preset", [
    ("ptb", "knn_lm", "default"), ("sst", "knn_sst", "sst"), ("cep", "wln", "molecules"),
    ("mol_csv", "wln", "mol_csv"),
])
def test_each_task_brings_its_training_defaults(compose_cfg, task: str, model: str,
                                                preset: str) -> None:
    """`task=<t>` alone trains with the task's own train/ preset (its YAML selects it); a
    `train=<name>` on the command line still replaces it."""
    plain = resolve_config(compose_cfg([f"task={task}", f"model={model}"])).train
    named = resolve_config(compose_cfg([f"task={task}", f"model={model}", f"train={preset}"]))
    assert plain == named.train
    other = "sst" if preset != "sst" else "default"
    assert resolve_config(compose_cfg([f"task={task}", f"model={model}",
                                       f"train={other}"])).train != plain


@pytest.mark.parametrize("task, model, other", [
    ("ptb", "knn_lm", "lstm_lm"), ("sst", "knn_sst", "kim_cnn"), ("cep", "wln", "nfp"),
    ("mol_csv", "wln", "gated_wln"),
])
def test_each_task_brings_its_default_model(compose_cfg, task: str, model: str, other: str) -> None:
    """`task=<t>` alone trains the task's default model (its YAML selects it); `model=<name>`
    on the command line replaces it."""
    assert resolve_config(compose_cfg([f"task={task}"])).model.name == model
    assert resolve_config(compose_cfg([f"task={task}", f"model={other}"])).model.name == other


@pytest.mark.parametrize("experiment", experiment_names())
def test_every_train_key_is_overridable_in_every_experiment(compose_cfg, experiment: str) -> None:
    """Each train preset carries every TrainConfig key, so e.g. ``train.checkpoint_every=``
    (a long run's checkpoints) works for every task without a ``+``."""
    from dataclasses import fields

    from knn.train.config import TrainConfig

    cfg = compose_cfg([f"experiment={experiment}"])
    assert set(cfg.train) == {f.name for f in fields(TrainConfig)}
    assert resolve_config(compose_cfg([f"experiment={experiment}", "train.checkpoint_every=7"])
                          ).train.checkpoint_every == 7
