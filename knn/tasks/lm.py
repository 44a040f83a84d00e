"""Word-level language modelling (PTB) with truncated back-propagation.

The token stream is cut into ``batch_size`` columns and read in ``bptt``-long
segments (see :func:`knn.data.ptb.batchify` for the picture). Within an epoch
the recurrent state is carried from one segment to the next, detached so that
gradients stop at the segment boundary; it is reset to zeros at the start of
every epoch and of every evaluation. Evaluation carries state the same way,
over ``eval_batch_size`` columns (the authors' PyTorch script uses 1, the
most faithful and slowest choice).

Data-parallel (``torchrun``, :mod:`knn.dist`): each of W processes
trains on its contiguous share of the ``batch_size`` columns (which must be
divisible by W) and carries its own part of the state, so W processes take
the steps of one process with ``batch_size`` columns; checkpoints hold the
state of all the columns, so a run resumes on any number of processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from knn import dist
from knn.data.ptb import PTBCorpus, batchify, load_ptb, num_segments, segment
from knn.errors import ConfigError
from knn.models import ModelSpec, models_of
from knn.tasks.base import ConstantBaseline, StepResult


@dataclass
class LMDataConfig:
    mirror: str | None = None  # None: $KNN_DATA_MIRROR, then the default search
    cache_dir: str | None = None
    # A folder of ptb.{train,valid,test}.txt in the PTB format, used as they are
    # (no checksum) instead of the verified PTB; None: the real PTB.
    dir: str | None = None


@dataclass
class LMTaskConfig:
    name: str = "ptb"
    batch_size: int = 32
    bptt: int = 35
    eval_batch_size: int = 1
    # Cut epochs/evaluations short (smoke runs); None means the whole split.
    limit_train_batches: int | None = None
    limit_eval_batches: int | None = None
    data: LMDataConfig = field(default_factory=LMDataConfig)


def load_corpus(data: LMDataConfig) -> PTBCorpus:
    """The PTB corpus (a seam tests replace with a tiny corpus)."""
    return load_ptb(mirror=data.mirror, cache_dir=data.cache_dir, data_dir=data.dir)


def detach(state: Any) -> Any:
    """Detach every tensor in a (nested) recurrent state; keeps its types."""
    if state is None or isinstance(state, Tensor):
        return None if state is None else state.detach()
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # NamedTuple
        return type(state)(*(detach(s) for s in state))
    return type(state)(detach(s) for s in state)


class LanguageModeling:
    """PTB language modelling; model selection on validation perplexity."""

    name: ClassVar[str] = "ptb"
    metric: ClassVar[str] = "ppl"
    higher_is_better: ClassVar[bool] = False
    Config: ClassVar[type] = LMTaskConfig
    models: ClassVar[dict[str, ModelSpec]] = models_of("lm")  # built as cls(cfg, vocab_size)

    def __init__(self, cfg: LMTaskConfig, device: torch.device, seed: int = 0) -> None:
        self.cfg = cfg
        self.device = device
        self.splits: dict[str, Tensor] = {}
        self.vocab_size = 0
        self.carry: Any = None  # recurrent state carried across training segments
        self._model: Any = None  # its state_to_tensors/state_batch_dim checkpoint the carry

    def setup(self, run_dir: Path | None = None) -> None:
        if self.cfg.batch_size % dist.world_size():
            raise ConfigError(f"task.batch_size={self.cfg.batch_size} must be divisible by the "
                              f"number of processes ({dist.world_size()})")
        corpus = load_corpus(self.cfg.data)
        self.vocab_size = len(corpus.vocab)
        sizes = {"train": self.cfg.batch_size, "valid": self.cfg.eval_batch_size}
        sizes["test"] = self.cfg.eval_batch_size
        for split, bsz in sizes.items():
            self.splits[split] = batchify(getattr(corpus, split), bsz).to(self.device)  # (N,B)
        # This process's columns (all of them in one process); evaluation is rank 0's, whole.
        self.splits["train"] = self.splits["train"][:, dist.share(self.cfg.batch_size)].contiguous()

    def build_model(self, model_cfg: Any) -> nn.Module:
        self._model = self.models[model_cfg.name].cls(model_cfg, self.vocab_size)
        return self._model

    def _num_batches(self, split: str, limit: int | None) -> int:
        n = num_segments(self.splits[split].size(0), self.cfg.bptt)
        return n if limit is None else min(n, limit)

    def num_train_batches(self) -> int:
        return self._num_batches("train", self.cfg.limit_train_batches)

    def start_epoch(self, epoch: int) -> None:
        self.carry = None  # zeros: each epoch reads the stream from its start

    def train_batch(self, epoch: int, index: int) -> tuple[Tensor, Tensor]:
        return segment(self.splits["train"], index, self.cfg.bptt)  # x, y: (T,B)

    def training_step(self, model: nn.Module, batch: tuple[Tensor, Tensor]) -> StepResult:
        x, y = batch  # (T,B)
        logits, state = model(x, self.carry)  # (T,B,V)
        self.carry = detach(state)  # truncated BPTT: carry values, not gradients
        nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
        # Summed over time, averaged over the batch, as in the authors' code:
        # the paper's lr of 1.0 (and clip 5) are tuned for this scale, which
        # is bptt times the per-token mean.
        loss = nll / y.size(1)
        return StepResult(loss=loss, total=nll.detach(), count=y.numel())

    def train_metrics(self, mean_loss: float) -> dict[str, float]:
        return {"loss": mean_loss, "ppl": _ppl(mean_loss)}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        model.eval()
        data, state = self.splits[split], None
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        count = 0
        for i in range(self._num_batches(split, self.cfg.limit_eval_batches)):
            x, y = segment(data, i, self.cfg.bptt)  # (T,B)
            logits, state = model(x, state)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
            count += y.numel()
        loss = float(total) / max(count, 1)
        return {"loss": loss, "ppl": _ppl(loss)}

    def constant_baseline(self) -> ConstantBaseline:
        """The training tokens' unigram distribution, add-one smoothed (no context): its
        perplexity on the evaluated validation segments, and its training loss, the
        cross-entropy (nats per token) of the training tokens under it."""
        train = self.splits["train"].flatten()
        counts = torch.bincount(train, minlength=self.vocab_size).double()
        logp = ((counts + 1) / (counts.sum() + self.vocab_size)).log()
        train_loss = float(-(counts * logp).sum() / counts.sum())
        total, count = 0.0, 0
        for i in range(self._num_batches("valid", self.cfg.limit_eval_batches)):
            _, y = segment(self.splits["valid"], i, self.cfg.bptt)
            total -= float(logp[y.flatten()].sum())
            count += y.numel()
        return ConstantBaseline("unigram (train, add-one) predictor", _ppl(total / max(count, 1)),
                                train_loss, log_loss=True)

    def meta(self) -> dict[str, Any]:
        return {"vocab_size": self.vocab_size}

    def state_dict(self) -> dict[str, Any]:
        """The carried state of all ``batch_size`` columns (gathered from every process)."""
        tensors = [] if self.carry is None else self._model.state_to_tensors(self.carry)
        dim = self._model.state_batch_dim
        # A carried state is often a view of the last step of a whole (T, B, d) output, and
        # torch.save writes a view's whole storage: clone, so last.pt holds the state alone.
        return {"carry": [dist.gather_cat(t, dim).clone() for t in tensors]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        dim = self._model.state_batch_dim
        tensors = [t.to(self.device)[(slice(None),) * dim + (dist.share(t.size(dim)),)]
                   .contiguous() for t in state["carry"]]
        self.carry = self._model.state_from_tensors(tensors) if tensors else None


def _ppl(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf  # exp overflows past ~709
