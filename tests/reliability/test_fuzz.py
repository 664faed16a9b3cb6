"""Fuzzing (issue 5 §8): any bytes on disk and any API input give a library exception (a
``SpectorError``) or a valid result — never a segfault, SIGBUS, hang, unbounded allocation or a
non-library exception.

1. **Mutated stores**, in a subprocess with an address-space limit (``RLIMIT_AS``) and a time
   limit: Hypothesis draws bit flips, truncations, zeroed ranges, splices (bytes of one place or
   file copied over another: stale and foreign records), garbage, whole-file replacements and
   random bodies behind a valid preamble, over every file of a small valid store; a long-lived
   worker opens each mutated copy read-only and writable and runs ``check``, ``recall``,
   ``get``, ``explain``, ``session_provenance`` and ``verify_chain`` on it.
2. **The API**, in process: Unicode edge cases (lone surrogates, NUL, RTL, emoji, 1 MiB texts),
   NaN/inf/zero/huge vectors through a ``CallableEmbedder``, oversized payloads, hostile ids and
   paths; the store's ``check().ok`` stays True throughout.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import struct
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spector_gpu import (
    Citation,
    MemoryType,
    RecallOptions,
    SpectorError,
    SpectorMemory,
    ValidationError,
)
from spector_gpu.embedders import CallableEmbedder
from spector_gpu.testing import JOURNAL_FILE, REGION_FILES, cortex_of

from .engine_workload import QUERIES, copy_store, open_memory, prefill, scratch_dir
from .harness import child_init, fork_process
from .workload import base_seed, record_figure, scale

pytestmark = pytest.mark.crash

STORE_EXAMPLES = 300  # CI; x20 under --soak
API_EXAMPLES = 120
MEMORY_LIMIT = 1 << 30  # bytes of address space a worker may add to what it inherits
TIME_LIMIT_S = 30.0  # per mutated store


# ---- 1. mutated stores in a limited subprocess ---------------------------------------------
def _build_template(path: Path) -> list[str]:
    """A small valid store touching every region: turns, facts (provenance, lineage), a
    skill, a cited fact, in-place strength updates, a snapshot. Returns every id."""
    prefill(path, range(12))
    with open_memory(path) as mem:
        mem.consolidate()
        mem.remember(
            "Deploy: build, test, ship.",
            type="procedural",
            skill_name="deploy",
            steps=["build", "test", "ship"],
        )
        mem.remember(
            "Eva plays the cello.",
            type=MemoryType.SEMANTIC,
            citations=[Citation("uri:https://example.org/eva", "2026-11-29T10:00:00Z")],
        )
        hits = mem.recall("Lisbon cello")
        mem.reinforce(hits[0].id)
        mem.forget(hits[-1].id)
        mem.flush()
        c = cortex_of(mem)
        from spector_gpu.storage.tsid import encode_tsid

        return [encode_tsid(int(v)) for v in c.cols.ids[: c.n].tolist()]


def _attempt(bad: list[str], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, None on a library error; a non-library one goes to ``bad``."""
    try:
        return fn(*args, **kwargs)
    except SpectorError:
        return None
    except BaseException:
        bad.append(traceback.format_exc(limit=6))
        return None


def _exercise(path: str, ids: list[str]) -> list[str]:
    """Everything a user may do with a store; the non-library exceptions it raised."""
    bad: list[str] = []
    for read_only in (True, False):
        mem = _attempt(bad, open_memory, path, read_only=read_only)
        if mem is None:
            continue
        _attempt(bad, mem.count)
        _attempt(bad, str, _attempt(bad, mem.check))
        batch = _attempt(
            bad, mem.recall_batch, list(QUERIES[:3]), RecallOptions(k=5, mode="observe")
        )
        for i in range(len(batch) if batch is not None else 0):
            _attempt(bad, batch.results, i)
        for mid in ids:
            _attempt(bad, mem.get, mid)
        _attempt(bad, mem.explain, ids[-3], include_parents=True)
        _attempt(bad, mem.session_provenance, 0)
        _attempt(bad, mem.verify_chain)
        if not read_only:
            _attempt(bad, mem.remember, "a write on a fuzzed store", session_id=3)
        _attempt(bad, mem.close)
    return bad


def _worker(commands: int, results: int, ids: list[str]) -> None:
    """Long-lived child: one JSON line per store path in, one JSON line of findings out."""
    child_init()
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + MEMORY_LIMIT, vm + MEMORY_LIMIT))
    src = os.fdopen(commands, "r")
    for line in src:
        bad = _exercise(json.loads(line)["path"], ids)
        os.write(results, (json.dumps({"bad": bad}) + "\n").encode())


class Worker:
    """The parent's handle on the fuzz worker; restarts it after a crash or a hang."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.proc: Any = None
        self.runs = 0

    def _start(self) -> None:
        cr, self.cw = os.pipe()
        self.rr, rw = os.pipe()
        self.proc = fork_process(_worker, cr, rw, self.ids, daemon=True)
        os.close(cr)
        os.close(rw)
        self.buf = b""

    def stop(self) -> None:
        if self.proc is not None:
            for fd in (self.cw, self.rr):
                os.close(fd)
            self.proc.kill()
            self.proc.join(10)
            self.proc = None

    def _dead(self) -> list[str]:
        proc = self.proc
        proc.join(0.5)
        code = proc.exitcode
        self.stop()
        if code is None:
            return [f"hang: no answer within {TIME_LIMIT_S} s"]
        how = signal.Signals(-code).name if code < 0 else f"exit {code}"
        return [f"worker died ({how})"]

    def run(self, path: Path) -> list[str]:
        """Findings for one store: non-library exceptions, or a crash, hang or kill."""
        if self.proc is None:
            self._start()
        self.runs += 1
        try:
            os.write(self.cw, (json.dumps({"path": str(path)}) + "\n").encode())
        except BrokenPipeError:
            return self._dead()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.rr], [], [], TIME_LIMIT_S)
            chunk = os.read(self.rr, 1 << 16) if ready else b""
            if not chunk:
                return self._dead()
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return list(json.loads(line)["bad"])


@pytest.fixture(scope="module")
def fuzz_template(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[str], Worker]]:
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path_factory.mktemp("fuzz")
    root = Path(__import__("tempfile").mkdtemp(prefix="spector-fuzz-", dir=base))
    ids = _build_template(root / "template")
    worker = Worker(ids)
    yield root / "template", ids, worker
    worker.stop()
    shutil.rmtree(root, ignore_errors=True)


def _used(path: Path) -> int:
    """Bytes worth mutating: a region's preamble and committed data, else the whole file."""
    data = path.read_bytes()
    if len(data) >= 64 and data[:4] == b"MKMS":
        count, stride = struct.unpack_from("<q", data, 24)[0], struct.unpack_from("<I", data, 32)[0]
        used = 64 + (count * stride if stride else count)
        if 64 <= used <= len(data):
            return used
    return max(len(data), 1)


_NAMES = [JOURNAL_FILE, *REGION_FILES, "derived.snap", "store.json", "config.json"]
_name = st.sampled_from(_NAMES)
_pos = st.integers(0, 1 << 30)
MUTATION = st.one_of(
    st.tuples(
        st.just("flip"), _name, st.lists(st.tuples(_pos, st.integers(0, 7)), min_size=1, max_size=8)
    ),
    st.tuples(st.just("truncate"), _name, _pos),
    st.tuples(st.just("zero"), _name, _pos, st.integers(1, 4096)),
    st.tuples(st.just("splice"), _name, _name, _pos, _pos, st.integers(1, 512)),
    st.tuples(st.just("garbage"), _name, _pos, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("whole"), _name, st.binary(max_size=2048)),
    st.tuples(st.just("body"), _name, st.binary(max_size=4096)),
    st.tuples(st.just("extend"), _name, st.binary(min_size=1, max_size=256)),
)


def apply_mutation(store: Path, m: tuple[Any, ...]) -> None:
    kind, name = m[0], m[1]
    path = store / name
    if not path.exists():
        return
    data = bytearray(path.read_bytes())
    used = _used(path)
    if kind == "flip":
        for pos, bit in m[2]:
            if data:
                data[pos % used % len(data)] ^= 1 << bit
    elif kind == "truncate":
        del data[m[2] % (used + 1) :]
    elif kind == "zero":
        start = m[2] % used
        data[start : start + m[3]] = bytes(len(data[start : start + m[3]]))
    elif kind == "splice":
        src = (store / m[2]).read_bytes() if (store / m[2]).exists() else b""
        if src:
            a = m[3] % _used(store / m[2])
            chunk = src[a : a + m[5]]
            b = m[4] % used
            data[b : b + len(chunk)] = chunk
    elif kind == "garbage":
        b = m[2] % used
        data[b : b + len(m[3])] = m[3]
    elif kind == "whole":
        data = bytearray(m[2])
    elif kind == "body":
        data = data[:64] + bytearray(m[2])
    elif kind == "extend":
        data += m[2]
    path.write_bytes(bytes(data))


def test_mutated_stores_give_library_errors_or_valid_results(fuzz_template, soak: int) -> None:
    template, _, worker = fuzz_template
    found: list[str] = []

    @seed(base_seed())
    @settings(
        max_examples=STORE_EXAMPLES * scale(soak),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(MUTATION, min_size=1, max_size=3))
    def mutated(mutations: list[tuple[Any, ...]]) -> None:
        with scratch_dir(template) as d:
            store = copy_store(template, d / "s")
            for m in mutations:
                apply_mutation(store, m)
            bad = worker.run(store)
        if bad:
            found.append(f"{mutations!r}: {bad[0]}")
        assert not bad, f"{mutations!r}:\n{bad[0]}"

    mutated()
    record_figure(
        "fuzz_stores",
        examples=worker.runs,
        failures=len(found),
        seed=base_seed(),
        memory_limit_mib=MEMORY_LIMIT >> 20,
        time_limit_s=TIME_LIMIT_S,
    )


HOSTILE_CONFIGS = [
    '{"store": 5}',
    "[]",
    '{"store": {"durability": 5}}',
    '{"store": {"snapshot_every": -1}}',
    '{"embedder": {"name": "st:/nonexistent"}}',
    '{"embedder": {"name": "hashing:100000000"}}',
    '{"dense": {"device": "cuda:99"}}',
    '{"store": {"provenance_capacity": 1000000000000}}',
    '{"store": {"checkpoint_mb": 1e30}}',
    '{"recall": {"k": 0}}',
    '{"lexical": {"k1": NaN}}',
    '{"association": {"hops": 100000000}}',
    '{"association": {"temporal_window": 1000000000}}',
    '{"recall": {"candidates": 1000000000000}}',
    '{"strength": {"decay_unit_s": 0}}',
    '{"reflect": {"max_facts_per_session": 100000000}}',
    '{"nosuch": {}}',
]


@pytest.mark.parametrize("text", HOSTILE_CONFIGS)
def test_hostile_saved_configs(text: str, fuzz_template) -> None:
    """A store's own config.json is bytes on disk too: a bad value is a ConfigError (or a
    valid store), never a hang (loop sizes are bounded) or a raw exception."""
    template, _, worker = fuzz_template
    with scratch_dir(template) as d:
        store = copy_store(template, d / "s")
        (store / "config.json").write_text(text)
        bad = worker.run(store)
    assert not bad, bad[0]


def test_the_worker_reports_crashes_and_non_library_errors(
    fuzz_template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness can fail: a worker killed mid-run is reported, and so is a raw exception."""
    template, ids, _ = fuzz_template
    w = Worker(ids)
    try:
        w._start()
        os.kill(w.proc.pid, signal.SIGKILL)  # (SIGSEGV would work too, with a faulthandler dump)
        w.proc.join(10)
        assert w.run(template)[0].startswith("worker died")
    finally:
        w.stop()
    assert not _exercise(str(template), ids)

    def raw(self: SpectorMemory, *args: Any) -> int:
        raise RuntimeError("a non-library exception")

    monkeypatch.setattr(SpectorMemory, "count", raw)
    assert "RuntimeError" in _exercise(str(template), ids)[0]


# ---- 2. the API --------------------------------------------------------------------------------
@pytest.fixture
def mem(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SpectorMemory]:
    monkeypatch.chdir(workdir)  # a hostile relative path must never land in the repository
    m = open_memory(workdir / "api")
    yield m
    report = m.check()
    m.close()
    assert report.ok, str(report)


def _lib_or_value(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except SpectorError as exc:
        return "lib", exc


EDGE_TEXTS = {
    "lone-surrogate": "a\ud800b",
    "low-surrogate": "\udfff",
    "nul": "a\x00b",
    "only-nul": "\x00",
    "rtl": "\u202eabc \u05e9\u05dc\u05d5\u05dd",
    "emoji-zwj": "\U0001f469\u200d\U0001f469\u200d\U0001f467 hi",
    "combining": "e\u0301\u0301\u0301",
    "bom": "\ufeffhello",
    "zero-width": "\u200b\u200c\u200d",
    "controls": "\x01\x1f\x7f text",
    "crlf": "line\r\nline",
    "private-use": "\ue000\U000f0000",
    "noncharacter": "\ufffe\uffff",
    "whitespace": " \t\n",
    "empty": "",
    "1MiB": "x" * (1 << 20),
    "1MiB+1": "x" * ((1 << 20) + 1),
    "1MiB-emoji": "\U0001f600" * (1 << 18),
    "4MiB-emoji": "\U0001f600" * (1 << 20),
    "long-token": "y" * 100_000,
}


@pytest.mark.parametrize("name", sorted(EDGE_TEXTS))
def test_unicode_edge_cases(name: str, mem: SpectorMemory) -> None:
    text = EDGE_TEXTS[name]
    kind, value = _lib_or_value(lambda: mem.remember(text, speaker="Ann", tags=["edge"]))
    if kind == "ok":
        got = mem.get(value)
        assert got is not None and got.text == text and got.speaker == "Ann"
    else:
        assert isinstance(value, ValidationError), value
    for fn in (
        lambda: mem.recall(text[:100_000]),
        lambda: mem.remember(f"speaker {name}", speaker=text[:1000]),
        lambda: mem.remember(f"tag {name}", tags=[text[:1000]]),
        lambda: mem.recall_batch([text[:1000], ""]),
    ):
        _lib_or_value(fn)


_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)


def test_api_text_fields_fuzz(mem: SpectorMemory, soak: int) -> None:
    runs: list[int] = []

    @seed(base_seed())
    @settings(max_examples=API_EXAMPLES * scale(soak), deadline=None, database=None)
    @given(
        text=_ANY_TEXT,
        speaker=_ANY_TEXT,
        tags=st.lists(_ANY_TEXT, max_size=3),
        session=st.integers(-(2**64), 2**64),
        external=st.none() | _ANY_TEXT,
        kind=st.sampled_from(["episodic", "semantic", "procedural", "working", "bogus"]),
    )
    def one(
        text: str, speaker: str, tags: list[str], session: int, external: str | None, kind: str
    ) -> None:
        runs.append(1)
        fields: dict[str, Any] = {
            "text": text,
            "speaker": speaker,
            "tags": tags,
            "session_id": session,
            "external_id": external,
            "type": kind,
        }
        if kind == "procedural":
            fields.update(skill_name=speaker or "s", steps=tags)
        status, value = _lib_or_value(lambda: mem.remember_batch([fields]))
        if status == "ok":
            got = mem.get(value[0])
            assert got is not None and (got.text, got.speaker, got.session_id) == (
                text,
                speaker,
                session,
            )
            assert list(got.tags) == list(dict.fromkeys(tags))
        _lib_or_value(lambda: mem.recall(text, RecallOptions(k=3, tags=frozenset(tags) or None)))
        _lib_or_value(lambda: mem.get(text))
        assert mem.explain(text) is None or len(text) == 13

    one()
    record_figure(
        "fuzz_api", target="remember/recall/get text fields", examples=len(runs), failures=0
    )


def _vector_store(path: Path, vectors: dict[str, Any]) -> SpectorMemory:
    def fn(texts: list[str]) -> Any:
        return vectors["next"](len(texts))

    return SpectorMemory.open(
        path, embedder=CallableEmbedder(fn, name="fuzz-vectors", dim=8), device="cpu"
    )


_F32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


def test_nan_inf_zero_huge_vectors(workdir: Path, soak: int) -> None:
    vectors: dict[str, Any] = {"next": lambda n: np.ones((n, 8), np.float32)}
    m = _vector_store(workdir / "vec", vectors)
    stored: list[str] = []
    runs: list[int] = []
    try:

        @seed(base_seed())
        @settings(max_examples=API_EXAMPLES * scale(soak), deadline=None, database=None)
        @given(
            hnp.arrays(np.float32, (2, 8), elements=_F32),
            hnp.arrays(np.float32, (1, 8), elements=_F32),
        )
        def one(docs: np.ndarray, query: np.ndarray) -> None:
            runs.append(1)
            vectors["next"] = lambda n: docs[:n]
            status, value = _lib_or_value(
                lambda: m.remember_batch([f"doc {len(stored)} a", f"doc {len(stored)} b"])
            )
            if status == "ok":
                assert np.isfinite(docs).all()
                stored.extend(value)
            else:
                assert not np.isfinite(docs).all(), value  # only non-finite vectors are refused
            vectors["next"] = lambda n: np.repeat(query, n, axis=0)
            status, hits = _lib_or_value(
                lambda: m.recall("doc", RecallOptions(k=4, mode="observe"))
            )
            if status == "ok":
                assert all(np.isfinite(h.score) for h in hits)
                assert {h.id for h in hits} <= set(stored)

        one()
        for special in (
            np.zeros((1, 8)),
            np.full((1, 8), 3.0e38),
            np.full((1, 8), 1e-45),
            -np.zeros((1, 8)),
        ):
            vectors["next"] = lambda n, s=special: np.repeat(s, n, axis=0).astype(np.float32)
            assert m.get(m.remember("a special vector")) is not None
        assert m.check().ok
    finally:
        m.close()
    assert stored
    record_figure(
        "fuzz_api", target="NaN/inf/zero/huge embedding vectors", examples=len(runs), failures=0
    )


@pytest.mark.parametrize("output", ["strings", "none", "ragged", "3d"])
def test_embedder_returning_non_vectors_is_a_validation_error(output: str, workdir: Path) -> None:
    make = {
        "strings": lambda n: [["a"] * 8] * n,
        "none": lambda n: None,
        "ragged": lambda n: [[1.0] * 8] * n + [[1.0] * 3],
        "3d": lambda n: np.ones((n, 8, 1)),
    }[output]
    m = _vector_store(workdir / "vec", {"next": make})
    try:
        with pytest.raises(ValidationError):
            m.remember("an embedder that returns no vectors")
        _lib_or_value(lambda: m.recall("a query through the same embedder"))
        assert m.count() == 0 and m.check().ok
    finally:
        m.close()


HOSTILE_IDS: list[Any] = [
    "../..",
    "",
    "0" * 13,
    "ZZZZZZZZZZZZZ",
    "8000000000000",
    "FZZZZZZZZZZZZ",
    "UUUUUUUUUUUUU",
    "\x00" * 13,
    "a" * 12,
    "a" * 14,
    "ilo0ilo0ilo0i",
    "\ud800" * 13,
    "../../etc/pas",
    2**64,
    -1,
    None,
    b"0000000000000",
    1.5,
    ["x"],
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=repr)
def test_hostile_ids(hostile: Any, mem: SpectorMemory, workdir: Path) -> None:
    real = mem.remember("a real memory about Lisbon")
    for fn in (
        lambda: mem.get(hostile),
        lambda: mem.explain(hostile),
        lambda: mem.reinforce(hostile),
        lambda: mem.forget(hostile),
        lambda: mem.session_provenance(hostile),
        lambda: mem.export_bundle(hostile, workdir / "b.tar"),
        lambda: mem.remember("a memory with a chosen id", id=hostile),
    ):
        _lib_or_value(fn)
    assert mem.get(real) is not None and mem.count() >= 1


@given(st.text(max_size=20) | st.integers() | st.binary(max_size=16))
@settings(max_examples=100, deadline=None, database=None)
def test_hostile_ids_fuzz(hostile: Any) -> None:
    from spector_gpu.storage.tsid import decode_tsid, is_tsid

    status, _ = _lib_or_value(decode_tsid, hostile)
    assert (status == "ok") == is_tsid(hostile)


OVERSIZED: dict[str, dict[str, Any]] = {
    "tags-65": {"tags": [f"t{i}" for i in range(65)]},
    "tag-2000-chars": {"tags": ["x" * 2000]},
    "steps-257": {"type": "procedural", "skill_name": "s", "steps": ["z"] * 257},
    "step-2000-chars": {"type": "procedural", "skill_name": "s", "steps": ["z" * 2000]},
    "citations-65": {
        "citations": [
            {"uri": f"uri:x{i}", "accessed_at": "2026-01-01T00:00:00Z"} for i in range(65)
        ]
    },
    "source-uri-5000": {"source_uri": "uri:" + "a" * 5000},
    "external-id-5000": {"external_id": "e" * 5000},
    "speaker-5000": {"speaker": "s" * 5000},
    "session-2^64": {"session_id": 2**64},
    "timestamp-2^63": {"timestamp_ms": 2**63},
    "importance-nan": {"importance": float("nan")},
    "importance-huge": {"importance": 1e308},
    "valence-1000": {"valence": 1000},
    "arousal-minus-1": {"arousal": -1},
    "span-reversed": {"source_span": (5, 2)},
    "unknown-field": {"payload": b"\x00" * 10},
}


@pytest.mark.parametrize("name", sorted(OVERSIZED))
def test_oversized_or_invalid_fields_are_refused(name: str, mem: SpectorMemory) -> None:
    with pytest.raises(ValidationError) as info:
        mem.remember_batch([{"text": "a memory with a bad field", **OVERSIZED[name]}])
    field = next(k for k in OVERSIZED[name] if k not in ("type", "skill_name"))
    assert field in str(info.value), str(info.value)  # the message names the field


def test_oversized_batches_and_queries_are_refused(mem: SpectorMemory) -> None:
    with pytest.raises(ValidationError, match="max_batch"):
        mem.remember_batch(["x"] * 100_001)
    with pytest.raises(ValidationError):
        mem.recall("q" * 200_000)
    with pytest.raises(ValidationError, match=r"recall\.max_k"):
        mem.recall("q", RecallOptions(k=10**9))
    assert mem.count() == 0


def test_hostile_paths(workdir: Path, mem: SpectorMemory) -> None:
    """Only paths this test owns: a plain file, a FIFO, names too long, NUL, empty."""
    plain = workdir / "a-file"
    plain.write_text("not a store")
    fifo = workdir / "a-fifo"
    os.mkfifo(fifo)
    fid = mem.remember("a memory to export")
    hostile = [
        "",
        "\x00",
        "a\x00b",
        str(plain / "sub"),
        str(fifo),
        "/" + "x" * 5000,
        str(workdir / ("y" * 300)),
    ]
    for p in [*hostile, str(plain)]:
        for read_only in (False, True):
            status, value = _lib_or_value(SpectorMemory.open, p, read_only=read_only)
            assert status == "lib", (p[:40], read_only, value)
    for p in [*hostile, str(workdir), str(workdir / "nodir" / "b.tar")]:
        status, value = _lib_or_value(mem.export_bundle, fid, p)
        assert status == "lib", (p[:40], value)
        assert not mem.verify_bundle(p).ok
    with pytest.raises(ValidationError):
        SpectorMemory.open(b"bytes-path")  # type: ignore[arg-type]
    assert fifo.is_fifo() and plain.read_text() == "not a store"
    assert sorted(os.listdir(workdir)) == ["a-fifo", "a-file", "api"]


# ---- regressions the fuzzer found ------------------------------------------------------------
def _poke(path: Path, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


@pytest.mark.parametrize("where", ["semantic-importance", "strength-retrieval"])
def test_a_damaged_header_value_never_reaches_recall(where: str, workdir: Path) -> None:
    """A NaN importance (slot header) or D (strength row) once made every recall compute NaN
    scores; such a memory is now left out of recall, raises when read, and is reported."""
    store = workdir / "s"
    ids = _build_template(store)
    with open_memory(store, read_only=True) as mem:
        c = cortex_of(mem)
        o = next(
            i
            for i, t in enumerate(c.cols.index["type"][: c.n].tolist())
            if t == MemoryType.SEMANTIC
        )
        victim = ids[o]
        slot = int(c.cols.index["record_offset"][o])
    if where == "semantic-importance":
        _poke(
            store / "semantic.slots",
            64 + slot * c.semantic.region.spec.stride + 4,
            struct.pack("<f", float("nan")),
        )
    else:
        _poke(store / "strength.rec", 64 + o * 96 + 80, struct.pack("<f", float("inf")))
    for read_only in (True, False):
        with open_memory(store, read_only=read_only) as mem:
            assert mem.recovery.get("corruption")
            batch = mem.recall_batch(list(QUERIES), RecallOptions(k=50, mode="observe"))
            assert np.isfinite(batch.scores[batch.scores > -np.inf]).all()
            assert victim not in batch.ids
            with pytest.raises(SpectorError):
                mem.get(victim)
            assert mem.get(ids[0]) is not None and not mem.check().ok


def test_store_identity_that_is_not_an_object_is_corruption(workdir: Path) -> None:
    prefill(workdir / "s", range(4))
    (workdir / "s" / "store.json").write_text("0")
    with pytest.raises(SpectorError, match="not a JSON object"):
        open_memory(workdir / "s")


def test_a_damaged_journal_seq_does_not_overflow_recovery(workdir: Path) -> None:
    prefill(workdir / "s", range(4))
    journal = workdir / "s" / "journal.jrn"
    _poke(journal, 60, b"\xff")  # the preamble's CRC: recovery falls back to the first record
    _poke(journal, 64, struct.pack("<IIQ", 0x4A524543, 32, 1 << 63))
    with open_memory(workdir / "s") as mem:
        assert mem.count() == 4 and mem.check().ok


def test_check_reports_an_index_entry_pointing_anywhere(workdir: Path) -> None:
    ids = _build_template(workdir / "s")
    with open_memory(workdir / "s", read_only=True) as mem:
        c = cortex_of(mem)
        o = next(
            i
            for i, t in enumerate(c.cols.index["type"][: c.n].tolist())
            if t == MemoryType.SEMANTIC
        )
    _poke(workdir / "s" / "index.midx", 64 + o * 48 + 16, struct.pack("<q", -(1 << 62)))
    with open_memory(workdir / "s") as mem:  # point in time: the entries before the damage
        report = mem.check()
        assert not report.ok and any(p.region == "index" for p in report.problems)
        assert mem.get(ids[0]) is not None


def test_a_damaged_preamble_costs_a_reader_a_few_rereads(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers re-read a preamble that fails its CRC (a writer may be mid-update); damage on
    disk once cost 200 re-reads and ~10 s on every refresh, like a hang."""
    from spector_gpu.storage import region

    prefill(workdir / "s", range(4))
    _poke(workdir / "s" / "strength.rec", 60, b"\xff")
    sleeps: list[float] = []
    monkeypatch.setattr(region.time, "sleep", sleeps.append)
    with pytest.raises(SpectorError):
        open_memory(workdir / "s", read_only=True)
    assert 0 < len(sleeps) <= 3


def test_a_damaged_episode_sequence_does_not_break_the_index_rebuild(workdir: Path) -> None:
    ids = _build_template(workdir / "s")
    (workdir / "s" / "derived.snap").unlink()
    with open_memory(workdir / "s", read_only=True) as mem:
        off = int(cortex_of(mem).cols.index["record_offset"][0])
    _poke(workdir / "s" / "episodic.log", off + 24, struct.pack("<I", 4043312896))  # its sequence
    with open_memory(workdir / "s") as mem:
        assert mem.recovery.get("corruption") and not mem.check().ok
        assert mem.get(ids[1]) is not None
        with pytest.raises(SpectorError):
            mem.get(ids[0])
