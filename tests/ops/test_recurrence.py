"""The fused scan agrees with its PyTorch reference, in values and gradients."""
import itertools
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


@pytest.fixture(params=["cpu", "cuda"])
def device(request, require_fused) -> str:
    """The fused ops of both device types; a test taking ``device`` runs once per type.

    Where a type's op is not built the test skips or fails as ``require_fused``
    decides: a failed build with the compilers present fails (CI must not pass
    with every parity test skipped); ``KNN_FUSED=0``, no compiler or no GPU skip.
    """
    require_fused(request.param)
    return request.param


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


@pytest.mark.parametrize("highway", HIGHWAYS)
@pytest.mark.parametrize("B", [16, 37])
def test_xh_scan_in_row_blocks_matches_one_block_and_reference(highway, B, require_fused):
    # With threads to spare, the (x, h)-gated CPU scan runs blocks of >= 8 rows as separate
    # time loops (for_row_blocks): B=16 in 2 blocks, 37 in 3 or 4 of unequal size.
    require_fused("cpu")
    spec = R.RecurrenceSpec(2, True, True, False, "tanh", highway != "none")
    inputs = make_inputs(2, "gated_xh", highway, True, True, T=5, B=B, d=6)
    ref = outputs_and_grads(R.string_kernel_recurrence_ref, inputs, spec)
    threads = torch.get_num_threads()
    try:
        results = {}
        for n in (1, 4):
            torch.set_num_threads(n)
            results[n] = outputs_and_grads(R._FusedRecurrence.apply, inputs, spec)
    finally:
        torch.set_num_threads(threads)
    for one, blocks, want in zip(results[1], results[4], ref):
        torch.testing.assert_close(blocks, one, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(blocks, want, rtol=1e-10, atol=1e-10)


class _Watching(TorchDispatchMode):
    """A dispatch mode that only watches, as FlopCounterMode does."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B", [2, 6])
def test_xh_scan_products_on_blas_equal_the_dispatchers_bit_for_bit(dtype, B, require_fused):
    # The (x, h)-gated CPU scan calls BLAS itself for its per-step products and dU
    # (csrc/cpu_gemm.h), and at::mm_out while a dispatch mode watches: the same bits.
    require_fused("cpu")
    spec = R.RecurrenceSpec(2, True, True, False, "tanh", False)
    inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
              for x in make_inputs(2, "gated_xh", "none", True, True, T=5, B=B, d=24)]
    inputs = [to_device(x, "cpu") for x in inputs]
    direct = outputs_and_grads(R._FusedRecurrence.apply, inputs, spec)
    with _Watching():
        watched = outputs_and_grads(R._FusedRecurrence.apply, inputs, spec)
    for a, b in zip(direct, watched):
        assert torch.equal(a, b)


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


# --------------------------------------------------------------------------
# When the fused tests run, skip or fail (conftest.require_fused)


def fake_failed_build(monkeypatch, error="RuntimeError: string_kernel_cpu.cpp:9:1: error: boom"):
    """State of a process whose CPU build was tried and failed with ``error``."""
    monkeypatch.delenv("KNN_FUSED", raising=False)
    monkeypatch.setattr(R, "_fused_modules", {})
    monkeypatch.setattr(R, "_fused_errors", {"cpu": error})
    monkeypatch.setattr(R, "_fused_logs", {"cpu": f"[1/2] c++ -c string_kernel_cpu.cpp\n{error}\n"
                                                  "ninja: build stopped: subcommand failed."})


def test_failed_build_with_a_compiler_fails_the_fused_tests(monkeypatch, require_fused):
    fake_failed_build(monkeypatch)
    monkeypatch.setattr(R.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert R.fused_status("cpu") == ("failed", "RuntimeError: string_kernel_cpu.cpp:9:1: error: boom")
    with pytest.raises(pytest.fail.Exception, match="failed to build although its compilers") as info:
        require_fused("cpu")
    assert "error: boom" in str(info.value) and "ninja: build stopped" in str(info.value)


def test_failed_build_without_a_compiler_skips(monkeypatch, require_fused):
    fake_failed_build(monkeypatch)
    monkeypatch.setattr(R.shutil, "which", lambda name: None)
    assert R.fused_status("cpu").state == "no_compiler"
    with pytest.raises(pytest.skip.Exception, match=r"no_compiler \(c\+\+ not on PATH; build error: .*boom"):
        require_fused("cpu")


def test_switched_off_fused_op_skips_without_building(monkeypatch, require_fused):
    def build(device_type):
        raise AssertionError("KNN_FUSED=0 must not build")

    monkeypatch.setenv("KNN_FUSED", "0")
    monkeypatch.setattr(R, "_build", build)
    monkeypatch.setattr(R, "_fused_modules", {})
    monkeypatch.setattr(R, "_fused_errors", {})
    with pytest.raises(pytest.skip.Exception, match=r"off \(KNN_FUSED=0\)"):
        require_fused("cpu")


def test_cuda_variants_skip_without_a_gpu(monkeypatch, require_fused):
    monkeypatch.delenv("KNN_FUSED", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(pytest.skip.Exception, match="CUDA is not available"):
        require_fused("cuda")


def test_built_op_runs_its_tests(monkeypatch, require_fused):
    monkeypatch.delenv("KNN_FUSED", raising=False)
    monkeypatch.setattr(R, "_fused_modules", {"cpu": object()})
    assert R.fused_status("cpu") == ("built", "")
    require_fused("cpu")  # neither skips nor fails


def run_parity_test(tmp_path, **env):
    """``pytest -k test_float32_parity`` on this file in a fresh process, ``env`` added
    (None unsets), building into an empty extensions folder (no cached build to reuse)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), **env}  # None: unset
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
           str(Path(__file__).relative_to(root)), "-k", "test_float32_parity"]
    return subprocess.run(cmd, cwd=root, env={k: v for k, v in env.items() if v is not None},
                          capture_output=True, text=True, timeout=300)


def test_broken_compiler_fails_the_suite_and_knn_fused_0_skips(tmp_path):
    """End to end: a compiler that is on PATH but fails makes the CPU parity test fail
    (exit status 1), showing the compiler's error; ``KNN_FUSED=0`` makes it a skip."""
    cxx = tmp_path / "broken-c++"
    cxx.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "c++ (GCC) 12.2.0"; exit 0; fi\n'
                   "echo 'string_kernel_cpu.cpp:1:1: error: simulated compiler failure' >&2\nexit 1\n")
    cxx.chmod(0o755)
    broken = run_parity_test(tmp_path, CXX=str(cxx), KNN_FUSED=None)
    out = broken.stdout + broken.stderr
    assert broken.returncode == 1, out[-3000:]
    assert "failed to build although its compilers are on PATH" in out
    assert "error: simulated compiler failure" in out
    assert "ERROR at setup of test_float32_parity[cpu]" in out  # require_fused fails it

    off = run_parity_test(tmp_path, CXX=str(cxx), KNN_FUSED="0")
    out = off.stdout + off.stderr
    assert off.returncode == 0, out[-3000:]
    assert "fused cpu op not run here: off (KNN_FUSED=0)" in out and "ERROR" not in out


def test_a_failed_sst_build_leaves_the_scan_and_the_sampler_working(monkeypatch, require_fused):
    """The SST nodes are a library of their own: its failure turns the pooled node off (the
    layers' reference runs), not the scan or the dropout sampler, and ops say which built."""
    require_fused("cpu")
    from torch.utils import cpp_extension

    from knn.ops import dropout, pooled
    from knn.train.provenance import ops

    load = cpp_extension.load

    def sst_broken(**kwargs):
        if "sk_sst" in kwargs["name"]:
            raise RuntimeError("classifier_cpu.cpp:1:1: error: boom")
        return load(**kwargs)

    monkeypatch.setattr(cpp_extension, "load", sst_broken)
    monkeypatch.setattr(R, "_fused_modules", {})
    monkeypatch.setattr(R, "_fused_errors", {})
    x = torch.randn(3, 2, 4)
    with pytest.warns(RuntimeWarning, match=r"\(cpu_sst\) unavailable .*error: boom"):
        assert not pooled.fused_applies(x)
    assert R.fused_available("cpu") and dropout._sampler_applies(x)
    assert R.fused_status("cpu_sst") == ("failed", "RuntimeError: classifier_cpu.cpp:1:1: error: boom")
    recorded = ops()
    assert recorded["fused_built"] == {"cpu": True, "cpu_sst": False}
    assert "boom" in recorded["fused_build_errors"]["cpu_sst"]


def test_a_build_lock_left_by_a_killed_process_does_not_hang_the_next(monkeypatch, tmp_path, caplog):
    """cpp_extension waits, without end, on a ``lock`` file its last holder never removed
    (that holder was killed); the build must clear it and go on. ``load`` is replaced by
    one that takes cpp_extension's own baton as the real one does, in a thread, so that a
    hang fails the test instead of stalling the suite."""
    import os
    import threading

    from torch.utils import cpp_extension
    from torch.utils.file_baton import FileBaton

    (tmp_path / "lock").write_text("")  # left by a process killed while holding it
    monkeypatch.setattr(cpp_extension, "_get_build_directory", lambda name, verbose: str(tmp_path))
    loaded = []

    def load(name, build_directory=None, **kwargs):
        folder = build_directory or cpp_extension._get_build_directory(name, False)
        baton = FileBaton(os.path.join(folder, "lock"))
        if baton.try_acquire():
            loaded.append(name)
            baton.release()
        else:
            baton.wait()

    monkeypatch.setattr(cpp_extension, "load", load)
    worker = threading.Thread(target=R._build, args=("cpu",), daemon=True)
    with caplog.at_level("WARNING", logger="knn.ops.recurrence"):
        worker.start()
        worker.join(timeout=30)
    assert not worker.is_alive(), "the build waited on the dead process's lock"
    assert len(loaded) == 1 and loaded[0].startswith("knn_sk_core_cpu_")
    assert not (tmp_path / "lock").exists()
    assert "left by a process stopped while it built" in caplog.text
