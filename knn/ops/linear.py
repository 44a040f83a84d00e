"""Dense products y = x Wᵀ + b, each on the CPU library that is faster for it here.

Why this exists: on CPU, ``torch.nn.functional.linear`` calls MKL's sgemm,
and how fast that is depends on the processor. On an AVX-512 AMD EPYC (Zen 4)
MKL does not take its AVX-512 path and reaches about the AVX2 limit; oneDNN
(the library behind ``nn.LSTM``'s CPU kernels) does take it, and ran the PTB
shapes' products about 2x faster (``experiments/bench/layers.md``). On an
AMD EPYC without AVX-512 (Zen 3) it is the other way round: MKL's AVX2 sgemm
ran SST's layer products 1.3-1.5x faster than oneDNN and PTB's as fast
(``experiments/bench/sst_epoch/2026-12-01/layers.md``), and took an SST
training step from 17.3 to 14.4 ms (``2026-12-01/linear_library/``). Leaving our GEMMs on the slower library while the LSTM baseline
gets its fastest kernels would compare libraries, not architectures.

Dispatch, in :func:`onednn_enabled`: float32 CPU tensors go to oneDNN when torch has
it and the CPU has AVX-512 (torch's ``get_cpu_capability()``); everything
else (CUDA, float64, an AVX2 CPU, a torch without oneDNN, and any code that
``torch.compile`` traces) goes to ``F.linear``. ``KNN_ONEDNN=1`` / ``0`` force
either choice outside compiled code. The product is the same either way, up to
float rounding::

    forward   Y  = X Wᵀ + b          X (M, K), W (N, K), b (N,)
    backward  dX = dY W              (M, N) x (N, K)
              dW = (Xᵀ dY)ᵀ          (K, M) x (M, N), transposed
              db = Σ_rows dY

each product a oneDNN matmul (``torch.ops.mkldnn._linear_pointwise``, the
op torch's own compiler emits for CPU linears). It takes strided tensors,
so the transposes are views; only dW's result is copied to W's layout.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import register_flop_formula

from knn.ops import usage


def _onednn_op():
    """The oneDNN linear op, or None when this torch build has none."""
    if not torch.backends.mkldnn.is_available():
        return None
    return getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)


_LINEAR = _onednn_op()


def onednn_preferred() -> bool:
    """Whether CPU float32 products go to oneDNN here: ``KNN_ONEDNN`` if set ("1" or "0"),
    else whether the CPU has AVX-512 (see the module docstring for the measurements)."""
    forced = os.environ.get("KNN_ONEDNN")
    if forced in ("0", "1"):
        return forced == "1"
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def onednn_enabled(x: Tensor) -> bool:
    """True when :func:`linear` sends ``x``'s products to oneDNN: the one dispatch point of
    this module (:func:`linear`, :func:`product`, :func:`product_grads` and the fused
    layer nodes all ask it).

    Support set of oneDNN: float32 CPU tensors with elements, a torch with oneDNN, and
    :func:`onednn_preferred`. Under ``torch.compile`` (``torch.compiler.is_compiling()``)
    it is False: the compiled graph has ``F.linear`` (``mm`` for :func:`product`), which
    Inductor lowers itself; it cannot lower the ``mkldnn._linear_pointwise`` calls of
    :class:`_OneDNNLinear` (``LoweringException: AssertionError: target:
    mkldnn._linear_pointwise.default``). The product is the same up to float rounding.
    """
    if torch.compiler.is_compiling():
        return False
    return (
        _LINEAR is not None
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and x.numel() > 0
        and onednn_preferred()
    )


def _mm(a: Tensor, w: Tensor, bias: Tensor | None = None) -> Tensor:
    """a (M, K) · w (N, K)ᵀ + bias, one oneDNN matmul."""
    return _LINEAR(a, w, bias, "none", [], "")


if _LINEAR is not None:
    # FlopCounterMode knows aten's products only; without this the throughput
    # report (knn.tools.throughput) would miss every product routed here.
    @register_flop_formula(_LINEAR)
    def _linear_flops(x_shape, w_shape, *args, **kwargs) -> int:
        rows = 1
        for s in x_shape[:-1]:
            rows *= s
        return 2 * rows * x_shape[-1] * w_shape[0]


def _onednn_grads(x: Tensor, weight: Tensor, dy: Tensor, need_x: bool,
                  need_w: bool) -> tuple[Tensor | None, Tensor | None]:
    """dX = dY W and dW = (Xᵀ dY)ᵀ, each a oneDNN product (None where not needed)."""
    dx = _mm(dy, weight.t()) if need_x else None
    # dW = dYᵀ X computed as (Xᵀ dY)ᵀ: oneDNN copies a transposed *input* before
    # multiplying (a 10000 x 1120 copy for the PTB decoder) but reads a transposed
    # weight in place; this order took 19.7 ms there instead of 42.6 (2 threads, here).
    dw = _mm(x.t(), dy.t()).t().contiguous() if need_w else None
    return dx, dw


class _OneDNNLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _mm(x, weight, bias)

    @staticmethod
    def backward(ctx, dy: Tensor):
        x, weight = ctx.saved_tensors
        dx, dw = _onednn_grads(x, weight, dy, ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        db = dy.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dw, db


def product(x: Tensor, weight: Tensor) -> Tensor:
    """x (M, K) · weight (N, K)ᵀ outside autograd, on the library :func:`linear` would use."""
    if onednn_enabled(x) and weight.dtype == x.dtype:
        usage.record("onednn")
        return _mm(x, weight)
    usage.record("aten_linear")
    return x.mm(weight.t())


def product_grads(x: Tensor, weight: Tensor, dy: Tensor, need_x: bool = True,
                  need_w: bool = True) -> tuple[Tensor | None, Tensor | None]:
    """(dX, dW) of Y = :func:`product` (x, weight) for dY, None where not needed: bit for bit
    what autograd gives for :func:`linear` without a bias (aten: its ``mm`` backward)."""
    if onednn_enabled(x) and weight.dtype == x.dtype:
        return _onednn_grads(x, weight, dy, need_x, need_w)
    return (dy.mm(weight) if need_x else None), (dy.t().mm(x) if need_w else None)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)`` for x (..., K), weight (N, K); oneDNN on CPU float32."""
    if not onednn_enabled(x) or weight.dtype != x.dtype:
        usage.record("aten_linear")
        return F.linear(x, weight, bias)
    usage.record("onednn")
    lead = x.shape[:-1]
    y = _OneDNNLinear.apply(x.reshape(-1, x.shape[-1]), weight, bias)
    return y.view(*lead, weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` whose forward is :func:`linear` (same parameters, same state dict)."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
