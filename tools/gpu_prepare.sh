#!/usr/bin/env bash
# Prepare, on this machine, what benchmarks/gpu_check.sh needs on a lent GPU machine that can
# reach no index: the wheels of the runtime dependencies its image lacks (CPython 3.12,
# manylinux x86-64) and a dev-data subset, all in .gpu/ (git-ignored through
# .git/info/exclude, carried by the device call). Then, through the device tool:
#     run(command="bash benchmarks/gpu_check.sh", carry=[".gpu"], timeout_s=590)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
SHARED=${SHARED:-../shared}
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >>.git/info/exclude
rm -rf .gpu && mkdir -p .gpu/whl .gpu/data
# the image has numpy, torch, triton, scipy, tqdm, cython, pytest and hypothesis
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl \
  faiss-cpu crc32c rank-bm25 PyStemmer
cp "$SHARED/data/locomo10/locomo10-dev.json" .gpu/data/
# LongMemEval_S dev is 111 MB: its first 30 questions (each with its own haystack)
"$PY" - "$SHARED/data/longmemeval/longmemeval_s_cleaned.dev.json" .gpu/data/lme_s_dev30.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))[:30]
json.dump(rows, open(sys.argv[2], "w"))
PY
du -sh .gpu
