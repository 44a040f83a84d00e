"""Did a finished run learn anything? Two checks, logged and written to ``result.json``.

A run can end without an error and still be useless: a molecule regression
trained with PTB's SGD (lr 1.0) reaches a training loss of ~1e14 and a test
RMSE equal to the mean predictor's. At the end of every run the trainer adds
``result["health"]`` and logs a WARNING line when either check fails.

**diverged.** Losses are compared on their natural scale s(L): the loss itself
for a squared error (molecules), e^L for a cross-entropy in nats (PTB, SST),
where e^L is a perplexity, so that "orders of magnitude" means the same for
both. With F = :data:`FACTOR` (100, two orders of magnitude), s_c the constant
baseline's training loss (:class:`~knn.tasks.base.ConstantBaseline`) and L_k
the mean training loss of epoch k (``metrics.jsonl``, partial epochs
included), a run diverged when

1. *blow-up*: some epoch's s(L_k) > F · min_{j<k} s(L_j), and s(L_k) > s_c
   (the loss rose by two orders of magnitude over an earlier epoch and is now
   worse than predicting a constant); or
2. *never fit*: the last epoch's s(L) > F · s_c (training ended two orders of
   magnitude worse than a constant predictor, e.g. a loss that exploded in
   the first epoch and stayed there).

A NaN or infinite loss stops training before this (``NonFiniteLoss``).

**beats_constant_baseline.** The selected model's validation metric is
better than the constant baseline's by more than a relative
:data:`TOLERANCE`: molecules, the train-mean predictor's RMSE; SST, the
accuracy of always answering the training split's majority class; PTB, the
perplexity of the training split's unigram distribution (add-one smoothed).
A model that *is* a constant predictor (``model=mean``) fails it, as it should.
Each baseline is scored on exactly the validation data the run is scored on
(``limit_eval_batches`` included), by the task (``task.constant_baseline()``).

``result["health"]``: ``diverged`` and ``diverged_reason`` (null or the rule
that fired, with the numbers), ``beats_constant_baseline``, ``metric``,
``valid``, ``constant_baseline`` (its validation metric),
``constant_baseline_name``, ``valid_over_constant`` and ``train_loss``
(first and last epoch, and the constant predictor's). null for a task
without a constant baseline.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from knn import dist
from knn.tasks.base import ConstantBaseline

log = logging.getLogger(__name__)

#: How many times larger (on the scale s) a loss must be to count as diverged.
FACTOR = 100.0
#: Relative margin by which the model must beat the constant baseline.
TOLERANCE = 1e-6


def loss_scale(loss: float, log_loss: bool) -> float:
    """s(L): ``loss`` for a squared error, e^loss (a perplexity) for a cross-entropy in nats."""
    if not log_loss:
        return loss
    return math.exp(loss) if loss < 700 else math.inf  # exp overflows past ~709


def divergence(losses: Sequence[float], baseline_loss: float, log_loss: bool,
               epochs: Sequence[int] | None = None, factor: float = FACTOR) -> str | None:
    """Why the epoch training losses ``losses`` count as diverged (module docstring), or None.

    ``baseline_loss`` is the constant predictor's training loss, in the same unit;
    ``epochs`` numbers the losses in the message (default 0, 1, ...).
    """
    epochs = list(range(len(losses))) if epochs is None else list(epochs)
    scaled = [loss_scale(x, log_loss) for x in losses]
    constant = loss_scale(baseline_loss, log_loss)
    for k in range(1, len(scaled)):
        best = min(scaled[:k])
        if scaled[k] > factor * best and scaled[k] > constant:
            return (f"training loss rose from {min(losses[:k]):.4g} to {losses[k]:.4g} at epoch "
                    f"{epochs[k]} (> {factor:g}x{' in perplexity' if log_loss else ''}, and worse "
                    f"than the constant predictor's {baseline_loss:.4g})")
    if scaled and scaled[-1] > factor * constant:
        return (f"final training loss {losses[-1]:.4g} is > {factor:g}x"
                f"{' in perplexity' if log_loss else ''} the constant predictor's "
                f"{baseline_loss:.4g}")
    return None


def beats(value: float, baseline: float, higher_is_better: bool,
          tolerance: float = TOLERANCE) -> bool:
    """``value`` is better than ``baseline`` by more than ``tolerance`` (relative)."""
    margin = tolerance * max(abs(baseline), 1e-12)
    if not math.isfinite(value):
        return False
    return value > baseline + margin if higher_is_better else value < baseline - margin


def assess(losses: Sequence[float], valid: float, baseline: ConstantBaseline, metric: str,
           higher_is_better: bool, epochs: Sequence[int] | None = None) -> dict[str, Any]:
    """The ``health`` entry of ``result.json`` from the epoch training losses (of ``epochs``),
    the selected model's validation ``metric`` value and the task's constant baseline."""
    reason = divergence(losses, baseline.train_loss, baseline.log_loss, epochs)
    return {
        "diverged": reason is not None,
        "diverged_reason": reason,
        "beats_constant_baseline": beats(valid, baseline.metric, higher_is_better),
        "metric": metric,
        "valid": valid,
        "constant_baseline": baseline.metric,
        "constant_baseline_name": baseline.name,
        # valid / constant: how far from the constant predictor (< 1 is better for an error)
        "valid_over_constant": valid / baseline.metric if baseline.metric else None,
        "train_loss": {"first": losses[0] if losses else None,
                       "last": losses[-1] if losses else None,
                       "constant": baseline.train_loss},
    }


def warnings_for(health: dict[str, Any]) -> list[str]:
    """The WARNING lines a run's log gets for ``health`` (none for a healthy run)."""
    out = []
    if health["diverged"]:
        out.append(f"training diverged: {health['diverged_reason']}; check train.lr, "
                   f"train.optimizer and train.clip (this run's train group)")
    if health["beats_constant_baseline"] is False:
        out.append(f"valid {health['metric']} {health['valid']:.4g} is no better than the "
                   f"{health['constant_baseline_name']}'s {health['constant_baseline']:.4g}: the "
                   f"model has learned nothing the constant does not know")
    return out


def train_losses(metrics_path: Path) -> tuple[list[int], list[float]]:
    """(epoch, training loss) of every epoch record in ``metrics.jsonl``, as two lists
    (closed-form fits have none)."""
    epochs: list[int] = []
    losses: list[float] = []
    if metrics_path.is_file():
        for line in metrics_path.read_text().splitlines():
            if line.strip() and "loss" in (record := json.loads(line)).get("train", {}):
                epochs.append(int(record["epoch"]))
                losses.append(float(record["train"]["loss"]))
    return epochs, losses


def check_run(task: Any, valid: dict[str, float], metrics_path: Path) -> dict[str, Any] | None:
    """``result["health"]`` for a finished run, with its WARNING lines logged; None when the
    task has no constant baseline."""
    baseline_of = getattr(task, "constant_baseline", None)
    if baseline_of is None:
        return None
    epochs, losses = train_losses(metrics_path)
    health = assess(losses, valid[task.metric], baseline_of(), task.metric, task.higher_is_better,
                    epochs)
    for line in warnings_for(health) if dist.is_main() else ():  # one log per run, not per process
        log.warning(line)
    return health
