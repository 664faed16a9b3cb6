#!/usr/bin/env bash
# One short check for a machine with a CUDA GPU (the dense kernels' GPU path):
#   1. the cuda-marked tests (kernel CPU == CUDA ids and scores, Triton == torch path, end-to-end
#      recall CPU == CUDA,
#      device resolution);
#   2. bench_dense.py --device cuda: 1M x 384 INT8, 4,096 queries, top-10, GPU time by CUDA
#      events (target <= 10 ms), CPU/CUDA agreement and recall on a sample.
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
"$PY" -m pytest -m cuda -q -p no:cacheprovider tests/kernels/test_device.py tests/kernels/test_kernels_dense.py tests/kernels/test_kernels_fused.py tests/api/test_cuda_e2e.py
tests_rc=$?

echo "== bench_dense --device cuda"
"$PY" benchmarks/bench_dense.py --device cuda --n 1000000 --dim 384 --queries 4096 --k 10 --repeats 10 --texts 20000
bench_rc=$?

echo "== bench_recall e2e on cuda (100k memories)"
SPECTOR_DENSE__DEVICE=cuda timeout 300 "$PY" benchmarks/bench_recall.py e2e
e2e_rc=$?

echo "== summary: cuda tests rc=${tests_rc}, bench rc=${bench_rc}, e2e rc=${e2e_rc} (0 = ok)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
