"""KernelClassifier.fused_nll_sum's node (knn/ops/csrc/classifier_cpu.cpp) against the module.

The node computes the summed cross-entropy and its gradients in its forward, one half of
the batch per thread (one after the other with one thread); nll_sum takes it when training
with two or more threads. The reference is the module itself:
``cross_entropy(model(tokens, mask), labels, reduction="sum")`` and autograd, from the same
generator state, so with the same dropout masks.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import pytest
import torch
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from knn.layers.string_kernel import StringKernelConfig
from knn.models.classifier import KernelClassifier, KernelClassifierConfig
from knn.ops import pooled, usage

V, D_IN, HIDDEN = 40, 12, 10

#: Layer variants: the SST default (gated on x and h), the paper's other Table 2 row
#: (λ = 0.5), a learned λ (a gradient through the node into sigmoid's input), highway
#: layers (layers 2-3 carry their input), and the x-only gate.
KERNELS = {
    "gated_xh": {},
    "constant": {"decay": "constant"},
    "learned": {"decay": "learned"},
    "highway": {"highway": True},
    "gated_x_highway": {"decay": "gated_x", "highway": True},
}


@pytest.fixture(autouse=True)
def _fused(require_fused) -> None:
    require_fused("cpu_sst")


@pytest.fixture
def threads():
    """Sets torch's thread count for a test, and puts it back."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def model_and_batch(kernel: dict, dtype: torch.dtype, B: int = 9, T: int = 7, **cfg):
    g = torch.Generator().manual_seed(3)
    base = KernelClassifierConfig(hidden=HIDDEN, depth=3, **cfg)
    torch.manual_seed(0)
    model = KernelClassifier(replace(base, kernel=replace(base.kernel, **kernel)),
                             torch.randn(V, D_IN, generator=g, dtype=dtype)).to(dtype)
    tokens = torch.randint(0, V, (T, B), generator=g)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T).unsqueeze(1) < lengths
    labels = torch.randint(0, base.n_classes, (B,), generator=g)
    return model.train(), tokens, mask, labels


def loss_and_grads(model, loss_of, scale: float = 0.25):
    """loss_of(model) from generator seed 11, its gradients after backward of scale · loss, and
    the generator state after it."""
    torch.manual_seed(11)
    model.zero_grad(set_to_none=True)
    loss = loss_of(model)
    (loss * scale).backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}, torch.get_rng_state()


def tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-13}


def module_loss(tokens, mask, labels):
    return lambda m: F.cross_entropy(m(tokens, mask), labels, reduction="sum")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_loss_gradients_and_generator_are_the_modules(kernel, dtype, threads):
    threads(2)
    model, tokens, mask, labels = model_and_batch(KERNELS[kernel], dtype)
    fused = loss_and_grads(model, lambda m: m.fused_nll_sum(tokens, mask, labels))
    ref = loss_and_grads(model, module_loss(tokens, mask, labels))
    torch.testing.assert_close(fused[0], ref[0], **tolerance(dtype))
    assert fused[1].keys() == ref[1].keys()
    for name in ref[1]:
        torch.testing.assert_close(fused[1][name], ref[1][name], **tolerance(dtype), msg=name)
    assert torch.equal(fused[2], ref[2])  # the same draws, so every later draw is the same too


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_thread_count_does_not_change_the_nodes_numbers(dtype, threads):
    model, tokens, mask, labels = model_and_batch({}, dtype, B=12)
    runs = []
    for n in (1, 2):
        threads(n)
        runs.append(loss_and_grads(model, lambda m: m.fused_nll_sum(tokens, mask, labels)))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])


def test_with_one_thread_nll_sum_is_the_module_bit_for_bit(threads):
    threads(1)
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    got = loss_and_grads(model, lambda m: m.nll_sum(tokens, mask, labels))
    ref = loss_and_grads(model, module_loss(tokens, mask, labels))
    assert torch.equal(got[0], ref[0])
    assert all(torch.equal(got[1][k], ref[1][k]) for k in ref[1])


def test_with_two_threads_it_is_one_node_and_reports_the_fused_paths(threads):
    threads(2)
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    usage.reset()
    loss = model.nll_sum(tokens, mask, labels)
    assert type(loss.grad_fn).__name__ == "CppFunction"  # the module's would be NllLossBackward0
    assert usage.ops_report()["fused_scan"] is True and usage.ops_report()["fused_bernoulli"] is True


@pytest.mark.parametrize("B", [1, 2, 5])
def test_small_and_odd_batches(B, threads):
    threads(2)  # halves of 0 + 1, 1 + 1 and 2 + 3 columns
    model, tokens, mask, labels = model_and_batch({}, torch.float64, B=B)
    fused = loss_and_grads(model, lambda m: m.fused_nll_sum(tokens, mask, labels))
    ref = loss_and_grads(model, module_loss(tokens, mask, labels))
    torch.testing.assert_close(fused[0], ref[0], **tolerance(torch.float64))
    for name in ref[1]:
        torch.testing.assert_close(fused[1][name], ref[1][name], **tolerance(torch.float64))


def test_without_dropout_the_halves_add_up_to_the_whole(threads):
    # No masks: the loss over 2 threads is the sum of the module's losses on each half.
    threads(2)
    model, tokens, mask, labels = model_and_batch({"rnn_dropout": 0.0}, torch.float64, B=8,
                                                  dropout=0.0)
    whole = model.fused_nll_sum(tokens, mask, labels)
    halves = sum(F.cross_entropy(model(tokens[:, s], mask[:, s]), labels[s], reduction="sum")
                 for s in (slice(0, 4), slice(4, 8)))
    torch.testing.assert_close(whole, halves, rtol=1e-14, atol=0)


def test_evaluation_and_no_grad_use_the_module(threads):
    threads(2)
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    model.eval()
    assert model.nll_sum(tokens, mask, labels).grad_fn is not None
    assert type(model.nll_sum(tokens, mask, labels).grad_fn).__name__ != "CppFunction"
    model.train()
    with torch.no_grad():
        assert model.nll_sum(tokens, mask, labels).grad_fn is None


def test_a_dispatch_mode_sees_the_products(threads):
    # Under a Python dispatch mode the halves run on the calling thread (it holds the GIL
    # that the mode needs) and every product goes through aten, where the mode counts it.
    threads(2)
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    ref = loss_and_grads(model, lambda m: m.fused_nll_sum(tokens, mask, labels))
    with FlopCounterMode(display=False) as counter:
        seen = loss_and_grads(model, lambda m: m.fused_nll_sum(tokens, mask, labels))
    # By hand, from the shapes (2 flops a multiply-add; T=7, B=9, all T*B positions): each
    # layer's projection to [W^(1); W^(2); W_λ] (3d rows) forward, its dW, and its dX above
    # layer 0 (the fixed embedding takes none); U_λ h[t-1] each step: forward, dU, dh; the
    # output layer: forward, dW, dX. A half the mode cannot see would be missing.
    T, B = tokens.shape
    d, C, depth = HIDDEN, model.cfg.n_classes, model.cfg.depth
    projections = sum((2 if l == 0 else 3) * 2 * T * B * 3 * d * (D_IN if l == 0 else d)
                      for l in range(depth))
    gates = depth * 3 * 2 * T * B * d * d
    output = 3 * 2 * B * depth * d * C
    assert counter.get_total_flops() == projections + gates + output
    torch.testing.assert_close(seen[0], ref[0], **tolerance(torch.float32))


def test_wrong_argument_counts_are_one_clear_error():
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    w = model.out.weight
    with pytest.raises(RuntimeError, match="2 layers need 11 params"):
        torch.ops.knn_sk_cpu.classifier_nll([w], tokens, mask, labels, model.embedding.weight,
                                            [], [0] * 14, False)


@dataclass
class _ClassifierWithANewField(KernelClassifierConfig):
    """A config that gained a field the fused path does not know (say, an output bias)."""

    output_bias: bool = True


@dataclass
class _KernelWithANewField(StringKernelConfig):
    norm_between_layers: bool = True


def test_every_config_field_is_declared_by_the_fused_path() -> None:
    """A new field of either config fails here until the nodes compute it and declare it
    (knn.ops.pooled)."""
    assert {f.name for f in fields(KernelClassifierConfig)} == set(pooled.CLASSIFIER_SUPPORTS)
    assert {f.name for f in fields(StringKernelConfig)} == set(pooled.LAYER_SUPPORTS)


def test_python_packs_by_the_names_cpp_declares() -> None:
    """The per-layer argument names are declared once, in C++ (csrc/pooled_layer.h), and
    knn.ops.pooled packs by them: a name added, removed or renamed on one side alone
    fails here."""
    model, *_ = model_and_batch({"highway": True}, torch.float32)
    node = model.layers[1].node_layer()
    layout = pooled.layout()
    assert tuple(layout) == pooled.LAYOUT_KINDS
    assert all(len(set(names)) == len(names) for names in layout.values())
    assert set(layout["params"]) == set(node.params())
    assert set(layout["masks"]) == set(pooled.LayerMasks._fields)
    assert set(layout["flags"]) == set(node.flags())
    # the pooled node takes a layer's arguments by keyword, under the same names
    schema = torch.ops.knn_sk_cpu.pooled.default._schema
    assert {name for names in layout.values() for name in names} <= {
        a.name for a in schema.arguments}
    with pytest.raises(RuntimeError, match="kind must be params, masks or flags"):
        torch.ops.knn_sk_cpu.classifier_layout("weights")


@pytest.mark.parametrize("new", ["classifier", "kernel"])
def test_an_undeclared_field_runs_the_module(new, threads, monkeypatch) -> None:
    """With two threads the fused loss node would run; an undeclared field makes the
    classifier take the module (and each layer its reference) instead."""
    threads(2)
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    cfg = model.cfg
    if new == "classifier":
        cfg = _ClassifierWithANewField(**{f.name: getattr(cfg, f.name) for f in fields(cfg)})
    else:
        kernel = _KernelWithANewField(**{f.name: getattr(cfg.kernel, f.name) for f in fields(cfg.kernel)})
        cfg = replace(cfg, kernel=kernel)
    torch.manual_seed(0)
    changed = KernelClassifier(cfg, model.embedding.weight.detach().clone()).train()
    assert model.node_supported and not changed.node_supported
    monkeypatch.setattr(KernelClassifier, "fused_nll_sum",
                        lambda *a: pytest.fail("the fused loss node ran for an undeclared field"))
    loss = changed.nll_sum(tokens, mask, labels)
    assert type(loss.grad_fn).__name__ == "NllLossBackward0"  # the module's loss
    if new == "kernel":
        assert not any(layer.pooled_node_supported for layer in changed.layers)


def test_ops_record_which_sst_path_trained(threads) -> None:
    """result.json's ops say whether the C++ nodes or the module trained (knn.ops.usage)."""
    model, tokens, mask, labels = model_and_batch({}, torch.float32)
    threads(2)
    usage.reset()
    model.nll_sum(tokens, mask, labels)
    report = usage.ops_report()
    assert report["classifier_loss_node"] is True and report["pooled_node"] is None
    threads(1)
    usage.reset()
    model.nll_sum(tokens, mask, labels)  # one thread: the module, each layer as one node
    report = usage.ops_report()
    assert report["classifier_loss_node"] is False and report["pooled_node"] is True
