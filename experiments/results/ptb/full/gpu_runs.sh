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
# PAUSED_AT.txt, .hydra/). PACK=<variant> also packs that run's last.pt and
# best.pt (unless it finished) so that it can resume on another machine:
# checkpoints are device-independent. The pack is one tar cut into 15 MiB parts,
# kept in outputs/gpu/pack/<variant>/ with its sha256. A call brings back at most
# 64 MiB, so each call sends 4 parts; the two checkpoints of a 20m model (about
# 156 MiB, 11 parts) need two more calls on the warm machine (it gives itself
# back 30 s after a call), which train nothing and send the next 4 parts each:
#   FETCH=1 bash experiments/results/ptb/full/gpu_runs.sh <variant>   (then FETCH=2)
# A lost transfer is sent again by the same FETCH value. gpu_unpack.sh joins the
# parts here, checks the sha256 and unpacks the run.
# EXTRA adds overrides to every run (e.g. EXTRA=debug=smoke to try the script);
# PART_BYTES sets the part size (split's -b, default 15M).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_runs}; mkdir -p "$OUT"
LOG=$OUT/log.txt
deadline=$((SECONDS + ${BUDGET_S:-540}))

send_parts() {  # $1: variant, $2: which 4 parts of its pack to send (0: the first 4)
  local pack=outputs/gpu/pack/$1
  if [ ! -f "$pack/sha256" ]; then echo "== $1: no checkpoint packed" | tee -a "$LOG"; return 1; fi
  local parts=("$pack"/part-*) first=$(($2 * 4))
  cp "$pack/sha256" "$OUT/$1.pt.tar.sha256"
  for p in "${parts[@]:first:4}"; do cp "$p" "$OUT/$1.pt.tar.${p##*/}"; done
  local sent=$((first + 4 < ${#parts[@]} ? first + 4 : ${#parts[@]}))
  echo "== $1: checkpoint parts $((first + 1))-$sent of ${#parts[@]} sent$( [ "$sent" -lt ${#parts[@]} ] \
    && echo "; the next call: FETCH=$(($2 + 1))")" | tee -a "$LOG"
}
if [ -n "${FETCH:-}" ]; then
  for v in "$@"; do send_parts "$v" "$FETCH" || exit 1; done
  exit 0
fi
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
    pack=outputs/gpu/pack/$v; rm -rf "$pack"; mkdir -p "$pack"
    pts=$(cd "$d" && ls last.pt best.pt 2>/dev/null)  # no best.pt before the first validation
    if [ -z "$pts" ]; then echo "== $v: no checkpoint to pack yet" | tee -a "$LOG"; continue; fi
    tar cf "$pack/pt.tar" -C "$d" $pts
    sha256sum "$pack/pt.tar" | cut -d' ' -f1 > "$pack/sha256"
    split -b "${PART_BYTES:-15M}" "$pack/pt.tar" "$pack/part-" && rm "$pack/pt.tar"
    send_parts "$v" 0
  fi
done
