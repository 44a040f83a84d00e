"""Word-level language models for PTB (paper Section 5.1, Table 1).

Both models share one harness and differ only in the recurrent encoder::

    ids (T,B) -> Embedding (V,d) -> dropout -> encoder (depth layers, width d = hidden)
              -> dropout -> Linear (d -> V), weight tied to the embedding -> logits (T,B,V)

``KernelLM`` uses the string-kernel network, its layers configured by
``cfg.kernel`` (:class:`StringKernelConfig`; the paper's 5m/20m models: n=1,
normalized, gated decay, highway); ``LSTMLM`` is the baseline with ``nn.LSTM`` in the
same harness, so the two differ in the encoder alone. Dropout is applied
where the authors apply it: on the embeddings and on the top layer's output;
``rnn_dropout`` (variational, inside the kernel layers) is the kernel
network's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn

from knn.layers.string_kernel import (
    KernelState,
    StringKernelConfig,
    StringKernelLayer,
    StringKernelNet,
)
from knn.ops.dropout import Dropout
from knn.ops.linear import Linear

LSTMState = tuple[Tensor, Tensor]  # (h, c), each (depth, B, d)
# A learned decay starts at the configured λ (the layer sets its logit), not 0.
_KEEP_INIT = ("decay_logit",)
INITS = ("authors",)  # besides None: this library's default


@dataclass
class KernelLMConfig:
    """KernelLM hyper-parameters: the harness's, and its layers' (``kernel``)."""

    name: str = "knn_lm"
    hidden: int = 355  # embedding and hidden width (tying needs them equal)
    depth: int = 3
    dropout: float = 0.5  # on embeddings and on the top layer's output
    tie: bool = True
    kernel: StringKernelConfig = field(default_factory=StringKernelConfig)
    # None: every matrix ±√(3/d), as the authors' PyTorch lm/train_knn.py; "authors": the
    # gated_xh decay gate drawn as their Theano lm code draws it (KernelLM.init_as_authors).
    init: str | None = None

    def __post_init__(self) -> None:
        if self.init is not None and self.init not in INITS:
            raise ValueError(f"init must be null or one of {INITS}, got {self.init!r}")
        if self.init == "authors" and self.kernel.decay != "gated_xh":
            raise ValueError(f"init 'authors' redraws the gate of decay 'gated_xh' only; decay "
                             f"{self.kernel.decay!r} initialises as with init null")


@dataclass
class LSTMLMConfig:
    """LSTMLM hyper-parameters (the harness's only)."""

    name: str = "lstm_lm"
    hidden: int = 650
    depth: int = 2
    dropout: float = 0.5
    tie: bool = True


class _TiedLM(nn.Module):
    """Embedding -> dropout -> ``self.encode`` -> dropout -> tied softmax layer.

    The recurrent state goes to checkpoints as ``state_to_tensors(state)``, a list of
    tensors whose batch (column) dimension is ``state_batch_dim``.
    """

    state_batch_dim: ClassVar[int]

    def __init__(self, vocab_size: int, d: int, dropout: float, tie: bool) -> None:
        super().__init__()
        self.d = d
        self.embedding = nn.Embedding(vocab_size, d)
        self.drop = Dropout(dropout)
        # knn.ops.linear: the faster CPU library for both models (oneDNN with AVX-512, MKL without).
        self.decoder = Linear(d, vocab_size)
        if tie:
            # Weight tying: Press & Wolf (2017) "Using the Output Embedding to
            # Improve Language Models"; Inan et al. (2017) "Tying Word Vectors
            # and Word Classifiers". The paper's Table 1 follows Press & Wolf.
            self.decoder.weight = self.embedding.weight

    def encode(self, x: Tensor, state: Any) -> tuple[Tensor, Any]:
        raise NotImplementedError

    def forward(self, ids: Tensor, state: object = None) -> tuple[Tensor, object]:
        """``ids`` (T,B) -> logits (T,B,V) and the encoder's final state."""
        x = self.drop(self.embedding(ids))  # (T,B,d)
        h, state = self.encode(x, state)  # (T,B,d)
        return self.decoder(self.drop(h)), state  # (T,B,V)

    def reset_parameters(self, keep: tuple[str, ...] = ()) -> None:
        """Matrices U(±sqrt(3/d)), vectors zero: the init of the authors' PyTorch
        ``lm/train_knn.py``, and of their Theano ``nn`` for every weight but one (see
        :meth:`KernelLM.init_as_authors`).

        Parameters whose name contains one of ``keep`` are left as their
        module initialised them (e.g. a learned decay that starts at a set λ).
        """
        bound = math.sqrt(3.0 / self.d)
        for name, p in self.named_parameters():
            if any(k in name for k in keep):
                continue
            with torch.no_grad():
                if p.dim() > 1:
                    p.uniform_(-bound, bound)
                else:
                    p.zero_()


class KernelLM(_TiedLM):
    """Language model whose encoder is a :class:`StringKernelNet`."""

    state_batch_dim: ClassVar[int] = 0  # c (B,n,d), h (B,d)

    def __init__(self, cfg: KernelLMConfig, vocab_size: int) -> None:
        super().__init__(vocab_size, cfg.hidden, cfg.dropout, cfg.tie)
        self.rnn = StringKernelNet(cfg.hidden, cfg.hidden, cfg.depth, cfg.kernel)
        self.reset_parameters(keep=_KEEP_INIT)
        if cfg.init == "authors":
            self.init_as_authors()

    def init_as_authors(self) -> None:
        """Redraw each layer's decay gate W_λ, U_λ as one [x; h] block, ±√(3/(2d))
        (:meth:`StringKernelLayer.init_gate_jointly`), as the authors' Theano ``lm`` code
        draws it (its ``RecurrentLayer``; the gated_xh cell is that code's);
        :meth:`reset_parameters` gives each part ±√(3/d). Their PyTorch script's cell
        gates on x alone and draws every matrix ±√(3/d)."""
        for layer in cast("Iterable[StringKernelLayer]", self.rnn.layers):
            layer.init_gate_jointly()

    def encode(
        self, x: Tensor, state: list[KernelState] | None
    ) -> tuple[Tensor, list[KernelState]]:
        h, state, _ = self.rnn(x, state)  # (T,B,d), one KernelState per layer
        return h, state

    @staticmethod
    def state_to_tensors(state: list[KernelState]) -> list[Tensor]:
        """Flatten for a checkpoint: [c_1, h_1, c_2, h_2, ...]."""
        return [t for s in state for t in (s.c, s.h)]

    @staticmethod
    def state_from_tensors(tensors: list[Tensor]) -> list[KernelState]:
        return [KernelState(c, h) for c, h in zip(tensors[0::2], tensors[1::2])]


class LSTMLM(_TiedLM):
    """The LSTM baseline in the same harness (``nn.LSTM``, tied, same dropout)."""

    state_batch_dim: ClassVar[int] = 1  # h, c: (depth,B,d)

    def __init__(self, cfg: LSTMLMConfig, vocab_size: int) -> None:
        super().__init__(vocab_size, cfg.hidden, cfg.dropout, cfg.tie)
        self.rnn = nn.LSTM(cfg.hidden, cfg.hidden, cfg.depth)
        self.reset_parameters()

    def encode(self, x: Tensor, state: LSTMState | None) -> tuple[Tensor, LSTMState]:
        return self.rnn(x, state)

    @staticmethod
    def state_to_tensors(state: LSTMState) -> list[Tensor]:
        return list(state)

    @staticmethod
    def state_from_tensors(tensors: list[Tensor]) -> LSTMState:
        return tensors[0], tensors[1]
