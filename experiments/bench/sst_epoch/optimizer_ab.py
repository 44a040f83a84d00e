"""The plain and the fused Adam, interleaved in one process on SST's real training steps.

    python experiments/bench/sst_epoch/optimizer_ab.py [--rounds 3] [--steps 290]

Builds ``experiment=sst/gated_fine`` at one thread, takes the first batches of
epoch 0, and for each round trains a fresh copy of the model with each optimizer
(10 warm-up steps, then ``--steps`` timed), alternating the two, so that a drift
in the machine's speed hits both. Prints ms per step per round.
"""
from __future__ import annotations

import argparse
import copy
import time

import torch

from knn.tools.throughput import first_batches, trainer_for


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=290)
    args = parser.parse_args()
    trainer = trainer_for(["experiment=sst/gated_fine", "threads=1"])
    task, model = trainer.task, trainer.model
    batches = first_batches(trainer, args.steps + 10)
    ms: dict[str, list[float]] = {"plain": [], "fused": []}
    for _ in range(args.rounds):
        for name in ms:
            m = copy.deepcopy(model)
            opt = torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=2e-6,
                                   fused=True if name == "fused" else None)
            def step(batch) -> None:
                loss = task.training_step(m, batch).loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            for b in batches[:10]:
                step(b)
            t0 = time.perf_counter()
            for b in batches[10:]:
                step(b)
            ms[name].append(round(1e3 * (time.perf_counter() - t0) / args.steps, 2))
    print({name: values for name, values in ms.items()})


if __name__ == "__main__":
    main()
