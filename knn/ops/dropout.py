"""Dropout whose CPU masks are torch's own, drawn several times faster.

Dropout keeps each element with probability q = 1 - p and scales the kept ones
by 1/q (Srivastava et al. 2014)::

    mask ~ Bernoulli(q)^shape,   y = x ⊙ (mask / q)

On CPU, torch draws ``mask`` one element at a time: two 32-bit words of the
default generator's mt19937 per element, u = (w₁·2³² + w₂ mod 2⁵³)·2⁻⁵³,
element = (u < q), about 10 ns per element (docs/performance.md).
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

Under ``torch.compile`` each draw is the custom op ``torch.ops.knn.mask``, which draws
what eager draws, in eager's order (:func:`_sampler_applies` says how).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from knn.ops import recurrence, usage

_DTYPES = (torch.float32, torch.float64)


def _sampler_applies(like: Tensor) -> bool:
    """Whether the CPU sampler draws for tensors like ``like`` (else torch's ``bernoulli_``):
    the dispatch point of :func:`bernoulli` and :func:`scaled_mask`.

    Support set: CPU tensors of float32 or float64, the fused CPU ops built.

    Under ``torch.compile`` the same choice is made when the graph is traced, and every
    draw of :func:`bernoulli` / :func:`scaled_mask` (the sampler's and torch's
    ``bernoulli_`` alike) runs as the custom op ``torch.ops.knn.mask`` (:func:`_mask_op`):
    one opaque node with a fake implementation that draws, at run time, what eager draws
    from the default generator, in eager's order. A compiled model's masks are eager's,
    bit for bit. (``F.dropout``, which :func:`dropout` leaves CUDA and strided tensors to,
    is Inductor's: its masks follow the same law but come from Inductor's generator, or
    with ``torch._inductor.config.fallback_random`` from eager's, in an order of
    Inductor's choosing.)
    """
    if like.device.type != "cpu" or like.dtype not in _DTYPES:
        return False
    if torch.compiler.is_compiling():
        return recurrence._fused_ready("cpu")
    return recurrence.fused_available("cpu")


#: Draws made by :func:`_mask_op` so far: the state that compiled graphs thread through
#: their draws. Each draw mutates it, so the compiler keeps the draws in program order.
_DRAWS = torch.zeros((), dtype=torch.int64)


@torch.library.custom_op("knn::mask", mutates_args=("draws",),
                         tags=(torch.Tag.nondeterministic_seeded,))
def _mask_op(draws: Tensor, shape: list[int], q: float, scaled: bool, sampler: bool,
             dtype: torch.dtype, device: torch.device) -> Tensor:
    """One draw as a custom op (what runs under torch.compile): Bernoulli(q) values of
    ``dtype`` on ``device``, divided by q when ``scaled``, from the CPU sampler when
    ``sampler`` (else torch's ``bernoulli_``); counts the draw in ``draws``.

    The generator is state the compiler cannot see, so two draws with no data path between
    them could run in either order (Inductor did swap a layer's two variational masks):
    every draw mutates the one counter :data:`_DRAWS`, which orders them as the program
    does. Tagged nondeterministic_seeded, so the compiler neither merges two draws nor
    recomputes one in the backward."""
    draws.add_(1)
    if sampler:
        if scaled:
            return torch.ops.knn_rng_cpu.scaled_mask(shape, q, dtype)
        return torch.ops.knn_rng_cpu.bernoulli(shape, q, dtype)
    mask = torch.empty(shape, dtype=dtype, device=device).bernoulli_(q)
    return mask.div_(q) if scaled else mask


@_mask_op.register_fake
def _mask_op_fake(draws, shape, q, scaled, sampler, dtype, device):
    return torch.empty(shape, dtype=dtype, device=device)


def _compiled_draw(like: Tensor, shape: tuple[int, ...], q: float, scaled: bool) -> Tensor:
    """:func:`bernoulli` (``scaled``: :func:`scaled_mask`) under torch.compile."""
    sampler = _sampler_applies(like)
    usage.record("fused_bernoulli" if sampler else "torch_bernoulli")
    return _mask_op(_DRAWS, list(shape), float(q), scaled, sampler, like.dtype, like.device)


def bernoulli(like: Tensor, shape: tuple[int, ...], q: float) -> Tensor:
    """``like.new_empty(shape).bernoulli_(q)``: 0/1 values in ``like``'s dtype and device."""
    if torch.compiler.is_compiling():
        return _compiled_draw(like, shape, q, scaled=False)
    if _sampler_applies(like):
        usage.record("fused_bernoulli")
        return torch.ops.knn_rng_cpu.bernoulli(list(shape), float(q), like.dtype)
    usage.record("torch_bernoulli")
    return like.new_empty(shape).bernoulli_(q)


def scaled_mask(like: Tensor, shape: tuple[int, ...], q: float) -> Tensor:
    """``bernoulli(like, shape, q).div_(q)``, the same values (on CPU in one pass)."""
    if torch.compiler.is_compiling():
        return _compiled_draw(like, shape, q, scaled=True)
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
