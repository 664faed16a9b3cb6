"""The default embedder: the packaged static table, its WordPiece tokeniser, and recall with it."""

from __future__ import annotations

import unicodedata
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.config import Config
from spector_gpu.embedders import StaticEmbedder, make_embedder, wordpiece
from spector_gpu.embedders import static as static_mod
from spector_gpu.embedders.wordpiece import WordPiece
from spector_gpu.errors import ConfigError, ValidationError


@pytest.fixture(scope="module")
def emb() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def vocab() -> list[str]:
    return static_mod._load(static_mod.static_table_path())[1]


def _cos(e: StaticEmbedder, a: str, b: str) -> float:
    v = e.embed([a, b])
    return float(v[0] @ v[1])


# ---- the tokeniser ------------------------------------------------------------------------
def test_wordpiece_splits_by_hand(vocab: list[str]) -> None:
    wp = WordPiece(vocab)

    def toks(text: str) -> list[str]:
        return [vocab[i] for i in wp.ids(text)]

    assert toks("Caroline's guitar!") == ["caroline", "'", "s", "guitar", "!"]
    assert toks("Naïve CAFÉ") == ["naive", "cafe"]  # lower case, accents dropped
    assert toks("東京") == ["東", "京"]  # each ideograph a token
    assert toks("x\u200by \x00\ufffd") == ["x", "##y"]  # format/control characters dropped
    assert toks("a" * 101) == ["[UNK]"]  # over 100 characters: unknown
    assert toks("   ") == []
    assert toks("embeddings") == ["em", "##bed", "##ding", "##s"]


def test_wordpiece_text_cache_gives_each_caller_its_own_ids(vocab: list[str]) -> None:
    """A text split before is answered from the cache: the same ids, in a fresh list (a
    caller changing its list changes nothing for the next), long texts split every time."""
    wp = WordPiece(vocab)
    first = wp.ids("Caroline went hiking")
    first.append(-1)
    again = wp.ids("Caroline went hiking")
    assert again == first[:-1] and again is not first
    long = "hiking " * 100  # over the cached length
    assert wp.ids(long) == wp.ids(long) == [vocab.index("hiking")] * 100


def test_wordpiece_needs_an_unknown_token() -> None:
    with pytest.raises(ValueError, match="unknown token"):
        WordPiece(["a", "b"])


_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcdeABZéèñüßİıﬁ  \t\n'-.,!?()[]#$~`^0123456789東京"),
        st.sampled_from("\u200b\x00\ufffd\uf0a7\x0b\x0c\r\x1c\x1f\x7f\x85"),
        # only characters assigned by Unicode 3.2: the two sides use different (newer) Unicode
        # versions, and a character one of them has not assigned yet is no disagreement
        st.characters(codec="utf-8").filter(lambda c: unicodedata.ucd_3_2_0.category(c) != "Cn"),
    ),
    max_size=60,
)


@pytest.fixture(scope="module")
def pair(vocab: list[str]) -> tuple[WordPiece, object]:
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.BertWordPieceTokenizer(
        {tok: i for i, tok in enumerate(vocab)}, lowercase=True
    )
    return WordPiece(vocab), reference


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_wordpiece_equals_the_tokenizers_package(pair: tuple[WordPiece, Any], text: str) -> None:
    ours, reference = pair
    assert ours.ids(text) == reference.encode(text, add_special_tokens=False).ids


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT.map(lambda t: t.replace("\n", " ")), min_size=1, max_size=4))
def test_a_text_s_ids_are_its_lines_ids(vocab: list[str], lines: list[str]) -> None:
    # each line is looked up on its own (a turn's dense text repeats lines split before):
    # a newline separates words like a space, so the ids are the same as one text's
    wp, fresh = WordPiece(vocab), WordPiece(vocab)
    for line in lines:
        wp.ids(line)  # cached, as an earlier turn's line is
    joined = "\n".join(lines)
    assert wp.ids(joined) == [i for line in lines for i in fresh.ids(line)]
    assert wp.ids(joined) == fresh.ids(" ".join(lines))


# ---- the embedder -------------------------------------------------------------------------
def test_rows_are_unit_float32_and_empty_text_is_zero(emb: StaticEmbedder) -> None:
    out = emb.embed(["a first text", "", "\x00\u200b", "another one"])
    assert out.dtype == np.float32 and out.shape == (4, 128)
    norms = np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(norms[[0, 3]], 1.0, rtol=1e-6)
    assert not out[1].any() and not out[2].any()
    assert emb.embed([]).shape == (0, 128)


def test_a_row_is_the_sublinear_sum_of_its_tokens(emb: StaticEmbedder, vocab: list[str]) -> None:
    table = static_mod._load(static_mod.static_table_path())[0]
    guitar, violin = vocab.index("guitar"), vocab.index("violin")
    want = (1 + np.log(3)) * table[guitar] + table[violin]
    got = emb.embed(["Guitar, guitar GUITAR and a violin!"])[0]  # "and", "a", "!" are silent
    np.testing.assert_allclose(got, want / np.linalg.norm(want), rtol=1e-5, atol=1e-6)


def test_a_row_does_not_depend_on_its_batch(emb: StaticEmbedder) -> None:
    texts = ["my sister plays the violin", "", "Stratocaster", "a b c " * 50]
    together = emb.embed(texts)
    alone = np.stack([emb.embed([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    small = StaticEmbedder(batch_size=1)
    assert np.array_equal(small.embed(texts), together)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 400), max_size=40), min_size=9, max_size=14))
def test_a_query_alone_has_the_bits_of_a_large_batch(
    emb: StaticEmbedder, vocab: list[str], picks: list[list[int]]
) -> None:
    # Up to _SMALL_GROUP texts are summed directly, larger groups by the sparse product:
    # a query embedded alone must be the very row its text gets inside a corpus batch.
    assert len(picks) > static_mod._SMALL_GROUP
    words = [w for w in vocab[1000:1401] if w.isalpha()]
    texts = [" ".join(words[i % len(words)] for i in pick) for pick in picks]
    together = emb.embed(texts)
    alone = np.stack([emb.embed([t])[0] for t in texts])
    assert together.view(np.int32).tolist() == alone.view(np.int32).tolist()


def test_related_words_are_closer_than_unrelated_ones(emb: StaticEmbedder) -> None:
    assert _cos(emb, "my sisters", "siblings") > _cos(emb, "my sisters", "carburetor") + 0.3
    assert _cos(emb, "guitar", "musical instrument") > _cos(emb, "guitar", "tax return") + 0.3


def test_bad_inputs_are_refused(emb: StaticEmbedder) -> None:
    with pytest.raises(ValidationError, match="single str"):
        emb.embed("one string")
    with pytest.raises(ValidationError, match=r"texts\[1\]"):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="batch_size"):
        StaticEmbedder(batch_size=0)


@pytest.mark.parametrize("content", [b"", b"not a zip file", None])
def test_a_missing_or_damaged_table_names_the_file(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, content: bytes | None
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "static_minilm.npz"
    if content is not None:
        path.write_bytes(content)
    monkeypatch.setattr(static_mod, "static_table_path", lambda: path)
    with pytest.raises(ConfigError, match="static embedder's table"):
        StaticEmbedder()


@pytest.mark.parametrize(
    "scales,meta,vocab,match",
    [
        (np.ones(2, np.float32), b'{"dim": 4}', b"a\nb\n[UNK]", "scales"),
        (np.full(3, np.nan, np.float32), b'{"dim": 4}', b"a\nb\n[UNK]", "scales"),
        (np.ones(3, np.float32), b'{"dim": 5}', b"a\nb\n[UNK]", "shape"),
        (np.ones(3, np.float32), b"[4]", b"a\nb\n[UNK]", "shape"),
        (np.ones(3, np.float32), b"{not json", b"a\nb\n[UNK]", "missing or damaged"),
        (np.ones(3, np.float32), b'{"dim": 4}', b"a\n\xff\n[UNK]", "missing or damaged"),
    ],
    ids=["scales short", "scales NaN", "dim", "meta not a table", "meta not JSON", "vocab bytes"],
)
def test_a_table_that_does_not_hold_together_is_refused(
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    scales: np.ndarray,
    meta: bytes,
    vocab: bytes,
    match: str,
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "t.npz"
    np.savez(
        path,
        codes=np.zeros((3, 4), np.int8),
        scales=scales,
        vocab=np.frombuffer(vocab, np.uint8),
        meta=np.frombuffer(meta, np.uint8),
    )
    monkeypatch.setattr(static_mod, "static_table_path", lambda: path)
    with pytest.raises(ConfigError, match=match):
        StaticEmbedder()


def test_a_code_outside_the_symmetric_range_is_refused(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the token relay's int8 dot products take |code| <= 127 (see kernels/_native.c)
    from pathlib import Path

    path = Path(str(tmp_path)) / "t.npz"
    codes = np.zeros((3, 4), np.int8)
    codes[1, 2] = -128
    np.savez(
        path,
        codes=codes,
        scales=np.ones(3, np.float32),
        vocab=np.frombuffer(b"a\nb\n[UNK]", np.uint8),
        meta=np.frombuffer(b'{"dim": 4}', np.uint8),
    )
    monkeypatch.setattr(static_mod, "static_table_path", lambda: path)
    with pytest.raises(ConfigError, match=r"outside \[-127, 127\]"):
        StaticEmbedder()
    with pytest.raises(ConfigError, match=r"outside \[-127, 127\]"):
        static_mod.static_codes(path)


def test_it_is_the_default(tmp_path: object) -> None:
    assert isinstance(make_embedder(), StaticEmbedder)
    assert isinstance(make_embedder("static"), StaticEmbedder)
    assert Config().embedder.name == "static"
    with SpectorMemory.open(f"{tmp_path}/s") as mem:
        assert mem.embedder.name == "static-minilm-l6-v1-d128" and mem.embedder.dim == 128


def test_dense_recall_finds_a_synonym_that_shares_no_word(tmp_path: object) -> None:
    docs = [
        "I have three sisters and we meet every summer",
        "The carburetor of my old car needs cleaning",
        "We filed the tax return on Monday",
        "The printer on the second floor is out of toner",
    ]
    with SpectorMemory.open(f"{tmp_path}/s") as mem:
        ids = mem.remember_batch([{"text": d} for d in docs])
        hits = mem.recall("siblings", RecallOptions(k=1, relays=("dense",), mode="observe"))
        assert [h.id for h in hits] == [ids[0]]


def test_a_store_keeps_the_embedder_it_was_made_with(tmp_path: object) -> None:
    """A store made with the hashing embedder (the default before the static one) reopens
    with it; without its config.json the open is refused, naming the recorded embedder."""
    from pathlib import Path

    from spector_gpu.errors import EmbedderMismatchError

    path = Path(str(tmp_path)) / "s"
    with SpectorMemory.open(path, embedder="hashing") as mem:
        mem.remember("made with the hashing embedder")
    with SpectorMemory.open(path) as mem:
        assert mem.embedder.name.startswith("hashing-") and mem.count() == 1
    (path / "config.json").unlink()
    with pytest.raises(EmbedderMismatchError, match="hashing-v1-d384"):
        SpectorMemory.open(path)
    with SpectorMemory.open(path, embedder="hashing") as mem:
        assert mem.count() == 1


def test_no_letter_or_digit_is_punctuation() -> None:
    # step 4 passes a word of letters and digits (str.isalnum) through whole: exact only if
    # no such character is punctuation to BERT, checked over every code point
    assert not [cp for cp in range(0x110000) if chr(cp).isalnum() and wordpiece._is_punct(chr(cp))]


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_step_four_fast_paths_split_as_the_loop_does(text: str) -> None:
    # the words step 4 meets: cleaned (step 1), split at whitespace, lower-cased
    for word in wordpiece._clean(text).split():
        word = word.lower()
        loop: list[str] = []
        start = 0
        for i, ch in enumerate(word):
            if wordpiece._is_punct(ch):
                loop += [word[start:i], ch] if start < i else [ch]
                start = i + 1
        loop += [word[start:]] if start < len(word) else []
        assert wordpiece._split_punct(word) == loop
