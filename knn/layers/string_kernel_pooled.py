"""A string-kernel layer, its input dropout and its masked mean, as one autograd node.

The SST classifier (:class:`knn.models.classifier.KernelClassifier`) runs each
layer as

    x̃    = (x ⊙ m_in) ⊙ m_x               dropout mask m_in (T, B, d_in), then the
                                           layer's variational mask m_x (1, B, d_in)
    proj = x̃ Wᵀ                            one GEMM (knn.ops.linear.product)
    h    = scan(proj; λ, U, h_mask, mask)  knn.ops.recurrence, from the zero state
    z    = Σ_t h[t] / max(1, L)            the masked mean (h is 0 on padding; L real steps)

As separate PyTorch ops that is about 30 small ops and 10 autograd nodes per
layer; here it is one node whose backward is written out, which took an SST step
at one thread from 14.3 to 13.3 ms (``experiments/bench/sst_epoch/2026-12-01/fused_layer_ab.json``):

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

import torch
from torch import Tensor

from knn.ops import linear as linear_ops
from knn.ops import recurrence
from knn.ops import usage


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


def fused_applies(x: Tensor) -> bool:
    """Whether :func:`pooled_layer` runs for inputs like ``x`` (else: the reference)."""
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and \
        recurrence.fused_available("cpu")


class _PooledLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, in_mask, x_mask, weight, weight_h, decay, decay_bias, highway_bias,
                h_mask, mask, spec, carry_is_input):
        mod = recurrence._fused_modules["cpu"]
        T, B, d_in = x.shape
        d = weight.shape[0] // spec.blocks(decay is None, spec.highway and not carry_is_input)
        xt = x if in_mask is None else x * in_mask
        if x_mask is not None:
            xt = xt * x_mask
        proj = linear_ops.product(xt.reshape(T * B, d_in), weight).view(T, B, -1, d)
        zeros = x.new_zeros(d)
        gate_bias = torch.stack([zeros if decay_bias is None else decay_bias,
                                 zeros if highway_bias is None else highway_bias])
        c0, h0 = x.new_zeros(B, spec.n, d), x.new_zeros(B, d)
        empty = x.new_empty(0)
        mask_f = mask.to(x.dtype)
        carry = xt if carry_is_input else None
        flags = recurrence.op_flags(spec)
        h, c_all, h_all, lam_all = mod.forward(
            proj, empty if carry is None else carry, empty if decay is None else decay,
            gate_bias, empty if weight_h is None else weight_h, c0, h0, mask_f,
            empty if h_mask is None else h_mask, *flags)
        usage.record("fused_scan")
        lengths = _lengths(mask, x.dtype)
        z = h.sum(0) / lengths  # h is 0 on padding, so this is the masked mean
        ctx.save_for_backward(xt, in_mask, x_mask, weight, weight_h, decay, proj, gate_bias,
                              c0, h0, mask_f, h_mask, c_all, h_all, lam_all, lengths)
        ctx.flags, ctx.carry_is_input = flags, carry_is_input
        return h, z

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_h, d_z):
        (xt, in_mask, x_mask, weight, weight_h, decay, proj, gate_bias,
         c0, h0, mask_f, h_mask, c_all, h_all, lam_all, lengths) = ctx.saved_tensors
        mod = recurrence._fused_modules["cpu"]
        T, B, d_in = xt.shape
        # dL/dh[t] over real steps: the next layer's share plus the mean's; the scan
        # never reads padded steps' gradients.
        g = (d_z / lengths).expand(T, B, -1)
        if d_h is not None:
            g = d_h + g
        empty = xt.new_empty(0)
        d_proj, d_carry, d_decay, d_bias, d_wh, _, _ = mod.backward(
            g.contiguous(), torch.zeros_like(c0), torch.zeros_like(h0), proj,
            xt if ctx.carry_is_input else empty, empty if decay is None else decay, gate_bias,
            empty if weight_h is None else weight_h, c0, h0, mask_f,
            empty if h_mask is None else h_mask, c_all, h_all, lam_all, *ctx.flags)
        need_x = ctx.needs_input_grad[0]
        dxt, d_weight = linear_ops.product_grads(xt.reshape(T * B, d_in), weight,
                                                 d_proj.view(T * B, -1), need_x=need_x)
        dx = None
        if need_x:
            dx = dxt.view(T, B, d_in)
            if ctx.carry_is_input:
                dx = dx + d_carry
            if x_mask is not None:
                dx = dx * x_mask
            if in_mask is not None:
                dx = dx * in_mask
        return (dx, None, None, d_weight, d_wh if weight_h is not None else None,
                d_decay if decay is not None and ctx.needs_input_grad[5] else None,
                d_bias[0] if ctx.needs_input_grad[6] else None,
                d_bias[1] if ctx.needs_input_grad[7] else None,
                None, None, None, None)


def pooled_layer(x: Tensor, in_mask: Tensor | None, x_mask: Tensor | None, weight: Tensor,
                 weight_h: Tensor | None, decay: Tensor | None, decay_bias: Tensor | None,
                 highway_bias: Tensor | None, h_mask: Tensor | None, mask: Tensor,
                 spec: recurrence.RecurrenceSpec, carry_is_input: bool) -> tuple[Tensor, Tensor]:
    """:func:`pooled_layer_ref` as one autograd node, given the layer's tensors and its drawn
    masks (:meth:`knn.layers.string_kernel.StringKernelLayer.forward_pooled` passes them)."""
    return _PooledLayer.apply(x, in_mask, x_mask, weight, weight_h, decay, decay_bias, highway_bias,
                              h_mask, mask, spec, carry_is_input)
