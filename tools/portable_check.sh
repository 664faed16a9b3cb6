#!/usr/bin/env bash
# Every shipped path runs in CI: the compiled kernels' vectorised loops are built twice by GCC
# (`VECTOR_CLONES` in kernels/csrc/select.h: an AVX2 clone and a `default` one, picked at
# import), and an AVX2 host only ever runs the first. This builds the kernels of a copy of the
# checkout with -DSPECTOR_PORTABLE (no clones: the plain x86-64 code the `default` clone is)
# and runs the kernel tests against that build. Called by `make test` (so CI).
set -euo pipefail
BUILD_PY=${BUILD_PY:-.venv/bin/python}
case $BUILD_PY in /*) ;; *) BUILD_PY="$PWD/$BUILD_PY" ;; esac  # (used after a cd)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the checkout's files as they are now (tracked or new, not ignored; a deleted one skipped)
(cd "$repo" && git ls-files -z --cached --others --exclude-standard -- spector_gpu kernels tests \
  pyproject.toml setup.py | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$work")
ln -s ../kernels "$work/spector_gpu/kernels"  # as the editable install maps it
echo "portable-check: building the kernels with -DSPECTOR_PORTABLE (no AVX2 clones)"
(cd "$work" && CFLAGS="-DSPECTOR_PORTABLE" "$BUILD_PY" -c "import setuptools; setuptools.setup()" \
  build_ext --inplace >"$work/build.log" 2>&1) || { tail -40 "$work/build.log"; exit 1; }
if objdump -d "$work"/kernels/_*.so | grep -q '\.avx2>:'; then
  echo "portable-check: the build still holds AVX2 clones" >&2
  exit 1
fi
cd "$work"  # the copy's spector_gpu (and its kernels) first on the path
PYTHONPATH="$work" "$BUILD_PY" - <<'PY'
import pathlib, spector_gpu.kernels._lexical as lexical
where = pathlib.Path(lexical.__file__).resolve()
assert str(where).startswith(str(pathlib.Path.cwd().resolve())), f"imported {where}"
print("portable-check: kernels from", where.parent)
PY
PYTHONPATH="$work" "$BUILD_PY" -m pytest -q -p no:cacheprovider -n 2 -m "not heavy" \
  tests/kernels tests/cortex/test_bm25_select.py
echo "portable-check: ok"
