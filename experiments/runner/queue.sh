#!/bin/bash
# queue.sh <queue file>: run its lines one after another, first line first, each removed
# as it starts (so lines can be added or reordered while it runs). Two queues side by side
# are two one-thread trainings on a 2-core machine. Stop: kill the pid in <queue file>.pid
# first (no next line starts), then the running training (it resumes from last.pt).
# The line running is kept in <queue file>.running until it ends, so a line cut short (a
# stop, or the machine going away) goes back to the top of the queue at the next start
# (run_one.sh lines then resume, or are skipped if they had finished; any other command
# simply runs again).
set -u
q=$1
if old=$(cat "$q.pid" 2>/dev/null) && tr '\0' ' ' < "/proc/$old/cmdline" 2>/dev/null | grep -qF "queue.sh $q"; then
  echo "queue.sh: $q is already being run (pid $old)" >&2; exit 2
fi
echo $$ > "$q.pid"
if [ -s "$q.running" ]; then
  { cat "$q.running"; cat "$q" 2>/dev/null; } > "$q.new" && mv "$q.new" "$q"
  rm -f "$q.running"
fi
while line=$(head -n1 "$q" 2>/dev/null) && [ -n "$line" ]; do
  echo "$line" > "$q.running"
  sed -i 1d "$q"
  echo "$(date -u '+%F %T') $line" >> "$q.log"
  bash -c "$line" >> "$q.log" 2>&1
  rm -f "$q.running"
done
rm -f "$q.pid"
