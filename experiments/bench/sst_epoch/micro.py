"""The single operations behind the SST step's numbers, each timed against its alternative.

    python experiments/bench/sst_epoch/micro.py [--reps 200] [--out FILE.json]

At one thread, in one process, alternating the two sides of each pair (best of 3 passes
of ``--reps`` calls each):

* dropout draws for 160,000 elements: torch's ``bernoulli_`` against knn.ops.dropout's
  sampler (ns per element; the same values, see tests/ops/test_dropout.py);
* the (x, h) gate's per-step product, 32 × 200 by 200 × 200: aten ``mm`` (MKL) against
  oneDNN's linear (µs);
* a layer's input projection, 232 × 200 rows by 600 × 200, the SST step's average:
  oneDNN against aten ``mm`` (µs, and GFLOP/s).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable

import torch

from knn.ops import dropout
from knn.train.provenance import provenance

_ONEDNN = torch.ops.mkldnn._linear_pointwise


def onednn(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _ONEDNN(a, w, None, "none", [], "")


def best_us(fn: Callable[[], object], reps: int) -> float:
    """Best of 3 passes, µs per call, after a warm-up."""
    for _ in range(20):
        fn()
    passes = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        passes.append(1e6 * (time.perf_counter() - t0) / reps)
    return min(passes)


def pair(a: Callable[[], object], b: Callable[[], object], reps: int) -> tuple[float, float]:
    """Both sides timed twice, interleaved a b a b; each side's best."""
    times = [best_us(f, reps) for f in (a, b, a, b)]
    return min(times[0], times[2]), min(times[1], times[3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 160_000
    x = torch.empty(n)
    torch_us, ours_us = pair(lambda: x.bernoulli_(0.65), lambda: dropout.bernoulli(x, (n,), 0.65), args.reps)
    h, u = torch.randn(32, 200), torch.randn(200, 200)
    mkl_step, onednn_step = pair(lambda: torch.mm(h, u.t()), lambda: onednn(h, u), args.reps)
    xs, w = torch.randn(232, 200), torch.randn(600, 200)
    onednn_proj, mkl_proj = pair(lambda: onednn(xs, w), lambda: torch.mm(xs, w.t()), args.reps)
    flops = 2 * 232 * 200 * 600
    report = {
        "dropout_draws_ns_per_element": {"torch_bernoulli": round(1e3 * torch_us / n, 2),
                                         "knn_sampler": round(1e3 * ours_us / n, 2),
                                         "speedup": round(torch_us / ours_us, 1)},
        "gate_step_product_us": {"shape": [32, 200, 200], "mkl": round(mkl_step, 1),
                                 "onednn": round(onednn_step, 1)},
        "input_projection_us": {"shape": [232, 200, 600], "onednn": round(onednn_proj, 1),
                                "mkl": round(mkl_proj, 1),
                                "onednn_gflops": round(flops / onednn_proj / 1e3, 1)},
        **provenance("python experiments/bench/sst_epoch/micro.py"
                     + (f" --reps {args.reps}" if args.reps != 200 else "")),
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("machine", "ops", "command")}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
