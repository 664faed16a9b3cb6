#!/usr/bin/env bash
# The CUDA check, one call of under 10 minutes on a lent GPU machine (an H100 or H200):
#   0. set-up there: the wheels from tools/gpu_prepare.sh, the kernels built in place;
#   1. every `cuda`-marked test: each stage's CPU == CUDA ids and scores, Triton == torch,
#      the recall pathway CPU == CUDA (both pool layouts, every fusion mode), no host sync
#      inside a recall batch (sync debug mode), end-to-end recall / recall_batch CPU == CUDA,
#      device resolution, the stacked many-store block CPU == CUDA;
#   2. bench_dense.py: 1M x 384 INT8, 4,096 queries, top-10 (target <= 10 ms) and the share
#      of the card's INT8 peak it reaches;
#   3. bench_recall.py gpu: all relays, 4,096 queries over 1M memories (target <= 50 ms),
#      single recall p50 CUDA vs CPU, CPU == CUDA ids and scores on a sample;
#   4. `spector-gpu eval` of LoCoMo dev and 30 LongMemEval_S dev questions on CUDA and on the
#      CPU of the same machine: throughput and the same metrics.
# Prepare here:   bash tools/gpu_prepare.sh     (wheels + data into .gpu/, ignored)
# Run there:      bash benchmarks/gpu_check.sh  (device tool: carry [".gpu"]); logs go to $OUT
# Dry run here:   GPU_CHECK_DRY=1 bash benchmarks/gpu_check.sh   (CPU, small sizes: the script)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-$(mktemp -d)}
DRY=${GPU_CHECK_DRY:-}
PY=${PYTHON:-python3}
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

if [ -z "$DRY" ]; then
  if [ -d .gpu/whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .gpu/whl/*.whl || exit 3
    export PYTHONPATH=/tmp/site
  fi
  [ -e spector_gpu/kernels ] || ln -s ../kernels spector_gpu/kernels
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 || log "native build failed (see build.log)"
  "$PY" - <<'PYEOF' || { log "no CUDA device visible to $PY; nothing to check"; exit 2; }
import sys, torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available={torch.cuda.is_available()}")
sys.exit(0 if torch.cuda.is_available() else 1)
PYEOF
  DEV=cuda; DEVICES="cpu cuda"; N=1000000; NQ=4096; ROUNDS=5; REPEATS=10
else
  DEV=cpu; DEVICES=cpu; N=20000; NQ=64; ROUNDS=1; REPEATS=2
fi
"$PY" -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')" \
  | sed 's/^/device: /' | tee -a "$OUT/summary.txt"
data=.gpu/data
[ -f "$data/locomo10-dev.json" ] || data=../shared/data/locomo10
lme=.gpu/data/lme_s_dev30.json

log "1. pytest -m cuda"
files=$(grep -rlE "pytest\.mark\.cuda|mark\.cuda" tests --include="test_*.py" | sort)
if [ -z "$DRY" ]; then
  "$PY" -m pytest -m cuda -q -p no:cacheprovider $files 2>&1 | tee "$OUT/cuda_tests.log" | tail -25
  tests_rc=${PIPESTATUS[0]}
else
  "$PY" -m pytest -m cuda -q -p no:cacheprovider --co $files 2>&1 | tail -2; tests_rc=0
fi
log "cuda tests rc=$tests_rc"

log "2. bench_dense --device $DEV"
timeout 150 "$PY" benchmarks/bench_dense.py --device "$DEV" --n "$N" --dim 384 --queries "$NQ" \
  --k 10 --repeats "$REPEATS" --texts 2000 2>&1 | tee "$OUT/bench_dense.log" | tail -20
bench_rc=${PIPESTATUS[0]}

log "3. bench_recall gpu: all relays, $NQ queries over $N memories"
if [ -z "$DRY" ]; then
  timeout 240 "$PY" benchmarks/bench_recall.py gpu --memories "$N" --gpu-queries "$NQ" \
    --rounds "$ROUNDS" 2>&1 | tee "$OUT/bench_recall.log" | tail -12
  recall_rc=${PIPESTATUS[0]}
else
  recall_rc=0; echo "(dry run: needs CUDA)"
fi

log "4. spector-gpu eval, CUDA vs CPU"
eval_rc=0
for ds in "$data/locomo10-dev.json" "$lme"; do
  [ -f "$ds" ] || { echo "missing $ds (run tools/gpu_prepare.sh)"; continue; }
  for d in $DEVICES; do
    name=$(basename "$ds" .json)-$d
    timeout 120 "$PY" -m spector_gpu.cli eval "$ds" --device "$d" --out "$OUT/tmp-$name" \
      --no-progress >"$OUT/eval-$name.log" 2>&1 || { eval_rc=1; tail -5 "$OUT/eval-$name.log"; }
    "$PY" - "$OUT/tmp-$name/metrics.json" "$name" <<'PYEOF' | tee -a "$OUT/summary.txt"
import json, sys
m = json.load(open(sys.argv[1]))
for name, c in m["configs"].items():
    print(f"   {sys.argv[2]} [{name}]: {c['queries_per_s']:,.0f} queries/s, "
          f"p50 {c['latency_ms_p50']:.2f} ms, "
          + ", ".join(f"{k} {v:.4f}" for k, v in c.items() if k.endswith("@10") and "recall" in k))
PYEOF
  done
done
rm -rf "$OUT"/tmp-*
log "summary: cuda tests rc=$tests_rc, dense bench rc=$bench_rc, recall bench rc=$recall_rc, eval rc=$eval_rc (0 = ok)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$recall_rc" -eq 0 ] && [ "$eval_rc" -eq 0 ]
