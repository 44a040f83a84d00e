"""Optimizers and per-epoch learning-rate schedules.

The schedules are pure functions of the epoch number, so resuming needs only
the epoch; the state dict is kept anyway so checkpoints say what ran.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("constant", "decay_after", "exponential")


def fused_update(params: list[torch.Tensor]) -> bool:
    """Whether torch's fused optimizer kernel can update ``params``: float tensors on CPU or CUDA.

    The fused kernel does one pass over every parameter instead of about ten
    small ops per parameter; on SST, where steps are short, that took an epoch
    from 106.7 to 99.1 s (experiments/bench/sst_epoch/). It computes the same
    update up to rounding (tests/train/test_optim.py).
    """
    return bool(params) and all(
        p.dtype in (torch.float32, torch.float64) and p.device.type in ("cpu", "cuda") for p in params
    )


def build_optimizer(model: nn.Module, cfg: Any) -> torch.optim.Optimizer:
    """SGD or Adam over the trainable parameters; ``weight_decay`` is L2; Adam fused where it can be."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:  # a model fitted in closed form (e.g. the WL-kernel ridge): never stepped
        params = [torch.zeros(0, requires_grad=True)]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                fused=fused_update(params) or None)
    raise ValueError(f"train.optimizer={cfg.optimizer!r}: expected 'sgd' or 'adam'")


def lr_at(epoch: int, lr: float, schedule: str, decay: float, decay_epoch: int) -> float:
    """Learning rate for 0-based ``epoch``.

    - ``constant``: ``lr``.
    - ``decay_after``: ``lr`` for epochs ``< decay_epoch``, then multiplied by
      ``decay`` once per epoch, starting at epoch ``decay_epoch``. This is the
      paper's PTB schedule ("decrease the learning rate by a constant factor
      after a certain epoch"); the authors' loop multiplies before training
      epoch e whenever e >= lr_decay_epoch.
    - ``exponential``: ``lr * decay**epoch`` (the SST/CEP "decay 0.9").
    """
    if schedule == "constant":
        return lr
    if schedule == "decay_after":
        return lr * decay ** max(0, epoch - decay_epoch + 1)
    if schedule == "exponential":
        return lr * decay**epoch
    raise ValueError(f"train.schedule={schedule!r}: expected one of {', '.join(SCHEDULES)}")


class EpochSchedule:
    """Sets the optimizer's learning rate at the start of each epoch."""

    def __init__(self, optimizer: torch.optim.Optimizer, cfg: Any) -> None:
        self.optimizer = optimizer
        self.base_lr = cfg.lr
        self.schedule = cfg.schedule
        self.decay = cfg.lr_decay
        self.decay_epoch = cfg.lr_decay_epoch
        lr_at(0, self.base_lr, self.schedule, self.decay, self.decay_epoch)  # validate name
        self.epoch = 0

    @property
    def lr(self) -> float:
        return self.lr_of(self.epoch)

    def lr_of(self, epoch: int) -> float:
        """The learning rate of 0-based ``epoch`` under this schedule (nothing is applied)."""
        return lr_at(epoch, self.base_lr, self.schedule, self.decay, self.decay_epoch)

    def set_epoch(self, epoch: int) -> float:
        """Apply the learning rate of ``epoch`` and return it."""
        self.epoch = epoch
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
        return self.lr

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "lr": self.lr, "schedule": self.schedule}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.set_epoch(int(state["epoch"]))
