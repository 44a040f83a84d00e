"""knn.ops.linear computes F.linear, routes CPU float32 through oneDNN on AVX-512 CPUs (or when
forced), and counts its FLOPs."""
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from knn.ops import linear as L

needs_onednn = pytest.mark.skipif(L._LINEAR is None, reason="this torch build has no oneDNN linear op")


@pytest.fixture
def onednn_on(monkeypatch):
    """The oneDNN path, whatever this CPU would choose."""
    monkeypatch.setenv("KNN_ONEDNN", "1")


def draw(shape_x, n_out, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape_x, generator=g)
    w = torch.randn(n_out, shape_x[-1], generator=g)
    b = torch.randn(n_out, generator=g) if bias else None
    return x, w, b


def grads_of(fn, x, w, b, dy):
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (x, w, b)]
    y = fn(*leaves)
    y.backward(dy)
    return y.detach(), [t.grad if t is not None else None for t in leaves]


@needs_onednn
@pytest.mark.parametrize("shape_x", [(7, 5), (4, 3, 6), (1, 9)])
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_equal_a_float64_product(shape_x, bias, onednn_on):
    x, w, b = draw(shape_x, 11, bias)
    assert L.onednn_enabled(x)
    dy = torch.randn(*shape_x[:-1], 11, generator=torch.Generator().manual_seed(1))
    y, g = grads_of(L.linear, x, w, b, dy)
    as64 = [t.double() if t is not None else None for t in (x, w, b)]
    y64, g64 = grads_of(nn.functional.linear, *as64, dy.double())
    assert y.dtype == torch.float32 and y.shape == y64.shape
    torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-5)
    for got, want in zip(g, g64):
        if want is not None:
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_strided_input_gives_the_same_product(onednn_on):
    x, w, b = draw((6, 4), 3, True)
    xt = x.t().contiguous().t()  # same values, column-major strides
    assert not xt.is_contiguous()
    torch.testing.assert_close(L.linear(xt, w, b), L.linear(x, w, b))


@needs_onednn
def test_float32_cpu_products_go_through_onednn(monkeypatch, onednn_on):
    calls = []

    def spy(*args):
        calls.append(args[0].shape)
        return L._onednn_op()(*args)

    monkeypatch.setattr(L, "_LINEAR", spy)
    x, w, b = draw((5, 4), 3, True)
    x.requires_grad_()
    w.requires_grad_()
    L.linear(x, w, b).sum().backward()
    assert calls == [(5, 4), (5, 3), (4, 5)]  # forward, dX = dY W, dWᵀ = Xᵀ dY


@pytest.mark.parametrize("case", ["float64", "switched_off", "empty"])
def test_other_inputs_fall_back_to_f_linear(monkeypatch, case):
    monkeypatch.setattr(L, "_LINEAR", lambda *a: pytest.fail("oneDNN op called"))
    x, w, b = draw((5, 4), 3, True)
    if case == "float64":
        x, w, b = x.double(), w.double(), b.double()
    elif case == "switched_off":
        monkeypatch.setenv("KNN_ONEDNN", "0")
    else:
        x = x[:0]
    assert not L.onednn_enabled(x)
    torch.testing.assert_close(L.linear(x, w, b), nn.functional.linear(x, w, b))


@needs_onednn
def test_flop_counter_sees_the_onednn_products(onednn_on):
    x, w, b = draw((8, 6), 5, True)
    x.requires_grad_()
    w.requires_grad_()
    with FlopCounterMode(display=False) as counter:
        L.linear(x, w, b).sum().backward()
    assert counter.get_total_flops() == 3 * 2 * 8 * 6 * 5  # forward, dX and dW products


@pytest.mark.parametrize("capability, forced, want", [
    ("AVX512", None, True), ("AVX2", None, False), ("DEFAULT", None, False),
    ("AVX2", "1", True), ("AVX512", "0", False),
])
def test_onednn_is_chosen_on_avx512_cpus_unless_forced(monkeypatch, capability, forced, want):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    if forced is None:
        monkeypatch.delenv("KNN_ONEDNN", raising=False)
    else:
        monkeypatch.setenv("KNN_ONEDNN", forced)
    assert L.onednn_preferred() is want
    assert L.onednn_enabled(torch.ones(2, 3)) is (want and L._LINEAR is not None)


def test_linear_module_is_a_drop_in_nn_linear():
    torch.manual_seed(0)
    ours, theirs = L.Linear(4, 3), nn.Linear(4, 3)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 5, 4)
    torch.testing.assert_close(ours(x), theirs(x))
