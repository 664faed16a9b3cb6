"""Analyzer: normalisation, tokenisation, stop words, stemming, description."""

from __future__ import annotations

import pickle

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex.analyzer import ENGLISH_STOPWORDS, Analyzer
from spector_gpu.errors import ConfigError, ValidationError


def plain(**kw: object) -> Analyzer:
    return Analyzer(stopwords=False, stemming=None, **kw)  # type: ignore[arg-type]


def test_possessive_is_dropped() -> None:
    assert plain().tokens("Caroline's cello") == ["caroline", "cello"]
    assert plain().tokens("Caroline\u2019s cello") == ["caroline", "cello"]
    assert Analyzer().tokens("Caroline's") == [Stemmer.Stemmer("english").stemWord("caroline")]


def test_internal_apostrophes_are_kept_and_unified() -> None:
    assert plain().tokens("O'Neil met O\u2019Neil") == ["o'neil", "met", "o'neil"]
    assert plain().tokens("'quoted' words'") == ["quoted", "words"]


def test_unicode_normalisation() -> None:
    assert plain().tokens("ＣＡＦＥ ﬁle") == ["cafe", "file"]  # full-width, ligature
    assert plain(normalize=None).tokens("ﬁle") == ["ﬁle"]
    assert plain().tokens("Ünïcödé straße") == ["ünïcödé", "straße"]
    assert plain(strip_accents=True).tokens("Ünïcödé café") == ["unicode", "cafe"]


def test_lowercase_switch() -> None:
    assert plain().tokens("Lisbon LISBON") == ["lisbon", "lisbon"]
    assert plain(lowercase=False).tokens("Lisbon LISBON") == ["Lisbon", "LISBON"]
    # stop words are matched case-insensitively even when case is kept
    assert Analyzer(lowercase=False, stemming=None).tokens("The Lisbon") == ["Lisbon"]


def test_word_characters_and_digits() -> None:
    assert plain().tokens("in 2023, at 10am: v2.5 — foo_bar!") == [
        "in",
        "2023",
        "at",
        "10am",
        "v2",
        "5",
        "foo_bar",
    ]
    assert plain().tokens("") == []
    assert plain().tokens("  ... !!! ") == []


def test_stopwords_on_off_custom() -> None:
    text = "the cat and the hat"
    assert Analyzer(stemming=None).tokens(text) == ["cat", "hat"]
    assert plain().tokens(text) == ["the", "cat", "and", "the", "hat"]
    custom = Analyzer(stopwords=frozenset({"Cat"}), stemming=None)
    assert custom.tokens(text) == ["the", "and", "the", "hat"]
    assert {"the", "and", "don't", "i'm"} <= ENGLISH_STOPWORDS
    assert Analyzer(stemming=None).tokens("I don\u2019t know") == ["know"]


def test_stemming_on_off_matches_snowball() -> None:
    words = ["running", "dogs", "ponies", "generously", "consolidation", "memories"]
    stem = Stemmer.Stemmer("english")
    assert Analyzer().tokens(" ".join(words)) == stem.stemWords(words)
    assert Analyzer(stemming=None).tokens(" ".join(words)) == words


def test_token_length_limits() -> None:
    assert plain(min_token_len=2).tokens("a bb c ddd") == ["bb", "ddd"]
    assert plain(max_token_len=2).tokens("a bb c ddd") == ["a", "bb", "c"]


def test_small_memo_gives_same_output() -> None:
    text = "alpha beta gamma alpha delta beta epsilon alpha"
    assert Analyzer(cache_size=2).tokens(text) == Analyzer().tokens(text)


def test_analyzers_with_equal_settings_share_one_memo() -> None:
    first, second = Analyzer(), Analyzer()
    assert first._memo is second._memo  # a second store stems nothing the first one did
    assert Analyzer(stemming=None)._memo is not first._memo
    assert Analyzer(cache_size=7)._memo is not first._memo
    words = "running runners ran Caroline's"
    assert Analyzer(stemming=None).tokens(words) == ["running", "runners", "ran", "caroline"]
    assert second.tokens(words) == ["run", "runner", "ran", "carolin"]
    assert first.tokens(words) == second.tokens(words)


def test_a_shared_memo_never_mixes_custom_stop_lists() -> None:
    ann, bo = Analyzer(stopwords=frozenset({"ann"})), Analyzer(stopwords=frozenset({"bo"}))
    assert ann._memo is not bo._memo
    assert ann.tokens("ann bo") == ["bo"] and bo.tokens("ann bo") == ["ann"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=6))
def test_batch_equals_single(texts: list[str]) -> None:
    analyzer = Analyzer()
    batch = analyzer.tokens_batch(texts)
    assert batch == [Analyzer().tokens(t) for t in texts]
    for terms in batch:
        assert all(t and not any(c.isspace() for c in t) for t in terms)


def test_name_and_config_describe_settings() -> None:
    a, b = Analyzer(), Analyzer(stemming=None)
    assert a.name != b.name and a.config != b.config
    assert Analyzer().name == a.name
    assert Analyzer(stopwords=frozenset({"x"})).name != Analyzer(stopwords=frozenset({"y"})).name
    assert "stem=english" in a.name


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stopwords": frozenset({"cat"}), "lowercase": False},
        {
            "stopwords": False,
            "stemming": None,
            "min_token_len": 2,
            "max_token_len": 9,
            "strip_accents": True,
            "normalize": "NFC",
        },
    ],
)
def test_from_config_round_trip(kw: dict[str, object]) -> None:
    a = Analyzer(**kw)  # type: ignore[arg-type]
    b = Analyzer.from_config(a.config)
    assert b.name == a.name and b.config == a.config
    text = "The Cat's café sat on 2 mats"
    assert b.tokens(text) == a.tokens(text)
    assert pickle.loads(pickle.dumps(a)).tokens(text) == a.tokens(text)  # process pools


def test_from_config_rejects_bad_configs() -> None:
    cfg = Analyzer().config
    with pytest.raises(ConfigError, match="version"):
        Analyzer.from_config({**cfg, "version": 99})
    with pytest.raises(ConfigError, match="stopwords_sha"):
        Analyzer.from_config({**cfg, "stopwords_sha": "0" * 12})
    with pytest.raises(ConfigError, match="malformed"):
        Analyzer.from_config({"version": cfg["version"]})


@pytest.mark.parametrize(
    "kw",
    [
        {"normalize": "NFD"},
        {"stemming": "klingon"},
        {"min_token_len": 0},
        {"max_token_len": 0},
        {"stopwords": ["a"]},
        {"cache_size": 0},
    ],
)
def test_bad_settings_raise_config_error(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Analyzer(**kw)  # type: ignore[arg-type]


def test_bad_input_raises_validation_error() -> None:
    with pytest.raises(ValidationError):
        Analyzer().tokens(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Analyzer().tokens_batch("a string")
    with pytest.raises(ValidationError, match=r"texts\[1\]"):
        Analyzer().tokens_batch(["ok", 3])  # type: ignore[list-item]
