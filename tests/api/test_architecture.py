"""The house rules of issue 10, checked on the source tree itself.

* no import cycle between the package's modules (module-level imports, and imports inside
  functions too: a lazy import still ties two modules together);
* no module over 400 lines and no function over 60 lines;
* pathways never import the storage layer (bytes belong to the stores);
* every package ``__init__`` declares ``__all__``.
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
    # the facade: one delegation per public verb, each with its keyword signature and docstring
    "spector_gpu.memory": "the facade's one-line delegations",
    # the public value types in their one home (RecallOptions, CognitiveResult with to_dict, ...)
    "spector_gpu.types": "the public value types, one home",
    # the opener: every keyword option documented, the shared-handle rule, the open itself
    "spector_gpu.memory:open": "the opener's documented options",
}
"""Modules (``module``) and functions (``module:function``) reviewed to stay over the limits,
and why (STYLE rule 20: limits are advice)."""


def _modules() -> dict[str, Path]:
    out = {}
    for root, prefix in ((PACKAGE, "spector_gpu"), (KERNELS, "spector_gpu.kernels")):
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
    return out


MODULES = _modules()


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: str, path: Path) -> set[str]:
    """Package modules imported by ``module`` (``from pkg import name`` counts ``pkg.name``
    when that is a module, else ``pkg``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            names = [
                f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                for a in node.names
            ]
        else:
            continue
        found.update(n for n in names if n in MODULES and n != module)
    return found


def _type_checking_only(path: Path) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (no runtime edge)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    lines.add(sub.lineno)
    return lines


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        graph[module] = _imports(module, path)
    # a package's __init__ re-exporting its modules is not a cycle with them
    for module in graph:
        graph[module] = {m for m in graph[module] if not module.startswith(m + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


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


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith("spector_gpu.pathways"))
)
def test_pathways_never_import_storage(module: str) -> None:
    deps = sorted(d for d in _graph()[module] if d.startswith("spector_gpu.storage"))
    assert [f"{module} imports {d}" for d in deps] == []


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
