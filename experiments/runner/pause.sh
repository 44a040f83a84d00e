#!/bin/bash
# pause.sh [--epoch] <run dir> [timeout seconds]: pause a run_one.sh training right after its
# next checkpoint, so that the pause loses no training: waits until last.pt is rewritten (at
# most the timeout, default 3600 s), then kills the trainer; run_one.sh appends "stopped ..."
# to PAUSED_AT.txt, and the same run_one.sh line resumes it. With --epoch it waits for the
# end of the epoch instead (the next metrics.jsonl line, written just after the epoch's
# checkpoint), so that a progress record taken in the pause holds that epoch's validation.
# Stop the run's queue first (kill $(cat <queue file>.pid)) so that no next line starts.
set -u
watch=last.pt
[ "${1:-}" = "--epoch" ] && { watch=metrics.jsonl; shift; }
dir=$1; limit=${2:-3600}
pid=$(cat "$dir/.current" 2>/dev/null) || { echo "pause.sh: $dir is not training" >&2; exit 1; }
state() { stat -c '%Y %s' "$dir/$watch" 2>/dev/null || echo 0; }
before=$(state)
for ((waited = 0; waited < limit; waited += 2)); do
  [ "$(state)" != "$before" ] && break
  sleep 2
done
sleep 3  # the checkpoint is renamed into place when complete; let the step after it begin
kill "$pid" && echo "pause.sh: paused $dir (last.pt of $(date -u -r "$dir/last.pt" '+%F %T') UTC)"
