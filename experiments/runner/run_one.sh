#!/bin/bash
# run_one.sh <worktree> <run dir> <hydra overrides...>
# One long training as the results READMEs describe it: from a git worktree of a clean
# commit, one torch thread, checkpoints every 1,000 steps unless an override says otherwise, and the run's start, pauses and
# end (UTC, with the commit) appended to <run dir>/PAUSED_AT.txt. Rerunning the same line
# on a run dir that holds last.pt resumes it (train.resume=true), which is exact on CPU; on
# a run dir that has finished it does nothing (to train a finished run further, call
# python -m knn.train with train.resume=true and the new limit yourself).
# KNN_PYTHON: the interpreter with knn's dependencies (default: the main checkout's .venv);
# `python -m` run from the worktree imports the worktree's knn, not the installed one.
set -u
wt=$(cd "$1" && pwd); mkdir -p "$2"; dir=$(cd "$2" && pwd); shift 2
py=${KNN_PYTHON:-$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/python}
if [ -n "$(git -C "$wt" status --porcelain --untracked-files=no)" ]; then
  echo "run_one.sh: $wt has uncommitted changes; runs come from a clean commit" >&2; exit 2
fi
if [ -f "$dir/result.json" ] && tail -n1 "$dir/PAUSED_AT.txt" 2>/dev/null | grep -q '^finished'; then
  echo "run_one.sh: $dir has finished already; nothing to do" >&2; exit 0
fi
# .current may outlive its machine, and a new machine reuses pids: the pid counts as this
# run's trainer only if its command line names this run dir.
pid=$(cat "$dir/.current" 2>/dev/null)
if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "hydra.run.dir=$dir "; then
  echo "run_one.sh: $dir is already training (pid $pid)" >&2; exit 2
fi
# A run killed with its machine (end of a working session) could not write its stop: note
# it now, at the time of its last checkpoint, which is where the resumed run goes on from.
if [ -f "$dir/PAUSED_AT.txt" ] && tail -n1 "$dir/PAUSED_AT.txt" | grep -q '^started'; then
  last=$(ls -t "$dir"/last.pt "$dir"/metrics.jsonl 2>/dev/null | head -n1)
  at=${last:+$(date -u -r "$last" '+%F %H:%M')}
  echo "stopped ${at:-at an unknown time} UTC (killed without a record; time of the last checkpoint, noted at the next start)" >> "$dir/PAUSED_AT.txt"
fi
resume=(); [ -f "$dir/last.pt" ] && resume=(train.resume=true)
echo "started $(date -u '+%F %H:%M') UTC at $(git -C "$wt" rev-parse --short HEAD)" >> "$dir/PAUSED_AT.txt"
# The overrides given come after these defaults, so they win (e.g. train.checkpoint_every=200).
(cd "$wt" && OMP_NUM_THREADS=1 exec "$py" -m knn.train device=cpu threads=1 \
  train.progress=false train.checkpoint_every=1000 "$@" "${resume[@]}" hydra.run.dir="$dir") \
  >> "$dir/stdout.log" 2>&1 &
echo $! > "$dir/.current"  # the trainer's pid: kill it to pause the run
wait $!; rc=$?
if [ $rc = 0 ] && [ -f "$dir/result.json" ]; then
  echo "finished $(date -u '+%F %H:%M') UTC" >> "$dir/PAUSED_AT.txt"
else
  echo "stopped $(date -u '+%F %H:%M') UTC (exit $rc)" >> "$dir/PAUSED_AT.txt"
fi
rm -f "$dir/.current"
exit $rc
