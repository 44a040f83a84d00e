"""What the shared trainer needs from a task.

The loop in :mod:`knn.train.loop` knows nothing about language modelling,
sentiment or molecules: it asks the task for a model, for training batch i of
epoch e, for the loss of a batch, and for validation/test metrics. Training
batches are addressed by (epoch, index) rather than drawn from an iterator so
that a run stopped mid-epoch resumes at the same batch (tasks that shuffle
derive the order from the seed and the epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from torch import nn


@dataclass(frozen=True)
class ConstantBaseline:
    """The best input-free predictor of a task, fitted on its training split: the floor a
    trained model must beat (:mod:`knn.train.health`).

    ``metric`` is the task's selection metric of that predictor on exactly the validation
    data the run is evaluated on (``limit_eval_batches`` included); ``train_loss`` is its
    loss on the training split in the unit of the epoch training loss (``train.loss`` in
    metrics.jsonl); ``log_loss`` says that loss is a cross-entropy in nats (so e^loss is a
    perplexity), else a squared error.
    """

    name: str  # e.g. "train-mean predictor"
    metric: float
    train_loss: float
    log_loss: bool


@dataclass
class StepResult:
    """One training batch: the loss to back-propagate and what to log.

    ``Σ total / Σ count`` over an epoch is the task's training loss in its
    reporting unit (per token for language models), which may differ from the
    scale of ``loss`` (the authors' PTB loss is summed over time steps).
    ``total`` may stay a device tensor: the loop sums it without a sync.
    """

    loss: torch.Tensor
    total: torch.Tensor | float
    count: int


class Task(Protocol):
    """A task object: the trainer builds it as ``TASKS[name](task_config, device, seed=seed)``
    (:data:`knn.tasks.TASKS`)."""

    name: ClassVar[str]
    metric: ClassVar[str]  # key of :meth:`evaluate`'s dict used for model selection
    higher_is_better: ClassVar[bool]

    def setup(self, run_dir: Path | None = None) -> None:
        """Load data (once, before :meth:`build_model`). ``run_dir``: the run's directory, for
        files the task writes beside the trainer's (a list of skipped rows); None: none."""

    def build_model(self, model_cfg: Any) -> nn.Module:
        """The model named by ``model_cfg.name``, sized for this task's data."""

    def num_train_batches(self) -> int:
        """Batches per training epoch."""

    def start_epoch(self, epoch: int) -> None:
        """Reset per-epoch state (e.g. a carried hidden state)."""

    def train_batch(self, epoch: int, index: int) -> Any:
        """Training batch ``index`` of ``epoch``, on the task's device."""

    def training_step(self, model: nn.Module, batch: Any) -> StepResult:
        """Forward one batch in training mode and return its loss."""

    def train_metrics(self, mean_loss: float) -> dict[str, float]:
        """Epoch training metrics from the mean of ``StepResult.total/count``."""

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """Metrics on ``split`` ("valid" or "test"); must contain :attr:`metric`."""

    def meta(self) -> dict[str, Any]:
        """Plain data a checkpoint needs besides the config (e.g. vocabulary size)."""

    def state_dict(self) -> dict[str, Any]:
        """Mid-epoch state to checkpoint (tensors/plain data only)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

    def constant_baseline(self) -> ConstantBaseline:
        """The input-free predictor fitted on train, scored on the evaluated validation data."""

    # Optional, looked up with getattr: ``after_step(model)`` runs after every
    # optimizer step (a weight constraint, e.g. Kim 2014's max-norm);
    # ``run_length(train_cfg, lr_of)`` returns a line the trainer logs at the start;
    # ``result_extra()`` returns fields the trainer adds to ``result.json``.


def is_better(new: float, best: float | None, higher_is_better: bool) -> bool:
    """True when ``new`` improves on ``best`` (``None`` means no best yet)."""
    if best is None:
        return True
    return new > best if higher_is_better else new < best
