"""DerivedIndexes on its own: append, session turns, lineage edges, snapshot save and load."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from spector_gpu.config import Config
from spector_gpu.cortex import Analyzer, DerivedIndexes, Links, Payload
from spector_gpu.cortex.derived_indexes import SNAPSHOT_NAME, index_text
from spector_gpu.types import MemoryType

EP, SEM = int(MemoryType.EPISODIC), int(MemoryType.SEMANTIC)


def _derived(config: Config | None = None, *, stopwords: bool = True) -> DerivedIndexes:
    return DerivedIndexes(config or Config(), Analyzer(stopwords=stopwords), 8, torch.device("cpu"))


def _fill(d: DerivedIndexes) -> np.ndarray:
    types = np.array([EP, EP, SEM, EP, EP])
    payloads = [
        Payload(text="Ann moved to Lisbon", session_id=1, speaker="Ann Lee", tags=("move",)),
        Payload(text="Bo asked about the flat", session_id=1, speaker="Bo"),
        Payload(text="Lisbon is in Portugal", session_id=1, tags=("move",)),
        Payload(text="other session", session_id=2, external_id="x-1", source_uri="doc:1"),
        Payload(text="Ann again", session_id=1, speaker="Ann"),
    ]
    d.append(types, payloads, [0, 1, -1, 0, 2])
    return types


def test_append_builds_cues_links_and_bm25_for_the_new_memories_alone() -> None:
    d = _derived(Config().replace({"association": {"tag_weight": 0.5}}))
    types = _fill(d)
    assert len(d) == len(d.bm25) == d.links.n == 5
    assert d.cues.session[:5].tolist() == [1, 1, 1, 2, 1]
    assert d.cues.next_sequence(1) == 3 and d.cues.next_sequence(2) == 1
    assert d.cues.external_id[3] == "x-1" and d.cues.source_uri[3] == "doc:1"
    assert d.cues.cue_tokens[0] == frozenset(d.analyzer.tokens("Ann move"))
    # the temporal chain skips the fact; the tag edge joins the memories sharing "move"
    assert d.links.prev[:5].tolist() == [-1, 0, -1, -1, 1]
    assert d.links.extra[2] == [(0, 0.5)]
    assert not _filled_links(_derived()).extra  # tag edges are off by default (weight 0)
    assert d.session_turns(types, 1, 0, 1) == [0, 1]
    assert d.session_turns(types, 1, 0, 99) == [0, 1, 4]
    assert d.bm25.doc_freq(d.analyzer.tokens("Lisbon")[0]) == 2


def _filled_links(d: DerivedIndexes) -> Links:
    _fill(d)
    return d.links


def test_index_text_joins_speaker_text_skill_steps_and_tags() -> None:
    p = Payload(text="boil water", speaker="Ann", skill_name="tea", steps=("a", "b"), tags=("t",))
    assert index_text(p) == "Ann: boil water tea a b t"


def test_snapshot_round_trip_restores_bm25_and_cues_and_rebuilds_links(tmp_path: Path) -> None:
    d = _derived()
    types = _fill(d)
    d.save_snapshot(tmp_path, durable=False)
    assert d.snapshot_covers == 5 and (tmp_path / SNAPSHOT_NAME).is_file()
    e = _derived()
    assert e.load_snapshot(tmp_path, 5, types) == 5 and e.snapshot_covers == 5
    assert e.bm25.state().keys() == d.bm25.state().keys()
    for k, v in d.bm25.state().items():
        assert np.array_equal(e.bm25.state()[k], v), k
    assert e.cues.tags == d.cues.tags and e.cues.external_id == d.cues.external_id
    assert e.links.prev[:5].tolist() == d.links.prev[:5].tolist()
    assert dict(e.links.extra) == dict(d.links.extra)


def test_an_unusable_snapshot_is_rebuilt_never_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = _derived()
    types = _fill(d)
    d.save_snapshot(tmp_path, durable=False)
    with caplog.at_level(logging.WARNING):
        assert _derived().load_snapshot(tmp_path, 4, types[:4]) == 0  # covers more than exist
        other = _derived(stopwords=False)  # another analyzer
        assert other.load_snapshot(tmp_path, 5, types) == 0 and len(other) == 0
    assert "rebuilding" in caplog.text
    (tmp_path / SNAPSHOT_NAME).write_bytes(b"garbage")
    assert _derived().load_snapshot(tmp_path, 5, types) == 0
    assert _derived().load_snapshot(tmp_path / "nowhere", 5, types) == 0


def test_a_directory_under_the_snapshot_name_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / SNAPSHOT_NAME).mkdir()
    d = _derived()
    _fill(d)
    with caplog.at_level(logging.WARNING):
        d.save_snapshot(tmp_path, durable=False)
    assert (tmp_path / SNAPSHOT_NAME).is_dir() and d.snapshot_covers == 5
    assert "is a directory" in caplog.text
