"""A string-kernel layer, its input dropout and its masked mean, as one autograd node.

The SST classifier (:class:`knn.models.classifier.KernelClassifier`) runs each
layer as

    x̃    = (x ⊙ m_in) ⊙ m_x               dropout mask m_in (T, B, d_in), then the
                                           layer's variational mask m_x (1, B, d_in)
    proj = x̃ Wᵀ                            one GEMM (knn.ops.linear.product)
    h    = scan(proj; λ, U, h_mask, mask)  knn.ops.recurrence, from the zero state
    z    = Σ_t h[t] / max(1, L)            the masked mean (h is 0 on padding; L real steps)

As separate PyTorch ops that is about 30 small ops and 10 autograd nodes per
layer, each paying the dispatcher's and autograd's fixed costs on small tensors;
here it is one node whose backward is written out. The node is C++
(``torch.ops.knn_sk_cpu.pooled``, ``knn/ops/csrc/string_kernel_pooled_cpu.cpp``), so
that with two or more threads its products run side by side on them
(``docs/performance.md`` says which library runs each); its forward and backward are
plain C++ functions (``csrc/pooled_layer.h``) that the classifier's loss node calls
too. Its backward:

    g      = dL/dh + (dL/dz / max(1, L))      (broadcast over t; padded steps are ignored)
    d proj = scan backward of g               (with dλ, dU, d biases, d carry)
    dW     = d projᵀ x̃,    dx̃ = d proj W (+ d carry when x̃ is the highway's carry)
    dx     = (dx̃ ⊙ m_x) ⊙ m_in

Every product and elementwise op is the one autograd runs for the composition, in
the same order, so values and gradients are bit for bit those of
:func:`pooled_layer_ref`, the plain composition (``tests/layers/test_string_kernel_pooled.py``).
It runs where the fused CPU scan does (CPU, float32/float64, the op built); elsewhere
:meth:`StringKernelLayer.forward_pooled` takes the reference.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, NamedTuple

import torch
from torch import Tensor

from knn.ops import linear as linear_ops
from knn.ops import recurrence, usage


def _lengths(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """max(1, L) per column as (B, 1): masked_mean's denominator."""
    return mask.unsqueeze(-1).to(dtype).sum(0).clamp_min(1.0)


def masked_mean(h: Tensor, mask: Tensor) -> Tensor:
    """Mean of h (T, B, d) over the real steps of each column -> (B, d)."""
    return (h * mask.unsqueeze(-1).to(h.dtype)).sum(0) / _lengths(mask, h.dtype)


def pooled_layer_ref(layer, x: Tensor, mask: Tensor, in_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The composition itself: ``layer(x ⊙ m_in)`` from the zero state and its masked mean."""
    h, _ = layer(x if in_mask is None else x * in_mask, mask=mask)
    return h, masked_mean(h, mask)


#: What the node computes, per field of the layer's ``StringKernelConfig``: the values it
#: supports, or None for every value the config accepts (the node gets them through
#: ``RecurrenceSpec``, the masks and the highway flag). A config with a field not named
#: here, one added after the node was written, makes the node stand aside and the
#: reference run, until the node computes the field and it is declared here; a test fails
#: while a field is undeclared (tests/layers/test_string_kernel_pooled.py).
NODE_SUPPORTS: dict[str, tuple[Any, ...] | None] = {
    "n": None, "mapping": None, "normalized": None, "output": None, "activation": None,
    "decay": None, "decay_value": None, "highway": None, "rnn_dropout": None,
}


def supports(cfg: Any, declared: dict[str, tuple[Any, ...] | None] = NODE_SUPPORTS) -> bool:
    """Whether every field of the dataclass ``cfg`` is ``declared`` with its value allowed."""
    values = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    return values.keys() <= declared.keys() and all(
        declared[name] is None or value in declared[name]  # type: ignore[operator]  # None checked
        for name, value in values.items())


def fused_applies(x: Tensor) -> bool:
    """Whether :func:`pooled_layer` runs for inputs like ``x`` (else: the reference); the
    dispatch point of the pooled node (the SST classifier asks it too), for a layer whose
    config the node supports (:func:`supports`, decided once when the layer is built:
    ``StringKernelLayer.pooled_node_supported``).

    Support set: CPU, float32/float64, the fused CPU scan and the SST nodes' library built
    (:data:`knn.ops.recurrence.PARTS`: "cpu_sst"). Under ``torch.compile``
    (``torch.compiler.is_compiling()``) it is False: the node's C++ autograd function
    cannot be traced, so the compiled graph has :func:`pooled_layer_ref`, whose scan is
    still the fused one (:func:`knn.ops.recurrence.string_kernel_recurrence`) and whose
    masks are drawn in the same order; the same numbers up to float rounding."""
    if torch.compiler.is_compiling():
        return False
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and \
        recurrence.fused_available("cpu_sst")


def products_on_onednn(x: Tensor, weight: Tensor) -> bool:
    """Whether the fused nodes' products of ``x`` and ``weight`` go to oneDNN (else aten's
    BLAS), as :func:`knn.ops.linear.linear` would choose; counts the fused scan and that
    choice in :mod:`knn.ops.usage`."""
    onednn = linear_ops.onednn_enabled(x) and weight.dtype == x.dtype
    usage.record("fused_scan")
    usage.record("onednn" if onednn else "aten_linear")
    return onednn


class NodeLayer(NamedTuple):
    """One layer as the C++ nodes read it (``PooledParams`` and ``PooledFlags`` of
    ``csrc/pooled_layer.h``), built by :meth:`StringKernelLayer.node_layer`: the node's one
    description of a layer, so its argument order is written down once, here.

    ``params``: W (K·d, d_in), U (d, d) or None, the decay (λ or the gate's weights) or
    None, the decay gate's bias or None, the highway gate's bias or None, in this order.
    ``flags``: :func:`knn.ops.recurrence.op_flags` of the layer's ``RecurrenceSpec``, then
    whether the highway carries the layer's input x̃ itself (no projection of it)."""

    weight: Tensor
    weight_h: Tensor | None
    decay: Tensor | None
    decay_bias: Tensor | None
    highway_bias: Tensor | None
    spec: recurrence.RecurrenceSpec
    carry_is_input: bool

    def params(self) -> list[Tensor | None]:
        return [self.weight, self.weight_h, self.decay, self.decay_bias, self.highway_bias]

    def flags(self) -> list:
        return [*recurrence.op_flags(self.spec), self.carry_is_input]


def pooled_layer(x: Tensor, in_mask: Tensor | None, x_mask: Tensor | None, layer: NodeLayer,
                 h_mask: Tensor | None, mask: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`pooled_layer_ref` as one autograd node, given the layer's description and its
    drawn masks (:meth:`knn.layers.string_kernel.StringKernelLayer.forward_pooled` passes
    them)."""
    mod = recurrence.fused_module("cpu_sst")
    onednn = products_on_onednn(x, layer.weight)
    w, w_h, decay, decay_bias, highway_bias = layer.params()
    h, z = mod.pooled(x, in_mask, x_mask, w, w_h, decay, decay_bias, highway_bias,
                      h_mask, mask, *layer.flags(), onednn)
    return h, z
