"""Optimizers and per-epoch learning-rate schedules.

The schedules are pure functions of the epoch number, so resuming needs only
the epoch; the state dict is kept anyway so checkpoints say what ran.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

OPTIMIZERS = ("sgd", "adam", "adadelta", "adagrad")
SCHEDULES = ("constant", "decay_after", "exponential")


def fused_update(params: list[torch.Tensor]) -> bool:
    """Whether torch's fused optimizer kernel can update ``params``: float tensors on CPU or CUDA.

    The fused kernel does one pass over every parameter instead of about ten
    small ops per parameter, which matters where steps are short (SST). It computes
    the same update up to rounding (tests/train/test_optim.py).
    """
    return bool(params) and all(
        p.dtype in (torch.float32, torch.float64) and p.device.type in ("cpu", "cuda") for p in params
    )


class FusedAdam(torch.optim.Adam):
    """``torch.optim.Adam(fused=True)`` without the Python bookkeeping around its kernel.

    torch's ``step`` runs Python around its one fused kernel at every step: grouping
    the tensors by device and dtype, the argument checks, the graph-capture check; on
    SST, where steps are a few milliseconds, that is worth skipping. Once every parameter
    has its state, this ``step`` calls the same kernel (``torch._fused_adam_``) on the
    same lists with the same arguments, so the update is torch's bit for bit
    (tests/train/test_optim.py). Step hooks run as for any optimizer (torch wraps
    ``step`` with them). Whatever that path does not cover goes to torch's ``step``: a
    closure, a first step (it creates the state), a gradient-scaler's attributes,
    amsgrad, capturable or decoupled settings, a tensor lr, sparse gradients, and
    parameters of mixed devices or dtypes.
    """

    def __init__(self, params: Any, **kwargs: Any) -> None:
        super().__init__(params, fused=True, **kwargs)

    def _lean_groups(self) -> list[tuple[dict[str, Any], list[torch.Tensor]]] | None:
        """Each group with its parameters that have gradients, or None: use torch's step."""
        if getattr(self, "grad_scale", None) is not None or getattr(self, "found_inf", None) is not None:
            return None
        groups, kinds = [], set()
        for group in self.param_groups:
            if (group["amsgrad"] or group["capturable"] or group["differentiable"]
                    or group["decoupled_weight_decay"] or isinstance(group["lr"], torch.Tensor)
                    or not all(isinstance(b, float) for b in group["betas"])):
                return None
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                if not self.state.get(p) or p.grad.is_sparse:
                    return None
                kinds.add((p.device, p.dtype))
            groups.append((group, params))
        return groups if len(kinds) <= 1 else None

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        groups = None if closure is not None else self._lean_groups()
        if groups is None:
            # torch.optim wraps every optimizer class's step to run the step hooks; this
            # class's wrapper already ran them, so call Adam's step unwrapped.
            adam_step = torch.optim.Adam.step
            return getattr(adam_step, "__wrapped__", adam_step)(self, closure)
        for group, params in groups:
            if not params:
                continue
            states = [self.state[p] for p in params]
            steps = [s["step"] for s in states]
            torch._foreach_add_(steps, 1)
            beta1, beta2 = group["betas"]
            grads = [cast(torch.Tensor, p.grad) for p in params]  # each has one (_lean_groups)
            torch._fused_adam_(params, grads, [s["exp_avg"] for s in states],
                               [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False,
                               lr=group["lr"], beta1=beta1, beta2=beta2,
                               weight_decay=group["weight_decay"], eps=group["eps"],
                               maximize=group["maximize"], grad_scale=None, found_inf=None)
        return None


class Optimizers:
    """Several optimizers stepped as one, each over its own parameters: Tai et al. (2015)
    train their network with Adagrad and its fine-tuned word vectors with plain SGD.
    The trainer sees one optimizer (``param_groups``, ``zero_grad``, ``step``, state)."""

    def __init__(self, *optimizers: torch.optim.Optimizer) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for opt, saved in zip(self.optimizers, state["optimizers"], strict=True):
            opt.load_state_dict(saved)


def _optimizer(params: list[torch.Tensor], cfg: Any) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    if cfg.optimizer == "adam":
        if fused_update(params):
            return FusedAdam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adadelta":  # Kim (2014): rho 0.95, eps 1e-6, lr 1
        rho = 0.9 if cfg.rho is None else cfg.rho  # None: torch's default
        return torch.optim.Adadelta(params, lr=cfg.lr, rho=rho, eps=1e-6,
                                    weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adagrad":  # Tai et al. (2015), as Torch7's optim.adagrad (eps 1e-10)
        return torch.optim.Adagrad(params, lr=cfg.lr, eps=1e-10, weight_decay=cfg.weight_decay)
    raise ValueError(f"train.optimizer={cfg.optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")


def build_optimizer(model: nn.Module, cfg: Any) -> torch.optim.Optimizer | Optimizers:
    """``cfg.optimizer`` (SGD, Adam fused where it can be, Adadelta or Adagrad) over the
    trainable parameters; ``weight_decay`` is L2.

    With ``cfg.embedding_lr`` set, the model's trained input embeddings
    (``model.embedding``'s parameters) are updated by plain SGD at that rate, without
    weight decay, and everything else by ``cfg.optimizer`` (:class:`Optimizers`)."""
    params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    if not params:  # a model fitted in closed form (e.g. the WL-kernel ridge): never stepped
        params = [torch.zeros(0, requires_grad=True)]
    embedding = getattr(model, "embedding", None)
    vectors = [] if cfg.embedding_lr is None or embedding is None else \
        [p for p in embedding.parameters() if p.requires_grad]
    if cfg.embedding_lr is not None and not vectors:
        raise ValueError("train.embedding_lr is set, but the model trains no input embeddings "
                         "(model.finetune_embeddings=true trains them)")
    if not vectors:
        return _optimizer(params, cfg)
    rest = [p for p in params if all(p is not v for v in vectors)]
    return Optimizers(_optimizer(rest, cfg), torch.optim.SGD(vectors, lr=cfg.embedding_lr))


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

    def __init__(self, optimizer: torch.optim.Optimizer | Optimizers, cfg: Any) -> None:
        self.optimizer = optimizer
        self.base_lr = cfg.lr
        # Each group's configured rate, read before a checkpoint's (decayed) rates load.
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
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
        """Apply the learning rate of ``epoch`` to every parameter group (each scaled from its
        own starting rate, e.g. a fine-tuned embedding's) and return the main one."""
        self.epoch = epoch
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = lr_at(epoch, base, self.schedule, self.decay, self.decay_epoch)
        return self.lr

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "lr": self.lr, "schedule": self.schedule}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.set_epoch(int(state["epoch"]))
