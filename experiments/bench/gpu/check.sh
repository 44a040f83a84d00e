#!/bin/bash
# One GPU check, run on a lent GPU machine through the device tool:
#   1. the fused-scan tests, whose CUDA variants check the CUDA op against the PyTorch reference;
#   2. training throughput (tokens/s, FLOPs/token, share of the GPU's fp32 GEMM peak) of the
#      5m gated Kernel NN with the fused CUDA scan, the same with the reference loop
#      (KNN_FUSED=0), and the 5m LSTM (cuDNN);
#   3. one full epoch (train + validation) and the test pass of the 5m gated model and the
#      5m LSTM through the trainer, the authors' evaluation batch size of 1 included;
#   4. the rest of the test suite, in the time left.
# Needs, in the checkout: .whl/ (hydra-core, omegaconf, antlr4, rdkit, submitit wheels for
# the machine's Python) and .devdata/ (a copy of the data mirror). Writes up to 6 files to $OUT.
# SKIP_REFERENCE=1 leaves out the (slow) reference-loop throughput; STAGES picks the steps
# to run (default "ops throughput epoch rest"); the build (step 0) always runs.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_check}; mkdir -p "$OUT"
LOG=$OUT/log.txt
deadline=$((SECONDS + ${BUDGET_S:-540}))
left() { echo $((deadline - SECONDS)); }
want() { [[ " ${STAGES:-ops throughput epoch rest} " == *" $1 "* ]]; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site KNN_DATA_MIRROR=$PWD/.devdata KNN_DATA_CACHE=/tmp/knn-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"
} 2>&1 | tee -a "$LOG"

echo "== 0. build the fused ops" | tee -a "$LOG"
{ python3 -c "import sysconfig, os; i = sysconfig.get_paths()['include']; print('Python.h present:', os.path.exists(i + '/Python.h'))"
  g++ --version | head -1
  python3 - <<'PY'
from knn.ops import recurrence as R
ok = {d: R.fused_available(d) for d in ("cpu", "cuda")}
print("fused ops built:", ok, R.fused_build_errors())
if not all(ok.values()):  # show the compiler's own words
    from torch.utils import cpp_extension
    src = R._CSRC / ("string_kernel_cuda.cu" if not ok["cuda"] else "string_kernel_cpu.cpp")
    try:
        cpp_extension.load(name="knn_sk_diagnose", sources=[str(src)], is_python_module=False, verbose=True)
    except Exception as exc:
        print(exc)
PY
} 2>&1 | tail -40 | tee -a "$LOG"
built=$(grep -c "fused ops built: {'cpu': True, 'cuda': True}" "$LOG")

[ "$built" = 1 ] && {
want ops && {
echo "== 1. fused-scan tests (CPU and CUDA)" | tee -a "$LOG"
timeout 240 python3 -m pytest tests/ops -q -p no:cacheprovider -rs 2>&1 | tail -25 | tee "$OUT/pytest.txt" | tail -4 | tee -a "$LOG"
}

want throughput && {
echo "== 2. throughput" | tee -a "$LOG"
tp() {  # name, env, steps
  env $2 timeout 120 python3 -m knn.tools.throughput experiment=ptb/${1%%.*} device=cuda --steps "$3" \
    --out "/tmp/tp_$1.json" > /dev/null 2>> "$LOG" && echo "$1: $(cat /tmp/tp_$1.json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["tokens_per_s"], "tok/s", r["step_ms"], "ms/step, fused", r["fused_scan"], ", peak", r["gemm_peak_gflops"], "GFLOP/s")')" | tee -a "$LOG"
}
tp gated_5m.fused KNN_FUSED=1 100
[ -z "${SKIP_REFERENCE:-}" ] && tp gated_5m.reference KNN_FUSED=0 20
tp lstm_5m.cudnn KNN_FUSED=1 100
python3 -c "import json,glob; print(json.dumps({p[8:-5]: json.load(open(p)) for p in sorted(glob.glob('/tmp/tp_*.json'))}, indent=2))" > "$OUT/throughput.json"
}

want epoch && {
echo "== 3. one epoch each" | tee -a "$LOG"
for m in gated_5m lstm_5m; do
  timeout $(( $(left) > 200 ? 200 : $(left) )) python3 -m knn.train experiment=ptb/$m device=cuda seed=0 \
    train.max_epochs=1 train.progress=false hydra.run.dir=/tmp/runs/$m 2>&1 | grep -E "INFO|Error|error" | tail -4 | tee -a "$LOG"
  python3 -c "import json,sys; d='/tmp/runs/$m'; print(json.dumps({'result': json.load(open(d+'/result.json')), 'metrics': [json.loads(l) for l in open(d+'/metrics.jsonl')]}, indent=2))" > "$OUT/epoch_$m.json" 2>> "$LOG"
done
}
}

want rest && {
echo "== 4. the rest of the suite ($(left) s left)" | tee -a "$LOG"
timeout $(left) python3 -m pytest tests -q -p no:cacheprovider --ignore=tests/ops -rfs --maxfail=5 --durations=10 2>&1 | tail -150 > "$OUT/pytest_rest.txt"
tail -3 "$OUT/pytest_rest.txt" | tee -a "$LOG"
}
