#!/bin/bash
# gpu_unpack.sh <variant> <run dir> <folder>...: here, after the device calls of
#   PACK=<variant> bash experiments/results/ptb/full/gpu_runs.sh <variant>, then FETCH=1, 2, ...
# join the checkpoint parts those calls sent back (each call's files_at is one <folder>),
# check them against the pack's sha256, and unpack last.pt and best.pt, with the run's
# files from the newest <variant>.tgz among the folders (PAUSED_AT.txt, metrics.jsonl,
# train.log, .hydra/), into <run dir>. The run then resumes on this machine:
#   experiments/runner/run_one.sh ../snap <run dir> experiment=ptb/<variant> seed=0 train.checkpoint_every=200
set -euo pipefail
die() { echo "gpu_unpack.sh: $*" >&2; exit 1; }
[ $# -ge 3 ] || die "usage: gpu_unpack.sh <variant> <run dir> <folder>..."
v=$1; dir=$2; shift 2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tgz=""
for f in "$@"; do
  [ -d "$f" ] || die "$f is not a folder"
  cp "$f/$v".pt.tar.part-* "$tmp"/ 2>/dev/null || true
  [ -f "$f/$v.pt.tar.sha256" ] && cat "$f/$v.pt.tar.sha256" >> "$tmp/sums"
  [ -f "$f/$v.tgz" ] && { [ -z "$tgz" ] || [ "$f/$v.tgz" -nt "$tgz" ]; } && tgz=$f/$v.tgz
done
[ -f "$tmp/sums" ] || die "no $v.pt.tar.sha256 in the folders: no call packed $v"
[ "$(sort -u "$tmp/sums" | wc -l)" = 1 ] || die "the folders hold parts of different packs of $v"
[ -n "$tgz" ] || die "no $v.tgz in the folders: the training call's files are missing"
cat "$tmp/$v".pt.tar.part-* > "$tmp/pt.tar"  # the glob sorts the parts: aa, ab, ...
[ "$(sha256sum < "$tmp/pt.tar" | cut -d' ' -f1)" = "$(head -n1 "$tmp/sums")" ] \
  || die "the parts of $v do not make the packed checkpoints ($(ls "$tmp"/*.part-* | wc -l) parts here): fetch the missing ones (FETCH=<k>)"
mkdir -p "$dir"
tar xzf "$tgz" -C "$dir"
tar xf "$tmp/pt.tar" -C "$dir"
echo "unpacked $v into $dir: $(cd "$dir" && ls last.pt best.pt 2>/dev/null | tr '\n' ' ')from $(ls "$tmp"/*.part-* | wc -l) parts; the run's files from $tgz"
