"""Bulk loading of the derived cues and links at open (cortex/cues.py ``Cues.from_state``,
cortex/links.py ``Links.extend``): the same columns, lists, indexes, chains, extra edges (in
the same order) and state as appending the memories one by one — then appending more memories
after the bulk load gives the same structures too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex.cues import Cues
from spector_gpu.cortex.links import Links

TAGS = ["a", "b", "c", ""]
row = st.tuples(
    st.integers(0, 5),  # session
    st.integers(-1, 6),  # sequence (-1: not a turn)
    st.booleans(),  # has citations
    st.sampled_from(["Ann", "Bo", ""]),
    st.lists(st.sampled_from(TAGS[:3]), max_size=3, unique=True),
    st.sampled_from([None, "x1", "x2"]),
    st.sampled_from([None, "file:///a"]),
    st.booleans(),  # episodic (links: has a session)
)


def _cues(rows: list) -> Cues:
    c = Cues()
    for session, seq, cit, speaker, tags, ext, uri, _ in rows:
        tokens = frozenset([speaker.lower()] if speaker else [])  # analysed tokens: never ""
        c.append(session, seq, cit, speaker, tuple(tags), ext, uri, tokens)
    return c


def _same_cues(a: Cues, b: Cues) -> None:
    assert a.n == b.n
    for col in ("session", "sequence", "has_citations"):
        np.testing.assert_array_equal(getattr(a, col)[: a.n], getattr(b, col)[: b.n])
    for name in ("speaker", "tags", "external_id", "source_uri", "cue_tokens", "last_seq"):
        assert getattr(a, name) == getattr(b, name), name
    assert dict(a.tag_index) == dict(b.tag_index)
    assert dict(a.session_index) == dict(b.session_index)


@settings(max_examples=200, deadline=None)
@given(st.lists(row, max_size=40), st.lists(row, max_size=10))
def test_cues_from_state_equal_one_by_one(rows: list, more: list) -> None:
    one_by_one = _cues(rows)
    loaded = Cues.from_state(one_by_one.state(), len(rows), "test")
    _same_cues(loaded, one_by_one)
    for target in (one_by_one, loaded):  # appending after the load
        for session, seq, cit, speaker, tags, ext, uri, _ in more:
            target.append(session, seq, cit, speaker, tuple(tags), ext, uri, frozenset())
    _same_cues(loaded, one_by_one)


def _links(rows: list, tw: float, links: Links | None = None) -> Links:
    out = links or Links()
    for session, _, _, _, tags, _, _, episodic in rows:
        out.append(session if episodic else None, tuple(tags), tw)
    return out


def _same_links(a: Links, b: Links) -> None:
    assert a.n == b.n
    np.testing.assert_array_equal(a.prev[: a.n], b.prev[: b.n])
    np.testing.assert_array_equal(a.next[: a.n], b.next[: b.n])
    assert a.last_in_session == b.last_in_session
    assert a.last_with_tag == b.last_with_tag
    assert {k: v for k, v in a.extra.items() if v} == {k: v for k, v in b.extra.items() if v}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(row, max_size=40),
    st.lists(row, max_size=40),
    st.lists(row, max_size=10),
    st.sampled_from([0.0, 0.5]),
)
def test_links_extend_equal_one_by_one(first: list, second: list, more: list, tw: float) -> None:
    one_by_one = _links(first + second, tw)
    bulk = Links()
    for part in (first, second):  # two bulk calls: the second continues the first's chains
        bulk.extend(
            np.array([r[0] for r in part], dtype=np.int64),
            np.array([r[7] for r in part], dtype=bool),
            [tuple(r[4]) for r in part],
            tw,
        )
    _same_links(bulk, one_by_one)
    _same_links(_links(more, tw, bulk), _links(more, tw, one_by_one))
