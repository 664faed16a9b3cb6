#!/usr/bin/env bash
# One short check for a machine with a CUDA GPU (about 10 minutes on an H200):
#   1. the cuda-marked tests: kernel CPU == CUDA ids and scores, Triton == torch path, the
#      recall pathway CPU == CUDA (both pool layouts, every fusion mode), no sync inside a
#      recall batch (sync debug mode), end-to-end recall CPU == CUDA, device resolution, the
#      stacked many-store block CPU == CUDA;
#   2. bench_dense.py --device cuda: 1M x 384 INT8, 4,096 queries, top-10 (target <= 10 ms);
#   3. bench_recall.py gpu: all relays, 4,096 queries over 1M memories (target <= 50 ms), single
#      recall p50 CUDA vs CPU, CPU == CUDA ids and scores on a sample.
# Usage: PYTHON=/path/to/python bash benchmarks/gpu_check.sh   (needs a CUDA build of torch)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

"$PY" - <<'PYEOF' || { echo "gpu_check: no CUDA device visible to $PY; nothing to check"; exit 2; }
import sys, torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available={torch.cuda.is_available()}")
sys.exit(0 if torch.cuda.is_available() else 1)
PYEOF

echo "== pytest -m cuda"
"$PY" -m pytest -m cuda -q -p no:cacheprovider tests/kernels/test_device.py \
  tests/kernels/test_kernels_dense.py tests/kernels/test_kernels_fused.py \
  tests/pathways/test_recall_device.py tests/api/test_cuda_e2e.py \
  tests/pathways/test_recall_stacked.py
tests_rc=$?

echo "== bench_dense --device cuda"
"$PY" benchmarks/bench_dense.py --device cuda --n 1000000 --dim 384 --queries 4096 --k 10 --repeats 10 --texts 20000
bench_rc=$?

echo "== bench_recall gpu: all relays, 4,096 queries over 1M memories"
timeout 420 "$PY" benchmarks/bench_recall.py gpu --memories 1000000 --gpu-queries 4096 --rounds 5
recall_rc=$?

echo "== summary: cuda tests rc=${tests_rc}, dense bench rc=${bench_rc}, recall bench rc=${recall_rc} (0 = ok)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$recall_rc" -eq 0 ]
