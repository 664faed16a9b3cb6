"""frozen_builder: one-step construction of frozen dataclasses, the same objects as __init__."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from spector_gpu.cortex.payload import Payload, decode_payload, encode_payload
from spector_gpu.frozen import frozen_builder
from spector_gpu.types import CognitiveResult, MemoryType, RecordProvenance


def _same(built: Any, expected: Any) -> None:
    assert built == expected
    assert type(built) is type(expected)
    try:
        expected_hash = hash(expected)
    except TypeError:  # a field holds a dict: unhashable either way
        with pytest.raises(TypeError):
            hash(built)
    else:
        assert hash(built) == expected_hash
    assert repr(built) == repr(expected)
    assert list(vars(built).items()) == list(vars(expected).items())  # field order too
    assert pickle.loads(pickle.dumps(built)) == expected


RESULT = {
    "id": "097GZG53YYM00",
    "text": "Ann moved to Lisbon.",
    "score": 0.5,
    "memory_type": MemoryType.EPISODIC,
    "importance": 5.0,
    "provenance": RecordProvenance.VERBATIM,
    "retrieval_strength": 0.9,
    "storage_strength": 1.0,
    "timestamp_ms": 1_700_000_000_000,
    "session_id": 3,
}


def test_required_fields_only_take_the_defaults() -> None:
    _same(frozen_builder(CognitiveResult)(RESULT), CognitiveResult(**RESULT))


def test_every_field_given_in_any_order() -> None:
    full = {
        f.name: getattr(CognitiveResult(**RESULT), f.name)
        for f in dataclasses.fields(CognitiveResult)
    }
    full.update(speaker="Ann", tags=("a", "b"), version=3, superseded_by=("097GZG53YYM01",))
    shuffled = dict(reversed(list(full.items())))
    _same(frozen_builder(CognitiveResult)(shuffled), CognitiveResult(**full))


def test_the_built_object_stays_frozen() -> None:
    built = frozen_builder(CognitiveResult)(RESULT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.text = "changed"  # type: ignore[misc]


def test_missing_and_unknown_fields_raise_as_init_does() -> None:
    build = frozen_builder(CognitiveResult)
    partial = {k: v for k, v in RESULT.items() if k != "score"}
    with pytest.raises(TypeError, match="missing field 'score'"):
        build(partial)
    with pytest.raises(TypeError, match="unexpected keyword"):
        CognitiveResult(**RESULT, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"has no field\(s\) colour"):
        build({**RESULT, "colour": "red"})


def test_payloads_decode_to_what_init_builds() -> None:
    p = Payload(
        text="héllo",
        session_id=7,
        role=1,
        speaker="Bo",
        tags=("x",),
        user_id="u",
        metadata={"k": 1},
        version=2,
        supersedes=41,
    )
    _same(decode_payload(encode_payload(p)), p)
    _same(decode_payload(encode_payload(Payload(text="t"))), Payload(text="t"))


@dataclasses.dataclass(frozen=True)
class _WithPostInit:
    a: int

    def __post_init__(self) -> None:
        pass


@dataclasses.dataclass
class _Mutable:
    a: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Slotted:
    a: int


@dataclasses.dataclass(frozen=True)
class _Factory:
    a: list[int] = dataclasses.field(default_factory=list)


@pytest.mark.parametrize("cls", [_WithPostInit, _Mutable, _Slotted, _Factory, int])
def test_classes_the_shortcut_would_not_build_right_are_refused(cls: type) -> None:
    with pytest.raises(TypeError):
        frozen_builder(cls)
