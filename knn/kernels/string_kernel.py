"""String kernels by brute-force enumeration of subsequences.

Independent of the neural layers on purpose: these functions follow the
paper's definitions literally (Eq. 2 and the appendix proof of Theorem 1), so
tests can check that the recurrences in :mod:`knn.layers.string_kernel`
compute them. Exponential in n; meant for tiny inputs.

Notation: a sequence is a (L, d) tensor; i_1 < ... < i_n are 1-based.

    φ_n(x)    = Σ_{i_1<…<i_n} λ^{|x|-i_1-n+1} x_{i_1} ⊗ … ⊗ x_{i_n}
    K_n(x, y) = Σ_{i_1<…<i_n} Σ_{k_1<…<k_n} λ_{x,i} λ_{y,k} Π_m <x_{i_m}, y_{k_m}>
              = <φ_n(x), φ_n(y)>
"""
from __future__ import annotations

from itertools import combinations

import torch
from torch import Tensor


def decay_weight(idx: tuple[int, ...], length: int, lam: float) -> float:
    """λ^{|x| - i_1 - n + 1}: the weight of the n-gram at 1-based positions idx."""
    return lam ** (length - idx[0] - len(idx) + 1)


def phi(x: Tensor, n: int, lam: float) -> Tensor:
    """The feature map φ_n(x) as a dense tensor of shape (d,) * n."""
    L, d = x.shape
    out = x.new_zeros((d,) * n)
    for idx in combinations(range(1, L + 1), n):
        term = x[idx[0] - 1]
        for i in idx[1:]:
            term = torch.tensordot(term, x[i - 1], dims=0)  # outer product
        out = out + decay_weight(idx, L, lam) * term
    return out


def kernel(x: Tensor, y: Tensor, n: int, lam: float) -> Tensor:
    """K_n(x, y) by the double sum over n-grams of x and of y (Eq. 2, inner-product form)."""
    total = x.new_zeros(())
    for i in combinations(range(1, len(x) + 1), n):
        for k in combinations(range(1, len(y) + 1), n):
            prod = x.new_ones(())
            for a, b in zip(i, k):
                prod = prod * (x[a - 1] @ y[b - 1])
            total = total + decay_weight(i, len(x), lam) * decay_weight(k, len(y), lam) * prod
    return total


def chain_weight(idx: tuple[int, ...], t: int, lam: Tensor, a: Tensor) -> Tensor:
    """Weight of a chain of positions idx under per-step decay.

    With λ_s and a_s (a_s = 1 - λ_s when normalized, else 1) given for steps
    s = 1..t as tensors of shape (t, ...), the recurrence
    c_j[t] = λ_t c_j[t-1] + a_t (...) gives the term entering at position
    i_k the factor a_{i_k}, and decays it by every λ_s it is held through
    until the next position (or until t):

        Π_k a_{i_k} · Π_k Π_{s=i_k+1}^{i_{k+1}-1} λ_s   (i_{j+1} := t + 1)

    For constant λ, un-normalized, this is λ^{t-i_1-n+1} (Theorem 1).
    """
    w = torch.ones_like(lam[0])
    bounds = list(idx) + [t + 1]
    for k, i in enumerate(idx):
        w = w * a[i - 1]
        for s in range(i + 1, bounds[k + 1]):
            w = w * lam[s - 1]
    return w


def reference_states(
    x: Tensor, weights: list[Tensor], lam: Tensor, normalized: bool, multiplicative: bool
) -> Tensor:
    """c_n[t] for every t by enumerating subsequences of x_{1:t}.

    Args:
        x: (L, d_in) the input sequence.
        weights: [W^{(1)}, ..., W^{(n)}], each (d, d_in): row i of each is the
            reference sequence w_{i,n}.
        lam: (L, d) per-step, per-coordinate decay λ_t (constant decay: repeat it).
        normalized: a_t = 1 - λ_t instead of 1.
        multiplicative: Π_k <w_i^{(k)}, x_{i_k}> over the n-gram; otherwise the
            additive mapping, whose terms are single projections
            <w_i^{(k)}, x_{i_k}> carried along the chain i_k < … < i_n (the
            chain positions after i_k contribute decay weights only).
    Returns:
        (L, d) with row t-1 = c_n[t].
    """
    n = len(weights)
    L = x.shape[0]
    a = 1 - lam if normalized else torch.ones_like(lam)
    proj = [x @ w.t() for w in weights]  # proj[k][s-1] = W^{(k+1)} x_s, (L, d)
    out = []
    for t in range(1, L + 1):
        c = torch.zeros_like(lam[0])
        if multiplicative:
            for idx in combinations(range(1, t + 1), n):
                term = chain_weight(idx, t, lam, a)
                for k, i in enumerate(idx):
                    term = term * proj[k][i - 1]
                c = c + term
        else:
            for start in range(n):  # u_{start+1} enters at i_{start+1}, the rest of the chain only decays
                for idx in combinations(range(1, t + 1), n - start):
                    c = c + chain_weight(idx, t, lam, a) * proj[start][idx[0] - 1]
        out.append(c)
    return torch.stack(out)
