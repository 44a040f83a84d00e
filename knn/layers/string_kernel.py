"""String-kernel recurrent layers (Lei et al. 2017, Sections 2, 4 and 5.1).

A layer compares the input prefix x_{1:t} with learned "reference
sequences" w_{i,j} = (row i of W^{(1)}, ..., row i of W^{(j)}) through an
n-gram string kernel. Its states (Eq. 3 and appendix Table 4)

    c_1[t] = λ_t ⊙ c_1[t-1] + a_t ⊙ W^{(1)} x_t
    c_j[t] = λ_t ⊙ c_j[t-1] + a_t ⊙ (c_{j-1}[t-1] ∘ W^{(j)} x_t),   1 < j ≤ n
    h[t]   = σ(c_n[t])   or   σ(Σ_j c_j[t])

with ∘ = ⊙ (multiplicative mapping) or + (additive mapping), and a_t = 1
(un-normalized aggregation) or 1 - λ_t (normalized aggregation). Theorem 1:
for constant λ, un-normalized multiplicative mapping,
c_j[t][i] = K_j(x_{1:t}, w_{i,j}) = <φ_j(x_{1:t}), φ_j(w_{i,j})>, with
φ_n(x) = Σ_{i_1<…<i_n} λ^{|x|-i_1-n+1} x_{i_1} ⊗ … ⊗ x_{i_n}
(tests/layers/test_string_kernel.py checks this against knn.kernels.string_kernel).

The decay λ_t (``decay`` in :class:`StringKernelConfig`) is

* ``constant``: a hyper-parameter λ (λ = 0 with the additive mapping is a
  width-n word CNN, the paper's footnote 2);
* ``learned``:  a parameter vector, λ = σ(θ) so that it stays in (0, 1);
* ``gated_x``:  λ_t = σ(W_λ x_t + b_λ)                      (Section 4);
* ``gated_xh``: λ_t = σ(W_λ x_t + U_λ h[t-1] + b_λ)          (Section 4; the
  variant of the authors' PTB code).

Section 5.1 adds a highway connection around each layer,
h[t] = f_t ⊙ σ(c[t]) + (1 - f_t) ⊙ x_t with f_t = σ(W_f x_t + b_f); when the
input and hidden widths differ, x_t is projected by an extra block W_p.

All projections W^{(1..n)}, W_λ, W_f, W_p are one (K·d, d_in) matrix, so a
layer costs one GEMM (knn.ops.linear) plus one elementwise scan
(knn.ops.recurrence).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from knn.layers.string_kernel_pooled import pooled_layer_ref
from knn.ops import pooled as pooled_ops
from knn.ops.dropout import scaled_mask
from knn.ops.linear import linear
from knn.ops.recurrence import ACTIVATIONS, RecurrenceSpec, string_kernel_recurrence

DECAYS = ("constant", "learned", "gated_x", "gated_xh")
MAPPINGS = ("multiplicative", "additive")
OUTPUTS = ("last", "sum")


@dataclass
class StringKernelConfig:
    """Which member of the string-kernel family a layer computes."""

    n: int = 1                       # n-gram order: states c_1..c_n
    mapping: str = "multiplicative"  # c_{j-1} ⊙ W x_t, or "additive": c_{j-1} + W x_t
    normalized: bool = True          # (1 - λ) factor on the new term
    output: str = "last"             # h = σ(c_n), or "sum": σ(Σ_j c_j)
    activation: str = "identity"     # σ: identity | tanh | relu | sigmoid
    decay: str = "gated_xh"          # constant | learned | gated_x | gated_xh
    decay_value: float = 0.5         # λ (constant) or its initial value (learned)
    highway: bool = True             # Section 5.1 highway connection
    rnn_dropout: float = 0.0         # variational dropout on inputs and recurrent h

    def __post_init__(self) -> None:
        checks = [
            (self.n >= 1, f"n must be >= 1, got {self.n}"),
            (self.mapping in MAPPINGS, f"mapping must be one of {MAPPINGS}, got {self.mapping!r}"),
            (self.output in OUTPUTS, f"output must be one of {OUTPUTS}, got {self.output!r}"),
            (self.activation in ACTIVATIONS, f"activation must be one of {ACTIVATIONS}, got {self.activation!r}"),
            (self.decay in DECAYS, f"decay must be one of {DECAYS}, got {self.decay!r}"),
            (0.0 <= self.decay_value <= 1.0, f"decay_value must be in [0, 1], got {self.decay_value}"),
            (0.0 <= self.rnn_dropout < 1.0, f"rnn_dropout must be in [0, 1), got {self.rnn_dropout}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


class KernelState(NamedTuple):
    """Recurrent state of one layer: c (B, n, d) and h (B, d)."""

    c: Tensor
    h: Tensor

    def detach(self) -> KernelState:
        return KernelState(self.c.detach(), self.h.detach())


def _variational_mask(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """One Bernoulli mask per sequence, scaled by 1/(1-p) (Gal & Ghahramani 2016)."""
    return scaled_mask(like, shape, 1 - p)


class StringKernelLayer(nn.Module):
    """One string-kernel recurrent layer; see the module docstring for the equations."""

    def __init__(self, d_in: int, d_hidden: int, cfg: StringKernelConfig) -> None:
        super().__init__()
        self.d_in, self.d, self.cfg = d_in, d_hidden, cfg
        # whether forward_pooled's node computes every field of cfg (its declaration)
        self.pooled_node_supported = pooled_ops.supports(cfg, pooled_ops.LAYER_SUPPORTS)
        gated = cfg.decay.startswith("gated")
        self.spec = RecurrenceSpec(
            n=cfg.n,
            multiplicative=cfg.mapping == "multiplicative",
            normalized=cfg.normalized,
            output_sum=cfg.output == "sum",
            activation=cfg.activation,
            highway=cfg.highway,
        )
        self.carry_projected = cfg.highway and d_in != d_hidden
        k = self.spec.blocks(gated, self.carry_projected)
        # Rows [j*d:(j+1)*d] are W^{(j+1)}, then W_λ, W_f, W_p as configured.
        self.weight = nn.Parameter(torch.empty(k * d_hidden, d_in))
        self.decay_bias = nn.Parameter(torch.zeros(d_hidden)) if gated else None
        self.highway_bias = nn.Parameter(torch.zeros(d_hidden)) if cfg.highway else None
        self.weight_h = nn.Parameter(torch.empty(d_hidden, d_hidden)) if cfg.decay == "gated_xh" else None
        if cfg.decay == "learned":
            v = min(max(cfg.decay_value, 1e-3), 1 - 1e-3)
            self.decay_logit: nn.Parameter | None = nn.Parameter(
                torch.full((d_hidden,), math.log(v / (1 - v))))
        else:
            self.decay_logit = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = math.sqrt(3.0 / self.d_in)  # unit-variance inputs give unit-variance projections
        nn.init.uniform_(self.weight, -bound, bound)
        if self.weight_h is not None:
            b = math.sqrt(3.0 / self.d)
            nn.init.uniform_(self.weight_h, -b, b)
        for bias in (self.decay_bias, self.highway_bias):
            if bias is not None:
                nn.init.zeros_(bias)

    def init_gate_jointly(self) -> None:
        """Redraw the decay gate's W_λ and U_λ as one [x; h] block, uniform ±√(3/(d_in + d)).

        The authors' Theano code (its ``RecurrentLayer``, in their SST and PTB models) draws
        λ_t's weights this way; :meth:`reset_parameters` draws each from its own fan-in
        (±√(3/d_in), ±√(3/d)).
        Only for ``gated_xh`` decay, the one with both parts.
        """
        if self.weight_h is None:
            raise ValueError(f"a joint gate init needs decay 'gated_xh', got {self.cfg.decay!r}")
        bound = math.sqrt(3.0 / (self.d_in + self.d))
        n, d = self.cfg.n, self.d
        with torch.no_grad():
            self.weight[n * d:(n + 1) * d].uniform_(-bound, bound)  # W_λ follows W^{(1..n)}
            self.weight_h.uniform_(-bound, bound)

    def decay(self) -> Tensor | None:
        """λ as a (d,) vector for constant / learned decay, None when gated."""
        if self.decay_logit is not None:
            return torch.sigmoid(self.decay_logit)
        if self.cfg.decay == "constant":
            # Built in the weight's dtype each call, so float64 tests see λ exactly.
            return self.weight.new_full((self.d,), self.cfg.decay_value)
        return None

    def initial_state(self, batch: int, like: Tensor) -> KernelState:
        return KernelState(like.new_zeros(batch, self.cfg.n, self.d), like.new_zeros(batch, self.d))

    def variational_masks(self, like: Tensor, batch: int) -> tuple[Tensor | None, Tensor | None]:
        """Training with rnn_dropout: the input's (1, B, d_in) and the state's (B, d) masks,
        drawn in that order in ``like``'s dtype (None, None otherwise)."""
        p = self.cfg.rnn_dropout
        if not (self.training and p > 0):
            return None, None
        return (_variational_mask(like, (1, batch, self.d_in), p),
                _variational_mask(like, (batch, self.d), p))

    def forward_pooled(self, x: Tensor, mask: Tensor, in_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(h, z) for x (T, B, d_in), mask (T, B): h (T, B, d) is this layer on x ⊙ in_mask from
        the zero state (in_mask: a caller's dropout mask, or None), z (B, d) its mean over
        each column's real steps. On the fused CPU path one autograd node
        (:mod:`knn.ops.pooled` decides), with the same numbers bit for bit as the
        composition (:mod:`knn.layers.string_kernel_pooled`)."""
        if not pooled_ops.pooled_node_runs(self.pooled_node_supported, x):
            return pooled_layer_ref(self, x, mask, in_mask)
        x_mask, h_mask = self.variational_masks(x, x.shape[1])
        return pooled_ops.pooled_layer(x, in_mask, x_mask, self.node_layer(), h_mask, mask)

    def node_layer(self) -> pooled_ops.NodeLayer:
        """This layer as the C++ pooled and loss nodes read it."""
        return pooled_ops.NodeLayer(
            weight=self.weight, weight_h=self.weight_h, decay=self.decay(),
            decay_bias=self.decay_bias, highway_bias=self.highway_bias, spec=self.spec,
            carry_is_input=self.cfg.highway and not self.carry_projected)

    def forward(
        self, x: Tensor, state: KernelState | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, KernelState]:
        """x: (T, B, d_in); mask: (T, B) True/1 for real tokens. Returns h (T, B, d), final state."""
        T, B, _ = x.shape
        if state is None:
            state = self.initial_state(B, x)
        x_mask, h_mask = self.variational_masks(x, B)
        if x_mask is not None:
            x = x * x_mask  # same mask at every step
        proj = linear(x.reshape(T * B, self.d_in), self.weight).view(T, B, -1, self.d)  # (T, B, K, d)
        zeros = x.new_zeros(self.d)
        gate_bias = torch.stack([
            self.decay_bias if self.decay_bias is not None else zeros,
            self.highway_bias if self.highway_bias is not None else zeros,
        ])  # (2, d)
        carry = x if self.cfg.highway and not self.carry_projected else None
        h, c_last, h_last = string_kernel_recurrence(
            proj, carry, self.decay(), gate_bias, self.weight_h,
            state.c, state.h, mask, h_mask, self.spec,
        )
        return h, KernelState(c_last, h_last)


class StringKernelNet(nn.Module):
    """A deep stack of string-kernel layers (Section 2.2, deep kernel construction).

    Layer l reads the outputs h^{(l-1)}[t] of layer l-1 (h^{(0)} = x).
    """

    def __init__(self, d_in: int, d_hidden: int, depth: int, cfg: StringKernelConfig) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.layers = nn.ModuleList(
            StringKernelLayer(d_in if l == 0 else d_hidden, d_hidden, cfg) for l in range(depth)
        )

    def forward(
        self, x: Tensor, state: list[KernelState] | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, list[KernelState], list[Tensor]]:
        """x: (T, B, d_in). Returns the top output (T, B, d), per-layer states and outputs."""
        states, outputs = [], []
        h = x
        for l, layer in enumerate(self.layers):
            h, s = layer(h, None if state is None else state[l], mask)
            states.append(s)
            outputs.append(h)
        return h, states, outputs
