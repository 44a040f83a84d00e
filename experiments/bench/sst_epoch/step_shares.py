"""Where an SST training step's time goes, by kind of work, over an epoch's mix of batches.

    python experiments/bench/sst_epoch/step_shares.py [--steps 300] [--out FILE.json]

Builds ``experiment=sst/gated_fine`` at one thread through the trainer, takes
the first ``--steps`` batches of epoch 0 (the random order the trainer uses, so
phrase lengths are mixed as in a whole epoch), runs 20 warm-up steps, then
profiles the rest (torch.profiler, self time per op) and sums the self time by
kind: matrix products (oneDNN linears, aten mm/addmm/bmm, and the fused ops' own BLAS
calls, knn::gemm), the fused scan,
random draws for dropout (torch's ``bernoulli_`` or knn.ops.dropout's samplers),
the optimizer, and everything else. The bound
printed last is what removing all non-matrix work would give at most:
total / matrix-product time, for the same computation.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from knn.tools.throughput import first_batches, trainer_for
from knn.train.provenance import provenance

KINDS = {
    # knn::gemm: the CPU ops' products on BLAS directly (knn/ops/csrc/cpu_gemm.h)
    "matrix products": ("mkldnn::_linear_pointwise", "aten::mm", "aten::addmm", "aten::bmm",
                        "knn::gemm"),
    "fused scan": ("knn_sk_cpu::forward", "knn_sk_cpu::backward"),
    # torch's sampler, or ours (scaled_mask: drawn and divided by q in one pass)
    "dropout draws": ("aten::bernoulli_", "knn_rng_cpu::bernoulli", "knn_rng_cpu::scaled_mask"),
    # FusedAdam's own step is the kernel and the step counters' _foreach_add_; torch's
    # step (its first) is recorded as Optimizer.step
    "optimizer": ("aten::_fused_adam_", "aten::_foreach_add_", "Optimizer.step#FusedAdam.step",
                  "Optimizer.zero_grad#FusedAdam.zero_grad"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out")
    args = parser.parse_args()
    trainer = trainer_for(["experiment=sst/gated_fine", "threads=1"])
    task, model = trainer.task, trainer.model
    batches = first_batches(trainer, args.steps + 20)
    for b in batches[:20]:
        trainer.optimize(task.training_step(model, b).loss)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[20:]:
            trainer.optimize(task.training_step(model, b).loss)
    self_us = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(self_us.values())
    shares = {kind: sum(self_us.get(op, 0.0) for op in ops) for kind, ops in KINDS.items()}
    shares["everything else"] = total - sum(shares.values())
    report = {
        "steps": args.steps,
        "mean_tokens_per_batch": sum(int(b[0].mask.sum()) for b in batches[20:]) / args.steps,
        "ms_per_step_profiled": total / 1e3 / args.steps,
        "ms_per_step_by_kind": {k: round(v / 1e3 / args.steps, 3) for k, v in shares.items()},
        "share_by_kind": {k: round(v / total, 3) for k, v in shares.items()},
        "speedup_bound_without_non_matrix_work": round(total / shares["matrix products"], 2),
        **provenance("python experiments/bench/sst_epoch/step_shares.py"
                     + f" --steps {args.steps}"),
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("machine", "ops", "command")}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
