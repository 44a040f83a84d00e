"""The SST classifier's two C++ autograd nodes, dispatched at one point.

* The pooled layer node, ``torch.ops.knn_sk_cpu.pooled``: one string-kernel layer, its
  input dropout and its masked mean (the math and the plain composition it equals bit for
  bit, ``pooled_layer_ref``, are in :mod:`knn.layers.string_kernel_pooled`).
* The loss node, ``torch.ops.knn_sk_cpu.classifier_nll``: the classifier's summed training
  loss and its gradients, one half of the batch per thread (the math is in
  ``csrc/classifier_cpu.cpp``; the module it stands for is
  :class:`knn.models.classifier.KernelClassifier`).

Both are C++ sharing ``csrc/pooled_layer.h``, built as the "cpu_sst" part of
:mod:`knn.ops.recurrence`. This module is all the Python they have:

* what they compute, per config field by name: :data:`LAYER_SUPPORTS` for a layer's
  ``StringKernelConfig``, :data:`CLASSIFIER_SUPPORTS` for ``KernelClassifierConfig``. A
  config with a field not declared, or a value not allowed, runs the module instead, so
  the model trained is always the one configured; a test fails while a field is
  undeclared (``tests/models/test_classifier_fused.py``);
* whether they run: :func:`pooled_node_runs` (a layer), :func:`classifier_fuses` (the
  classifier's layers) and :func:`loss_node_runs` (its loss), each recording its choice
  in :mod:`knn.ops.usage`;
* their arguments. A layer is a :class:`NodeLayer`, its drawn masks a :class:`LayerMasks`.
  The loss node takes every layer's parameters, masks and flags as three flat lists; the
  order within a layer is declared once, by name, in C++ (the ``fields`` of
  ``PooledParams``, ``PooledMasks`` and ``PooledFlags``), read here through
  ``torch.ops.knn_sk_cpu.classifier_layout`` (:func:`layout`), and
  :func:`classifier_nll` packs by those names. The pooled node takes the same names as
  keyword arguments.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, NamedTuple

import torch
from torch import Tensor

from knn.ops import linear as linear_ops
from knn.ops import recurrence, usage

#: What the pooled node computes, per field of a layer's ``StringKernelConfig``: the values
#: it supports, or None for every value the config accepts (the node gets them through
#: ``RecurrenceSpec``, the masks and the highway flag).
LAYER_SUPPORTS: dict[str, tuple[Any, ...] | None] = {
    "n": None, "mapping": None, "normalized": None, "output": None, "activation": None,
    "decay": None, "decay_value": None, "highway": None, "rnn_dropout": None,
}

#: What the loss node computes, per field of ``KernelClassifierConfig`` (``kernel``: each
#: layer's config, decided by :data:`LAYER_SUPPORTS`; ``init`` only draws the initial
#: weights).
CLASSIFIER_SUPPORTS: dict[str, tuple[Any, ...] | None] = {
    "name": None, "n_classes": None, "hidden": None, "depth": None, "dropout": None,
    "pooling": ("mean",), "kernel": None, "init": None,
}

#: The kinds of the loss node's per-layer arguments (``classifier_layout``'s argument).
LAYOUT_KINDS = ("params", "masks", "flags")


def supports(cfg: Any, declared: dict[str, tuple[Any, ...] | None]) -> bool:
    """Whether every field of the dataclass ``cfg`` is ``declared`` with its value allowed."""
    values = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    return values.keys() <= declared.keys() and all(
        declared[name] is None or value in declared[name]  # type: ignore[operator]  # None checked
        for name, value in values.items())


def classifier_supported(cfg: Any, layer_cfgs: Sequence[Any]) -> bool:
    """Whether the classifier's config and each of its layers' configs are declared."""
    return supports(cfg, CLASSIFIER_SUPPORTS) and all(
        supports(c, LAYER_SUPPORTS) for c in layer_cfgs)


def fused_applies(x: Tensor) -> bool:
    """Whether the nodes can run for inputs like ``x``: CPU, float32/float64, the fused CPU
    scan and the "cpu_sst" library built (:data:`knn.ops.recurrence.PARTS`).

    Under ``torch.compile`` (``torch.compiler.is_compiling()``) it is False: the nodes' C++
    autograd functions cannot be traced, so the compiled graph has the reference
    composition, whose scan is still the fused one
    (:func:`knn.ops.recurrence.string_kernel_recurrence`) and whose masks are drawn in
    the same order; the same numbers up to float rounding."""
    if torch.compiler.is_compiling():
        return False
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and \
        recurrence.fused_available("cpu_sst")


def pooled_node_runs(layer_supported: bool, x: Tensor) -> bool:
    """Whether a layer's ``forward_pooled`` runs :func:`pooled_layer` (else its reference),
    for a layer whose config is ``layer_supported`` (:func:`supports`, decided once when
    the layer is built) and inputs like ``x``; records the choice."""
    runs = layer_supported and fused_applies(x)
    usage.record("pooled_node" if runs else "pooled_reference")
    return runs


def classifier_fuses(classifier_supported: bool, dropout: float, h: Tensor) -> bool:
    """Whether the classifier runs its layer on ``h`` as the pooled node, and its training
    loss may be :func:`classifier_nll`: a config within the declarations
    (:func:`classifier_supported`), dropout in [0, 1), contiguous inputs, and where the
    nodes run (:func:`fused_applies`)."""
    return (classifier_supported and 0.0 <= dropout < 1.0 and h.is_contiguous()
            and fused_applies(h))


def loss_node_runs(classifier_supported: bool, dropout: float, training: bool,
                   like: Tensor) -> bool:
    """Whether the classifier's loss is :func:`classifier_nll` (else the module's
    ``cross_entropy``): training with gradients on, two or more threads, and
    :func:`classifier_fuses` for its inputs (``like``: the embedding table). At one thread
    the node measured no faster (``docs/performance.md``) and the module keeps its exact
    numbers there. Records the choice."""
    runs = (training and torch.is_grad_enabled() and torch.get_num_threads() > 1
            and classifier_fuses(classifier_supported, dropout, like))
    usage.record("classifier_loss_node" if runs else "classifier_module_loss")
    return runs


def products_on_onednn(x: Tensor, weight: Tensor) -> bool:
    """Whether the nodes' products of ``x`` and ``weight`` go to oneDNN (else aten's BLAS),
    as :func:`knn.ops.linear.linear` would choose; counts the fused scan and that choice in
    :mod:`knn.ops.usage`."""
    onednn = linear_ops.onednn_enabled(x) and weight.dtype == x.dtype
    usage.record("fused_scan")
    usage.record("onednn" if onednn else "aten_linear")
    return onednn


class NodeLayer(NamedTuple):
    """One string-kernel layer as the nodes read it (``PooledParams`` and ``PooledFlags`` of
    ``csrc/pooled_layer.h``), built by ``StringKernelLayer.node_layer``. The tensor fields
    are the parameters under their C++ names (None: the layer has none)."""

    weight: Tensor  # W (K·d, d_in): W^{(1..n)}, then W_λ, W_f, W_p as configured
    weight_h: Tensor | None  # U (d, d) of the (x, h)-gated decay
    decay: Tensor | None  # λ (d,) for constant / learned decay; None when gated
    decay_bias: Tensor | None  # b_λ (d,) of the decay gate
    highway_bias: Tensor | None  # b_f (d,) of the highway gate
    spec: recurrence.RecurrenceSpec
    carry_is_input: bool  # the highway carries the layer's input x̃ itself (no W_p)

    def params(self) -> dict[str, Tensor | None]:
        """The parameters by their C++ names (``PooledParams``)."""
        params = self._asdict()
        del params["spec"], params["carry_is_input"]
        return params

    def flags(self) -> dict[str, int | bool]:
        """The scan's flags (as :func:`knn.ops.recurrence.op_flags`) and ``carry_is_input``,
        by their C++ names (``PooledFlags``)."""
        s = self.spec
        return {"n": s.n, "mult": s.multiplicative, "norm": s.normalized,
                "out_sum": s.output_sum, "act": recurrence.ACTIVATIONS.index(s.activation),
                "highway": s.highway, "carry_is_input": self.carry_is_input}


class LayerMasks(NamedTuple):
    """One layer's dropout masks as the loss node reads them (``PooledMasks``), by their C++
    names; None where none was drawn."""

    in_mask: Tensor | None  # (T, B, d_in): the classifier's dropout of the layer's input
    x_mask: Tensor | None  # (1, B, d_in): the layer's variational input mask
    h_mask: Tensor | None  # (B, d): the layer's variational state mask


@functools.cache
def layout() -> dict[str, tuple[str, ...]]:
    """The loss node's per-layer argument names of each kind (:data:`LAYOUT_KINDS`), in the
    order its lists hold them, as ``csrc/pooled_layer.h`` declares them. Needs the "cpu_sst"
    part built."""
    mod = recurrence.fused_module("cpu_sst")
    return {kind: tuple(mod.classifier_layout(kind)) for kind in LAYOUT_KINDS}


def pooled_layer(x: Tensor, in_mask: Tensor | None, x_mask: Tensor | None, layer: NodeLayer,
                 h_mask: Tensor | None, mask: Tensor) -> tuple[Tensor, Tensor]:
    """``pooled_layer_ref`` as one autograd node, given the layer and its drawn masks:
    (h (T, B, d), z (B, d)) for x (T, B, d_in) and mask (T, B)."""
    mod = recurrence.fused_module("cpu_sst")
    onednn = products_on_onednn(x, layer.weight)
    h, z = mod.pooled(x, in_mask=in_mask, x_mask=x_mask, h_mask=h_mask, mask=mask,
                      onednn=onednn, **layer.params(), **layer.flags())
    return h, z


def classifier_nll(layers: Sequence[NodeLayer], masks: Sequence[LayerMasks], out_weight: Tensor,
                   out_mask: Tensor | None, tokens: Tensor, mask: Tensor, labels: Tensor,
                   table: Tensor) -> Tensor:
    """The loss node: Σ_b -log softmax(logits_b)[labels_b] as one autograd node, for the
    classifier with these layers, their drawn masks, the output weight W_out (C, depth·d)
    and the mask of its input (B, depth·d), on tokens (T, B) of the embedding ``table``
    (V, d_in), mask (T, B) and labels (B,)."""
    empty = table.new_empty(0)

    def given(t: Tensor | None) -> Tensor:  # absent tensors reach the op as 0 elements
        return empty if t is None else t

    names = layout()
    params: list[Tensor] = []
    drawn: list[Tensor] = []
    flags: list[int | bool] = []
    for node, layer_masks in zip(layers, masks):  # each kind in the order C++ declares
        node_params, node_masks, node_flags = node.params(), layer_masks._asdict(), node.flags()
        params += [given(node_params[name]) for name in names["params"]]
        drawn += [given(node_masks[name]) for name in names["masks"]]
        flags += [node_flags[name] for name in names["flags"]]
    return recurrence.fused_module("cpu_sst").classifier_nll(
        [*params, out_weight], tokens, mask, labels, table, [*drawn, given(out_mask)], flags,
        products_on_onednn(table, layers[0].weight))
