"""Layer benchmark: string-kernel layers against nn.LSTM / nn.GRU in one process.

    python -m knn.tools.bench [--record | --out FILE] [--reps 30]

Each case times forward + backward of one layer (median over ``reps`` after
warm-up) next to nn.LSTM and nn.GRU of the same width and the layer's own
input-projection GEMM alone (``floor_ms``: the part no recurrence can avoid).
A second section times the models' dense products (``LINEAR_SHAPES``) through
aten's ``F.linear`` (MKL), through oneDNN, and through
:func:`knn.ops.linear.linear`, which the layers use and which picks one of the
two by the CPU. Ratios, not absolute times, are what carry across machines.

The JSON (and a Markdown table beside it) goes to ``outputs/bench/layers.json``,
outside version control; ``--record`` writes the committed measurement,
``experiments/bench/layers.json``, instead. Either carries the provenance of
:func:`knn.train.provenance.provenance` (commit, command, machine, torch, ops run).
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from knn.io import write_json, write_text
from knn.layers.string_kernel import StringKernelConfig, StringKernelLayer
from knn.ops import linear as linear_ops
from knn.ops import usage
from knn.ops.linear import linear, onednn_enabled
from knn.ops.recurrence import fused_available
from knn.train.provenance import provenance

#: Where measurements go: scratch by default, the committed folder with ``--record``.
SCRATCH_DIR, RECORD_DIR = Path("outputs/bench"), Path("experiments/bench")

SHAPES = {"ptb": (35, 20, 355), "sst": (50, 32, 200)}  # (T, B, width)
# (M, K, N) of x (M, K) Wᵀ, W (N, K): products of a PTB 5m training step (batch 32 x BPTT 35
# rows) and of an SST gated_fine step (232 tokens per batch on average; 50-d GloVe inputs).
LINEAR_SHAPES = {"ptb_decoder": (1120, 355, 10000), "ptb_projection": (1120, 355, 1065),
                 "sst_layer1": (232, 50, 600), "sst_layer2": (232, 200, 600)}
VARIANTS = {
    "n1_gated_x_highway": StringKernelConfig(n=1, decay="gated_x", highway=True),
    "n1_gated_xh_highway": StringKernelConfig(n=1, decay="gated_xh", highway=True),
    "n2_mult_gated_xh": StringKernelConfig(n=2, mapping="multiplicative", decay="gated_xh", highway=False),
}


def time_ms(steps: dict[str, Callable[[], None]], reps: int, warmup: int = 5) -> dict[str, float]:
    """Median wall time in ms of each step, the steps interleaved rep by rep.

    Interleaving puts every step under the same conditions: a slow spell of
    the machine (another process, frequency changes) hits all of them, so
    their ratios stay meaningful.
    """
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            t0 = time.perf_counter()
            step()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def fwd_bwd(module: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        out = module(x)[0]
        out.backward(torch.ones_like(out))
        module.zero_grad(set_to_none=True)
        x.grad = None

    return step


def gemm_floor(layer: StringKernelLayer, x: torch.Tensor) -> Callable[[], None]:
    """Forward + backward of the layer's input projection alone."""
    w = layer.weight.detach().clone().requires_grad_()
    T, B, d_in = x.shape

    def step() -> None:
        proj = linear(x.reshape(T * B, d_in), w)
        proj.backward(torch.ones_like(proj))
        w.grad = None
        x.grad = None

    return step


def linear_fwd_bwd(fn: Callable, x: torch.Tensor, w: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        y = fn(x, w)
        y.backward(torch.ones_like(y))
        x.grad = w.grad = None

    return step


def run_linear(reps: int) -> list[dict]:
    """Forward + backward of x Wᵀ through aten (``F.linear``), oneDNN (where torch has it) and
    :func:`knn.ops.linear.linear`, which runs one of the two (``knn_library``)."""
    cases = []
    library = "onednn" if onednn_enabled(torch.ones(1)) else "aten"
    for name, (M, K, N) in LINEAR_SHAPES.items():
        x, w = torch.randn(M, K, requires_grad=True), torch.randn(N, K, requires_grad=True)
        steps = {"aten": linear_fwd_bwd(nn.functional.linear, x, w), "knn": linear_fwd_bwd(linear, x, w)}
        if linear_ops._LINEAR is not None:
            steps["onednn"] = linear_fwd_bwd(lambda a, b: linear_ops._OneDNNLinear.apply(a, b, None), x, w)
        ms = time_ms(steps, reps)
        onednn_ms = ms.get("onednn")
        cases.append({
            "product": name, "M": M, "K": K, "N": N,
            "aten_ms": round(ms["aten"], 3),
            "onednn_ms": None if onednn_ms is None else round(onednn_ms, 3),
            "knn_ms": round(ms["knn"], 3), "knn_library": library,
            "ratio_aten_vs_knn": round(ms["aten"] / ms["knn"], 3),
            "ratio_aten_vs_onednn": None if onednn_ms is None else round(ms["aten"] / onednn_ms, 3),
            "knn_gflops": round(6 * M * K * N / ms["knn"] / 1e6, 1),
        })
        versus = "" if onednn_ms is None else \
            f"  onednn {onednn_ms:7.2f} ms  aten/onednn {ms['aten'] / onednn_ms:5.2f}x"
        print(f"linear {name:15s} aten {ms['aten']:7.2f} ms{versus}  knn ({library}) {ms['knn']:7.2f} ms",
              flush=True)
    return cases


def output_path(name: str, record: bool, out: str | None = None) -> Path:
    """``out`` if given, else ``name`` in :data:`RECORD_DIR` (``record``) or :data:`SCRATCH_DIR`."""
    if out:
        return Path(out)
    return (RECORD_DIR if record else SCRATCH_DIR) / name


def run(reps: int, command: str) -> dict:
    """Every case and product, timed; with the provenance of ``command`` (its command line)."""
    usage.reset()  # ops: what this benchmark ran, not what the process ran before
    torch.manual_seed(0)
    cases = []
    for shape_name, (T, B, width) in SHAPES.items():
        x = torch.randn(T, B, width, requires_grad=True)
        steps = {"lstm": fwd_bwd(nn.LSTM(width, width), x), "gru": fwd_bwd(nn.GRU(width, width), x)}
        for name, cfg in VARIANTS.items():
            layer = StringKernelLayer(width, width, cfg)
            steps[name] = fwd_bwd(layer, x)
            steps[name + "/floor"] = gemm_floor(layer, x)
        ms = time_ms(steps, reps)
        for name, cfg in VARIANTS.items():
            ours, floor = ms[name], ms[name + "/floor"]
            cases.append({
                "variant": name,
                "shape": {"name": shape_name, "T": T, "B": B, "width": width},
                "config": asdict(cfg),
                "ms": round(ours, 3),
                "lstm_ms": round(ms["lstm"], 3),
                "gru_ms": round(ms["gru"], 3),
                "ratio_vs_lstm": round(ms["lstm"] / ours, 3),
                "ratio_vs_gru": round(ms["gru"] / ours, 3),
                "floor_ms": round(floor, 3),
                "ratio_vs_floor": round(ours / floor, 3),
            })
            print(
                f"{shape_name:4s} {name:22s} ours {ours:7.2f} ms  lstm {ms['lstm']:7.2f}  gru {ms['gru']:7.2f}  "
                f"floor {floor:6.2f}  lstm/ours {ms['lstm'] / ours:5.2f}x  ours/floor {ours / floor:5.2f}x",
                flush=True,
            )
    linear_cases = run_linear(reps)
    return {
        **provenance(command),
        "fused": fused_available(),
        "onednn_linear": onednn_enabled(torch.ones(1)),
        "reps": reps,
        "timed": "forward+backward, median ms after 5 warm-up steps, all steps of a shape interleaved",
        "date": time.strftime("%Y-%m-%d"),
        "cases": cases,
        "linear": linear_cases,
    }


def to_markdown(result: dict) -> str:
    """The cases as a Markdown table, with the machine they ran on."""
    machine = result["machine"]
    lines = [
        f"torch {result['torch_version']}, {machine['torch_threads']} threads, {machine['cpu_model']}, "
        f"fused op: {result['fused']}, {result['timed']} ({result['reps']} reps), {result['date']}, "
        f"commit {result['git_commit']}",
        "",
        "| shape (T, B, width) | variant | ours ms | nn.LSTM ms | nn.GRU ms | LSTM / ours | GEMM floor ms | ours / floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cases"]:
        s = c["shape"]
        lines.append(
            f"| {s['name']} ({s['T']}, {s['B']}, {s['width']}) | {c['variant']} | {c['ms']:.2f} | {c['lstm_ms']:.2f} "
            f"| {c['gru_ms']:.2f} | {c['ratio_vs_lstm']:.2f}x | {c['floor_ms']:.2f} | {c['ratio_vs_floor']:.2f}x |"
        )
    lines += [
        "",
        f"Products x Wᵀ, forward + backward (knn.ops.linear: oneDNN {result['onednn_linear']}):",
        "",
        "| product (M, K, N) | aten F.linear ms | oneDNN ms | aten / oneDNN | knn linear ms | knn GFLOP/s |",
        "|---|---|---|---|---|---|",
    ]
    for c in result["linear"]:
        onednn = "n/a | n/a" if c.get("onednn_ms") is None else \
            f"{c['onednn_ms']:.2f} | {c['ratio_aten_vs_onednn']:.2f}x"
        lines.append(
            f"| {c['product']} ({c['M']}, {c['K']}, {c['N']}) | {c['aten_ms']:.2f} | {onednn} "
            f"| {c['knn_ms']:.2f} ({c.get('knn_library', 'onednn' if result['onednn_linear'] else 'aten')}) "
            f"| {c['knn_gflops']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--record", action="store_true",
                       help=f"write the committed measurement, {RECORD_DIR / 'layers.json'}")
    where.add_argument("--out", help=f"JSON; a .md table goes beside it (default: "
                                     f"{SCRATCH_DIR / 'layers.json'})")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args(argv)
    result = run(args.reps, shlex.join(["python", "-m", "knn.tools.bench", *argv]))
    out = output_path("layers.json", args.record, args.out)
    write_json(result, out)
    write_text(out.with_suffix(".md"), to_markdown(result))
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
