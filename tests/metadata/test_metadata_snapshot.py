"""MetadataIndex.state / from_state: plain arrays, exact round trip, damage detected."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spector_gpu.errors import CorruptionError, ValidationError
from spector_gpu.metadata import MetadataIndex, compile_filter

ROWS: list[Any] = [
    {"s": "a", "n": 1, "f": 1.5, "b": True, "z": None, "l": ["x", 1], "o": {"k": "v"}},
    {"s": "é😀", "n": 2**63 - 1, "f": -0.0, "b": False, "l": [], "o": {}},
    None,
    {"s": "a", "n": -(2**63), "l": [[1.0], {"q": 1}], "dotted.key": 3},
    {"n": 2**53 + 1, "l": ["x", 1]},
] + [{"s": f"v{i % 5}", "n": i, "dense": i} for i in range(200)]

FILTERS: list[dict[str, Any]] = [
    {"s": "a"},
    {"s": {"$gt": "v2"}},
    {"n": 2**63 - 1},
    {"n": {"$lt": -(2**62)}},
    {"n": 2**53 + 1},
    {"n": {"$gte": 100}},
    {"f": 0},
    {"b": False},
    {"z": None},
    {"l": ["x", 1]},
    {"l": {"$contains": "x"}},
    {"l": {"$contains": [1]}},
    {"l": [[1], {"q": 1}]},
    {"o": {"$exists": True}},
    {"o.k": "v"},
    {"dotted\\.key": 3},
    {"dense": {"$in": [3, 5, 150]}},
]


def masks(index: MetadataIndex, n: int) -> list[list[bool]]:
    return [index.mask(compile_filter(f), n).tolist() for f in FILTERS]


def test_state_is_plain_arrays_and_round_trips() -> None:
    index = MetadataIndex.from_list(ROWS)
    state = index.state()
    assert all(isinstance(a, np.ndarray) and a.ndim == 1 for a in state.values())
    assert not any(a.dtype == object for a in state.values())
    buf = io.BytesIO()
    np.savez(buf, **state)  # type: ignore[arg-type]  # numpy stubs: **kwds meets allow_pickle
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as loaded:
        restored = MetadataIndex.from_state(dict(loaded), len(ROWS))
    assert len(restored) == len(ROWS)
    assert masks(restored, len(ROWS)) == masks(index, len(ROWS))
    assert restored.paths() == index.paths()
    assert any(any(m) for m in masks(index, len(ROWS)))
    # the restored index keeps growing like the original
    for ix in (index, restored):
        ix.append({"s": "a", "l": ["x", 1], "n": 2**63 - 1})
    assert masks(restored, len(ROWS) + 1) == masks(index, len(ROWS) + 1)
    assert restored.state().keys() == state.keys()


def test_state_of_an_empty_index_and_after_truncate() -> None:
    empty = MetadataIndex.from_state(MetadataIndex().state(), 0)
    assert len(empty) == 0 and empty.paths() == []
    index = MetadataIndex.from_list(ROWS)
    index.truncate(3)
    restored = MetadataIndex.from_state(index.state(), 3)
    assert masks(restored, 3) == masks(index, 3)
    # a state may cover fewer rows than the engine has (rows without metadata at the end)
    wider = MetadataIndex.from_state(index.state(), 10)
    assert masks(wider, 3) == masks(index, 3)


def test_state_keeps_no_value_that_no_row_holds() -> None:
    index = MetadataIndex.from_list(
        [{"s": "keep", "l": ["kept"]}, {"s": "TOKEN-1", "l": ["TOKEN-2"]}]
    )
    index.truncate(1)
    with pytest.raises(ValidationError):
        index.extend([{"s": "TOKEN-3"}, {"s": float("nan")}])  # rolled back
    index.append({"s": "later"})
    state = index.state()
    everything = b"".join(a.tobytes() for a in state.values())
    assert b"keep" in everything and b"later" in everything
    assert b"TOKEN" not in everything
    restored = MetadataIndex.from_state(state, 2)
    assert restored.mask(compile_filter({"s": "later"}), 2).tolist() == [False, True]
    assert restored.mask(compile_filter({"l": {"$contains": "kept"}}), 2).tolist() == [True, False]


def test_state_with_many_sparse_paths() -> None:
    rows = [{f"key{i}": i, "common": "x"} for i in range(300)]
    index = MetadataIndex.from_list(rows)
    restored = MetadataIndex.from_state(index.state(), 300)
    for i in (0, 150, 299):
        f = compile_filter({f"key{i}": i})
        assert np.flatnonzero(restored.mask(f, 300)).tolist() == [i]


def damaged(change: Callable[[dict[str, np.ndarray]], None]) -> dict[str, np.ndarray]:
    state = {k: v.copy() for k, v in MetadataIndex.from_list(ROWS).state().items()}
    change(state)
    return state


def first_of(state: dict[str, np.ndarray], path: str) -> int:
    """Entry index of the first entry of the column named ``path`` (a JSON list of keys)."""
    blob = state["paths_blob"].tobytes()
    off = state["paths_offsets"]
    for c in range(len(off) - 1):
        if blob[off[c] : off[c + 1]] == path.encode():
            return int(state["entry_offsets"][c])
    raise KeyError(path)


def set_at(
    name: str, pos: Callable[[dict[str, np.ndarray]], int], value: Any
) -> Callable[[Any], None]:
    def change(state: dict[str, np.ndarray]) -> None:
        state[name][pos(state)] = value

    return change


def cases() -> list[tuple[str, Callable[[dict[str, np.ndarray]], None], str]]:
    def s_col(st: dict[str, np.ndarray]) -> int:
        return first_of(st, '["s"]')

    def n_col(st: dict[str, np.ndarray]) -> int:
        return first_of(st, '["n"]')

    def drop_tags(st: dict[str, np.ndarray]) -> None:
        del st["tags"]

    return [
        ("missing array", drop_tags, "'tags' is missing"),
        (
            "wrong dtype",
            lambda st: st.update(rows=st["rows"].astype(np.int64)),
            "'rows' is missing or not",
        ),
        ("2-D", lambda st: st.update(num=st["num"].reshape(1, -1)), "'num' is missing or not"),
        ("version", set_at("version", lambda st: 0, 9), "layout version"),
        ("row out of range", set_at("rows", s_col, 10_000), "outside [0, 205)"),
        ("negative row", set_at("rows", s_col, -1), "outside [0, 205)"),
        ("rows not ascending", set_at("rows", lambda st: s_col(st) + 1, 0), "strictly ascending"),
        ("bad tag", set_at("tags", s_col, 9), "not a value type"),
        ("num on a string", set_at("num", s_col, 1.0), "'num' is not finite exactly"),
        ("NaN for a number", set_at("num", n_col, np.nan), "'num' is not finite exactly"),
        ("fractional int", set_at("num", n_col, 1.5), "not an integral"),
        ("code out of book", set_at("code", s_col, 10_000), "outside its column's codebook"),
        ("code on a number", set_at("code", n_col, 0), "'code' is not set exactly"),
        ("tag turned list", set_at("tags", s_col, 7), "string entry points at a list"),
        ("entry offsets", set_at("entry_offsets", lambda st: 1, 10**9), "'entry_offsets' are not"),
        ("code offsets", set_at("code_offsets", lambda st: -1, 1), "'code_offsets' are not"),
        ("path blob", set_at("paths_blob", lambda st: 0, ord("{")), "path"),
        ("code text utf-8", set_at("code_blob", lambda st: 0, 0xFF), "code text does not decode"),
        ("code kind", set_at("code_kinds", lambda st: 0, 5), "code kind 5"),
        ("big value", set_at("big_values", lambda st: 0, 12345), "big int does not match"),
        (
            "big dropped",
            lambda st: st.update(
                big_entries=st["big_entries"][1:], big_values=st["big_values"][1:]
            ),
            "no exact value",
        ),
        ("big length", lambda st: st.update(big_values=st["big_values"][1:]), "differ in length"),
        ("lengths", lambda st: st.update(code=st["code"][:-1]), "differ in length"),
    ]


@pytest.mark.parametrize(("name", "change", "rule"), cases(), ids=[c[0] for c in cases()])
def test_damaged_state_is_corruption_naming_the_rule(
    name: str, change: Callable[[dict[str, np.ndarray]], None], rule: str
) -> None:
    with pytest.raises(CorruptionError, match=r"^metadata index state: ") as info:
        MetadataIndex.from_state(damaged(change), len(ROWS))
    assert rule in str(info.value), str(info.value)


def swap_text(
    state: dict[str, np.ndarray], blob: str, offsets: str, group: str | None = None
) -> None:
    """Overwrite one text with an earlier one of the same length (and, with ``group``, of
    the same column): a duplicate."""
    off = state[offsets]
    texts = [state[blob][off[c] : off[c + 1]].tobytes() for c in range(len(off) - 1)]
    owner = np.zeros(len(texts), dtype=np.int64)
    if group is not None:
        owner = np.repeat(np.arange(len(state[group]) - 1), np.diff(state[group]))
    i, j = next(
        (i, j)
        for i in range(len(texts))
        for j in range(i)
        if len(texts[i]) == len(texts[j]) and owner[i] == owner[j]
    )
    state[blob][off[i] : off[i + 1]] = np.frombuffer(texts[j], dtype=np.uint8)


def test_duplicate_paths_and_codes_are_corruption() -> None:
    state = damaged(lambda st: swap_text(st, "paths_blob", "paths_offsets"))
    with pytest.raises(CorruptionError, match="a path is listed twice"):
        MetadataIndex.from_state(state, len(ROWS))
    # "v0".."v4" are codes of one column, all of length 2
    state = damaged(lambda st: swap_text(st, "code_blob", "code_text_offsets", "code_offsets"))
    with pytest.raises(CorruptionError, match="code text is listed twice"):
        MetadataIndex.from_state(state, len(ROWS))


def test_a_state_larger_than_n_rows_is_corruption() -> None:
    state = MetadataIndex.from_list(ROWS).state()
    with pytest.raises(CorruptionError, match=r"outside \[0, 3\)"):
        MetadataIndex.from_state(state, 3)
