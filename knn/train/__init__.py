"""The shared trainer: ``train(cfg)`` runs one experiment of any task."""

from knn.train.config import ConfigError, RunConfig, TrainConfig, resolve_config
from knn.train.loop import NonFiniteLoss, train

__all__ = ["ConfigError", "NonFiniteLoss", "RunConfig", "TrainConfig", "resolve_config", "train"]
