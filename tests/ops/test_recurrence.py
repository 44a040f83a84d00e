"""The fused scan agrees with its PyTorch reference, in values and gradients."""
import itertools
import warnings

import pytest
import torch

from knn.ops import recurrence as R

DECAYS = ["constant", "learned", "gated_x", "gated_xh"]
HIGHWAYS = ["none", "carry", "projected"]


def make_inputs(n, decay, highway, masked, h_masked, T=4, B=3, d=5, seed=0, device="cpu"):
    """The scan's arguments, drawn on the CPU (the same numbers on every device), then moved."""
    g = torch.Generator().manual_seed(seed)
    gated = decay.startswith("gated")

    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, dtype=torch.float64, generator=g)).requires_grad_()

    K = R.RecurrenceSpec(n=n, highway=highway != "none").blocks(gated, highway == "projected")
    proj = rand(T, B, K, d)
    carry = rand(T, B, d) if highway == "carry" else None
    lam = None if gated else torch.rand(d, dtype=torch.float64, generator=g).requires_grad_(decay == "learned")
    weight_h = rand(d, d, scale=0.5) if decay == "gated_xh" else None
    mask = None
    if masked:
        mask = torch.ones(T, B, dtype=torch.bool)
        mask[T - 2 :, 1] = False  # right padding
        mask[1, 0] = False  # and a hole, which must also leave the state alone
    h_mask = (torch.rand(B, d, generator=g) > 0.3).double() / 0.7 if h_masked else None
    inputs = [proj, carry, lam, rand(2, d), weight_h, rand(B, n, d), rand(B, d), mask, h_mask]
    return [to_device(x, device) for x in inputs]


def to_device(x, device):
    if not isinstance(x, torch.Tensor):
        return x
    return x.detach().to(device).requires_grad_(x.requires_grad)


def outputs_and_grads(fn, inputs, spec):
    outs = fn(*inputs, spec)
    g = torch.Generator().manual_seed(1)
    loss = sum((o * torch.randn(o.shape, dtype=o.dtype, generator=g).to(o.device)).sum() for o in outs)
    leaves = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return list(outs) + [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads, leaves)]


needs_fused = pytest.mark.skipif(not R.fused_available(), reason="fused op not built on this machine")
# The fused ops of both device types; the CUDA one runs only where a GPU is (CI has none).
DEVICES = [
    pytest.param("cpu", marks=needs_fused),
    pytest.param("cuda", marks=pytest.mark.skipif(not R.fused_available("cuda"),
                                                  reason="needs CUDA and the fused CUDA op")),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,decay,highway", list(itertools.product([1, 2, 3], DECAYS, HIGHWAYS)))
def test_fused_matches_reference(n, decay, highway, device):
    for mult, norm, out_sum, act, masked, h_masked in itertools.product(
        [True, False], [True, False], [False, True], R.ACTIVATIONS, [False, True], [False, True]
    ):
        spec = R.RecurrenceSpec(n, mult, norm, out_sum, act, highway != "none")
        inputs = make_inputs(n, decay, highway, masked, h_masked, device=device)
        ref = outputs_and_grads(R.string_kernel_recurrence_ref, inputs, spec)
        fused = outputs_and_grads(R._FusedRecurrence.apply, inputs, spec)
        for a, b in zip(ref, fused):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,decay,highway", list(itertools.product([1, 2], DECAYS, HIGHWAYS)))
@pytest.mark.parametrize("mapping", ["multiplicative", "additive"])
@pytest.mark.parametrize("normalized", [True, False])
def test_fused_gradcheck(n, decay, highway, mapping, normalized, device):
    spec = R.RecurrenceSpec(n, mapping == "multiplicative", normalized, n > 1, "tanh", highway != "none")
    inputs = make_inputs(n, decay, highway, masked=True, h_masked=True, T=3, B=2, d=3, device=device)
    assert torch.autograd.gradcheck(lambda *xs: R._FusedRecurrence.apply(*xs, spec), inputs)


def test_reference_gradcheck():
    spec = R.RecurrenceSpec(2, True, True, True, "sigmoid", True)
    inputs = make_inputs(2, "gated_xh", "carry", masked=True, h_masked=True, T=3, B=2, d=3)
    assert torch.autograd.gradcheck(lambda *xs: R.string_kernel_recurrence_ref(*xs, spec), inputs)


@pytest.mark.parametrize("device", DEVICES)
def test_float32_parity(device):
    spec = R.RecurrenceSpec(2, True, True, False, "identity", True)
    inputs = [x.float() if isinstance(x, torch.Tensor) else x
              for x in make_inputs(2, "gated_xh", "carry", True, True, T=20, B=4, d=37, device=device)]
    inputs = [x.detach().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs]
    for a, b in zip(outputs_and_grads(R.string_kernel_recurrence_ref, inputs, spec),
                    outputs_and_grads(R._FusedRecurrence.apply, inputs, spec)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_switched_off_fast_path_runs_reference(monkeypatch):
    monkeypatch.setenv("KNN_FUSED", "0")
    assert not R.fused_available()
    spec = R.RecurrenceSpec(1, True, True, False, "identity", True)
    inputs = make_inputs(1, "gated_x", "carry", False, False)
    out = R.string_kernel_recurrence(*inputs, spec)
    assert out[0].grad_fn is not None and "Fused" not in type(out[0].grad_fn).__name__
    torch.testing.assert_close(out[0], R.string_kernel_recurrence_ref(*inputs, spec)[0])


def test_failed_build_warns_once_and_falls_back(monkeypatch):
    from torch.utils import cpp_extension

    def broken(**kwargs):
        raise OSError("no compiler here")

    monkeypatch.setattr(cpp_extension, "load", broken)
    monkeypatch.setattr(R, "_fused_modules", {})
    monkeypatch.setattr(R, "_fused_errors", {})
    spec = R.RecurrenceSpec(1, True, True, False, "identity", False)
    inputs = make_inputs(1, "constant", "none", False, False)
    with pytest.warns(RuntimeWarning, match=r"fused string-kernel op \(cpu\) unavailable .*no compiler here"):
        out = R.string_kernel_recurrence(*inputs, spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second call is silent
        R.string_kernel_recurrence(*inputs, spec)
    torch.testing.assert_close(out[0], R.string_kernel_recurrence_ref(*inputs, spec)[0])


def test_failed_build_names_the_compiler_error(monkeypatch):
    from torch.utils import cpp_extension

    def broken(**kwargs):
        raise RuntimeError("Error building extension 'x': [1/2] nvcc ...\n"
                           "common.h(144): error: more than one instance of overloaded function\n"
                           "1 error detected\nninja: build stopped: subcommand failed.")

    monkeypatch.setattr(cpp_extension, "load", broken)
    monkeypatch.setattr(R, "_fused_modules", {})
    monkeypatch.setattr(R, "_fused_errors", {})
    with pytest.warns(RuntimeWarning, match=r"common.h\(144\): error: more than one instance"):
        assert not R.fused_available("cpu")


def test_build_name_follows_every_source_file(monkeypatch, tmp_path):
    """An edit to the shared header alone gives a new build name, so no stale build is loaded."""
    for f in R._CSRC.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(R, "_CSRC", tmp_path)
    before = R._sources_digest()
    header = tmp_path / "string_kernel_common.h"
    header.write_text(header.read_text() + "\n// edited\n")
    assert R._sources_digest() != before


def test_other_dtypes_run_the_reference():
    spec = R.RecurrenceSpec(1, True, True, False, "identity", True)
    inputs = [to_device(x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x,
                        "cpu") for x in make_inputs(1, "gated_x", "carry", False, False)]
    out = R.string_kernel_recurrence(*inputs, spec)
    assert out[0].dtype == torch.bfloat16 and "Fused" not in type(out[0].grad_fn).__name__


def test_unknown_activation_is_one_clear_error():
    spec = R.RecurrenceSpec(1, True, True, False, "swish", False)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        R.string_kernel_recurrence(*make_inputs(1, "constant", "none", False, False), spec)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_dispatch_matches_cpu():
    """The dispatcher on a GPU gives what it gives on the CPU (each device's fused op where built)."""
    spec = R.RecurrenceSpec(2, True, True, False, "tanh", True)
    inputs = make_inputs(2, "gated_xh", "carry", True, True)
    cpu = outputs_and_grads(R.string_kernel_recurrence, inputs, spec)
    cuda_inputs = [to_device(x, "cuda") for x in inputs]
    out = R.string_kernel_recurrence(*cuda_inputs, spec)
    assert ("Fused" in type(out[0].grad_fn).__name__) == R.fused_available("cuda")
    gpu = outputs_and_grads(R.string_kernel_recurrence, cuda_inputs, spec)
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(a, b.cpu())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", R.ACTIVATIONS)
def test_fused_propagates_nan_like_reference(act, device):
    """A NaN input gives NaN outputs where the reference's are, for every activation.

    relu once mapped NaN to 0 here (``s > 0 ? s : 0``): a diverged SST run then
    had NaN weights but a finite loss of ln 2, and the trainer's NaN check never fired.
    """
    spec = R.RecurrenceSpec(2, True, True, True, act, False)
    inputs = make_inputs(2, "gated_xh", "none", masked=False, h_masked=False, device=device)
    with torch.no_grad():
        inputs[0][1, 0] = float("nan")  # one projection row of step 1, item 0
    ref = R.string_kernel_recurrence_ref(*inputs, spec)
    fused = R._FusedRecurrence.apply(*inputs, spec)
    for a, b in zip(ref, fused):
        assert a.isnan().any()
        assert torch.equal(a.isnan(), b.isnan())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", R.ACTIVATIONS)
def test_fused_float32_with_saturated_gates_matches_reference(act, device):
    """Gate pre-activations far past exp's float32 range (|x| >> 88) still give σ = 0 or 1.

    Built with -ffinite-math-only (implied by -ffast-math), the vectorized exp
    returned garbage past its range: NaN outputs, or, behind relu, silently wrong
    values; a gated SST model then diverged without a NaN loss. The build now adds
    -fno-finite-math-only.
    """
    spec = R.RecurrenceSpec(2, True, True, True, act, False)
    inputs = make_inputs(2, "gated_xh", "none", masked=False, h_masked=False, T=6, B=4, d=16, device=device)
    inputs = [x.detach().float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
              for x in inputs]
    inputs[0] = inputs[0] * 300  # projections, the gate's among them: pre-activations up to ~1e3
    ref = R.string_kernel_recurrence_ref(*inputs, spec)
    fused = R._FusedRecurrence.apply(*inputs, spec)
    for a, b in zip(ref, fused):
        assert a.isfinite().all()
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-3)
