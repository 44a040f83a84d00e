"""Training throughput of one experiment: tokens/s, FLOPs/token, share of GEMM peak.

    python -m knn.tools.throughput experiment=ptb/gated_5m [--steps 30] [--profile 5]
                                   [--record | --out FILE]

Runs real optimizer steps of the experiment's model on its task's training
batches (the loop's own update: forward, backward, clipping, SGD/Adam step).
FLOPs are counted, not estimated: torch's FlopCounterMode records every
matrix product of one step, forward and backward (the fused scan's
recurrent GEMMs included; elementwise work is not counted). The peak is the
fp32 GEMM rate of a 2048 x 2048 product measured in the same process, on the
same device (``device=cuda`` measures the GPU; TF32 stays off, as in
training), through aten's matmul and through knn.ops.linear; the faster
counts. ``--profile N`` adds where the time goes: the ops with the most self
time over N more steps (torch.profiler).

The result is printed and written to ``outputs/bench/<name>.json``, outside
version control; ``--record`` writes the committed measurement,
``experiments/bench/<name>.json``, instead (``<name>``: :func:`result_name`,
e.g. ``throughput_ptb_gated_5m``). It carries the provenance of
:func:`knn.train.provenance.provenance` (commit, command, machine, torch, ops run).
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from knn.io import write_json
from knn.models import count_params
from knn.ops import usage
from knn.ops.linear import linear
from knn.ops.recurrence import fused_available
from knn.paths import CONF_DIR
from knn.tools.bench import output_path
from knn.train.config import resolve_config
from knn.train.loop import Trainer
from knn.train.protocol import experiment_of
from knn.train.provenance import device_name, provenance


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so wall-clock time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm_peak_gflops(device: torch.device = torch.device("cpu"), n: int = 2048, reps: int = 10) -> dict[str, float]:
    """fp32 GEMM rate of an n x n product on ``device``, by library (median of ``reps`` after warm-up).

    ``aten``: ``a @ b`` (MKL on CPU, cuBLAS on CUDA); ``knn``: :func:`knn.ops.linear.linear`,
    the path the models' products take (oneDNN on AVX-512 CPUs, else MKL). The peak is the faster.
    """
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    products = {"aten": lambda: a @ b, "knn": lambda: linear(a, b)}
    rates = {}
    for name, product in products.items():
        for _ in range(3):
            product()
        times = []
        for _ in range(reps):
            sync(device)
            t0 = time.perf_counter()
            product()
            sync(device)
            times.append(time.perf_counter() - t0)
        rates[name] = 2 * n**3 / statistics.median(times) / 1e9
    return rates


def where_time_goes(step: Callable[[], None], steps: int, top: int = 12) -> list[dict[str, Any]]:
    """The ops taking most self time over ``steps`` calls of ``step`` (torch.profiler), as
    ``{"op", "ms_per_step", "share"}``; ``share`` is of the profiled self time, all ops."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
    us = {e.key: e.self_cpu_time_total + e.self_device_time_total for e in prof.key_averages()}
    total = sum(us.values())
    ranked = sorted((k for k in us if us[k] > 0), key=us.__getitem__, reverse=True)
    return [{"op": k, "ms_per_step": round(us[k] / 1e3 / steps, 2), "share": round(us[k] / total, 3)}
            for k in ranked[:top]]


def result_name(overrides: list[str]) -> str:
    """The file name of a measurement: ``throughput_`` + the experiment (``/`` -> ``_``) + every
    other override, so a measurement with other settings never replaces another's.
    ``experiment=ptb/gated_5m device=cuda`` -> ``throughput_ptb_gated_5m_device=cuda.json``."""
    experiment = experiment_of(overrides)
    rest = [o for o in overrides if o.partition("=")[0].lstrip("+~") != "experiment"]
    parts = ["throughput", *([experiment.replace("/", "_")] if experiment else []), *rest]
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "-", "_".join(parts)) + ".json"


def trainer_for(overrides: list[str]) -> Trainer:
    """A trainer (task, model, optimizer) composed from Hydra ``overrides``, its run dir a
    temporary folder that is gone once it is built (nothing is written there after)."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg.run_dir = run_dir
        return Trainer(resolve_config(cfg))


def first_batches(trainer: Trainer, n: int) -> list[Any]:
    """The first ``n`` training batches of epoch 0 (at most the epoch's), with the model in
    training mode and the epoch started: what a measurement steps through."""
    trainer.model.train()
    trainer.task.start_epoch(0)
    return [trainer.task.train_batch(0, i) for i in range(min(n, trainer.task.num_train_batches()))]


def measure(overrides: list[str], steps: int, command: str, warmup: int = 5,
            profile_steps: int = 0) -> dict[str, Any]:
    """Time ``steps`` optimizer steps after ``warmup``; with ``profile_steps``, also profile that
    many. ``command`` is the command line recorded with the result's provenance."""
    usage.reset()  # ops: what this measurement ran, not what the process ran before
    trainer = trainer_for(overrides)
    task, model = trainer.task, trainer.model
    batches = first_batches(trainer, warmup + steps)

    with FlopCounterMode(display=False) as counter:
        trainer.optimize(task.training_step(model, batches[0]).loss)
    tokens_per_step = task.training_step(model, batches[0]).count
    flops_per_token = counter.get_total_flops() / tokens_per_step

    for batch in batches[:warmup]:
        trainer.optimize(task.training_step(model, batch).loss)
    sync(trainer.device)
    t0 = time.perf_counter()
    for batch in batches[warmup:]:
        trainer.optimize(task.training_step(model, batch).loss)
    sync(trainer.device)
    seconds = time.perf_counter() - t0
    timed = len(batches) - warmup
    tokens_per_s = timed * tokens_per_step / seconds
    top_ops = where_time_goes(lambda: trainer.optimize(task.training_step(model, batches[-1]).loss),
                              profile_steps) if profile_steps else None
    rates = gemm_peak_gflops(trainer.device)
    peak = max(rates.values())
    achieved = flops_per_token * tokens_per_s / 1e9
    return {
        "overrides": overrides,
        "params": count_params(model),
        "tokens_per_step": tokens_per_step,
        "steps_timed": timed,
        "tokens_per_s": round(tokens_per_s, 1),
        "step_ms": round(1e3 * seconds / timed, 2),
        "flops_per_token": int(flops_per_token),
        "flops_counted": "matrix products of forward+backward (torch FlopCounterMode); elementwise not counted",
        "achieved_gflops": round(achieved, 1),
        "gemm_peak_gflops": round(peak, 1),
        "gemm_peak_how": "fp32 2048x2048 product, median of 10, same process and device; the faster library",
        "gemm_gflops_by_library": {k: round(v, 1) for k, v in rates.items()},
        "device": device_name(trainer.device),
        "fused_scan": fused_available(trainer.device.type),
        "fraction_of_peak": round(achieved / peak, 3),
        **provenance(command),
        "date": time.strftime("%Y-%m-%d"),
        **({"profile": {"steps": profile_steps, "self_time_by_op": top_ops}} if top_ops else {}),
    }


def main(argv: list[str] | None = None) -> Path:
    """Measure, print the JSON, write it (see the module docstring); return where it went."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=ptb/gated_5m")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="also profile STEPS more steps and report the ops taking most time")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--record", action="store_true",
                       help="write the committed measurement, experiments/bench/<name>.json")
    where.add_argument("--out", default=None, help="write the JSON here (default: outputs/bench/<name>.json)")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "knn.tools.throughput", *argv])
    result = measure(args.overrides, args.steps, command, profile_steps=args.profile)
    print(json.dumps(result, indent=2))
    out = output_path(result_name(args.overrides), args.record, args.out)
    write_json(result, out)
    print(f"wrote {out}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
