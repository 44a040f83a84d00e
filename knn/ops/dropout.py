"""Dropout whose CPU masks are torch's own, drawn several times faster.

Dropout keeps each element with probability q = 1 - p and scales the kept ones
by 1/q (Srivastava et al. 2014)::

    mask ~ Bernoulli(q)^shape,   y = x ⊙ (mask / q)

On CPU, torch draws ``mask`` one element at a time: two 32-bit words of the
default generator's mt19937 per element, u = (w₁·2³² + w₂ mod 2⁵³)·2⁻⁵³,
element = (u < q); about 10 ns per element, a tenth of an SST training step.
:func:`bernoulli` draws the same words from the same generator state, in the
same order, with vectorized loops (``csrc/bernoulli_cpu.cpp``), and writes the
state back. So the masks, everything after them, and every later draw from
the generator are unchanged, bit for bit (``tests/ops/test_dropout.py`` checks
both against torch and against NumPy's MT19937).

:func:`bernoulli` falls back to ``new_empty(shape).bernoulli_(q)`` itself on
CUDA and other devices, for dtypes other than float32/float64, and with the
fused ops off (``KNN_FUSED=0``) or unbuilt; :func:`dropout` leaves
non-contiguous inputs to ``F.dropout``. A torch build may hand CPU Bernoulli
draws to MKL instead (on some Intel CPUs); there our masks, drawn from the
mt19937 stream, follow the same law but differ from torch's.

:func:`dropout` and :class:`Dropout` compute what ``F.dropout`` and
``nn.Dropout`` compute, in the same operations (mask, then ``div_(q)``, then
``x * mask``), so results match to the last bit; on CPU the mask and its ``div_(q)``
are one pass (:func:`scaled_mask`: a kept element is the value ``div_(q)`` gives 1).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from knn.ops import recurrence, usage

_DTYPES = (torch.float32, torch.float64)


def _sampler_applies(like: Tensor) -> bool:
    """Whether the CPU sampler draws for tensors like ``like`` (else torch's ``bernoulli_``)."""
    return like.device.type == "cpu" and like.dtype in _DTYPES and recurrence.fused_available("cpu")


def bernoulli(like: Tensor, shape: tuple[int, ...], q: float) -> Tensor:
    """``like.new_empty(shape).bernoulli_(q)``: 0/1 values in ``like``'s dtype and device."""
    if _sampler_applies(like):
        usage.record("fused_bernoulli")
        return torch.ops.knn_rng_cpu.bernoulli(list(shape), float(q), like.dtype)
    usage.record("torch_bernoulli")
    return like.new_empty(shape).bernoulli_(q)


def scaled_mask(like: Tensor, shape: tuple[int, ...], q: float) -> Tensor:
    """``bernoulli(like, shape, q).div_(q)``, the same values (on CPU in one pass)."""
    if _sampler_applies(like):
        usage.record("fused_bernoulli")
        return torch.ops.knn_rng_cpu.scaled_mask(list(shape), float(q), like.dtype)
    return bernoulli(like, shape, q).div_(q)


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """``F.dropout(x, p, training)``, with the mask from :func:`bernoulli` on CPU."""
    if not training or not 0.0 < p < 1.0 or x.device.type != "cpu" or not x.is_contiguous():
        # torch's own cases (nothing or everything dropped, a bad p, another device), and
        # strided inputs: torch fills their mask in memory order, which only matches ours
        # for contiguous ones
        return F.dropout(x, p, training)
    q = 1.0 - p
    return x * scaled_mask(x, tuple(x.shape), q)


def dropout_mask(x: Tensor, p: float, training: bool = True,
                 shape: tuple[int, ...] | None = None) -> Tensor | None:
    """The scaled mask that :func:`dropout` multiplies a contiguous CPU ``x`` by, drawn as it
    draws it (same generator state before and after); None where it leaves ``x`` as is
    (evaluation, p = 0). With ``shape``: the mask for a tensor of that shape and ``x``'s
    dtype, drawn before that tensor exists. For layers that fuse the product into their own op."""
    if x.device.type != "cpu" or not x.is_contiguous() or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_mask needs a contiguous CPU tensor and 0 <= p < 1, "
                         f"got {x.device.type}, contiguous={x.is_contiguous()}, p={p}")
    if not training or p == 0.0:
        return None
    q = 1.0 - p
    return scaled_mask(x, tuple(x.shape) if shape is None else shape, q)


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same arguments, same repr) whose forward is :func:`dropout`."""

    def forward(self, x: Tensor) -> Tensor:
        if self.inplace:
            return super().forward(x)
        return dropout(x, self.p, self.training)
