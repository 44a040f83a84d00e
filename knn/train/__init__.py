"""The shared trainer: ``train(cfg)`` runs one experiment of any task."""

from knn.errors import ConfigError
from knn.train.config import RunConfig, TrainConfig, resolve_config
from knn.train.loop import NonFiniteLoss, train

__all__ = ["ConfigError", "NonFiniteLoss", "RunConfig", "TrainConfig", "resolve_config", "train"]
