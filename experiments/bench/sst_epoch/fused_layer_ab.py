"""The SST classifier's layers as one autograd node each, against the plain composition,
interleaved in one process on SST's real training steps.

    python experiments/bench/sst_epoch/fused_layer_ab.py [--rounds 16] [--chunk 25] [--threads 1] [--out FILE.json]

Builds ``experiment=sst/gated_fine`` twice (the same seed, so the same weights and
batches), one trainer taking :meth:`StringKernelLayer.forward_pooled`'s fused node and
one the composition it fuses (dropout, layer, masked mean as separate ops; the two
compute the same numbers bit for bit, ``tests/layers/test_string_kernel_pooled.py``).
After 20 warm-up steps each, chunks of ``--chunk`` steps alternate between the two for
``--rounds`` rounds, so a drift in the machine's speed hits both; prints and records the
median ms per step of each and their ratio.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import knn.models.classifier as classifier
from knn.tools.throughput import first_batches, trainer_for
from knn.train.provenance import provenance


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--chunk", type=int, default=25)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()
    fused_applies = classifier.pooled_layer_applies
    paths = {"composition": lambda h: False, "fused": fused_applies}
    trainers = {name: trainer_for(["experiment=sst/gated_fine", f"threads={args.threads}"])
                for name in paths}
    n = 20 + args.rounds * args.chunk
    batches = {name: first_batches(t, n) for name, t in trainers.items()}
    ms: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for r in range(-1, args.rounds):  # round -1: the warm-up
            for name, t in trainers.items():
                classifier.pooled_layer_applies = paths[name]
                chunk = batches[name][:20] if r < 0 else \
                    batches[name][20 + r * args.chunk: 20 + (r + 1) * args.chunk]
                t0 = time.perf_counter()
                for b in chunk:
                    t.optimize(t.task.training_step(t.model, b).loss)
                if r >= 0:
                    ms[name].append(round(1e3 * (time.perf_counter() - t0) / len(chunk), 3))
    finally:
        classifier.pooled_layer_applies = fused_applies
    median = {name: statistics.median(v) for name, v in ms.items()}
    report = {"median_ms_per_step": median, "fused_over_composition": round(
        median["fused"] / median["composition"], 3), "ms_per_step_by_round": ms,
        **provenance("python experiments/bench/sst_epoch/fused_layer_ab.py "
                     f"--rounds {args.rounds} --chunk {args.chunk} --threads {args.threads}")}
    print(json.dumps({k: report[k] for k in ("median_ms_per_step", "fused_over_composition")}))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
