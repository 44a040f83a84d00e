"""knn.train.health: the divergence rule, the constant-baseline comparison, and each task's
constant baseline."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from knn.tasks.base import ConstantBaseline
from knn.train.health import (
    FACTOR,
    assess,
    beats,
    check_run,
    divergence,
    loss_scale,
    train_losses,
    warnings_for,
)

MEAN = ConstantBaseline("train-mean predictor", metric=1.0, train_loss=1.0, log_loss=False)
UNIGRAM = ConstantBaseline("unigram predictor", metric=690.0, train_loss=6.5, log_loss=True)


def test_loss_scale_is_the_loss_or_its_perplexity() -> None:
    assert loss_scale(3.0, log_loss=False) == 3.0
    assert loss_scale(2.0, log_loss=True) == pytest.approx(math.e**2)
    assert loss_scale(800.0, log_loss=True) == math.inf  # no OverflowError


@pytest.mark.parametrize("losses", [
    [0.9, 0.5, 0.3],  # learning
    [0.9, 0.5, 0.6, 0.4],  # noisy
    [226.0, 50.0, 2.0],  # unstandardised targets: a big first epoch that comes down
    [1e-6, 1e-3],  # a 1000x rise, but far below the constant predictor's loss
    [],  # a closed-form fit: no training epochs
])
def test_healthy_squared_error_curves(losses: list[float]) -> None:
    assert divergence(losses, MEAN.train_loss, log_loss=False) is None


def test_a_blow_up_after_a_good_start() -> None:
    why = divergence([0.9, 0.5, 80.0], 1.0, log_loss=False, epochs=[0, 1, 2])
    assert why is not None and "rose from 0.5 to 80 at epoch 2" in why


def test_exploded_from_the_start_is_never_fit() -> None:
    """A run once seen: PTB's SGD on a molecule task, epoch loss 7.8e14 and nothing else."""
    why = divergence([7.8e14], 1.0, log_loss=False)
    assert why is not None and "final training loss 7.8e+14" in why
    assert divergence([0.9 * FACTOR], 1.0, log_loss=False) is None  # within two orders


def test_cross_entropy_is_judged_in_perplexity() -> None:
    """A log loss rising from 5.5 to 12 nats is a 665x rise in perplexity: diverged; the same
    numbers as squared errors would not be."""
    assert divergence([6.0, 5.5, 12.0], 6.5, log_loss=True) is not None
    assert divergence([6.0, 5.5, 12.0], 6.5, log_loss=False) is None
    assert divergence([6.5, 5.0, 4.8], 6.5, log_loss=True) is None  # PTB learning
    assert divergence([1.6, 1.3, 1.1], 1.28, log_loss=True) is None  # SST learning
    assert divergence([6.5 + math.log(FACTOR) + 0.1], 6.5, log_loss=True) is not None
    assert divergence([6.5 + math.log(FACTOR) - 0.1], 6.5, log_loss=True) is None


@pytest.mark.parametrize("value, baseline, higher, expected", [
    (0.5, 1.0, False, True),
    (1.0, 1.0, False, False),  # the mean predictor itself
    (1.0 - 1e-9, 1.0, False, False),  # rounding, not learning
    (1.2, 1.0, False, False),
    (45.0, 41.7, True, True),
    (41.7, 41.7, True, False),
    (math.nan, 1.0, False, False),
    (math.inf, 1.0, False, False),
])
def test_beats(value: float, baseline: float, higher: bool, expected: bool) -> None:
    assert beats(value, baseline, higher) is expected


def test_assess_and_warnings() -> None:
    good = assess([0.9, 0.4], 0.7, MEAN, "rmse", higher_is_better=False)
    assert good["diverged"] is False and good["beats_constant_baseline"] is True
    assert good["constant_baseline"] == 1.0 and good["valid_over_constant"] == 0.7
    assert good["train_loss"] == {
        "first": 0.9, "last": 0.4, "constant": 1.0}
    assert warnings_for(good) == []
    bad = assess([7.8e14, 7.9e14], 1.3, MEAN, "rmse", higher_is_better=False)
    lines = warnings_for(bad)
    assert bad["diverged"] and bad["beats_constant_baseline"] is False and len(lines) == 2
    assert lines[0].startswith("training diverged: final training loss 7.9e+14")
    assert "no better than the train-mean predictor's 1" in lines[1]
    assert json.loads(json.dumps(bad)) == bad  # plain data for result.json


def test_train_losses_from_metrics_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    records = [{"epoch": 0, "partial": False, "train": {"loss": 0.9, "rmse": 1.0}},
               {"epoch": 1, "partial": True, "train": {"loss": 0.7}},  # stopped mid-epoch
               {"epoch": 1, "partial": False, "train": {}}]  # no batches (closed-form fit)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert train_losses(path) == ([0, 1], [0.9, 0.7])
    assert train_losses(tmp_path / "absent.jsonl") == ([], [])


def test_check_run_logs_and_skips_tasks_without_a_baseline(tmp_path: Path, caplog) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"epoch": 0, "train": {"loss": 1e15}}))
    task = SimpleNamespace(metric="rmse", higher_is_better=False, constant_baseline=lambda: MEAN)
    with caplog.at_level("WARNING", logger="knn.train.health"):
        health = check_run(task, {"rmse": 2.0}, tmp_path / "metrics.jsonl")
    assert health["diverged"] and not health["beats_constant_baseline"]
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert check_run(SimpleNamespace(metric="rmse", higher_is_better=False), {"rmse": 1.0},
                     tmp_path / "metrics.jsonl") is None


# --------------------------------------------------------------------------- #
# The tasks' constant baselines (molecules: tests/tasks/test_molecules.py)
# --------------------------------------------------------------------------- #


def test_ptb_unigram_baseline(fake_ptb) -> None:
    """The add-one unigram of the training tokens: its perplexity on every validation target,
    and its cross-entropy on the training tokens."""
    from knn.tasks.lm import LanguageModeling, LMTaskConfig

    task = LanguageModeling(LMTaskConfig(batch_size=4, bptt=8, eval_batch_size=10),
                            torch.device("cpu"))
    task.setup()
    base = task.constant_baseline()
    train = task.splits["train"].flatten()
    counts = torch.bincount(train, minlength=task.vocab_size).double()
    p = (counts + 1) / (counts.sum() + task.vocab_size)
    targets = task.splits["valid"][1:].flatten()  # every row but the first is a target
    assert base.metric == pytest.approx(math.exp(-float(p.log()[targets].mean())), rel=1e-9)
    assert base.train_loss == pytest.approx(-float(p.log()[train].mean()), rel=1e-9)
    assert base.log_loss and 1 < base.metric < task.vocab_size  # better than uniform


def test_sst_majority_class_baseline() -> None:
    """Always the training split's most frequent label: its accuracy on the evaluated dev
    batches (limit_eval_batches applies) and the entropy of the training labels."""
    from knn.data.sst import Example
    from knn.tasks.sst import SentimentClassification, SSTTaskConfig

    task = SentimentClassification.__new__(SentimentClassification)
    task.cfg, task.n_classes = SSTTaskConfig(limit_eval_batches=2), 5
    task.train = [Example(("w",), label) for label in [2, 2, 2, 3, 1, 2]]
    task.eval_batches = {"valid": [SimpleNamespace(labels=torch.tensor(b))
                                   for b in ([2, 0, 2], [4, 2], [2, 2, 2])]}  # third not read
    base = task.constant_baseline()
    assert base.metric == pytest.approx(100 * 3 / 5) and base.log_loss
    freq = torch.tensor([4, 1, 1], dtype=torch.float64) / 6
    assert base.train_loss == pytest.approx(float(-(freq * freq.log()).sum()))
    assert "majority class (2)" in base.name
