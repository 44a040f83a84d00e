"""A string-kernel layer, its input dropout and its masked mean: the math of the pooled
node, and the plain composition it equals.

The SST classifier (:class:`knn.models.classifier.KernelClassifier`) runs each
layer as

    x̃    = (x ⊙ m_in) ⊙ m_x               dropout mask m_in (T, B, d_in), then the
                                           layer's variational mask m_x (1, B, d_in)
    proj = x̃ Wᵀ                            one GEMM (knn.ops.linear.product)
    h    = scan(proj; λ, U, h_mask, mask)  knn.ops.recurrence, from the zero state
    z    = Σ_t h[t] / max(1, L)            the masked mean (h is 0 on padding; L real steps)

As separate PyTorch ops that is about 30 small ops and 10 autograd nodes per
layer, each paying the dispatcher's and autograd's fixed costs on small tensors;
the pooled node is one node whose backward is written out. It is C++
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
:mod:`knn.ops.pooled` is its dispatch point: what it supports, where it runs (CPU,
float32/float64, the op built) and its arguments; elsewhere
:meth:`StringKernelLayer.forward_pooled` takes the reference.
"""
from __future__ import annotations

import torch
from torch import Tensor


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
