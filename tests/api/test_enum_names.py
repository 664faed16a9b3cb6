"""The public enums print as their names and stay integers everywhere else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spector_gpu import MemoryType, RecordProvenance, Role, Source, SpectorMemory


@pytest.mark.parametrize("cls", [MemoryType, Role, Source, RecordProvenance])
def test_an_enum_prints_as_the_name_parse_accepts(cls: type) -> None:
    for member in cls:
        assert str(member) == f"{member}" == member.name.lower()
        assert cls(int(member)) is member and json.dumps(member) == str(int(member))
        assert repr(member) == f"<{cls.__name__}.{member.name}: {int(member)}>"
        if hasattr(cls, "parse"):
            assert cls.parse(str(member)) is member


def test_a_recalled_memory_shows_names(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", embedder="hashing") as mem:
        mem.remember("owls hunt at night", role="user")
        hit = mem.recall("owls")[0]
        assert f"{hit.memory_type} {hit.provenance}" == "episodic verbatim"
        assert hit.memory_type == MemoryType.EPISODIC == 1
