"""Typed schemas for a training run, and validation of a composed config.

Hydra composes YAML from ``conf/``; :func:`resolve_config` then merges each
part onto its dataclass schema (the ``train`` group onto :class:`TrainConfig`,
``task`` onto the task's ``Config``, ``model`` onto the schema its task lists
for ``model.name``). A misspelt key or a value of the wrong type fails here
with OmegaConf's one-line message, whether the config came from the command
line, from Hydra's compose API in a test, or from a plain dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from knn.errors import ConfigError
from knn.paths import CONF_DIR  # the tests import it from here too
from knn.tasks import TASKS
from knn.train.average import check_decay
from knn.train.optim import OPTIMIZERS, SCHEDULES


def experiment_names(task: str | None = None) -> list[str]:
    """``experiment=`` choices under ``conf/experiment/<task>/``, e.g. ``ptb/gated_5m``."""
    root = CONF_DIR / "experiment"
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob(f"{task or '*'}/*.yaml"))


@dataclass
class TrainConfig:
    """The ``train`` group: optimisation, schedule, stopping, checkpoints."""

    optimizer: str = "sgd"  # sgd | adam | adadelta | adagrad
    lr: float = 1.0
    momentum: float = 0.0
    # adadelta's decay of its squared averages; None: torch's 0.9 (Kim 2014: 0.95). Null,
    # not 0.9, so that runs of older code, which had no such key, compare as unchanged.
    rho: float | None = None
    # Plain SGD at this rate for the model's trained input embeddings, the rest by
    # `optimizer` (Tai et al. 2015); None: one optimizer for every parameter.
    embedding_lr: float | None = None
    weight_decay: float = 0.0  # L2 penalty, applied by the optimizer
    schedule: str = "decay_after"  # constant | decay_after | exponential (see knn.train.optim)
    lr_decay: float = 1.0
    lr_decay_epoch: int = 10
    clip: float | None = 5.0  # max global gradient norm; None: no clipping
    max_epochs: int = 50
    max_steps: int | None = None
    max_minutes: float | None = None  # wall-clock budget for training
    patience: int | None = None  # stop after this many epochs without improvement
    resume: bool = False  # continue from <run_dir>/last.pt
    checkpoint_every: int | None = None  # also write last.pt every N steps inside an epoch
    # Validate, select and test an exponential moving average of the weights with this
    # decay (knn.train.average); None: the weights as trained.
    ema_decay: float | None = None
    # torch's deterministic kernels, for GPU runs; CPU runs of one seed and thread count are
    # bit-identical without it (knn.featurize.graph). An op without one warns (knn.train.rng).
    deterministic: bool = False
    progress: bool | None = None  # tqdm bars; None: only when stderr is a terminal
    # Without a bar, a log line (step, running train metrics, s/step) at most every this
    # many minutes, so that a detached run shows its pace; None: none.
    log_minutes: float | None = 5.0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.ema_decay is not None:
            check_decay(self.ema_decay)
        if self.log_minutes is not None and self.log_minutes < 0:
            raise ValueError(f"log_minutes must be >= 0 or null, got {self.log_minutes}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")


@dataclass
class RunConfig:
    """The whole run; ``task`` and ``model`` are typed by their own schemas."""

    task: Any = None  # validated against the task's own schema
    model: Any = None  # validated against the schema its task lists for model.name
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int | None = None  # torch intra-op threads; None: torch's default
    keep_freed_memory: bool = True  # CPU runs: glibc reuses freed memory (knn.train.memory)
    variant: str = "default"  # experiment name, recorded in result.json
    paper: dict[str, Any] | None = None  # the paper's number this run targets
    run_dir: str | None = None  # where checkpoints and results go; None: cwd
    # Keys such as "model.depth" that a task or model without that field drops instead of
    # failing on, so that one preset (debug=smoke) can size every model.
    optional_keys: list[str] = field(default_factory=list)


def _typed(schema: type, node: Any, where: str) -> DictConfig:
    """``node`` merged onto ``schema``: defaults filled, types checked, no extra keys."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        key = ".".join(k for k in (where, str(getattr(e, "full_key", "") or "")) if k)
        raise ConfigError(f"config error: {msg}" + (f" (key: {key})" if key else "")) from None
    OmegaConf.set_struct(merged, True)
    return cast(DictConfig, merged)  # merged onto a structured (dict) schema


def _drop_absent(node: DictConfig, schema: type, part: str, optional: list[str]) -> DictConfig:
    """``node`` without the ``optional`` keys of ``part`` (``"model.depth"``: ``depth``) that
    ``schema`` has no field for."""
    names = {f.name for f in fields(schema)}
    drop = {k.partition(".")[2] for k in optional if k.partition(".")[0] == part} - names
    return OmegaConf.create({k: v for k, v in node.items() if k not in drop})


def resolve_config(cfg: Any) -> DictConfig:
    """Validate ``cfg`` (DictConfig or dict) and return it typed and resolved.

    Raises :class:`ConfigError` with a one-line message on unknown keys,
    wrong types, or unknown task/model names.
    """
    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    node = cast(DictConfig, OmegaConf.create(OmegaConf.to_container(node, resolve=True)))
    task_name = OmegaConf.select(node, "task.name")
    if task_name not in TASKS:
        raise ConfigError(f"task.name={task_name!r}: expected one of {sorted(TASKS)}")
    task_cls = TASKS[task_name]
    model_name = OmegaConf.select(node, "model.name")
    if model_name not in task_cls.models:
        known = sorted(task_cls.models)
        raise ConfigError(f"model.name={model_name!r} is not a {task_name} model: {known}")
    rest = {k: v for k, v in node.items() if k not in ("task", "model")}
    run = _typed(RunConfig, rest, "")
    schemas = {"task": task_cls.Config, "model": task_cls.models[model_name].config}
    with open_dict(run):
        for part, schema in schemas.items():
            run[part] = _typed(schema, _drop_absent(node[part], schema, part, run.optional_keys), part)
    for part in ("train", "task", "model"):
        try:  # build the dataclass once so its own checks (__post_init__) run now
            to_dataclass(run[part])
        except ValueError as e:
            raise ConfigError(f"config error: {part}: {e}") from None
    return run


def to_dataclass(node: DictConfig) -> Any:
    """The dataclass instance behind a typed node (models take dataclasses)."""
    return OmegaConf.to_object(node)


def reference_config(experiment: str | None, groups: Sequence[str] = ()) -> dict[str, Any]:
    """The resolved config of ``experiment=<experiment>`` alone (when None: of the ``groups``
    overrides alone, e.g. ``["task=mol_csv"]``; an experiment ignores them): the protocol a
    run's config is compared with (:mod:`knn.train.protocol`).

    Inside ``python -m knn.train`` Hydra is already initialised on :data:`CONF_DIR` and
    composes directly; elsewhere (tests, the migration) it is initialised here.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = [f"experiment={experiment}"] if experiment else list(groups)
    if GlobalHydra.instance().is_initialized():
        cfg = compose(config_name="train", overrides=overrides)
    else:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides)
    return cast("dict[str, Any]", OmegaConf.to_container(resolve_config(cfg), resolve=True))
