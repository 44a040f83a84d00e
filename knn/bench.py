"""Layer benchmark: string-kernel layers against nn.LSTM / nn.GRU in one process.

    python -m knn.bench [--out experiments/bench/layers.json] [--reps 30]

Each case times forward + backward of one layer (median over ``reps`` after
warm-up) next to nn.LSTM and nn.GRU of the same width and the layer's own
input-projection GEMM alone (``floor_ms``: the part no recurrence can avoid).
Ratios, not absolute times, are what carry across machines.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from knn.layers.string_kernel import StringKernelConfig, StringKernelLayer
from knn.ops.recurrence import fused_available

SHAPES = {"ptb": (35, 20, 355), "sst": (50, 32, 200)}  # (T, B, width)
VARIANTS = {
    "n1_gated_x_highway": StringKernelConfig(n=1, decay="gated_x", highway=True),
    "n1_gated_xh_highway": StringKernelConfig(n=1, decay="gated_xh", highway=True),
    "n2_mult_gated_xh": StringKernelConfig(n=2, mapping="multiplicative", decay="gated_xh", highway=False),
}


def time_ms(step: Callable[[], None], reps: int, warmup: int = 5) -> float:
    """Median wall time of ``step`` in milliseconds."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


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
        proj = x.reshape(T * B, d_in) @ w.t()
        proj.backward(torch.ones_like(proj))
        w.grad = None
        x.grad = None

    return step


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(reps: int) -> dict:
    torch.manual_seed(0)
    cases = []
    for shape_name, (T, B, width) in SHAPES.items():
        x = torch.randn(T, B, width, requires_grad=True)
        lstm_ms = time_ms(fwd_bwd(nn.LSTM(width, width), x), reps)
        gru_ms = time_ms(fwd_bwd(nn.GRU(width, width), x), reps)
        for name, cfg in VARIANTS.items():
            layer = StringKernelLayer(width, width, cfg)
            ours = time_ms(fwd_bwd(layer, x), reps)
            floor = time_ms(gemm_floor(layer, x), reps)
            case = {
                "variant": name,
                "shape": {"name": shape_name, "T": T, "B": B, "width": width},
                "config": asdict(cfg),
                "ms": round(ours, 3),
                "lstm_ms": round(lstm_ms, 3),
                "gru_ms": round(gru_ms, 3),
                "ratio_vs_lstm": round(lstm_ms / ours, 3),
                "ratio_vs_gru": round(gru_ms / ours, 3),
                "floor_ms": round(floor, 3),
                "ratio_vs_floor": round(ours / floor, 3),
            }
            cases.append(case)
            print(
                f"{shape_name:4s} {name:22s} ours {ours:7.2f} ms  lstm {lstm_ms:7.2f}  gru {gru_ms:7.2f}  "
                f"floor {floor:6.2f}  lstm/ours {lstm_ms / ours:5.2f}x  ours/floor {ours / floor:5.2f}x",
                flush=True,
            )
    return {
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "fused": fused_available(),
        "reps": reps,
        "timed": "forward+backward, median ms after 5 warm-up steps",
        "date": time.strftime("%Y-%m-%d"),
        "cases": cases,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/bench/layers.json")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    result = run(args.reps)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
