"""Stanford Sentiment Treebank classification (paper Section 5.2, Table 2).

Data, vectors and models come from :mod:`knn.data.sst`,
:mod:`knn.data.vectors` and :mod:`knn.models.classifier`; this module wires
them to the shared trainer:

* train on phrase-level (``phrases=true``, every labelled node once, the
  authors' ``stsa.*.phrases.train``) or sentence-level examples; dev and test
  are always whole sentences (root labels), fine-grained (5 classes) or binary
  (neutral dropped);
* the token types of the three splits are looked up in a GloVe/word2vec text
  file and form a fixed embedding table (``vectors.path``; default: the data
  mirror's GloVe 6B 50d extract, uncased, standing in for the paper's cased
  GloVe 840B 300d), unit length by default, with the configured
  out-of-vocabulary policy (see :mod:`knn.data.vectors`); the model's input
  width follows the vectors' dimension;
* training batches are sentences of similar length (:func:`bucket_batches`),
  reshuffled every epoch from (seed, epoch), so a resumed run sees the same
  batches; evaluation batches are fixed, and masking makes their grouping
  irrelevant to the predictions;
* the loss is the batch-mean cross-entropy (the authors' ``T.mean``); the
  selection metric is accuracy in percent on dev, higher is better;
* data-parallel (``torchrun``): every process derives the same batches and
  trains on its contiguous part of each, its loss weighted so that the
  averaged gradient is the whole batch's (:func:`knn.dist.split_batch`).

``out_max_norm`` rescales each class's output weight vector to L2 norm at most
that value after every optimizer step (Kim 2014's constraint, s = 3, applied
to the softmax weights; used by the CNN baseline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from knn import dist
from knn.data.mirror import GLOVE_6B_SST, resolve
from knn.data.sst import (
    GRANULARITIES,
    NUM_CLASSES,
    SST_FILES,
    Batch,
    EncodedExamples,
    Example,
    bucket_batches,
    collate,
    encode_examples,
    make_batch,
    phrase_examples,
    read_trees,
    sentence_examples,
)
from knn.data.vectors import OOV_POLICIES, SHARED_POLICIES, Embeddings, build_embeddings
from knn.errors import ConfigError
from knn.models import ModelSpec, models_of
from knn.tasks.base import ConstantBaseline, StepResult

log = logging.getLogger(__name__)

#: The default vectors: real GloVe (6B tokens, 50-d, uncased) cut to SST's types, standing
#: in for the paper's GloVe 840B 300d (cased), which the mirror cannot carry.
DEFAULT_VECTORS = GLOVE_6B_SST
#: Trainer split name -> SST file split.
EVAL_SPLITS = {"valid": "dev", "test": "test"}


@dataclass
class SSTDataConfig:
    mirror: str | None = None  # None: $KNN_DATA_MIRROR, then the default search
    cache_dir: str | None = None


@dataclass
class SSTVectorsConfig:
    """Word vectors: a GloVe/word2vec text file (plain, .gz or .zip), read once, cut to SST."""

    path: str | None = None  # None: DEFAULT_VECTORS (sha256-checked); else a file path
    member: str | None = None  # which file of a .zip holding several
    oov: str = "unk"  # unk | zero | random (knn.data.vectors)
    normalize: bool = True  # unit L2 length, as the paper
    shared: str = "keep"  # keep | split: words sharing one vector (knn.data.vectors)
    cased: bool | None = None  # None: detected; uncased files are also searched lowercased

    def __post_init__(self) -> None:
        if self.oov not in OOV_POLICIES:
            raise ValueError(f"vectors.oov must be one of {OOV_POLICIES}, got {self.oov!r}")
        if self.shared not in SHARED_POLICIES:
            raise ValueError(f"vectors.shared must be one of {SHARED_POLICIES}, got {self.shared!r}")


@dataclass
class SSTTaskConfig:
    name: str = "sst"
    granularity: str = "fine"  # fine (5 classes) | binary (neutral dropped)
    phrases: bool = True  # train on every labelled phrase (True) or on root labels only
    normalize_tokens: bool = True  # -LRB- -> (, 1\/2 -> 1/2 (knn.data.sst)
    lowercase: bool = False
    batch_size: int = 32
    eval_batch_size: int = 256  # speed only: predictions do not depend on it
    out_max_norm: float | None = None  # max L2 norm of each class's output weights
    # Cut epochs/evaluations short (smoke runs); None means the whole split.
    limit_train_batches: int | None = None
    limit_eval_batches: int | None = None
    data: SSTDataConfig = field(default_factory=SSTDataConfig)
    vectors: SSTVectorsConfig = field(default_factory=SSTVectorsConfig)

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}")
        if self.batch_size < 1 or self.eval_batch_size < 1:
            raise ValueError("batch_size and eval_batch_size must be >= 1")


def load_trees(data: SSTDataConfig) -> dict[str, list]:
    """Parsed trees of train/dev/test, from the verified mirror/cache (a seam for tests)."""
    return {split: read_trees(resolve(path, data.mirror, data.cache_dir))
            for split, path in SST_FILES.items()}


def vectors_path(cfg: SSTTaskConfig) -> str:
    """The configured vector file, or the verified default (:data:`DEFAULT_VECTORS`)."""
    if cfg.vectors.path:
        return cfg.vectors.path
    return str(resolve(DEFAULT_VECTORS, cfg.data.mirror, cfg.data.cache_dir))


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A generator that depends on (seed, epoch) only: the batch order of a resumed epoch."""
    state = np.random.SeedSequence([seed, epoch]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


class SentimentClassification:
    """SST fine-grained or binary; model selection on dev accuracy (%)."""

    name: ClassVar[str] = "sst"
    metric: ClassVar[str] = "acc"
    higher_is_better: ClassVar[bool] = True
    Config: ClassVar[type] = SSTTaskConfig
    models: ClassVar[dict[str, ModelSpec]] = models_of("sentence")  # cls(cfg, vectors)

    def __init__(self, cfg: SSTTaskConfig, device: torch.device, seed: int = 0) -> None:
        self.cfg = cfg
        self.device = device
        self.seed = seed
        self.n_classes = NUM_CLASSES[cfg.granularity]
        self.train: list[Example] = []
        self.train_ids: EncodedExamples | None = None  # self.train encoded, once
        self.eval_batches: dict[str, list[Batch]] = {}
        self.embeddings: Embeddings | None = None
        self._order: tuple[int, list[list[int]]] | None = None  # (epoch, index batches)

    # ----------------------------------------------------------------- data
    def setup(self, run_dir: Path | None = None) -> None:
        cfg = self.cfg
        trees = load_trees(cfg.data)
        opts = {"normalize": cfg.normalize_tokens, "lowercase": cfg.lowercase}
        view = phrase_examples if cfg.phrases else sentence_examples
        self.train = view(trees["train"], cfg.granularity, **opts)
        evals = {s: sentence_examples(trees[f], cfg.granularity, **opts)
                 for s, f in EVAL_SPLITS.items()}
        # Vectors are looked up for the types of all three splits (any label): the
        # table is fixed and label-free, like the authors' table of the whole vector file.
        tokens = (w for split in trees.values()
                  for e in sentence_examples(split, "fine", **opts) for w in e.tokens)
        v = cfg.vectors
        self.embeddings = build_embeddings(tokens, vectors_path(cfg), oov=v.oov,
                                           normalize=v.normalize, seed=self.seed, member=v.member,
                                           shared=v.shared, cased=v.cased)
        log.info("sst %s, %s-level train: %d / %d / %d examples; vectors %s: %s",
                 cfg.granularity, "phrase" if cfg.phrases else "sentence", len(self.train),
                 len(evals["valid"]), len(evals["test"]), v.path or DEFAULT_VECTORS,
                 self.embeddings.coverage.summary())
        vocab = self.embeddings.vocab
        self.train_ids = encode_examples(self.train, vocab)
        for split, examples in evals.items():
            index = bucket_batches([len(e.tokens) for e in examples], cfg.eval_batch_size)
            self.eval_batches[split] = [
                make_batch([examples[i] for i in b], vocab).to(self.device) for b in index]

    def build_model(self, model_cfg: Any) -> nn.Module:
        if model_cfg.n_classes != self.n_classes:
            raise ConfigError(f"model.n_classes={model_cfg.n_classes} but task.granularity="
                              f"{self.cfg.granularity} has {self.n_classes} classes "
                              f"(set model.n_classes={self.n_classes})")
        assert self.embeddings is not None, "setup() first"
        model = self.models[model_cfg.name].cls(model_cfg, self.embeddings.vectors)
        if self.cfg.out_max_norm is not None and not isinstance(getattr(model, "out", None),
                                                                 nn.Linear):
            raise ConfigError(
                f"task.out_max_norm: model {model_cfg.name} has no output layer 'out'")
        return model

    # ------------------------------------------------------------- training
    def _batches(self, epoch: int) -> list[list[int]]:
        if self._order is None or self._order[0] != epoch:
            lengths = [len(e.tokens) for e in self.train]
            order = bucket_batches(lengths, self.cfg.batch_size, epoch_generator(self.seed, epoch))
            self._order = (epoch, order)
        return self._order[1]

    def num_train_batches(self) -> int:
        n = -(-len(self.train) // self.cfg.batch_size)
        limit = self.cfg.limit_train_batches
        return n if limit is None else min(n, limit)

    def start_epoch(self, epoch: int) -> None:
        self._batches(epoch)

    def train_batch(self, epoch: int, index: int) -> tuple[Batch, float]:
        """This process's part of batch ``index`` and the factor on its mean loss
        (the whole batch and 1 in one process; 0: a stand-in for an empty part)."""
        ids = self._batches(epoch)[index]
        part, scale = dist.split_batch(len(ids))
        assert self.train_ids is not None, "setup() first"
        return collate(self.train_ids, ids[part]).to(self.device), scale

    def training_step(self, model: nn.Module, batch: tuple[Batch, float]) -> StepResult:
        b, scale = batch
        # A model's own nll_sum (the Kernel NN's fused loss node) where it has one; a DDP
        # wrapper has none, and trains through its forward
        nll_sum = getattr(model, "nll_sum", None)
        nll = (nll_sum(b.tokens, b.mask, b.labels) if nll_sum is not None
               else F.cross_entropy(model(b.tokens, b.mask), b.labels, reduction="sum"))
        n = b.labels.numel() if scale else 0  # a stand-in item is not counted
        return StepResult(loss=nll / b.labels.numel() * scale, total=nll.detach() if n else 0.0,
                          count=n)

    @torch.no_grad()
    def after_step(self, model: nn.Module) -> None:
        """Kim's max-norm: rescale each class's output weight row to norm <= out_max_norm."""
        if self.cfg.out_max_norm is not None:
            w = cast(nn.Linear, model.out).weight  # (C, F): one row per class
            w.copy_(torch.renorm(w, p=2, dim=0, maxnorm=self.cfg.out_max_norm))

    def train_metrics(self, mean_loss: float) -> dict[str, float]:
        return {"loss": mean_loss}

    # ----------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        model.eval()
        batches = self.eval_batches[split][: self.cfg.limit_eval_batches]
        nll = torch.zeros((), dtype=torch.float64, device=self.device)
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        count = 0
        for b in batches:
            logits = model(b.tokens, b.mask)  # (B, C)
            nll += F.cross_entropy(logits, b.labels, reduction="sum")
            correct += (logits.argmax(-1) == b.labels).sum()
            count += b.labels.numel()
        count = max(count, 1)
        return {"acc": 100.0 * int(correct) / count, "loss": float(nll) / count}

    def constant_baseline(self) -> ConstantBaseline:
        """Always the training split's majority class: its dev accuracy (%) on the evaluated
        batches, and its training loss, the entropy (nats) of the training label frequencies."""
        counts = torch.bincount(torch.tensor([e.label for e in self.train]),
                                minlength=self.n_classes).double()
        majority = int(counts.argmax())
        labels = torch.cat([b.labels.cpu() for b in
                            self.eval_batches["valid"][: self.cfg.limit_eval_batches]])
        acc = 100.0 * float((labels == majority).double().mean()) if labels.numel() else 0.0
        p = counts[counts > 0] / counts.sum()
        return ConstantBaseline(f"majority class ({majority}) predictor", acc,
                                float(-(p * p.log()).sum()), log_loss=True)

    # --------------------------------------------------------- checkpoints
    def meta(self) -> dict[str, Any]:
        """What rebuilds the model besides the config: the vocabulary (its table is a buffer)."""
        assert self.embeddings is not None
        e = self.embeddings
        cov = e.coverage
        return {"vocab": list(e.vocab.itos), "dim": e.dim, "n_classes": self.n_classes,
                "coverage": {"types": [cov.found_types, cov.total_types],
                             "tokens": [cov.found_tokens, cov.total_tokens]}}

    def result_extra(self) -> dict[str, Any]:
        """The vectors this run used, for ``result.json``: ``vectors.path: null`` names
        whatever the default was at the time, so the file itself is recorded."""
        assert self.embeddings is not None
        cov = self.embeddings.coverage
        return {"vectors": {"file": self.cfg.vectors.path or DEFAULT_VECTORS,
                            "dim": self.embeddings.dim, "cased": cov.cased,
                            "types": [cov.found_types, cov.total_types],
                            "exact_types": cov.exact_types,
                            "tokens": [cov.found_tokens, cov.total_tokens]}}

    def state_dict(self) -> dict[str, Any]:
        return {}  # the batch order is a function of (seed, epoch)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
