#!/usr/bin/env bash
# Install what users install: build the sdist and, from it, the wheel; install the wheel with
# an extra into a clean venv (no checkout on sys.path), then run the README's first example,
# the CLI and the quick demo there. Called by `make test` (so CI) and `make wheel-check`.
set -euo pipefail
PYTHON=${PYTHON:-python3}
BUILD_PY=${BUILD_PY:-.venv/bin/python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "wheel-check: building the sdist, then the wheel from it"
"$BUILD_PY" -m build --sdist --wheel --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/*.whl)
sdist=$(ls "$work"/dist/*.tar.gz)
echo "wheel-check: $(basename "$wheel") ($(unzip -l "$wheel" | tail -1 | awk '{print $2}') files)"

# Every package folder of the checkout must be in the wheel (the round-2 wheel lacked one).
"$BUILD_PY" - "$wheel" "$repo" <<'PY'
import pathlib, sys, zipfile
wheel, repo = sys.argv[1], pathlib.Path(sys.argv[2])
names = set(zipfile.ZipFile(wheel).namelist())
want = {p.parent.relative_to(repo).as_posix() for p in (repo / "spector_gpu").rglob("__init__.py")}
want |= {"spector_gpu/kernels" + p.parent.relative_to(repo / "kernels").as_posix().removeprefix(".")
         for p in (repo / "kernels").rglob("__init__.py")}
missing = sorted(w for w in want if f"{w}/__init__.py" not in names)
if missing:
    sys.exit(f"wheel-check: packages missing from the wheel: {missing}")
for must in ("spector_gpu/py.typed", "spector_gpu/data/static_minilm.npz"):
    if must not in names:
        sys.exit(f"wheel-check: {must} missing from the wheel")
print(f"wheel-check: all {len(want)} packages and the package data are in the wheel")
PY

echo "wheel-check: a clean venv; $TORCH_SPEC first, then the wheel with its [plot] extra"
# The venv gets no pip of its own: the build venv's pip (upgraded by the Makefile) installs into
# it (--python), which saves seeding and upgrading a second pip. torch goes in without
# byte-compiling its ~4,000 modules (24 of its 33 s on a 2-core AVX2 host); the runs below may
# write bytecode into this throwaway venv, so the first import compiles the few hundred torch
# modules it loads (~2 s) and later runs reuse them.
unset PYTHONDONTWRITEBYTECODE
"$PYTHON" -m venv --without-pip "$work/venv"
vpy="$work/venv/bin/python"
pipq() { "$BUILD_PY" -m pip --python "$vpy" install -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pipq --no-compile "$TORCH_SPEC"
pipq "spector-gpu[plot] @ file://$wheel"

cd "$work"  # away from the checkout: the import must resolve to the installed wheel
"$vpy" - <<'PY'
import pathlib, spector_gpu
where = pathlib.Path(spector_gpu.__file__).resolve()
assert "site-packages" in where.parts, f"imported from {where}, not the installed wheel"
print("wheel-check: import spector_gpu from", where.parent)
# the compiled kernels are optional for an install without a compiler, but this machine has
# one: the wheel must carry them (C sources and headers in the sdist, Cython at build time)
from spector_gpu.kernels.native import MODULES, native
from spector_gpu.storage.native import native as codecs
assert native is not None, f"wheel-check: the native kernels ({MODULES}) are not in the wheel"
assert codecs is not None, "wheel-check: the native storage codecs are not in the wheel"
print("wheel-check: native kernels", ", ".join(MODULES), "and the storage codecs load")
PY
# The README's first example, extracted from the README of the sdist the wheel was built from.
tar -xzf "$sdist" -C "$work"
"$vpy" - "$work"/spector_gpu-*/README.md <<'PY'
import pathlib, re, sys
text = pathlib.Path(sys.argv[1]).read_text()
block = re.search(r"## Use it from Python\n\n```python\n(.*?)```", text, re.S).group(1)
pathlib.Path("readme_example.py").write_text(block)
PY
"$vpy" readme_example.py >example.out
grep -q "fact.tar" example.out || [ -f fact.tar ] || { echo "wheel-check: README example wrote no bundle"; exit 1; }
echo "wheel-check: README example ran ($(wc -l <example.out) lines of output)"
cli="$work/venv/bin/spector-gpu"
"$cli" --version
"$cli" check ./memory >/dev/null
"$cli" recall ./memory "where does Ann live?" --k 2
"$cli" demo --quick --no-progress --out "$work/demo_out" >demo.log
test -s "$work/demo_out/synthetic/metrics.json" || { tail -20 demo.log; exit 1; }
echo "wheel-check: quick demo wrote $(ls "$work/demo_out/synthetic" | wc -l) files; ok"
