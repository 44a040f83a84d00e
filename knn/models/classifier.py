"""Sentence classifiers for SST (paper Section 5.2, Table 2) over fixed word vectors.

All three models share the input: a frozen, pretrained (V, d_in) table (the
paper normalises GloVe vectors to unit length and fixes them; the Bi-LSTM can
train its copy instead, as Tai et al. 2015 do). A frozen table is a
buffer, not a parameter, so ``parameters()`` are exactly the trained ones
and an optimizer's weight decay never touches it; it is still saved in the
``state_dict``. Inputs are time-major like the recurrent layers:
``tokens`` (T, B) long and ``mask`` (T, B) bool, True on real tokens, with
padding after each sentence. ``forward`` returns logits (B, C).

``KernelClassifier`` (the paper's model, the authors' ``sst/main.py``)::

    tokens -> E (T,B,d_in) -> dropout -> layer 1 -> h1 (T,B,d) -> dropout -> layer 2 -> h2 ...
    z = [mean_t h1 ; mean_t h2 ; mean_t h3]        (B, depth·d), means over real tokens only
    logits = W dropout(z)                           (B, C), no bias (as the authors)

Each layer is a :class:`StringKernelLayer` with n = 2, multiplicative
mapping, normalized aggregation (a_t = 1 - λ_t) and h = σ(c_1 + c_2) (the
authors' ``MKernelNN`` with ``combine_c``). Decay is gated on x[t] and
h[t-1] (Table 2, "gated λ") or constant λ = 0.5 (the other row). The layers
are stacked here rather than through :class:`StringKernelNet` because the
authors drop out between layers, and put highway connections (when on) on
layers 2.. only. With d_in = 300, d = 200, depth 3, 5 classes, gated decay
and no highway there are 543,600 trained parameters, the authors' "around
540k" (with highway on layers 2-3: 624,000; so their runs had it off).
Training on CPU with two or more threads, :meth:`KernelClassifier.nll_sum`
gives the loss as one C++ node that also computes its gradients, one half of
the batch per thread (``knn/ops/csrc/classifier_cpu.cpp``): the same loss and
gradients, up to the order of the sums over examples. :mod:`knn.ops.pooled` decides
where that node and the layers' pooled nodes run, and which configs they support.

``KimCNN`` (Kim 2014, CNN-static): widths 3, 4, 5 × 100 filters, ReLU,
max over time, dropout 0.5, linear. ``BiLSTMClassifier``: one bidirectional
``nn.LSTM`` layer (or one LSTM read both ways, Tai et al.'s code), masked mean
of the outputs or the two final states.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import cast

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from knn.layers.string_kernel import StringKernelConfig, StringKernelLayer
from knn.layers.string_kernel_pooled import masked_mean
from knn.ops import pooled as pooled_ops
from knn.ops.dropout import Dropout, dropout_mask

POOLINGS = ("mean", "last")
INITS = ("authors",)  # besides None: this library's default


def _sst_kernel() -> StringKernelConfig:
    """The authors' SST layers: n = 2, h = relu(c_1 + c_2), gated decay, no highway,
    rnn dropout 0.2 (their fine-grained setting; 0.1 for binary)."""
    return StringKernelConfig(n=2, output="sum", activation="relu", highway=False, rnn_dropout=0.2)


@dataclass
class KernelClassifierConfig:
    """Kernel NN classifier hyper-parameters: the harness's, and its layers' (``kernel``).

    Defaults are the paper's fine-grained setting (authors' README: dropout
    0.35, rnn dropout 0.2; 0.1 for binary). ``activation`` "relu" is the
    default of the authors' ``sst/options.py``, which their README does not
    override. ``kernel.highway`` applies to layers 2..depth (the authors' rule).
    """

    name: str = "knn_sst"
    n_classes: int = 5
    hidden: int = 200
    depth: int = 3
    dropout: float = 0.35  # on embeddings, between layers, on the pooled features
    pooling: str = "mean"  # per-layer masked mean over time, or the last real state
    kernel: StringKernelConfig = field(default_factory=_sst_kernel)
    # None: each weight block from its own fan-in, torch's default for the output layer;
    # "authors": as the authors' code draws them (see KernelClassifier.init_as_authors).
    init: str | None = None

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.init is not None and self.init not in INITS:
            raise ValueError(f"init must be null or one of {INITS}, got {self.init!r}")
        for name in ("n_classes", "hidden", "depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def layer_kernel(self, layer: int) -> StringKernelConfig:
        """Layer ``layer``'s (0-based) config: ``kernel``, with highway only above layer 0."""
        return replace(self.kernel, highway=self.kernel.highway and layer > 0)


@dataclass
class KimCNNConfig:
    """Kim (2014) CNN hyper-parameters (CNN-static: fixed vectors)."""

    name: str = "kim_cnn"
    n_classes: int = 5
    widths: tuple[int, ...] = (3, 4, 5)
    hidden: int = 100  # feature maps (filters) per width
    dropout: float = 0.5  # on the pooled features


@dataclass
class BiLSTMConfig:
    """Bidirectional LSTM baseline (Tai et al. 2015 use d = 150 per direction, one layer)."""

    name: str = "bilstm"
    n_classes: int = 5
    hidden: int = 150  # per direction
    depth: int = 1  # stacked bidirectional layers
    dropout: float = 0.5  # on the pooled features (and on embeddings: input_dropout)
    input_dropout: float | None = None  # on the embeddings; None: dropout (Tai et al.: 0)
    pooling: str = "mean"  # masked mean of [fwd; bwd] outputs, or "last": final states
    # One LSTM read forwards and backwards (Tai et al.'s code shares the two directions'
    # weights); needs pooling "last".
    tied: bool = False
    finetune_embeddings: bool = False  # train the input vectors (Tai et al.), else fixed

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.tied and self.pooling != "last":
            raise ValueError("tied=true reads the final states of both directions: "
                             f"it needs pooling='last', got {self.pooling!r}")


# --------------------------------------------------------------------------- #
# Shared pieces
# --------------------------------------------------------------------------- #


def last_real(h: Tensor, mask: Tensor) -> Tensor:
    """h at each column's last real step: (T, B, d) -> (B, d)."""
    last = (mask.long().sum(0) - 1).clamp_min(0)  # (B,)
    return h[last, torch.arange(h.shape[1], device=h.device)]


class _FixedEmbedding(nn.Module):
    """A frozen (V, d) lookup table held as a buffer."""

    weight: Tensor

    def __init__(self, vectors: Tensor) -> None:
        super().__init__()
        if vectors.dim() != 2:
            raise ValueError(f"vectors must be (V, d), got shape {tuple(vectors.shape)}")
        self.register_buffer("weight", vectors.detach().clone())

    def forward(self, tokens: Tensor) -> Tensor:
        return nn.functional.embedding(tokens, self.weight)  # (..., d)


# --------------------------------------------------------------------------- #
# Models
# --------------------------------------------------------------------------- #


class KernelClassifier(nn.Module):
    """The paper's SST model; see the module docstring for the diagram."""

    def __init__(self, cfg: KernelClassifierConfig, vectors: Tensor) -> None:
        """``vectors``: fixed (V, d_in) table (zeros of that shape before loading a checkpoint)."""
        super().__init__()
        self.cfg = cfg
        # whether the C++ nodes compute this config (knn.ops.pooled's declarations), decided
        # once: the config does not change
        self.node_supported = pooled_ops.classifier_supported(
            cfg, [cfg.layer_kernel(i) for i in range(cfg.depth)])
        self.embedding = _FixedEmbedding(vectors)
        d_in = vectors.shape[1]
        self.layers = nn.ModuleList(
            StringKernelLayer(d_in if l == 0 else cfg.hidden, cfg.hidden, cfg.layer_kernel(l))
            for l in range(cfg.depth)
        )
        self.drop = Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.depth * cfg.hidden, cfg.n_classes, bias=False)
        if cfg.init == "authors":
            self.init_as_authors()

    def init_as_authors(self) -> None:
        """Redraw the two weights whose initial scale the authors' ``nn/initialization.py``
        sets differently: each gated layer's W_λ and U_λ as one [x; h] block, ±√(3/(d_in + d))
        (:meth:`StringKernelLayer.init_gate_jointly`), and the output W, ±√(3/(depth·d))
        instead of torch's ±1/√(depth·d). Every other weight already matches theirs."""
        for layer in cast("Iterable[StringKernelLayer]", self.layers):
            if layer.weight_h is not None:
                layer.init_gate_jointly()
        bound = math.sqrt(3.0 / self.out.in_features)
        nn.init.uniform_(self.out.weight, -bound, bound)

    def features(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """Concatenated per-layer summaries z (B, depth·d), before the output dropout."""
        h = self.embedding(tokens)  # (T, B, d_in)
        pooled = []
        for layer in cast("Iterable[StringKernelLayer]", self.layers):
            if pooled_ops.classifier_fuses(self.node_supported, self.drop.p, h):
                # dropout, layer and mean as one autograd node: the same numbers, fewer ops
                h, z = layer.forward_pooled(h, mask, dropout_mask(h, self.drop.p, self.training))
            else:
                h, _ = layer(self.drop(h), mask=mask)  # (T, B, d); padded steps are 0
                z = (masked_mean if self.cfg.pooling == "mean" else last_real)(h, mask)
            pooled.append(z)  # summaries see h before dropout, as the authors'
        return torch.cat(pooled, dim=-1)  # (B, depth·d)

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """tokens (T, B) long, mask (T, B) bool -> logits (B, C)."""
        return self.out(self.drop(self.features(tokens, mask)))

    def nll_sum(self, tokens: Tensor, mask: Tensor, labels: Tensor) -> Tensor:
        """Σ_b -log softmax(forward(tokens, mask)_b)[labels_b], the training loss's sum.

        Training on the fused CPU path with two or more threads
        (:func:`knn.ops.pooled.loss_node_runs` decides), it is :meth:`fused_nll_sum`.
        Elsewhere it is ``cross_entropy(forward(tokens, mask), labels, reduction="sum")``.
        """
        if pooled_ops.loss_node_runs(self.node_supported, self.drop.p, self.training,
                                     self.embedding.weight):
            return self.fused_nll_sum(tokens, mask, labels)
        return F.cross_entropy(self(tokens, mask), labels, reduction="sum")

    def fused_nll_sum(self, tokens: Tensor, mask: Tensor, labels: Tensor) -> Tensor:
        """:meth:`nll_sum` as one autograd node that computes the loss and its gradients at
        once, one half of the batch per thread (``knn/ops/csrc/classifier_cpu.cpp``; with one
        thread the halves run one after the other, with the same numbers). Its dropout
        masks are drawn here in the order :meth:`forward` draws them: the same generator
        stream, and the module's loss and gradients up to the order of the sums over
        examples. Needs the fused CPU ops (:func:`knn.ops.pooled.classifier_fuses`)."""
        like = self.embedding.weight
        T, B = tokens.shape
        p = self.drop.p
        nodes, masks = [], []
        for layer in cast("Iterable[StringKernelLayer]", self.layers):
            nodes.append(layer.node_layer())
            in_mask = dropout_mask(like, p, self.training, shape=(T, B, layer.d_in))
            masks.append(pooled_ops.LayerMasks(in_mask, *layer.variational_masks(like, B)))
        out_mask = dropout_mask(like, p, self.training, shape=(B, self.out.in_features))
        return pooled_ops.classifier_nll(nodes, masks, self.out.weight, out_mask, tokens, mask,
                                         labels, like)


class KimCNN(nn.Module):
    """Kim (2014) CNN over fixed vectors, with padding masked out of the max.

    Each sentence is zero-padded by w-1 on both sides (Kim's wide
    convolution), so a width-w filter has L + w - 1 windows, each touching a
    real token; windows lying wholly in batch padding are set to -inf before
    the max, so a sentence's features do not depend on its batch.
    """

    def __init__(self, cfg: KimCNNConfig, vectors: Tensor) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding = _FixedEmbedding(vectors)
        d_in = vectors.shape[1]
        self.convs = nn.ModuleList(
            nn.Conv1d(d_in, cfg.hidden, w, padding=w - 1) for w in cfg.widths
        )
        self.drop = Dropout(cfg.dropout)
        self.out = nn.Linear(len(cfg.widths) * cfg.hidden, cfg.n_classes)

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """tokens (T, B) long, mask (T, B) bool -> logits (B, C)."""
        x = self.embedding(tokens) * mask.unsqueeze(-1).to(self.embedding.weight.dtype)
        x = x.permute(1, 2, 0)  # (B, d_in, T): padding columns are exact zeros
        lengths = mask.long().sum(0)  # (B,)
        pooled = []
        for conv, w in zip(self.convs, self.cfg.widths):
            a = torch.relu(conv(x))  # (B, F, T + w - 1)
            pos = torch.arange(a.shape[-1], device=a.device)
            valid = pos.unsqueeze(0) < (lengths + w - 1).unsqueeze(1)  # (B, T + w - 1)
            pooled.append(a.masked_fill(~valid.unsqueeze(1), float("-inf")).amax(-1))  # (B, F)
        return self.out(self.drop(torch.cat(pooled, dim=-1)))


def reverse_padded(x: Tensor, mask: Tensor) -> Tensor:
    """Each column's real steps in reverse order, padding left in place: (T, B, d) -> (T, B, d)."""
    lengths = mask.long().sum(0)  # (B,)
    t = torch.arange(x.shape[0], device=x.device).unsqueeze(1)  # (T, 1)
    index = torch.where(t < lengths, lengths - 1 - t, t)  # (T, B)
    return x.gather(0, index.unsqueeze(-1).expand_as(x))


class BiLSTMClassifier(nn.Module):
    """Bidirectional LSTM over word vectors; sequences are packed so padding is skipped.

    ``z = [h_fwd[L]; h_bwd[1]]`` (pooling "last") or the masked mean of ``[h_fwd; h_bwd]``
    over time, then ``logits = W dropout(z) + b``. With ``tied``, one LSTM gives both
    directions: ``h_bwd`` is that LSTM's final state on the reversed sentence (Tai et
    al.'s code). With ``finetune_embeddings`` the vectors are a trained parameter.
    """

    def __init__(self, cfg: BiLSTMConfig, vectors: Tensor) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding = (nn.Embedding.from_pretrained(vectors.detach().clone(), freeze=False)
                          if cfg.finetune_embeddings else _FixedEmbedding(vectors))
        self.rnn = nn.LSTM(vectors.shape[1], cfg.hidden, cfg.depth, bidirectional=not cfg.tied)
        self.drop = Dropout(cfg.dropout)
        self.drop_input = Dropout(
            cfg.dropout if cfg.input_dropout is None else cfg.input_dropout)
        self.out = nn.Linear(2 * cfg.hidden, cfg.n_classes)

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """tokens (T, B) long, mask (T, B) bool -> logits (B, C)."""
        x = self.drop_input(self.embedding(tokens))  # (T, B, d_in)
        lengths = mask.long().sum(0).cpu()
        if self.cfg.tied:
            _, (h_fwd, _) = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
            _, (h_bwd, _) = self.rnn(pack_padded_sequence(reverse_padded(x, mask), lengths,
                                                          enforce_sorted=False))
            return self.out(self.drop(torch.cat([h_fwd[-1], h_bwd[-1]], dim=-1)))
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, (h_n, _) = self.rnn(packed)  # h_n (2·depth, B, d): final fwd and bwd states per layer
        if self.cfg.pooling == "mean":
            h, _ = pad_packed_sequence(out, total_length=tokens.shape[0])  # (T, B, 2d), pads 0
            z = masked_mean(h, mask)
        else:
            z = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2d), the top layer's
        return self.out(self.drop(z))
