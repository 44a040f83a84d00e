"""Two pieces of an SST step timed alone: the fused CPU scan of one layer and collate.

    cd <checkout> && PYTHONPATH=$PWD .venv/bin/python <this file> [--out FILE.json]

Run it in two checkouts, alternating, to compare their code (PYTHONPATH makes the
checkout's own ``knn`` the one imported). At one thread, best of 3 passes:

* ``knn_sk_cpu::forward`` / ``::backward`` on the SST layer's shape (T = 9 steps, B = 32
  columns, d = 200, n = 2, multiplicative, normalized, h = relu(c_1 + c_2), variational
  state mask), with the decay gated on x only (no per-step product) and on (x, h) (µs);
* ``collate`` of the first 1,500 training batches of ``sst/gated_fine``'s epoch 0 (µs a batch).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from micro import best_us  # this folder's micro.py (the script's folder is on sys.path)

from knn.data.sst import collate
from knn.ops import recurrence
from knn.tools.throughput import trainer_for
from knn.train.provenance import provenance


def scan_us(gated_on_h: bool, reps: int = 1000) -> dict[str, float]:
    """Forward and backward µs of the fused scan on the SST layer's shape."""
    if not recurrence.fused_available("cpu"):
        raise SystemExit("the fused CPU scan is not built here")
    T, B, d, n = 9, 32, 200, 2
    g = torch.Generator().manual_seed(0)
    proj = torch.randn(T, B, n + 1, d, generator=g) * 0.5
    weight_h = torch.randn(d, d, generator=g) * 0.05 if gated_on_h else torch.empty(0)
    h_mask = (torch.rand(B, d, generator=g) > 0.2).float() / 0.8
    empty, gate_bias = torch.empty(0), torch.zeros(2, d)
    c0, h0, mask = torch.zeros(B, n, d), torch.zeros(B, d), torch.ones(T, B)
    flags = (n, True, True, True, recurrence._ACT_CODE["relu"], False)
    ops = torch.ops.knn_sk_cpu
    out = ops.forward(proj, empty, empty, gate_bias, weight_h, c0, h0, mask, h_mask, *flags)
    d_out = torch.randn(T, B, d, generator=g)
    return {
        "forward_us": round(best_us(lambda: ops.forward(proj, empty, empty, gate_bias, weight_h, c0,
                                                        h0, mask, h_mask, *flags), reps), 1),
        "backward_us": round(best_us(lambda: ops.backward(
            d_out, torch.zeros(B, n, d), torch.zeros(B, d), proj, empty, empty, gate_bias,
            weight_h, c0, h0, mask, h_mask, out[1], out[2], out[3], *flags), reps), 1),
    }


def collate_us(batches: int = 1500) -> float:
    trainer = trainer_for(["experiment=sst/gated_fine", "threads=1"])
    task = trainer.task
    task.start_epoch(0)
    index = task._batches(0)[:batches]
    encoded = task.train_ids

    def every_batch() -> None:
        for ids in index:
            collate(encoded, ids)

    return round(best_us(every_batch, 1) / len(index), 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    report = {
        "scan_gated_x": scan_us(False),
        "scan_gated_xh": scan_us(True),
        "collate_us_per_batch": collate_us(),
        **provenance("python experiments/bench/sst_epoch/scan_collate.py"),
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("machine", "ops")}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
