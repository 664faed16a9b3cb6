"""Each framework adapter is an optional extra: importing ``spector_gpu`` never imports a
framework, and importing an adapter without its framework raises ``MissingExtraError`` naming
the extra to install."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from spector_gpu.errors import MissingExtraError

# adapter module -> (framework top-level module, extra)
ADAPTERS = {
    "spector_gpu.integrations.mcp_server": ("mcp", "mcp"),
    "spector_gpu.integrations.langgraph": ("langgraph", "langgraph"),
    "spector_gpu.integrations.langchain": ("langchain_core", "langchain"),
}


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_missing_framework_names_the_extra(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    framework, extra = ADAPTERS[module]
    for name in list(sys.modules):  # forget the adapter and the framework, if loaded
        if name in (module, framework) or name.startswith(f"{framework}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)  # None in sys.modules: ImportError
    with pytest.raises(MissingExtraError, match=rf"pip install 'spector-gpu\[{extra}\]'"):
        importlib.import_module(module)


def test_mem0_adapter_never_imports_mem0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "spector_gpu.integrations.mem0", raising=False)
    monkeypatch.setitem(sys.modules, "mem0", None)  # importing mem0 would raise
    assert importlib.import_module("spector_gpu.integrations.mem0").Memory is not None


def test_importing_the_package_imports_no_framework() -> None:
    probe = (
        "import sys, spector_gpu, spector_gpu.integrations, spector_gpu.cli; "
        f"print(sorted(m for m in {sorted({f for f, _ in ADAPTERS.values()} | {'mem0'})!r} "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
