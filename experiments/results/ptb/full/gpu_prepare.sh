#!/bin/bash
# gpu_prepare.sh: make, on this machine, what gpu_runs.sh needs carried to a lent GPU machine
# (which reaches no package registry): .whl/ with the wheels its image lacks, for its
# Python 3.12 (hydra-core, omegaconf, antlr4 built here as pure-Python wheels; rdkit's
# binary wheel), and .devdata/ptb/ with the data mirror's PTB files. Both stay out of git
# (.git/info/exclude). Then, in a session lent a GPU, the device tool's call is
#   command: BUDGET_S=540 PACK=<row> bash experiments/results/ptb/full/gpu_runs.sh <row>
#   carry:   [".whl", ".devdata"]
# followed, for a 20m run, by the FETCH calls and gpu_unpack.sh here (README.md beside this).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
py=${PYTHON:-.venv/bin/python}
mkdir -p .whl .devdata
"$py" -m pip wheel -q --no-deps -w .whl hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 -d .whl rdkit==2026.9.1
rm -rf .devdata/ptb && cp -r "${KNN_DATA_MIRROR:-../shared/data}/ptb" .devdata/ptb
exclude=$(git rev-parse --git-path info/exclude)
for p in /.whl/ /.devdata/; do grep -qxF "$p" "$exclude" 2>/dev/null || echo "$p" >> "$exclude"; done
ls .whl .devdata/ptb
