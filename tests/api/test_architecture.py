"""The house rules, checked on the source tree itself.

The layer table of docs/architecture.md is an executable contract: import-linter
(``[tool.importlinter]`` in pyproject.toml, ``make imports``; ``make test`` runs it) checks that
imports only go downward, that no import cycle exists inside a layer, that pathways never
import ``storage``, and that eval, the CLI, the integrations and the demo use the public API.
What it cannot see is checked here:

* ``kernels/`` installs as ``spector_gpu.kernels`` from the top-level folder, which grimp does
  not read: its modules import only ``spector_gpu.errors``, ``spector_gpu.device`` and each
  other;
* the size limits are advice (STYLE rule 20): a module over 400 lines or a function over 60
  is either shortened or named, with the reason, in :data:`LONG_ON_PURPOSE`;
* every package ``__init__`` declares ``__all__``;
* the hand-written C (``kernels/csrc/``, ``spector_gpu/storage/csrc/``) stays within
  :data:`MAX_HAND_WRITTEN_C` lines (issue 36), bound by Cython: no hand-parsed argument tuples
  and no hand-written intrinsics anywhere in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "spector_gpu"
KERNELS = REPO / "kernels"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

LONG_ON_PURPOSE = {
    # the facade: one delegation per public verb, each with its whole keyword signature and
    # docstring; splitting it (a mixin) would only hide methods from a reader
    "spector_gpu.memory": "the facade's one-line delegations",
    # the public value types in their one home (RecallOptions, CognitiveResult with its
    # to_dict, RecallBatch, Explanation, ...), each with its documented fields
    "spector_gpu.types": "the public value types, one home",
    # remember's 27 keyword options, each passed on by name (ruff puts one per line)
    "spector_gpu.memory:remember": "one delegation of every keyword option",
}
"""Modules (``module``) and functions (``module:function``) reviewed to stay over the limits,
and why (STYLE rule 20)."""

MAX_HAND_WRITTEN_C = 1200
"""Lines of hand-written C (.c and .h, not Cython's output) allowed under kernels/ and
spector_gpu/ (issue 36)."""
NATIVE_FORBIDDEN = (b"PyArg_ParseTuple", b"immintrin.h")
"""Strings no file of the package may contain: Cython binds the C; GCC vectorises plain loops."""

KERNEL_IMPORTS = ("spector_gpu.errors", "spector_gpu.device", "spector_gpu.kernels")


def _modules() -> dict[str, Path]:
    out = {}
    for root, prefix in ((PACKAGE, "spector_gpu"), (KERNELS, "spector_gpu.kernels")):
        for path in sorted(root.rglob("*.py")):
            if root == PACKAGE and "kernels" in path.relative_to(root).parts[:1]:
                continue  # the checkout's spector_gpu/kernels link to kernels/
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
    return out


MODULES = _modules()


def _package_imports(path: Path) -> set[str]:
    """Absolute ``spector_gpu...`` modules a kernels/ file imports (relative imports stay
    inside kernels/)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("spector_gpu"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("spector_gpu")
        ):
            found.add(str(node.module))
    return found


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith("spector_gpu.kernels"))
)
def test_kernels_import_only_errors_and_device(module: str) -> None:
    bad = sorted(m for m in _package_imports(MODULES[module]) if not m.startswith(KERNEL_IMPORTS))
    assert [f"{module} imports {m}" for m in bad] == []


def test_the_kernel_import_check_finds_a_climbing_import(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text("from spector_gpu.cortex import Cortex\nfrom spector_gpu.errors import X\n")
    assert _package_imports(path) == {"spector_gpu.cortex", "spector_gpu.errors"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_and_function_lengths(module: str) -> None:
    path = MODULES[module]
    text = path.read_text(encoding="utf-8")
    problems = []
    if text.count("\n") > MAX_MODULE_LINES and module not in LONG_ON_PURPOSE:
        problems.append(f"{path} has {text.count(chr(10))} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and f"{module}:{node.name}" not in LONG_ON_PURPOSE:
                problems.append(f"{path}:{node.lineno} {node.name} is {length} lines")
    assert problems == []


def test_the_allow_list_names_only_long_code() -> None:
    """An entry whose module or function got short again (or went) leaves the list."""
    stale = [entry for entry in LONG_ON_PURPOSE if not _still_long(entry)]
    assert stale == []


def _still_long(entry: str) -> bool:
    module, _, function = entry.partition(":")
    if module not in MODULES:
        return False
    text = MODULES[module].read_text(encoding="utf-8")
    if not function:
        return text.count("\n") > MAX_MODULE_LINES
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == function
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
        for node in ast.walk(ast.parse(text))
    )


def test_no_line_meets_the_limits_by_formatting_tricks() -> None:
    """``# fmt: skip`` together with ``# noqa: E501`` hid long lines from both tools."""
    tricks = [
        f"{path}:{i}"
        for path in MODULES.values()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "fmt: skip" in line and "E501" in line
    ]
    assert tricks == []


@pytest.mark.parametrize(
    "package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py")
)
def test_packages_declare_all(package: str) -> None:
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    names = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    assert "__all__" in names, f"{MODULES[package]} declares no __all__"


def _package_files() -> list[Path]:
    """Every file under kernels/ and spector_gpu/ (not the checkout's spector_gpu/kernels link
    to kernels/, not bytecode caches)."""
    files = []
    for root in (KERNELS, PACKAGE):
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).parts
            if root == PACKAGE and rel[:1] == ("kernels",):
                continue
            if "__pycache__" in rel or not path.is_file():
                continue
            files.append(path)
    return files


def hand_written_c(files: list[Path]) -> dict[Path, int]:
    """Line counts of the C sources and headers among ``files``; a .c file beside a .pyx of the
    same stem is Cython's output, not hand-written."""
    return {
        path: len(path.read_bytes().splitlines())
        for path in files
        if path.suffix in (".c", ".h")
        and not (path.suffix == ".c" and path.with_suffix(".pyx").exists())
    }


def test_hand_written_c_stays_within_its_budget() -> None:
    counts = hand_written_c(_package_files())
    assert any(p.name == "scan.c" for p in counts)  # the walk sees the kernels' sources
    total = sum(counts.values())
    listing = ", ".join(f"{p.relative_to(REPO)}: {n}" for p, n in sorted(counts.items()))
    assert total <= MAX_HAND_WRITTEN_C, (
        f"{total} lines of hand-written C (budget {MAX_HAND_WRITTEN_C}): {listing}; move "
        "work to numpy/Cython or remove duplication before raising the budget"
    )


def test_the_c_count_skips_cython_output_only(tmp_path: Path) -> None:
    (tmp_path / "_mod.pyx").write_text("# cython\n")
    (tmp_path / "_mod.c").write_text("generated\n" * 5000)
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "mod.c").write_text("int f(void);\nint f(void) { return 0; }\n")
    (tmp_path / "csrc" / "mod.h").write_text("/* prototypes */\n")
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    counts = {p.relative_to(tmp_path).as_posix(): n for p, n in hand_written_c(files).items()}
    assert counts == {"csrc/mod.c": 2, "csrc/mod.h": 1}


def test_no_hand_parsed_arguments_or_intrinsics() -> None:
    found = [
        f"{path.relative_to(REPO)}: {needle.decode()}"
        for path in _package_files()
        for needle in NATIVE_FORBIDDEN
        if needle in path.read_bytes()
    ]
    assert found == [], "bind C through Cython and let the compiler vectorise plain loops"
