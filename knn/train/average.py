"""An exponential moving average of the weights (Polyak averaging), for evaluation.

With ``train.ema_decay=d`` the trainer keeps, beside the weights θ_t that the
optimizer updates, their average

    θ̄_t = β_t θ̄_{t-1} + (1 - β_t) θ_t,   β_t = min(d, (1 + t) / (10 + t)),   θ̄_0 = θ_0,

updated after every optimizer step t = 1, 2, ...  (``shadow`` is θ̄, ``updates`` is t).
The ramp β_t keeps the first steps from weighting the random initialisation for
~1/(1-d) steps. Validation, the best checkpoint and the final evaluation use θ̄;
training continues from θ. Late in a run the iterates θ_t still wander (CEP's
validation RMSE moves by several hundredths from one epoch to the next at lr 5e-5,
by about 0.01 with θ̄: experiments/studies/cep/factors/), and θ̄ smooths that walk
without any extra forward pass.

Only trainable parameters are averaged; buffers (fixed vectors, batch-norm
statistics) are used as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def check_decay(decay: float) -> None:
    """ValueError (one line) unless 0 <= ``decay`` < 1: at 1 θ̄ would never move."""
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"ema_decay must be in [0, 1), got {decay}")


class WeightAverage:
    """θ̄ for the trainable parameters of ``model``; :meth:`update` after each step."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        check_decay(decay)
        self.decay = decay
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.params: list[torch.Tensor] = [p for _, p in named]
        self.shadow = [p.detach().clone() for p in self.params]  # θ̄_0 = θ_0
        self.updates = 0

    def beta(self) -> float:
        """β_t of the next update."""
        t = self.updates + 1
        return min(self.decay, (1 + t) / (10 + t))

    @torch.no_grad()
    def update(self) -> None:
        """θ̄ ← β θ̄ + (1 - β) θ, i.e. θ̄ + (1 - β)(θ - θ̄)."""
        weight = 1.0 - self.beta()
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], weight)
        self.updates += 1

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Inside the block the model's parameters hold θ̄; θ is restored after it."""
        with torch.no_grad():
            current = [p.detach().clone() for p in self.params]
            torch._foreach_copy_(self.params, self.shadow)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(self.params, current)

    def state_dict(self) -> dict[str, Any]:
        """θ̄ by parameter name (as in the model's state dict) and the step count t."""
        return {"shadow": {n: s.clone() for n, s in zip(self.names, self.shadow)},
                "updates": self.updates}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state["shadow"]
        if list(saved) != self.names:
            raise ValueError(f"the checkpoint averages parameters {sorted(saved)}, "
                             f"this model trains {sorted(self.names)}")
        for name, s in zip(self.names, self.shadow):
            s.copy_(saved[name])
        self.updates = int(state["updates"])
