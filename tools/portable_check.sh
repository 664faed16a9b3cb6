#!/usr/bin/env bash
# Every shipped path runs in CI: the compiled kernels' vectorised loops are built twice by GCC
# (`VECTOR_CLONES` in kernels/csrc/select.h: an AVX2 clone and a `default` one, picked at
# import), and an AVX2 host only ever runs the first. This builds a wheel of a copy of the
# checkout with -DSPECTOR_PORTABLE (no clones: the plain x86-64 code the `default` clone is)
# and runs the kernel tests against its kernels. Called by `make test` (so CI).
set -euo pipefail
BUILD_PY=${BUILD_PY:-.venv/bin/python}
case $BUILD_PY in /*) ;; *) BUILD_PY="$PWD/$BUILD_PY" ;; esac  # (used after a cd)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the checkout's files as they are now (tracked or new, not ignored; a deleted one skipped)
(cd "$repo" && git ls-files -z --cached --others --exclude-standard -- spector_gpu kernels tests \
  pyproject.toml setup.py MANIFEST.in README.md |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$work")
echo "portable-check: building a wheel of the copy with -DSPECTOR_PORTABLE (no AVX2 clones)"
# (as users build: an isolated build environment with its Cython; its kernels into the copy)
CFLAGS="-DSPECTOR_PORTABLE" "$BUILD_PY" -m build --wheel --outdir "$work/dist" "$work" \
  >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
"$BUILD_PY" - "$work" <<'PY'
import pathlib, sys, zipfile
work = pathlib.Path(sys.argv[1])
wheel = zipfile.ZipFile(next((work / "dist").glob("*.whl")))
built = [n for n in wheel.namelist() if n.startswith("spector_gpu/kernels/_") and n.endswith(".so")]
if len(built) < 4:
    sys.exit(f"portable-check: the wheel holds {len(built)} compiled kernel modules: {built}")
for name in built:
    (work / "kernels" / pathlib.Path(name).name).write_bytes(wheel.read(name))
print("portable-check:", len(built), "kernel modules built")
PY
clones=$(objdump -d "$work"/kernels/_*.so | grep -c '\.avx2>:' || true)  # (-c reads it all)
if [ "$clones" != 0 ]; then
  echo "portable-check: the build still holds $clones AVX2 clones" >&2
  exit 1
fi
ln -s ../kernels "$work/spector_gpu/kernels"  # as the editable install maps it
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
