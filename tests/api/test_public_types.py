"""Every type a public call accepts or returns is exported from ``spector_gpu`` (issue 37).

The walk starts at the exported classes, reads the type hints of their public methods and
properties (and a dataclass's fields), and follows every class of the package it meets. A
compiled :class:`~spector_gpu.Filter` is opaque: callers build it from a ``where`` mapping and
never touch its nodes, so the walk does not enter it.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing

import spector_gpu

OPAQUE = {spector_gpu.Filter}
INTERNAL_CONSTRUCTORS = {spector_gpu.SpectorMemory}  # built by SpectorMemory.open, not __init__


def _package_types(hint: object, out: set[type]) -> None:
    if isinstance(hint, type):
        if hint.__module__.startswith("spector_gpu"):
            out.add(hint)
        return
    origin = typing.get_origin(hint)
    if isinstance(origin, type) and origin.__module__.startswith("spector_gpu"):
        out.add(origin)
    for arg in typing.get_args(hint):
        _package_types(arg, out)


def _hints_of(cls: type) -> dict[str, set[type]]:
    """``{"Class.member": package types in its hints}`` for the public surface of ``cls``."""
    found: dict[str, set[type]] = {}
    for name, member in inspect.getmembers(cls):
        public = not name.startswith("_") or (
            name == "__init__" and cls not in INTERNAL_CONSTRUCTORS
        )
        func = member.fget if isinstance(member, property) else member
        if not public or not callable(func) or isinstance(func, type):
            continue
        out: set[type] = set()
        for hint in typing.get_type_hints(func).values():
            _package_types(hint, out)
        found[f"{cls.__name__}.{name}"] = out
    if dataclasses.is_dataclass(cls):
        out = set()
        for hint in typing.get_type_hints(cls).values():
            _package_types(hint, out)
        found[f"{cls.__name__} fields"] = out
    return found


def _reachable() -> dict[type, str]:
    start = [getattr(spector_gpu, n) for n in spector_gpu.__all__]
    todo = [t for t in start if isinstance(t, type)]
    seen: set[type] = set()
    where: dict[type, str] = {}
    while todo:
        cls = todo.pop()
        if cls in seen or cls in OPAQUE:
            continue
        seen.add(cls)
        for member, types in _hints_of(cls).items():
            for t in types:
                where.setdefault(t, member)
                todo.append(t)
    return where


def test_every_type_in_a_public_signature_is_exported() -> None:
    exported = {id(getattr(spector_gpu, n)) for n in spector_gpu.__all__}
    missing = {
        f"{t.__module__}.{t.__qualname__} (in {member})"
        for t, member in _reachable().items()
        if id(t) not in exported
    }
    assert not missing, sorted(missing)


def test_the_walk_reaches_nested_result_types() -> None:
    reached = _reachable()
    # SpectorMemory.sleep -> SleepReport -> DreamReport -> DreamEntry -> HebbianChange
    assert spector_gpu.HebbianChange in reached
    assert spector_gpu.ManifestEntry in reached  # export_bundle -> BundleInfo.entries
    assert spector_gpu.Embedder in reached


def test_all_names_resolve() -> None:
    for name in spector_gpu.__all__:
        assert hasattr(spector_gpu, name), name
