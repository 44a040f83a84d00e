"""String-kernel layers compute the kernels of Section 2 (float64, tiny sizes)."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from knn.kernels.string_kernel import kernel, phi, reference_states
from knn.layers.string_kernel import StringKernelConfig, StringKernelLayer, StringKernelNet
from knn.models import count_params

D_IN, D = 3, 4


def make_layer(n, weights=None, **kw) -> StringKernelLayer:
    cfg = StringKernelConfig(n=n, activation="identity", highway=False, **kw)
    layer = StringKernelLayer(D_IN, D, cfg).double()
    if weights is not None:
        with torch.no_grad():
            layer.weight[: n * D] = torch.cat(weights[:n])
    return layer


def run(layer, x):
    """Outputs h[t] for one sequence x (L, d_in) -> (L, d)."""
    return layer(x.unsqueeze(1))[0].squeeze(1)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, D_IN, dtype=torch.float64, generator=g)
    weights = [torch.randn(D, D_IN, dtype=torch.float64, generator=g) for _ in range(3)]
    return x, weights


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.9, 1.0])
def test_theorem_1_states_are_string_kernels(data, lam):
    """c_j[t][i] = K_j(x_{1:t}, w_{i,j}) = <φ_j(x_{1:t}), φ_j(w_{i,j})> for every j, t, i."""
    x, weights = data
    for j in (1, 2, 3):
        # c_j does not depend on W^{(j+1..n)}, so an order-j layer exposes c_j as its output.
        c = run(make_layer(j, weights, decay="constant", decay_value=lam, normalized=False), x)
        for t, i in itertools.product(range(1, len(x) + 1), range(D)):
            ref = torch.stack([w[i] for w in weights[:j]])  # reference sequence w_{i,j}, (j, d_in)
            k = kernel(x[:t], ref, j, lam)
            torch.testing.assert_close(c[t - 1, i], k)
            torch.testing.assert_close(c[t - 1, i], (phi(x[:t], j, lam) * phi(ref, j, lam)).sum())


@pytest.mark.parametrize("mapping", ["multiplicative", "additive"])
@pytest.mark.parametrize("normalized", [False, True])
def test_constant_decay_variants_match_enumeration(data, mapping, normalized):
    """Appendix Table 4 (a)-(c): each variant's state is its subsequence sum."""
    x, weights = data
    for n in (1, 2, 3):
        layer = make_layer(n, weights, decay="constant", decay_value=0.6, normalized=normalized, mapping=mapping)
        lam = torch.full((len(x), D), 0.6, dtype=torch.float64)
        ref = reference_states(x, weights[:n], lam, normalized, mapping == "multiplicative")
        torch.testing.assert_close(run(layer, x), ref)


def test_normalized_multiplicative_is_scaled_unnormalized(data):
    """For constant λ, normalizing scales the n-gram state by (1-λ)^n (Table 5 (b) vs (a))."""
    x, weights = data
    for n in (1, 2, 3):
        plain = run(make_layer(n, weights, decay="constant", decay_value=0.3, normalized=False), x)
        norm = run(make_layer(n, weights, decay="constant", decay_value=0.3, normalized=True), x)
        torch.testing.assert_close(norm, plain * 0.7**n)


@pytest.mark.parametrize("decay", ["gated_x", "gated_xh", "learned"])
@pytest.mark.parametrize("mapping", ["multiplicative", "additive"])
@pytest.mark.parametrize("normalized", [False, True])
def test_adaptive_decay_states_match_enumeration(data, decay, mapping, normalized):
    """Section 4: with per-step decay λ_t the weights become products of λ_s along each chain."""
    x, weights = data
    n = 2
    layer = make_layer(n, weights, decay=decay, normalized=normalized, mapping=mapping, decay_value=0.4)
    with torch.no_grad():
        if layer.decay_bias is not None:
            layer.decay_bias.normal_()
    h = run(layer, x)
    if decay == "learned":
        lam = layer.decay().detach().expand(len(x), D)
    else:
        w_lam = layer.weight[n * D : (n + 1) * D].detach()
        pre = x @ w_lam.t() + layer.decay_bias.detach()
        if decay == "gated_xh":  # λ_t sees h[t-1] = c_n[t-1] (identity activation, no highway)
            h_prev = torch.cat([torch.zeros(1, D, dtype=x.dtype), h[:-1].detach()])
            pre = pre + h_prev @ layer.weight_h.detach().t()
        lam = torch.sigmoid(pre)
    ref = reference_states(x, weights[:n], lam, normalized, mapping == "multiplicative")
    torch.testing.assert_close(h, ref)


def test_output_sum_is_sum_of_states(data):
    x, weights = data
    total = run(make_layer(3, weights, decay="constant", decay_value=0.5, output="sum"), x)
    parts = sum(run(make_layer(j, weights, decay="constant", decay_value=0.5), x) for j in (1, 2, 3))
    torch.testing.assert_close(total, parts)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_zero_decay_additive_is_word_cnn(data, n):
    """Footnote 2: λ = 0, additive: h[t] = W^{(1)} x_{t-n+1} + … + W^{(n)} x_t (zero-padded)."""
    x, weights = data
    h = run(make_layer(n, weights, decay="constant", decay_value=0.0, mapping="additive"), x)
    filt = torch.stack(weights[:n], dim=-1)  # (d, d_in, n): tap k is W^{(k+1)}
    cnn = F.conv1d(x.t().unsqueeze(0), filt, padding=n - 1)[0, :, : len(x)].t()
    torch.testing.assert_close(h, cnn)


def test_unit_decay_gives_running_sums(data):
    x, weights = data
    u1, u2 = x @ weights[0].t(), x @ weights[1].t()
    h1 = run(make_layer(1, weights, decay="constant", decay_value=1.0, normalized=False), x)
    torch.testing.assert_close(h1, u1.cumsum(0))
    h2 = run(make_layer(2, weights, decay="constant", decay_value=1.0, normalized=False), x)
    before = torch.cat([torch.zeros(1, D, dtype=x.dtype), u1.cumsum(0)[:-1]])  # Σ_{i<t} u_1[i]
    torch.testing.assert_close(h2, (u2 * before).cumsum(0))


@pytest.mark.parametrize("decay", ["constant", "gated_x", "gated_xh"])
@pytest.mark.parametrize("d_in", [D, D_IN])  # highway carry: the input itself, or projected
def test_batch_equals_items_run_one_at_a_time(decay, d_in):
    torch.manual_seed(1)
    cfg = StringKernelConfig(n=2, decay=decay, highway=True, activation="tanh")
    net = StringKernelNet(d_in, D, depth=2, cfg=cfg).double()
    lengths = [5, 2, 4]
    xs = [torch.randn(L, d_in, dtype=torch.float64) for L in lengths]
    batch = torch.zeros(max(lengths), len(xs), d_in, dtype=torch.float64)
    mask = torch.zeros(max(lengths), len(xs), dtype=torch.bool)
    for b, x in enumerate(xs):
        batch[: len(x), b], mask[: len(x), b] = x, True
    out, states, _ = net(batch, mask=mask)
    for b, x in enumerate(xs):
        single, single_states, _ = net(x.unsqueeze(1))
        torch.testing.assert_close(out[: len(x), b], single[:, 0])
        assert torch.all(out[len(x) :, b] == 0)
        for s, ss in zip(states, single_states):
            torch.testing.assert_close(s.c[b], ss.c[0])
            torch.testing.assert_close(s.h[b], ss.h[0])


def test_state_carries_across_segments():
    """Running [x1; x2] equals running x1, then x2 from x1's final state (BPTT carry)."""
    torch.manual_seed(2)
    net = StringKernelNet(D, D, depth=3, cfg=StringKernelConfig(n=1, decay="gated_xh")).double()
    x = torch.randn(7, 2, D, dtype=torch.float64)
    whole, _, _ = net(x)
    first, state, _ = net(x[:3])
    second, _, _ = net(x[3:], [s.detach() for s in state])
    torch.testing.assert_close(torch.cat([first, second]), whole)


def test_variational_dropout_uses_one_mask_per_sequence():
    torch.manual_seed(3)
    layer = StringKernelLayer(D, D, StringKernelConfig(n=1, decay="constant", decay_value=0.0,
                                                       highway=False, rnn_dropout=0.5))
    x = torch.ones(6, 2, D)
    layer.train()
    h, _ = layer(x)
    # λ = 0, identity: h[t] = W (m ⊙ x_t); a constant input with one mask per sequence gives constant h.
    torch.testing.assert_close(h, h[:1].expand_as(h))
    layer.eval()
    torch.testing.assert_close(layer(x)[0], x @ layer.weight[:D].t())  # eval: no dropout


def test_parameter_count_of_authors_ptb_layer():
    """n = 1, (x, h)-gated, highway: W, W_λ, U_λ, b_λ, W_f, b_f = 4 d² + 2 d."""
    layer = StringKernelLayer(355, 355, StringKernelConfig(n=1, decay="gated_xh", highway=True))
    assert count_params(layer) == 4 * 355**2 + 2 * 355


def test_bad_config_is_one_clear_error():
    with pytest.raises(ValueError, match="decay must be one of"):
        StringKernelConfig(decay="sometimes")
    with pytest.raises(ValueError, match="n must be >= 1"):
        StringKernelConfig(n=0)
