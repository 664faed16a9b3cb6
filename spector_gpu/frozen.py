"""Frozen dataclasses built in one step, for the paths that build thousands of them.

A frozen dataclass's generated ``__init__`` writes each field through ``object.__setattr__``
(the class's own ``__setattr__`` refuses): about 0.3 µs a field, so 10–13 µs for the 38 fields
of a :class:`~spector_gpu.types.CognitiveResult` and 7 µs for a payload — more than reading
and verifying the memory's record. :func:`frozen_builder` returns a constructor that fills the
instance's ``__dict__`` once, in field order, with the defaults of the fields not given: the
object the generated ``__init__`` builds (equal, the same hash and repr, the same ``vars()``).
It applies only to classes for which that holds: frozen, no ``__post_init__``, no
``__slots__``, every field in ``__init__``, no default factories.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["frozen_builder"]

T = TypeVar("T")
_REQUIRED: Any = object()  # a required field not given


def frozen_builder(cls: type[T]) -> Callable[[Mapping[str, Any]], T]:
    """A constructor ``build(values)`` of frozen dataclass ``cls`` equivalent to
    ``cls(**values)`` (module docstring); ``TypeError`` for a missing field without a default
    or a name that is not a field, as ``__init__`` raises. Refuses (``TypeError``) a class for
    which the shortcut would not build what ``__init__`` builds."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"frozen_builder needs a frozen dataclass, got {cls.__name__}")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        hasattr(cls, "__post_init__")
        or "__slots__" in vars(cls)
        or any(not f.init or f.default_factory is not dataclasses.MISSING for f in fields)
    ):
        raise TypeError(f"{cls.__name__}: __post_init__, slots, init=False or default factories")
    required = tuple(f.name for f in fields if f.default is dataclasses.MISSING)
    # every field in field order, each a default or the marker of a required one: merging the
    # given values into it keeps that order (a dict update keeps a key's place)
    template = {
        f.name: _REQUIRED if f.default is dataclasses.MISSING else f.default for f in fields
    }
    new = object.__new__
    set_attr = object.__setattr__

    def build(values: Mapping[str, Any]) -> T:
        state = {**template, **values}
        if len(state) != len(template):
            unknown = sorted(set(values) - template.keys())
            raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
        for n in required:
            if state[n] is _REQUIRED:
                raise TypeError(f"{cls.__name__} missing field {n!r}")
        obj = new(cls)
        set_attr(obj, "__dict__", state)
        return obj

    return build
