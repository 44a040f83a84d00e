"""Models, and the one registry that names them.

Every model module exports its model classes and their config dataclasses; :data:`MODELS`
maps each ``model.name`` to a :class:`ModelSpec` (class, config dataclass, input family).
A model is built as ``cls(cfg, *inputs)``, the inputs being what its family reads from
the data:

=========== ======================================= ============================== ========
family      modules                                 ``cls(cfg, *inputs)``          task
=========== ======================================= ============================== ========
``lm``      :mod:`knn.models.lm`                    ``(cfg, vocab_size)``          PTB
``sentence`` :mod:`knn.models.classifier`           ``(cfg, vectors)`` (V, d) table SST
``graph``   :mod:`knn.models.graph`,                ``(cfg)``; ``cfg.atom_dim`` and CEP,
            :mod:`knn.models.graph_baselines`       ``bond_dim`` from the featurizer mol_csv
=========== ======================================= ============================== ========

Presets (sizes, variants) live in one place, ``conf/model/<name>.yaml``; :func:`preset`
reads them for code that builds a model without Hydra (tests, benchmarks). Width and
depth are ``hidden`` and ``depth`` in every family that has them.

:func:`count_params` is the one parameter count: the trainer's ``params`` in
``result.json``, the throughput tool and the tests' size checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch import nn

from knn.models import graph_baselines as gb
from knn.models.classifier import (
    BiLSTMClassifier,
    BiLSTMConfig,
    KernelClassifier,
    KernelClassifierConfig,
    KimCNN,
    KimCNNConfig,
)
from knn.models.graph import WLNConfig, WLNRegressor
from knn.models.lm import LSTMLM, KernelLM, KernelLMConfig, LSTMLMConfig
from knn.paths import CONF_DIR

FAMILIES = ("lm", "sentence", "graph")


@dataclass(frozen=True)
class ModelSpec:
    """What ``model.name`` builds: ``cls(config(...), *inputs)``; ``config`` is also the
    ``model.*`` schema the trainer checks a composed config against."""

    cls: type[nn.Module]
    config: type
    family: str  # one of FAMILIES: what the model reads, so which tasks can train it


MODELS: dict[str, ModelSpec] = {
    "knn_lm": ModelSpec(KernelLM, KernelLMConfig, "lm"),
    "lstm_lm": ModelSpec(LSTMLM, LSTMLMConfig, "lm"),
    "knn_sst": ModelSpec(KernelClassifier, KernelClassifierConfig, "sentence"),
    "kim_cnn": ModelSpec(KimCNN, KimCNNConfig, "sentence"),
    "bilstm": ModelSpec(BiLSTMClassifier, BiLSTMConfig, "sentence"),
    "wln": ModelSpec(WLNRegressor, WLNConfig, "graph"),
    "gated_wln": ModelSpec(WLNRegressor, WLNConfig, "graph"),
    "nfp": ModelSpec(gb.NFPRegressor, gb.NFPConfig, "graph"),
    "elbp": ModelSpec(gb.LoopyBPRegressor, gb.LoopyBPConfig, "graph"),
    "emf": ModelSpec(gb.MeanFieldRegressor, gb.MeanFieldConfig, "graph"),
    "mean": ModelSpec(gb.MeanPredictor, gb.MeanPredictorConfig, "graph"),
    "wl_kernel": ModelSpec(gb.WLSubtreeRidge, gb.WLSubtreeConfig, "graph"),
}


def models_of(family: str) -> dict[str, ModelSpec]:
    """The models a task of ``family`` can train, by name."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; choose from {FAMILIES}")
    return {name: spec for name, spec in MODELS.items() if spec.family == family}


def spec_of(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    return MODELS[name]


def preset(name: str, **overrides: Any) -> Any:
    """The config of model ``name`` at its preset (``conf/model/<name>.yaml``), with
    ``overrides`` applied (nested ones as dicts, e.g. ``kernel={"decay": "constant"}``).

    Raises ValueError (one line) for an unknown model, key or value.
    """
    spec = spec_of(name)
    try:
        node = OmegaConf.merge(OmegaConf.structured(spec.config),
                               OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml"), overrides)
        return OmegaConf.to_object(node)
    except (OmegaConfBaseException, ValueError, OSError) as e:  # bad key/type, value, file
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"model {name}: {first}") from None


def build(name: str, *inputs: Any, **overrides: Any) -> nn.Module:
    """Model ``name`` at its preset, e.g. ``build("knn_lm", 10000, depth=2)``,
    ``build("wln", atom_dim=82, bond_dim=6)``."""
    return spec_of(name).cls(preset(name, **overrides), *inputs)


def count_params(model: nn.Module) -> int:
    """Trainable parameters (``requires_grad``); tied weights count once, buffers (a fixed
    embedding table, a fitted kernel model's weights) not at all."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["FAMILIES", "MODELS", "ModelSpec", "build", "count_params", "models_of", "preset",
           "spec_of"]
