#!/bin/bash
# park.sh save <run dir> <parked dir> | park.sh restore <parked dir> <run dir>
# A run that cannot finish before its machine goes away (the authors' full CEP schedule,
# hours at one thread) is parked in the repository at the end of a working session and
# restored on the next machine, where the same run_one.sh line resumes it exactly. Saved:
# the checkpoints (last.pt to resume, best.pt for the final test; .gitignore lets *.pt
# through under experiments/parked/) and the run's records. Stop the run first; delete
# the parked folder (git rm -r) once the run has finished and been copied to the results.
set -eu
files=(last.pt best.pt metrics.jsonl train.log PAUSED_AT.txt stdout.log)
if [ $# != 3 ] || { [ "$1" != save ] && [ "$1" != restore ]; }; then
  echo "usage: park.sh save <run dir> <parked dir> | park.sh restore <parked dir> <run dir>" >&2; exit 2
fi
src=$2; dst=$3
if [ "$1" = save ] && [ -f "$src/.current" ]; then
  echo "park.sh: $src is training (pid $(cat "$src/.current")); stop it first" >&2; exit 2
fi
[ -f "$src/last.pt" ] || { echo "park.sh: no last.pt in $src" >&2; exit 2; }
mkdir -p "$dst"
for f in "${files[@]}"; do
  [ -f "$src/$f" ] && cp -p "$src/$f" "$dst/$f"
done
ls -la "$dst"
