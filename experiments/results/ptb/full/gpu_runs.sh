#!/bin/bash
# Full-protocol PTB runs on a lent GPU (the device tool), resumable across calls.
#
#   BUDGET_S=540 bash experiments/results/ptb/full/gpu_runs.sh lstm_5m learned_5m
#
# Run on the device machine from the repository root of a clean commit, with
# .whl/ (hydra-core, omegaconf, antlr4 wheels for its Python) and .devdata/ptb/
# (the mirror's three PTB files) carried. Each named experiment trains seed 0
# on its experiment file's full protocol (device=cuda), all of them at once, in
# outputs/gpu/ptb/<variant>/seed0; a run whose last.pt is already there (a warm
# machine keeps outputs/ between calls) resumes with train.resume=true. Runs
# still going BUDGET_S seconds after the start are stopped (kill -9: the
# checkpoint write is atomic, at most train.checkpoint_every steps are lost)
# and the stop is appended to the run's PAUSED_AT.txt, as on the CPU.
#
# Writes to $OUT: log.txt and, per variant, <variant>.tgz (the run directory
# without checkpoints: result.json once finished, metrics.jsonl, train.log,
# PAUSED_AT.txt, .hydra/). PACK=<variant> also writes that run's last.pt and
# best.pt as <variant>.pt.tar.part-* (15 MiB pieces; join with cat) so that it
# can resume on another machine: checkpoints are device-independent.
# EXTRA adds overrides to every run (e.g. EXTRA=debug=smoke to try the script).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_runs}; mkdir -p "$OUT"
LOG=$OUT/log.txt
deadline=$((SECONDS + ${BUDGET_S:-540}))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site KNN_DATA_MIRROR=$PWD/.devdata KNN_DATA_CACHE=/tmp/knn-cache
# The copy's file modes may differ from the checkout's; only content makes a tree dirty.
git config core.fileMode false
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "commit $(git rev-parse --short HEAD); modified tracked files: $(git status --porcelain --untracked-files=no | wc -l)"
  python3 -c "from knn.ops import recurrence as R; print('fused ops built:', {d: R.fused_available(d) for d in ('cpu', 'cuda')}, R.fused_build_errors())"
} 2>&1 | tee -a "$LOG"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
declare -A pids stdout
for v in "$@"; do
  d=outputs/gpu/ptb/$v/seed0; mkdir -p "$d"
  resume=""; [ -f "$d/last.pt" ] && resume="train.resume=true"
  echo "$( [ -n "$resume" ] && echo resumed || echo started ) $(date -u '+%Y-%m-%d %H:%M:%S') UTC on $gpu at $(git rev-parse --short HEAD)" >> "$d/PAUSED_AT.txt"
  stdout[$v]=$d/stdout_$(date -u +%H%M%S).txt
  python3 -m knn.train experiment=ptb/$v seed=0 device=cuda train.checkpoint_every=200 \
    train.progress=false $resume ${EXTRA:-} hydra.run.dir=$d > "${stdout[$v]}" 2>&1 &
  pids[$v]=$!
done

running() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while running && [ $SECONDS -lt $deadline ]; do sleep 5; done
for v in "$@"; do
  d=outputs/gpu/ptb/$v/seed0
  if kill -0 "${pids[$v]}" 2>/dev/null; then
    kill -9 "${pids[$v]}"
    echo "stopped $(date -u '+%Y-%m-%d %H:%M:%S') UTC: end of the device call's budget" >> "$d/PAUSED_AT.txt"
  fi
  echo "== $v: $(tail -n 1 "$d/PAUSED_AT.txt")" | tee -a "$LOG"
  grep -h "INFO" "$d"/train.log 2>/dev/null | tail -n 3 | tee -a "$LOG"
  tail -n 3 "${stdout[$v]}" | grep -i -E "error|exception" | tee -a "$LOG"  # this call's run only
  tar czf "$OUT/$v.tgz" --exclude='*.pt' -C "$d" .
  if [ "${PACK:-}" = "$v" ] && [ ! -f "$d/result.json" ]; then
    tar cf - -C "$d" last.pt best.pt | split -b 15M - "$OUT/$v.pt.tar.part-"
  fi
done
