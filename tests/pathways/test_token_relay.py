"""The token relay: late interaction over static token vectors re-scores the fused top list.

Checked through the public API: the score of every result is ``minmax(fused) +
w·minmax(token)`` over the re-scored list (recomputed from the explanations when the whole
list is returned), the MaxSim values against a brute-force computation, what a token row is
made of, its survival through close/reopen and a snapshot without it, the relay switched off
by leaving it out or weighting it 0, ``token_depth`` bounding the list, and the refusal of the
relay alone. The reference twin (``test_recall_twin.py``) covers it on every relay subset.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.config import Config
from spector_gpu.cortex.batch import NewMemories
from spector_gpu.cortex.payload import Payload
from spector_gpu.cortex.snapshot import read_snapshot, write_snapshot
from spector_gpu.cortex.token_rows import memory_words, payload_rows, token_vocab
from spector_gpu.embedders.static import static_table_path, static_tables
from spector_gpu.errors import ValidationError
from spector_gpu.pathways.recall import token_relay
from spector_gpu.pathways.recall.token_relay import maxsim
from spector_gpu.types import Source

FUSED_ONLY = ("lexical", "dense", "association", "salience")
TEXTS = [
    "I have two sisters and an older brother",
    "We talked about my family over dinner",
    "My family is large and loud, I have a big family",
    "The weather was nice for the picnic",
    "I adopted a cat from the shelter last spring",
    "The cat sleeps on the family sofa",
    "Dinner was pasta with my parents",
    "I have a meeting on Tuesday",
]


@pytest.fixture
def mem(tmp_path: Path) -> SpectorMemory:
    m = SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}})
    m.remember_batch(
        [{"text": t, "session_id": i // 4, "speaker": "Ann"} for i, t in enumerate(TEXTS)]
    )
    yield m
    m.close()


def _spread(x: np.ndarray) -> np.ndarray:
    return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)


def test_each_score_is_the_fused_session_and_token_mix_of_the_list(mem: SpectorMemory) -> None:
    # k covers every memory, so the whole re-scored list is returned and can be recomputed:
    # the session relay orders the fused list first, the token relay re-scores that order
    hits = mem.recall(
        "how many siblings do I have", RecallOptions(k=50, explain=True, mode="observe")
    )
    fused = np.array([h.breakdown.fused for h in hits])  # type: ignore[union-attr]
    token = np.array([h.breakdown.relays["token"].score for h in hits])  # type: ignore[union-attr]
    session = np.array([h.breakdown.relays["session"].score for h in hits])  # type: ignore[union-attr]
    weight = hits[0].breakdown.relays["token"].weight  # type: ignore[union-attr]
    lift = hits[0].breakdown.relays["session"].weight  # type: ignore[union-attr]
    assert (weight, lift) == (1.0, 0.5)  # [recall] token_weight, session_weight x 1.0
    want = _spread(_spread(fused) + lift * _spread(session)) + weight * _spread(token)
    assert np.all(np.diff(want) <= 1e-6)  # the list is in the order of that mix
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    ranks = [h.breakdown.relays["token"].rank for h in hits]  # type: ignore[union-attr]
    assert sorted(ranks) == list(range(1, len(hits) + 1))  # type: ignore[type-var]
    best = hits[ranks.index(1)]
    assert best.text == "I have two sisters and an older brother"  # siblings ~ sisters, brother


def test_the_relay_lifts_the_memory_that_says_it(mem: SpectorMemory) -> None:
    query = "how many siblings do I have"
    fused_only = mem.recall(query, RecallOptions(k=3, relays=FUSED_ONLY, mode="observe"))
    rescored = mem.recall(query, RecallOptions(k=3, mode="observe"))
    fact = "I have two sisters and an older brother"
    assert rescored[0].text == fact
    assert fused_only[0].text != fact  # no word of the question: the fusion ranks a sibling first


def test_maxsim_equals_a_brute_force_computation() -> None:
    vocab = token_vocab()
    rng = np.random.default_rng(3)
    meaningful = np.flatnonzero(vocab.weight > 0)
    rows = [np.unique(rng.choice(meaningful, size=int(rng.integers(0, 9)))) for _ in range(40)]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    ids = np.concatenate(rows).astype(np.int32)
    query = np.unique(rng.choice(meaningful, size=6)).astype(np.int32)
    members = rng.permutation(40)[:25].astype(np.int64)
    got = maxsim(query, members, (offsets, ids), vocab)
    table = static_tables(static_table_path())[0].astype(np.float64)  # the scaled rows
    unit = table / np.maximum(np.linalg.norm(table, axis=1), 1e-300)[:, None]
    w = vocab.weight[query]
    for g, m in zip(got, members, strict=True):
        if len(rows[m]) == 0:
            assert g == 0.0
            continue
        best = (unit[query] @ unit[rows[m]].T).max(axis=1)
        assert g == pytest.approx(float(w @ best / w.sum()), rel=1e-6, abs=1e-8)  # float32 table
    assert not maxsim(np.zeros(0, np.int32), members, (offsets, ids), vocab).any()


def test_a_token_row_holds_the_memory_s_own_words(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s") as m:
        m.remember("violin lessons", speaker="Zoltan", tags=["orchestra"], session_id=1)
        m.remember(
            "tune a violin",
            type="procedural",
            skill_name="violin tuning",
            steps=["loosen the peg", "pluck the string"],
        )
        offsets, ids = m._cortex.derived.tokens.rows()
        vocab = token_vocab()
        first = ids[offsets[0] : offsets[1]].tolist()
        assert first == vocab.ids("Zoltan violin lessons").tolist()  # the speaker, no tag
        skill = m._cortex.payload(1)
        assert "peg" in memory_words(skill) and "string" in memory_words(skill)
        assert ids[offsets[1] : offsets[2]].tolist() == vocab.ids(memory_words(skill)).tolist()
        assert all(vocab.weight[ids] > 0)  # stop words and the unknown token are left out


_WORDS = st.sampled_from(
    [
        "the",
        "Violin",
        "lessons",
        "naïve",
        "café",
        "Zoë",
        "x" * 120,
        "sisters!",
        "?",
        "東京",
        "🙂",
        "Ann:",
        "don't",
        "##ing",
        "[UNK]",
        "",
        "  ",
        "\n",
        "\x00",
        "3,000",
        "siblings",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_WORDS, max_size=12).map(" ".join), max_size=20))
def test_batched_rows_are_each_text_s_own_ids(texts: list[str]) -> None:
    # TokenRows.append builds every row of a batch in one sort: the rows of ids(text) each
    vocab = token_vocab()
    lengths, ids = vocab.rows(texts)
    assert lengths.dtype == np.int64 and ids.dtype == np.int32
    assert lengths.tolist() == [len(vocab.ids(t)) for t in texts]
    one = [vocab.ids(t) for t in texts]
    assert ids.tolist() == (np.concatenate(one).tolist() if one else [])


@settings(max_examples=200, deadline=None)
@given(_WORDS, st.lists(_WORDS, max_size=8).map(" ".join), st.booleans())
def test_a_row_is_the_speaker_s_and_the_text_s_tokens(speaker: str, text: str, said: bool) -> None:
    # memory_words heads the row's text as a turn's dense text ends ("<speaker>: <text>", so
    # the tokeniser has split it already): the row is still the speaker's and text's tokens
    if said:
        text = f"{speaker}: {text}"  # a text that carries its attribution already
    p = Payload(text=text, speaker=speaker)
    vocab = token_vocab()
    assert vocab.ids(memory_words(p)).tolist() == vocab.ids(f"{speaker} {text}").tolist()


def test_rows_survive_reopen_and_an_old_snapshot_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "s"
    opts = RecallOptions(k=5, mode="observe")
    with SpectorMemory.open(path) as m:
        m.remember_batch([{"text": t, "session_id": 1} for t in TEXTS])
        before = m.recall_batch(["siblings", "a pet cat"], opts)
        rows = [a.copy() for a in m._cortex.derived.tokens.rows()]
    with SpectorMemory.open(path) as m:  # from the snapshot
        again = [a.copy() for a in m._cortex.derived.tokens.rows()]
        assert all(np.array_equal(a, b) for a, b in zip(rows, again, strict=True))
        assert m.recall_batch(["siblings", "a pet cat"], opts).ids.tolist() == before.ids.tolist()
    snap = path / "derived.snap"
    meta, arrays = read_snapshot(snap)
    write_snapshot(
        snap, {k: v for k, v in arrays.items() if not k.startswith("tok.")}, meta, durable=False
    )
    with SpectorMemory.open(path) as m:  # a snapshot written before the token relay: rebuilt
        rebuilt = m._cortex.derived.tokens.rows()
        assert all(np.array_equal(a, b) for a, b in zip(rows, rebuilt, strict=True))
        assert m.recall_batch(["siblings", "a pet cat"], opts).ids.tolist() == before.ids.tolist()


def test_a_snapshot_naming_a_meaningless_token_is_rebuilt(tmp_path: Path) -> None:
    # the unknown token has no length: a row holding it is damaged, not divided by zero
    path = tmp_path / "s"
    with SpectorMemory.open(path) as m:
        m.remember_batch([{"text": t, "session_id": 1} for t in TEXTS])
        rows = [a.copy() for a in m._cortex.derived.tokens.rows()]
    snap = path / "derived.snap"
    meta, arrays = read_snapshot(snap)
    ids = arrays["tok.ids"].copy()
    ids[0] = token_vocab().tokenizer.unk_id  # type: ignore[attr-defined]
    write_snapshot(snap, {**arrays, "tok.ids": ids}, meta, durable=False)
    with SpectorMemory.open(path) as m:
        rebuilt = m._cortex.derived.tokens.rows()
        assert all(np.array_equal(a, b) for a, b in zip(rows, rebuilt, strict=True))
        hits = m.recall("how many siblings do I have", RecallOptions(k=3, explain=True))
        assert all(np.isfinite(h.score) for h in hits)


def test_left_out_or_weighted_zero_the_order_is_the_fusion_s(mem: SpectorMemory) -> None:
    q = "family dinner with my brother"
    off = mem.recall(q, RecallOptions(k=8, relays=FUSED_ONLY, mode="observe", explain=True))
    # (the session relay re-orders the fused list too: left out or weighted 0 with it)
    zero = mem.recall(
        q,
        RecallOptions(k=8, weights={"token": 0.0, "session": 0.0}, mode="observe", explain=True),
    )
    assert [h.id for h in off] == [h.id for h in zero]
    for hits in (off, zero):
        fused = [h.breakdown.fused for h in hits]  # type: ignore[union-attr]
        assert fused == sorted(fused, reverse=True)


def test_a_query_without_meaningful_tokens_keeps_the_fused_order(mem: SpectorMemory) -> None:
    q = "the and of"  # stop words only: no token to match, every token score 0
    hits = mem.recall(q, RecallOptions(k=8, mode="observe", explain=True))
    off = mem.recall(q, RecallOptions(k=8, relays=FUSED_ONLY, mode="observe"))
    assert [h.id for h in hits] == [h.id for h in off]
    assert all(h.breakdown.relays["token"].score == 0.0 for h in hits)  # type: ignore[union-attr]


def test_token_depth_bounds_the_list(tmp_path: Path) -> None:
    cfg = {"store": {"durability": "none"}, "recall": {"token_depth": 3}}
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        m.remember_batch([{"text": t, "session_id": 1} for t in TEXTS])
        q = "how many siblings do I have"
        fused = m.recall(q, RecallOptions(k=3, relays=FUSED_ONLY, mode="observe"))
        hits = m.recall(q, RecallOptions(k=2, mode="observe"))
        assert {h.id for h in hits} <= {h.id for h in fused}  # only the fused top 3 re-scored
        assert len(hits) == 2


def test_the_relay_alone_is_refused() -> None:
    for alone in (("token",), ("session",), ("session", "token")):
        with pytest.raises(ValidationError, match="token and session relays re-score"):
            RecallOptions(relays=alone)
    RecallOptions(relays=("salience", "token", "session"))  # with a proposing relay it is fine


def test_the_numpy_twin_answers_as_the_kernel_does(
    mem: SpectorMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without the compiled kernel (a build without a compiler) the relay runs in numpy
    queries = ["how many siblings do I have", "my cat", "pasta dinner", "the and of"]
    opts = RecallOptions(k=5, mode="observe", explain=True)
    kernel = mem.recall_batch(queries, opts)
    monkeypatch.setattr(token_relay, "native", None)
    twin = mem.recall_batch(queries, opts)
    for got, want in zip(kernel, twin, strict=True):
        assert [h.id for h in got] == [h.id for h in want]
        for g, w in zip(got, want, strict=True):
            assert g.score == pytest.approx(w.score, rel=1e-5, abs=1e-6)
            t_g, t_w = g.breakdown.relays["token"], w.breakdown.relays["token"]  # type: ignore[union-attr]
            assert t_g.rank == t_w.rank
            assert t_g.score == pytest.approx(t_w.score, rel=1e-6, abs=1e-7)


def test_rows_made_beside_the_embedding_are_the_payloads_rows(tmp_path: Path) -> None:
    # the remember pathway makes a batch's token rows group by group beside the embedding
    # (three texts a group here); they must be the rows the payloads give on their own, as
    # a rebuild makes them: turns with context, an update of a turn, a skill, a document
    cfg = Config().replace({"embedder": {"batch_size": 3}})
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        m.remember_batch(
            [{"text": t, "session_id": 1, "speaker": "Ann"} for t in TEXTS]
            + [
                {
                    "text": "tune a violin",
                    "type": "procedural",
                    "skill_name": "violin tuning",
                    "steps": ["loosen the peg", "pluck the string"],
                },
                "a plain document about the\nweather",
            ]
        )
        first = m.recall("siblings", RecallOptions(k=1, mode="observe"))[0]
        m.update(first.id, text="I have three sisters and a brother")
        c = m._cortex
        offsets, ids = (a.copy() for a in c.derived.tokens.rows())
        lengths, again = payload_rows([c.payload(i) for i in range(c.n)])
    assert np.diff(offsets).tolist() == lengths.tolist()
    assert ids.tolist() == again.tolist()


def test_token_rows_that_do_not_fit_the_batch_are_refused() -> None:
    rows = (np.array([2, 1], dtype=np.int64), np.array([5, 9], dtype=np.int32))  # sums to 3
    new = NewMemories(
        ids=np.array([1, 2]),
        types=np.array([1, 1]),
        payloads=[Payload("a"), Payload("b")],
        sequences=np.array([-1, -1]),
        vectors=np.zeros((2, 4), np.float32),
        timestamp_ms=np.zeros(2),
        importance=np.ones(2),
        valence=np.zeros(2),
        arousal=np.zeros(2),
        pinned=np.zeros(2, bool),
        provenance=np.zeros(2),
        source=Source.EXPERIENCED,
        now_ms=0,
        token_rows=rows,
    )
    with pytest.raises(ValidationError, match="token_rows"):
        new.check(4)
