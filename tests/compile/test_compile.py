"""``torch.compile`` runs every layer family and each task's model with eager's numbers.

Each test builds a module at smoke size, runs one forward and backward eagerly and one
through ``torch.compile(module, fullgraph=True)`` (Inductor) from the same generator
state, and compares the outputs and every gradient. ``fullgraph=True`` makes any graph
break an error, so a pass also says the whole module, every layer included, is one graph.

What the compiled graph runs (the dispatch points' docstrings say it too):

* products (:func:`knn.ops.linear.onednn_enabled`): ``F.linear``, lowered by Inductor,
  instead of the oneDNN calls eager makes on an AVX-512 CPU;
* the string-kernel scan (:func:`knn.ops.recurrence.string_kernel_recurrence`): the
  fused C++/CUDA kernels as the custom ops ``knn::string_kernel_scan`` /
  ``knn::string_kernel_scan_backward`` (the reference, unrolled, where no fused op is built);
* the SST classifier's C++ nodes (:func:`knn.ops.pooled.fused_applies`): the reference
  composition, around the same fused scan;
* dropout masks (:mod:`knn.ops.dropout`): the custom op ``knn::mask``, the same draws
  from the default generator as eager, in the same order;
* random-walk and WL layers: plain PyTorch, compiled as they are.

Tolerance: float32, ``rtol = 1e-4``, ``atol = 1e-5`` (:data:`TOL`). The compiled graph
rounds differently from eager (``F.linear`` for oneDNN, fused elementwise kernels,
reassociated sums), never by more than float32 rounding propagated through a few layers;
the dropout masks are the same bits. On CUDA the models' own dropout is off
(:func:`model_dropout`): ``F.dropout``'s compiled masks are not eager's there.
"""
from __future__ import annotations

import pytest
import torch

from knn.featurize import BatchMolGraph, MolGraph
from knn.layers.random_walk import DeepRandomWalkNet, RandomWalkConfig
from knn.layers.string_kernel import StringKernelConfig, StringKernelLayer
from knn.models import build
from knn.ops import recurrence, usage

TOL = {"rtol": 1e-4, "atol": 1e-5}
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="CUDA is not available")),
]


@pytest.fixture(params=DEVICES)
def device(request):
    """Each test once per device; a fresh Dynamo cache for each (no recompile limits)."""
    torch._dynamo.reset()
    yield request.param
    torch._dynamo.reset()


def model_dropout(device):
    """The models' own dropout p: 0.5 on CPU; 0 on CUDA, where it is ``F.dropout``, whose
    compiled masks are Inductor's, not eager's (knn.ops.dropout._sampler_applies). The
    layers' variational masks are drawn on every device, and equal eager's."""
    return 0.5 if device == "cpu" else 0.0


def run(fn, module, inputs, seed=11):
    """Outputs of ``fn(module, *inputs)`` and the gradients of a fixed random projection of
    them, w.r.t. every parameter and every input that requires grad, from generator state
    ``seed``."""
    module.zero_grad(set_to_none=True)
    inputs = [x.detach().clone().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x
              for x in inputs]
    torch.manual_seed(seed)
    outs = [o for o in _flat(fn(module, *inputs)) if o.is_floating_point()]
    g = torch.Generator().manual_seed(5)
    loss = sum((o * torch.randn(o.shape, generator=g).to(o)).sum() for o in outs)
    loss.backward()
    grads = {name: p.grad for name, p in module.named_parameters() if p.grad is not None}
    grads.update({f"input{i}": x.grad for i, x in enumerate(inputs)
                  if torch.is_tensor(x) and x.grad is not None})
    return [o.detach() for o in outs], grads, torch.get_rng_state()


def _flat(x):
    if torch.is_tensor(x):
        return [x]
    return [t for item in x for t in _flat(item)]


def assert_compiled_equals_eager(fn, module, inputs):
    """One eager and one compiled (fullgraph, Inductor) step agree within :data:`TOL`."""
    eager = run(fn, module, inputs)
    compiled = run(torch.compile(fn, fullgraph=True), module, inputs)
    assert len(compiled[0]) == len(eager[0])
    for c, e in zip(compiled[0], eager[0]):
        torch.testing.assert_close(c, e, **TOL)
    assert compiled[1].keys() == eager[1].keys()
    for name in eager[1]:
        torch.testing.assert_close(compiled[1][name], eager[1][name], **TOL, msg=lambda m: f"{name}: {m}")
    # the same number of draws from the default generator (the same masks, above)
    assert torch.equal(compiled[2], eager[2])


def padded(T=5, B=3, lengths=(5, 3, 2)):
    return torch.arange(T).unsqueeze(1) < torch.tensor(lengths)  # (T, B), padding after each column


# --------------------------------------------------------------------------
# Layer families


class _Stack(torch.nn.Module):
    """String-kernel layers one after another, one per decay and highway variant."""

    def __init__(self, d_in, d, cfgs):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            StringKernelLayer(d_in if i == 0 else d, d, cfg) for i, cfg in enumerate(cfgs))

    def forward(self, x, mask):
        outs = []
        for layer in self.layers:
            x, state = layer(x, mask=mask)
            outs += [x, state.c, state.h]
        return outs


STRING_KERNEL_CONFIGS = [
    # decay, with the highway's carry projected (6 -> 8), the input (8 -> 8) or none
    StringKernelConfig(n=2, decay="constant", decay_value=0.4, highway=True, rnn_dropout=0.2),
    StringKernelConfig(n=1, decay="learned", activation="tanh", highway=False),
    StringKernelConfig(n=2, decay="gated_x", mapping="additive", output="sum", highway=True,
                       rnn_dropout=0.3),
    StringKernelConfig(n=2, decay="gated_xh", activation="relu", output="sum", highway=True,
                       rnn_dropout=0.2),
]


def test_string_kernel_layers_every_decay(device):
    """Constant, learned, x-gated and (x, h)-gated decay, in training (variational dropout)."""
    torch.manual_seed(0)
    stack = _Stack(6, 8, STRING_KERNEL_CONFIGS).to(device)
    x = torch.randn(5, 3, 6, device=device, requires_grad=True)
    usage.reset()
    assert_compiled_equals_eager(lambda m, x, mask: m(x, mask), stack, [x, padded().to(device)])
    assert usage.ops_report()["fused_scan"] is recurrence.fused_available(torch.device(device).type)


def test_pooled_sst_layer(device):
    """StringKernelLayer.forward_pooled (eager on CPU: the C++ node; compiled: its reference)."""
    torch.manual_seed(1)
    layer = StringKernelLayer(6, 8, StringKernelConfig(n=2, output="sum", activation="relu",
                                                       decay="gated_xh", highway=True,
                                                       rnn_dropout=0.2)).to(device)
    x = torch.randn(5, 3, 6, device=device, requires_grad=True)
    in_mask = (torch.rand(5, 3, 6) > 0.3).to(device) / 0.7
    assert_compiled_equals_eager(lambda m, *a: m.forward_pooled(*a), layer,
                                 [x, padded().to(device), in_mask])


def graphs(device, d_in=8, d_e=3, seed=0):
    """Two small molecules-like graphs with random atom and bond features, batched."""
    g = torch.Generator().manual_seed(seed)
    mols = []
    for v, extra in ((6, [(0, 5), (1, 4)]), (4, [(0, 2)])):
        edges = [(i, i + 1) for i in range(v - 1)] + extra
        mols.append(MolGraph(torch.randn(v, d_in, generator=g), torch.tensor(edges),
                             torch.randn(len(edges), d_e, generator=g)))
    return BatchMolGraph.from_graphs(mols).to(device)


def test_random_walk_layers(device):
    """Deep random-walk net, gated decay with bond features (the constant λ runs in wln)."""
    torch.manual_seed(2)
    cfg = RandomWalkConfig(n=3, activation="tanh", decay="gated", gate_scale=10.0, bond_dim=3)
    net = DeepRandomWalkNet(8, 8, 2, cfg).to(device)  # d_in = d: both layers share kernels
    graph = graphs(device)
    assert_compiled_equals_eager(lambda m, f, e: m(f, graph, e), net,
                                 [graph.atom_features.requires_grad_(),
                                  graph.bond_features.requires_grad_()])


# --------------------------------------------------------------------------
# Each task's model (knn.models.build at tiny sizes), in training mode


def test_knn_lm(device):
    torch.manual_seed(3)
    model = build("knn_lm", 30, hidden=8, depth=2, dropout=model_dropout(device),
                  kernel={"rnn_dropout": 0.2}).to(device)
    ids = torch.randint(0, 30, (5, 3), device=device)
    assert_compiled_equals_eager(lambda m, ids: m(ids), model, [ids])


def test_knn_sst(device):
    """The SST classifier; its eager CPU layers are the pooled C++ nodes."""
    torch.manual_seed(4)
    model = build("knn_sst", torch.randn(20, 6), hidden=8, depth=2,
                  dropout=model_dropout(device)).to(device)
    tokens = torch.randint(0, 20, (5, 3), device=device)
    assert_compiled_equals_eager(lambda m, t, mask: m(t, mask), model, [tokens, padded().to(device)])


def test_wln(device):
    """The WL kernel network regressor (its random-walk kernel with constant λ)."""
    torch.manual_seed(5)
    model = build("wln", atom_dim=8, bond_dim=3, hidden=8, depth=3).to(device)
    graph = graphs(device)
    assert_compiled_equals_eager(lambda m: m(graph), model, [])


# --------------------------------------------------------------------------
# The custom ops themselves


def test_scan_custom_op_is_the_fused_op(require_fused):
    """knn::string_kernel_scan (what compiled code runs) passes torch.library.opcheck
    (schema, fake implementation, autograd registration) and equals _FusedRecurrence,
    eager's fused scan, bit for bit."""
    require_fused("cpu")
    g = torch.Generator().manual_seed(0)
    T, B, n, d = 4, 3, 2, 5
    spec = recurrence.RecurrenceSpec(n=n, output_sum=True, activation="tanh", highway=True)
    K = spec.blocks(gated=True, carry_projected=False)
    proj = torch.randn(T, B, K, d, dtype=torch.float64, generator=g, requires_grad=True)
    carry = torch.randn(T, B, d, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(2, d, dtype=torch.float64, generator=g, requires_grad=True)
    weight_h = torch.randn(d, d, dtype=torch.float64, generator=g, requires_grad=True)
    c0 = torch.randn(B, n, d, dtype=torch.float64, generator=g)
    h0 = torch.randn(B, d, dtype=torch.float64, generator=g)
    mask, h_mask = padded(T, B, (4, 2, 3)), torch.full((B, d), 1.25, dtype=torch.float64)
    inputs = [proj, carry, None, bias, weight_h, c0, h0, mask, h_mask]
    # opcheck without padding: the op leaves λ_t of padded steps unwritten (no step runs
    # there; the backward never reads them), and opcheck compares that output of two runs.
    unpadded = [*inputs[:7], None, h_mask]
    torch.library.opcheck(recurrence._scan_op,
                          (*recurrence._op_args(*unpadded), *recurrence.op_flags(spec)))

    def outs_and_grads(fn):
        outs = fn(*inputs, spec)
        loss = sum((o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype).view_as(o)).sum() for o in outs)
        return [*outs, *torch.autograd.grad(loss, [proj, carry, bias, weight_h])]

    for a, b in zip(outs_and_grads(recurrence._compiled_scan),
                    outs_and_grads(recurrence._FusedRecurrence.apply)):
        assert torch.equal(a, b)
