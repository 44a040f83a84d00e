#!/bin/bash
# SST epoch time before and after a change, on one machine, in one call.
#
#   BEFORE=<checkout> AFTER=<checkout> [ROUNDS=2] [THREADS=1] [BATCHES=n] bash experiments/bench/sst_epoch/run.sh <out dir>
#
# Each checkout has its own .venv. First each checkout builds its fused ops (a checkout at a
# new path rebuilds them once; that minute must not land in a timed epoch). Then, for each
# of ROUNDS rounds, alternating before/after so that a change in the machine's load hits
# both: one trainer epoch of sst/gated_fine at THREADS threads (training over all 4,978
# phrase batches, then dev accuracy; metrics.jsonl's `elapsed` and `valid_seconds`; with
# BATCHES, only the epoch's first n batches, task.limit_train_batches), and
# 400 training steps through knn.tools.throughput (ms per step). Writes
# <out dir>/<before|after>_<round>_{epoch.json,throughput.json}.
set -eu
out=$(realpath -m "$1"); mkdir -p "$out"
threads=${THREADS:-1}
limit=${BATCHES:+task.limit_train_batches=$BATCHES}
for dir in "$BEFORE" "$AFTER"; do
  (cd "$dir" && .venv/bin/python -c 'from knn.ops.recurrence import fused_status; print("'"$dir"'", "fused op:", fused_status())')
done
for r in $(seq 1 "${ROUNDS:-2}"); do
  for side in before after; do
    if [ "$side" = before ]; then dir=$BEFORE; else dir=$AFTER; fi
    run=$(mktemp -d)
    (cd "$dir" && OMP_NUM_THREADS=$threads .venv/bin/python -m knn.train experiment=sst/gated_fine seed=0 \
       threads=$threads train.max_epochs=1 train.progress=false $limit hydra.run.dir="$run" > "$run/stdout.txt" 2>&1)
    cp "$run/metrics.jsonl" "$out/${side}_${r}_epoch.jsonl"
    cp "$run/result.json" "$out/${side}_${r}_epoch_result.json"
    (cd "$dir" && OMP_NUM_THREADS=$threads .venv/bin/python -m knn.tools.throughput experiment=sst/gated_fine \
       threads=$threads --steps 400 --out "$out/${side}_${r}_throughput.json" > /dev/null 2>&1)
    echo "$side round $r: $(python3 -c "import json; m=[json.loads(l) for l in open('$out/${side}_${r}_epoch.jsonl')][-1]; t=json.load(open('$out/${side}_${r}_throughput.json')); print('epoch', m['elapsed'], 's (dev', m['valid_seconds'], 's), step', t['step_ms'], 'ms')")"
    rm -rf "$run"
  done
done
