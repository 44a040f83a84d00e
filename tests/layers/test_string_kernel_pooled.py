"""StringKernelLayer.forward_pooled (one autograd node) is bit for bit the composition it fuses."""
from dataclasses import replace

import pytest
import torch

from knn.layers.string_kernel import (DECAYS, MAPPINGS, OUTPUTS, StringKernelConfig,
                                      StringKernelLayer)
from knn.layers.string_kernel_pooled import pooled_layer_ref
from knn.models.classifier import KernelClassifier, KernelClassifierConfig
from knn.ops import linear as linear_ops
from knn.ops import pooled as pooled_ops
from knn.ops.dropout import dropout_mask
from knn.ops.recurrence import ACTIVATIONS

@pytest.fixture(autouse=True)
def _fused(require_fused) -> None:
    """Runs only where the pooled node is built; fails where its build failed (conftest)."""
    require_fused("cpu_sst")

#: The values each config field can take, for a field :data:`knn.ops.pooled.LAYER_SUPPORTS`
#: declares as "any" (None); a declared tuple is tested as given. Numeric fields: a few
#: points of their range.
DOMAINS = {"n": (1, 2, 3), "mapping": MAPPINGS, "normalized": (True, False), "output": OUTPUTS,
           "activation": ACTIVATIONS, "decay": DECAYS, "decay_value": (0.5, 0.8),
           "highway": (True, False), "rnn_dropout": (0.0, 0.25)}
BASE = StringKernelConfig(n=2, decay="gated_xh", highway=True, rnn_dropout=0.1)


def declared_variants() -> dict[str, StringKernelConfig]:
    """One config per value of each field the node declares, the others at :data:`BASE`'s
    (``decay_value`` under a learned decay, where it is the initial λ)."""
    variants = {}
    for field, allowed in pooled_ops.LAYER_SUPPORTS.items():
        for value in allowed if allowed is not None else DOMAINS[field]:
            extra = {"decay": "learned"} if field == "decay_value" else {}
            variants[f"{field}={value}"] = replace(BASE, **{field: value, **extra})
    return variants


def test_every_declared_field_has_values_to_test() -> None:
    """A field the node declares as any value needs a domain here, else its values go
    untested (the declaration itself is checked in tests/models/test_classifier_fused.py)."""
    assert {f for f, allowed in pooled_ops.LAYER_SUPPORTS.items() if allowed is None} <= set(DOMAINS)


CONFIGS = {
    # the SST classifier's layer (Table 2, gated λ)
    "sst_gated_xh": StringKernelConfig(n=2, output="sum", activation="relu", decay="gated_xh",
                                       highway=False, rnn_dropout=0.2),
    "const_additive": StringKernelConfig(n=3, mapping="additive", decay="constant", decay_value=0.5,
                                         highway=False, rnn_dropout=0.3),
    "learned_unnormalized": StringKernelConfig(n=1, normalized=False, activation="tanh",
                                               decay="learned", highway=False),
    "gated_x_highway": StringKernelConfig(n=1, decay="gated_x", highway=True, rnn_dropout=0.25),
    "gated_xh_highway": StringKernelConfig(n=2, decay="gated_xh", highway=True, rnn_dropout=0.1),
}


def batch(d_in, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 5, 3, 1])
    mask = torch.arange(5).unsqueeze(1) < lengths  # (T, B), padding after each column
    x = torch.randn(5, 4, d_in, dtype=dtype, generator=g)
    return x, mask


def step(fn, layer, x, mask, p_in, use_h, seed=3):
    """Output, pooled mean and every gradient of one forward/backward from generator state ``seed``."""
    torch.manual_seed(seed)
    x = x.clone().requires_grad_()
    in_mask = dropout_mask(x.detach(), p_in, layer.training)
    h, z = fn(layer, x, mask, in_mask)
    g = torch.Generator().manual_seed(7)
    loss = (z * torch.randn(z.shape, dtype=z.dtype, generator=g)).sum()
    if use_h:
        loss = loss + (h * torch.randn(h.shape, dtype=h.dtype, generator=g)).sum()
    layer.zero_grad(set_to_none=True)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None}
    return h.detach(), z.detach(), x.grad, grads, torch.get_rng_state()


VARIANTS = {**CONFIGS, **declared_variants()}


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("use_h", [True, False])  # h feeds a next layer, or only its mean is used
@pytest.mark.parametrize("d_in", [6, 8])  # 6: the highway's carry is projected
def test_fused_node_equals_the_composition_bit_for_bit(name, dtype, use_h, d_in):
    """Every declared variant (each value of each field the node declares) and the named
    configs of the paper's rows."""
    layer = StringKernelLayer(d_in, 8, VARIANTS[name]).to(dtype)
    x, mask = batch(d_in, dtype)
    fused = step(lambda l, *a: l.forward_pooled(*a), layer, x, mask, 0.35, use_h)
    ref = step(pooled_layer_ref, layer, x, mask, 0.35, use_h)
    for got, want in zip(fused[:3], ref[:3]):
        assert torch.equal(got, want)
    assert fused[3].keys() == ref[3].keys() == {n for n, p in layer.named_parameters()}
    for key in ref[3]:
        assert torch.equal(fused[3][key], ref[3][key]), key
    assert torch.equal(fused[4], ref[4])  # the same draws: the generator ends in the same state


@pytest.mark.parametrize("onednn", ["0", "1"])
def test_both_product_libraries_give_the_composition(monkeypatch, onednn):
    if onednn == "1" and linear_ops._LINEAR is None:
        pytest.skip("this torch build has no oneDNN linear op")
    monkeypatch.setenv("KNN_ONEDNN", onednn)
    layer = StringKernelLayer(8, 8, CONFIGS["sst_gated_xh"])
    x, mask = batch(8, torch.float32)
    fused = step(lambda l, *a: l.forward_pooled(*a), layer, x, mask, 0.35, True)
    ref = step(pooled_layer_ref, layer, x, mask, 0.35, True)
    assert all(torch.equal(a, b) for a, b in zip(fused[:3], ref[:3]))
    assert all(torch.equal(fused[3][k], ref[3][k]) for k in ref[3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_threads_split_the_work_but_not_the_numbers(dtype):
    # 36 x 8 = 288 rows: with 4 threads the forward product runs in 4 blocks of rows, dW
    # and dX side by side, the scan in 4 blocks of the batch; the same numbers as 1 thread
    # up to the products' own rounding, and the composition's.
    layer = StringKernelLayer(16, 16, CONFIGS["sst_gated_xh"]).to(dtype)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(36, 8, 16, dtype=dtype, generator=g)
    mask = torch.arange(36).unsqueeze(1) < torch.tensor([36, 30, 36, 1, 12, 36, 35, 20])
    threads = torch.get_num_threads()
    try:
        runs = {}
        for n in (1, 4):
            torch.set_num_threads(n)
            runs[n] = step(lambda l, *a: l.forward_pooled(*a), layer, x, mask, 0.35, True)
        ref = step(pooled_layer_ref, layer, x, mask, 0.35, True)
    finally:
        torch.set_num_threads(threads)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for one, split, want in zip(runs[1][:3], runs[4][:3], ref[:3]):
        torch.testing.assert_close(split, one, **tol)
        torch.testing.assert_close(split, want, **tol)
    for key in ref[3]:
        torch.testing.assert_close(runs[4][3][key], runs[1][3][key], **tol)
        torch.testing.assert_close(runs[4][3][key], ref[3][key], **tol)
    assert torch.equal(runs[4][4], ref[4])


def test_padding_gets_no_output_and_the_mean_is_over_real_steps():
    layer = StringKernelLayer(6, 8, CONFIGS["sst_gated_xh"]).double().eval()
    x, mask = batch(6, torch.float64)
    h, z = layer.forward_pooled(x, mask)
    assert torch.equal(h[~mask], torch.zeros_like(h[~mask]))
    lengths = mask.sum(0)
    for b in range(4):
        torch.testing.assert_close(z[b], h[: lengths[b], b].mean(0))


def test_classifier_takes_the_fused_node_and_computes_the_same(monkeypatch):
    cfg = KernelClassifierConfig(n_classes=5, hidden=8, depth=3)
    vectors = torch.randn(20, 6, generator=torch.Generator().manual_seed(1))
    model = KernelClassifier(cfg, vectors).train()
    tokens = torch.randint(0, 20, (5, 4), generator=torch.Generator().manual_seed(2))
    _, mask = batch(6, torch.float32)

    def logits_and_grads():
        torch.manual_seed(11)
        model.zero_grad(set_to_none=True)
        out = model(tokens, mask)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    calls = []
    real = pooled_ops.pooled_layer
    monkeypatch.setattr(pooled_ops, "pooled_layer",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    fused = logits_and_grads()
    assert len(calls) == cfg.depth
    monkeypatch.setattr(pooled_ops, "fused_applies", lambda h: False)
    unfused = logits_and_grads()
    assert len(calls) == cfg.depth  # the reference path did not call it
    assert torch.equal(fused[0], unfused[0])
    for got, want in zip(fused[1], unfused[1]):
        assert torch.equal(got, want)


def test_dropout_mask_is_what_dropout_multiplies_by():
    x = torch.randn(5, 4, 3)
    torch.manual_seed(0)
    want = torch.nn.functional.dropout(x, 0.35, True)
    torch.manual_seed(0)
    assert torch.equal(x * dropout_mask(x, 0.35), want)
    assert dropout_mask(x, 0.35, training=False) is None and dropout_mask(x, 0.0) is None
    with pytest.raises(ValueError, match="contiguous CPU tensor and 0 <= p < 1"):
        dropout_mask(x, 1.0)
