#!/bin/bash
# pause.sh <run dir> [timeout seconds]: pause a run_one.sh training right after its next
# checkpoint, so that the pause loses no training: waits until last.pt is rewritten (at most
# the timeout, default 3600 s), then kills the trainer; run_one.sh appends "stopped ..." to
# PAUSED_AT.txt, and the same run_one.sh line resumes it. Stop the run's queue first
# (kill $(cat <queue file>.pid)) so that no next line starts.
set -u
dir=$1; limit=${2:-3600}
pid=$(cat "$dir/.current" 2>/dev/null) || { echo "pause.sh: $dir is not training" >&2; exit 1; }
before=$(stat -c %Y "$dir/last.pt" 2>/dev/null || echo 0)
for ((waited = 0; waited < limit; waited += 2)); do
  now=$(stat -c %Y "$dir/last.pt" 2>/dev/null || echo 0)
  [ "$now" != "$before" ] && break
  sleep 2
done
sleep 3  # the checkpoint is renamed into place when complete; let the step after it begin
kill "$pid" && echo "pause.sh: paused $dir (last.pt of $(date -u -r "$dir/last.pt" '+%F %T') UTC)"
