"""The string-kernel recurrence: one elementwise scan over time, fused.

Everything a string-kernel layer computes after its single input GEMM lives
here: the decay gate, the n-gram states c_1..c_n, the activation and the
highway connection. Following SRU (Lei et al. 2018), the GEMM stays outside
and the scan is dispatched at one point, :func:`string_kernel_recurrence`, to

* a fused op, built lazily on first use and cached by torch's cpp_extension
  tooling: C++ (``csrc/string_kernel_cpu.cpp``) for CPU tensors, CUDA
  (``csrc/string_kernel_cuda.cu``, one thread per hidden unit) for GPU
  tensors, both float32 or float64; or
* :func:`string_kernel_recurrence_ref`, a plain PyTorch loop with the same
  signature, used for other dtypes, when a build is unavailable, when
  ``KNN_FUSED=0``, and by the tests as the reference.

:func:`fused_status` says which of the two runs on a device type, and why.
Under ``torch.compile`` the fused op runs as the custom ops
``torch.ops.knn.string_kernel_scan`` / ``string_kernel_scan_backward``, which have
fake implementations so that the compiler traces them as opaque nodes (see
:func:`string_kernel_recurrence`).

Per element (b, i) and step t, with K blocks of ``proj[t, b]`` holding
u_1..u_n = W^{(1..n)} x_t, then the decay-gate pre-activation (gated decay
only), the highway-gate pre-activation and the highway carry projection
(highway only; the carry is ``x_t`` itself when ``carry`` is given):

    λ_t    = σ(W_λ x_t + U (h[t-1] ⊙ m) + b_λ)   gated (U only for "gated_xh")
           = decay                                constant / learned
    a_t    = 1 - λ_t if normalized else 1
    c_1[t] = λ_t c_1[t-1] + a_t u_1[t]
    c_j[t] = λ_t c_j[t-1] + a_t (c_{j-1}[t-1] ∘ u_j[t]),  ∘ ∈ {⊙, +},  1 < j ≤ n
    y[t]   = act(c_n[t])  or  act(Σ_j c_j[t])
    h[t]   = f_t ⊙ (y[t] ⊙ m) + (1 - f_t) ⊙ carry_t,  f_t = σ(W_f x_t + b_f)   (highway)
           = y[t]                                                               (otherwise)

m is the variational-dropout mask of the recurrent state (one per sequence,
already scaled); inside the highway it also drops y, as the authors' PTB code
does. Where ``mask[t, b] == 0`` (padding) the state (c, h) is left unchanged
and the output is zero.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch
from torch import Tensor

from knn.ops import usage

log = logging.getLogger(__name__)

ACTIVATIONS = ("identity", "tanh", "relu", "sigmoid")


@dataclass(frozen=True)
class RecurrenceSpec:
    """Static shape of the scan (everything that is not a tensor)."""

    n: int = 1
    multiplicative: bool = True
    normalized: bool = True
    output_sum: bool = False
    activation: str = "identity"
    highway: bool = False

    def blocks(self, gated: bool, carry_projected: bool) -> int:
        """Number of d-wide blocks K that ``proj`` must hold."""
        return self.n + int(gated) + int(self.highway) + int(self.highway and carry_projected)


def _act(s: Tensor, name: str) -> Tensor:
    if name == "identity":
        return s
    if name == "tanh":
        return torch.tanh(s)
    if name == "relu":
        return torch.relu(s)
    if name == "sigmoid":
        return torch.sigmoid(s)
    raise ValueError(f"unknown activation {name!r}; choose one of {ACTIVATIONS}")


def string_kernel_recurrence_ref(
    proj: Tensor,
    carry: Tensor | None,
    decay: Tensor | None,
    gate_bias: Tensor,
    weight_h: Tensor | None,
    c0: Tensor,
    h0: Tensor,
    mask: Tensor | None,
    h_mask: Tensor | None,
    spec: RecurrenceSpec,
) -> tuple[Tensor, Tensor, Tensor]:
    """Plain PyTorch scan (the reference twin of the fused op).

    Args:
        proj: (T, B, K, d) input projections, blocks as in the module docstring.
        carry: (T, B, d) highway carry input (the layer input), or None when
            the carry is the projected block of ``proj`` (or no highway).
        decay: (d,) decay λ for constant / learned decay; None for gated decay.
        gate_bias: (2, d) biases of the decay gate (row 0) and highway gate (row 1).
        weight_h: (d, d) U of the (x, h)-gated decay, or None.
        c0: (B, n, d) initial states c_1..c_n.
        h0: (B, d) initial output state h[0].
        mask: (T, B) 1 for real tokens, 0 for padding, or None.
        h_mask: (B, d) variational-dropout mask of h, or None.
    Returns:
        h: (T, B, d) outputs; c_last: (B, n, d); h_last: (B, d).
    """
    T, B, K, d = proj.shape
    n, gated = spec.n, decay is None
    lam_idx = n
    f_idx = n + int(gated)
    c = [c0[:, j] for j in range(n)]  # each (B, d)
    h = h0
    outputs = []
    for t in range(T):
        u = proj[t]  # (B, K, d)
        if decay is None:  # gated
            g = u[:, lam_idx] + gate_bias[0]
            if weight_h is not None:
                hh = h if h_mask is None else h * h_mask
                g = g + hh @ weight_h.t()
            lam = torch.sigmoid(g)
        else:
            lam = decay.expand(B, d)
        a = 1 - lam if spec.normalized else torch.ones_like(lam)
        new_c = []
        for j in range(n):
            if j == 0:
                inp = u[:, 0]
            elif spec.multiplicative:
                inp = c[j - 1] * u[:, j]
            else:
                inp = c[j - 1] + u[:, j]
            new_c.append(lam * c[j] + a * inp)
        s = cast(Tensor, sum(new_c)) if spec.output_sum else new_c[-1]  # n >= 1 terms
        y = _act(s, spec.activation)
        if spec.highway:
            if h_mask is not None:
                y = y * h_mask
            f = torch.sigmoid(u[:, f_idx] + gate_bias[1])
            x_c = carry[t] if carry is not None else u[:, f_idx + 1]
            new_h = f * y + (1 - f) * x_c
        else:
            new_h = y
        if mask is not None:
            keep = mask[t].to(proj.dtype).unsqueeze(-1)  # (B, 1)
            new_c = [keep * cn + (1 - keep) * co for cn, co in zip(new_c, c)]
            out = keep * new_h
            new_h = out + (1 - keep) * h
        else:
            out = new_h
        c, h = new_c, new_h
        outputs.append(out)
    return torch.stack(outputs), torch.stack(c, dim=1), h


# --------------------------------------------------------------------------
# Fused ops


_ACT_CODE = {name: i for i, name in enumerate(ACTIVATIONS)}
_CSRC = Path(__file__).with_name("csrc")
_FUSED_DTYPES = (torch.float32, torch.float64)
#: The fused libraries, each built on its own so that one's failure leaves the others
#: working: "cpu" (the scan and the Bernoulli sampler), "cuda" (the scan) and "cpu_sst"
#: (the SST classifier's pooled layer node and loss node, which call the "cpu" scan
#: through the dispatcher, so they need it built too).
PARTS = ("cpu", "cuda", "cpu_sst")
#: The C++ sources of each CPU library (knn/ops/csrc/).
_CPU_SOURCES = {"cpu": ("string_kernel_cpu.cpp", "bernoulli_cpu.cpp"),
                "cpu_sst": ("string_kernel_pooled_cpu.cpp", "classifier_cpu.cpp")}
# Built modules, the reasons builds failed (one line) and the failed builds'
# output (its tail), by part (PARTS): each build is tried once per process.
_fused_modules: dict[str, Any] = {}  # torch.ops namespaces of the built libraries
_fused_errors: dict[str, str] = {}
_fused_logs: dict[str, str] = {}
_LOG_TAIL_CHARS = 4000


def _isa() -> tuple[str, list[str]]:
    """Widest vector ISA both this CPU and torch support, with its gcc flags."""
    cap = torch.backends.cpu.get_cpu_capability()
    if cap in ("AVX2", "AVX512"):
        return "avx2", ["-mavx2", "-mfma"]
    return "base", []


def _sources_digest() -> str:
    """Short hash of every file in csrc/.

    cpp_extension rebuilds when a listed source changes, but not when only the
    shared header does; naming the build after all of csrc/ means an edited
    header is never served from a stale build.
    """
    h = hashlib.sha256()
    for f in sorted(_CSRC.iterdir()):
        if f.suffix in (".h", ".cpp", ".cu"):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:10]


@contextmanager
def _build_lock(name: str) -> Iterator[Path]:
    """Hold an OS lock on the build folder of extension ``name`` while cpp_extension loads
    it; yield the folder.

    cpp_extension makes processes take turns with a plain ``lock`` file in the folder,
    which its holder deletes when done, even when nothing needs rebuilding. A process
    killed while holding it (a timeout, a stop during the up-to-date check) leaves it
    behind, and every later process waits on it forever without a word. This lock is an
    ``flock``, released by the OS when its holder dies, and every knn process takes it
    before cpp_extension's, so a ``lock`` file found while holding it is a dead process's.
    """
    from filelock import FileLock
    from torch.utils import cpp_extension

    folder = Path(cpp_extension._get_build_directory(name, verbose=False))
    with FileLock(str(folder / "knn.lock")):
        stale = folder / "lock"
        if stale.exists():
            log.warning("removed %s, left by a process stopped while it built %s", stale, name)
            stale.unlink(missing_ok=True)
        yield folder


def _build(device_type: str):
    """Compile (or reuse from cpp_extension's cache) the library of a part (:data:`PARTS`);
    return its ops.

    The ops register through TORCH_LIBRARY (``torch.ops.knn_sk_cpu`` /
    ``torch.ops.knn_sk_cuda``; the "cpu_sst" library adds its ops to ``knn_sk_cpu`` as a
    fragment) rather than as a Python module, so no Python headers are needed to build them.
    """
    from torch.utils import cpp_extension

    digest = _sources_digest()
    if device_type == "cuda":
        name = f"knn_string_kernel_cuda_{digest}"
        with _build_lock(name) as folder:
            cpp_extension.load(
                name=name,
                sources=[str(_CSRC / "string_kernel_cuda.cu")],
                extra_cflags=["-O3"],
                extra_cuda_cflags=["-O3"],
                build_directory=str(folder),
                is_python_module=False,
                verbose=False,
            )
        return torch.ops.knn_sk_cuda
    isa, isa_flags = _isa()
    # The ISA is part of the name so a cached build never runs on a CPU without it.
    name = f"knn_{'sk_core' if device_type == 'cpu' else 'sk_sst'}_cpu_{isa}_{digest}"
    with _build_lock(name) as folder:
        cpp_extension.load(
            name=name,
            # "cpu": the scan and the Bernoulli sampler of knn.ops.dropout; "cpu_sst": the
            # SST classifier's pooled layer node and loss node (knn.ops.pooled).
            sources=[str(_CSRC / f) for f in _CPU_SOURCES[device_type]],
            # -ffast-math lets gcc vectorize (exp through glibc's libmvec, declared in the
            # source); compile-only, so the process-wide flush-to-zero of crtfastmath.o is
            # never linked in.
            # -fno-finite-math-only keeps NaN and inf meaning what they mean: a
            # diverged run must produce a NaN loss, not quietly clamped zeros.
            extra_cflags=["-O3", "-ffast-math", "-fno-finite-math-only", "-fopenmp", *isa_flags],
            extra_ldflags=["-fopenmp"],
            build_directory=str(folder),
            is_python_module=False,
            verbose=False,
        )
    return torch.ops.knn_sk_cpu


def _load_fused(device_type: str = "cpu"):
    """Build (first call only; cached on disk by cpp_extension) and import the op for a device type."""
    if device_type in _fused_modules or device_type in _fused_errors:
        return _fused_modules.get(device_type)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fused_modules[device_type] = _build(device_type)
    except Exception as exc:  # compiler, ninja or headers missing: fall back, say why once
        # A failed build's message is the compiler's whole output ending in ninja's
        # "build stopped"; the first "error:" line is the one that says why.
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        errors = [line for line in lines if "error:" in line]
        reason = errors[0] if errors else (lines[-1] if lines else type(exc).__name__)
        _fused_errors[device_type] = f"{type(exc).__name__}: {reason}"
        _fused_logs[device_type] = str(exc)[-_LOG_TAIL_CHARS:]
        warnings.warn(
            f"knn: fused string-kernel op ({device_type}) unavailable ({_fused_errors[device_type]}); "
            "using the PyTorch reference",
            RuntimeWarning,
            stacklevel=3,
        )
    return _fused_modules.get(device_type)


def fused_available(device_type: str = "cpu") -> bool:
    """True when the fused library of ``device_type`` (a part of :data:`PARTS`: "cpu",
    "cuda" or "cpu_sst") is built (building it if needed); "cpu_sst" also needs "cpu"."""
    if os.environ.get("KNN_FUSED", "1") == "0" or device_type not in PARTS:
        return False
    if device_type == "cuda" and not torch.cuda.is_available():
        return False
    if device_type == "cpu_sst" and not fused_available("cpu"):
        return False
    return _load_fused(device_type) is not None


def fused_parts() -> dict[str, bool]:
    """Each part whose build was tried in this process: whether it is built (result.json's
    ``ops`` records it beside the build errors)."""
    return {part: part in _fused_modules for part in PARTS
            if part in _fused_modules or part in _fused_errors}


def fused_module(device_type: str = "cpu") -> Any:
    """The built fused-op module of ``device_type`` (building it on first use), or None when
    it is off (``KNN_FUSED=0``) or its build failed: the layers' C++ nodes call through it."""
    return _load_fused(device_type) if fused_available(device_type) else None


def fused_build_errors() -> dict[str, str]:
    """Why each fused build that was tried failed, one line per device type (empty: none
    failed or none was tried); result.json's ``ops`` records it."""
    return dict(_fused_errors)


def fused_build_log(device_type: str = "cpu") -> str:
    """The tail of a failed build's compiler output ("" when it did not fail)."""
    return _fused_logs.get(device_type, "")


def fused_compilers(device_type: str = "cpu") -> dict[str, str | None]:
    """The compilers a build for ``device_type`` needs, each with its path or None if absent.

    The C++ compiler is the one cpp_extension runs (``$CXX``, else ``c++``);
    the CUDA build needs nvcc from cpp_extension's CUDA_HOME as well.
    """
    from torch.utils import cpp_extension

    cxx = cpp_extension.get_cxx_compiler()
    found: dict[str, str | None] = {cxx: shutil.which(cxx)}
    if device_type == "cuda":
        home = cpp_extension.CUDA_HOME
        nvcc = str(Path(home) / "bin" / "nvcc") if home else "nvcc"
        found[nvcc] = shutil.which(nvcc)
    return found


class FusedStatus(NamedTuple):
    """Whether the fused op of a device type runs here, and why (see :func:`fused_status`)."""

    state: str  # "built" | "off" | "no_device" | "no_compiler" | "failed"
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.state} ({self.detail})" if self.detail else self.state


def fused_status(device_type: str = "cpu") -> FusedStatus:
    """Why the dispatcher does or does not run the fused op of ``device_type`` (building it if needed).

    ``built``: it runs. ``off``: ``KNN_FUSED=0``. ``no_device``: not a fused
    device type, or CUDA without a GPU. ``no_compiler``: a compiler the build
    needs is not on PATH. ``failed``: the compilers are there but the build
    failed; ``detail`` is its first error line. Only ``failed`` is a defect of
    the checkout or machine (the test suite fails on it); the others are choices
    or limits of the machine.
    """
    if os.environ.get("KNN_FUSED", "1") == "0":
        return FusedStatus("off", "KNN_FUSED=0")
    if device_type not in PARTS:
        return FusedStatus("no_device", f"no fused op for device type {device_type!r}")
    if device_type == "cuda" and not torch.cuda.is_available():
        return FusedStatus("no_device", "CUDA is not available")
    if fused_available(device_type):
        return FusedStatus("built")
    missing = [name for name, path in fused_compilers(device_type).items() if path is None]
    if missing:
        return FusedStatus("no_compiler", f"{', '.join(missing)} not on PATH; build error: "
                                          f"{_fused_errors.get(device_type, '?')}")
    return FusedStatus("failed", _fused_errors.get(device_type, "unknown build error"))


def op_flags(spec: RecurrenceSpec) -> list:
    """The fused ops' trailing arguments for ``spec`` (n, mult, norm, out_sum, act code, highway)."""
    return [spec.n, spec.multiplicative, spec.normalized, spec.output_sum,
            _ACT_CODE[spec.activation], spec.highway]


def _op_args(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask) -> list[Tensor]:
    """The fused ops' nine tensor arguments: contiguous, the mask in ``proj``'s dtype, and an
    absent tensor (None) as a 0-element one."""
    empty = proj.new_empty(0)
    return [
        proj.contiguous(),
        empty if carry is None else carry.contiguous(),
        empty if decay is None else decay.contiguous(),
        gate_bias.contiguous(),
        empty if weight_h is None else weight_h.contiguous(),
        c0.contiguous(),
        h0.contiguous(),
        empty if mask is None else mask.to(proj.dtype).contiguous(),
        empty if h_mask is None else h_mask.contiguous(),
    ]


class _FusedRecurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, spec):
        mod = _fused_modules[proj.device.type]
        args = _op_args(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask)
        flags = op_flags(spec)
        out, c_all, h_all, lam_all = mod.forward(*args, *flags)
        ctx.save_for_backward(*args, c_all, h_all, lam_all)
        ctx.flags = flags
        ctx.mod = mod
        ctx.has = (carry is not None, decay is not None, weight_h is not None)
        T = proj.shape[0]
        return out, c_all[T], h_all[T]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_c_last, d_h_last):
        saved = ctx.saved_tensors
        grads = ctx.mod.backward(
            d_out.contiguous(), d_c_last.contiguous(), d_h_last.contiguous(), *saved, *ctx.flags
        )
        d_proj, d_carry, d_decay, d_bias, d_wh, d_c0, d_h0 = grads
        has_carry, has_decay, has_wh = ctx.has
        return (
            d_proj,
            d_carry if has_carry else None,
            d_decay if has_decay else None,
            d_bias,
            d_wh if has_wh else None,
            d_c0,
            d_h0,
            None,
            None,
            None,
        )


# --------------------------------------------------------------------------
# The same fused ops as torch.library custom ops, for torch.compile
#
# torch.ops.knn_sk_cpu / knn_sk_cuda are registered from C++ without a dispatch key, so the
# compiler would trace into their C++ bodies with fake tensors, which have no data. Wrapped
# here as opaque custom ops with fake (shape-only) implementations, Dynamo and AOTAutograd
# trace them as one node each, and Inductor calls the same C++ kernels at run time.
# Absent tensors are 0-element ones, as for _FusedRecurrence.


@torch.library.custom_op("knn::string_kernel_scan", mutates_args=())
def _scan_op(proj: Tensor, carry: Tensor, decay: Tensor, gate_bias: Tensor, weight_h: Tensor,
             c0: Tensor, h0: Tensor, mask: Tensor, h_mask: Tensor, n: int, mult: bool,
             norm: bool, out_sum: bool, act: int, highway: bool
             ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The fused forward: out (T, B, d), c_all (T+1, B, n, d), h_all (T+1, B, d) and
    λ_t over all steps (T, B, d; 0 elements unless gated)."""
    out, c_all, h_all, lam_all = _fused_modules[proj.device.type].forward(
        proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask,
        n, mult, norm, out_sum, act, highway)
    return out, c_all, h_all, lam_all


@_scan_op.register_fake
def _scan_op_fake(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, n, mult, norm,
                  out_sum, act, highway):
    T, B, _, d = proj.shape
    gated = decay.numel() == 0
    return (proj.new_empty(T, B, d), proj.new_empty(T + 1, B, n, d), proj.new_empty(T + 1, B, d),
            proj.new_empty(T, B, d) if gated else proj.new_empty(0))


@torch.library.custom_op("knn::string_kernel_scan_backward", mutates_args=())
def _scan_backward_op(d_out: Tensor, d_c_last: Tensor, d_h_last: Tensor, proj: Tensor,
                      carry: Tensor, decay: Tensor, gate_bias: Tensor, weight_h: Tensor,
                      c0: Tensor, h0: Tensor, mask: Tensor, h_mask: Tensor, c_all: Tensor,
                      h_all: Tensor, lam_all: Tensor, n: int, mult: bool, norm: bool,
                      out_sum: bool, act: int, highway: bool) -> list[Tensor]:
    """The fused backward: d proj, d carry, d decay, d gate_bias, d weight_h, d c0, d h0
    (each shaped as its input, 0 elements where the input has)."""
    return list(_fused_modules[proj.device.type].backward(
        d_out, d_c_last, d_h_last, proj, carry, decay, gate_bias, weight_h, c0, h0, mask,
        h_mask, c_all, h_all, lam_all, n, mult, norm, out_sum, act, highway))


@_scan_backward_op.register_fake
def _scan_backward_op_fake(d_out, d_c_last, d_h_last, proj, carry, decay, gate_bias, weight_h,
                           c0, h0, mask, h_mask, c_all, h_all, lam_all, *flags):
    return [torch.empty_like(t) for t in (proj, carry, decay, gate_bias, weight_h, d_c_last,
                                          d_h_last)]


def _scan_setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs[:9], *output[1:])
    ctx.flags = inputs[9:]


def _scan_backward(ctx, d_out, d_c_all, d_h_all, _d_lam_all):
    # Only out, c_all[T] and h_all[T] leave the dispatch point (_compiled_scan), so the
    # gradients of c_all and h_all are those of their last step.
    saved = ctx.saved_tensors
    proj, c0, h0 = saved[0], saved[5], saved[6]
    T = proj.shape[0]
    d_out = torch.zeros_like(proj[:, :, 0]) if d_out is None else d_out.contiguous()
    d_c_last = torch.zeros_like(c0) if d_c_all is None else d_c_all[T].contiguous()
    d_h_last = torch.zeros_like(h0) if d_h_all is None else d_h_all[T].contiguous()
    grads = _scan_backward_op(d_out, d_c_last, d_h_last, *saved, *ctx.flags)
    # proj, carry, decay, gate_bias, weight_h, c0, h0; none for the masks and the flags
    return (*grads, None, None, *([None] * len(ctx.flags)))


_scan_op.register_autograd(_scan_backward, setup_context=_scan_setup_context)


def _compiled_scan(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, spec):
    """The fused scan through the custom ops: what :func:`string_kernel_recurrence` runs
    under torch.compile (the same C++ kernels as :class:`_FusedRecurrence`)."""
    args = _op_args(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask)
    out, c_all, h_all, _ = _scan_op(*args, *op_flags(spec))
    T = proj.shape[0]
    return out, c_all[T], h_all[T]


@torch.compiler.assume_constant_result
def _fused_ready(device_type: str) -> bool:
    """:func:`fused_available` as torch.compile sees it: called once when a graph is traced
    (building the op if needed, outside the graph) and taken as a constant."""
    return fused_available(device_type)


def string_kernel_recurrence(
    proj: Tensor,
    carry: Tensor | None,
    decay: Tensor | None,
    gate_bias: Tensor,
    weight_h: Tensor | None,
    c0: Tensor,
    h0: Tensor,
    mask: Tensor | None,
    h_mask: Tensor | None,
    spec: RecurrenceSpec,
) -> tuple[Tensor, Tensor, Tensor]:
    """Run the scan; the single dispatch point between fused op and reference.

    Same arguments and results as :func:`string_kernel_recurrence_ref`.

    Support set of the fused op: float32 and float64 tensors on CPU or CUDA, with that
    device type's op built (:func:`fused_status`) and ``KNN_FUSED`` not ``0``; everything
    else runs the reference.

    Under ``torch.compile`` (``torch.compiler.is_compiling()``) the same choice is made
    when the graph is traced, and the fused op runs as the custom ops
    ``torch.ops.knn.string_kernel_scan`` / ``string_kernel_scan_backward``: the same C++
    or CUDA kernels, traced through their fake (shape-only) implementations as one node
    each, with no graph break; the compiler treats the scan as opaque and fuses around
    it. Outside the support set the reference is traced instead (its time loop unrolled
    into the graph). Either way the numbers are eager's, up to the float rounding of the
    ops the compiler fuses around the scan (``tests/compile/test_compile.py``).
    """
    if spec.activation not in _ACT_CODE:
        raise ValueError(f"unknown activation {spec.activation!r}; choose one of {ACTIVATIONS}")
    if torch.compiler.is_compiling():
        if proj.dtype in _FUSED_DTYPES and _fused_ready(proj.device.type):
            usage.record("fused_scan")
            return _compiled_scan(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, spec)
    elif proj.dtype in _FUSED_DTYPES and fused_available(proj.device.type):
        usage.record("fused_scan")
        return _FusedRecurrence.apply(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, spec)
    usage.record("reference_scan")
    return string_kernel_recurrence_ref(proj, carry, decay, gate_bias, weight_h, c0, h0, mask, h_mask, spec)
