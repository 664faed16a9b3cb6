"""The hashing embedder's bounded chunks and pieces give the whole text's vector (issue 15)."""

from __future__ import annotations

import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.embedders import HashingEmbedder
from spector_gpu.embedders.pieces import CUT_CHARS, split_text

WORD = st.text(alphabet="abcXYZ019ΣσςéÉ東京ﬁ'.,-\u0301", min_size=1, max_size=9)
SEP = st.sampled_from([" ", "  ", "\n", "\t", " , ", "\x00"])
TEXT = st.lists(st.tuples(WORD, SEP), max_size=40).map(lambda ws: "".join(w + s for w, s in ws))


@settings(max_examples=80, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6), st.sampled_from([320, 352, 640]))
def test_pieces_give_the_whole_texts_vectors(texts: list[str], chunk_bytes: int) -> None:
    # every whitespace-free run is at most 9 characters, below chunk_bytes // 32: exact
    whole = HashingEmbedder(96, word_ngrams=(1, 3)).embed(texts)
    pieces = HashingEmbedder(96, word_ngrams=(1, 3), chunk_bytes=chunk_bytes, chunk_texts=2)
    np.testing.assert_array_equal(pieces.embed(texts), whole)


def test_a_long_text_spans_chunks_and_keeps_its_vector() -> None:
    text = " ".join(f"word{i % 97} Σίσυφος café" for i in range(3000))
    small = HashingEmbedder(chunk_bytes=1024, chunk_texts=1)
    got = small.embed(["short one", text, "another short"])
    np.testing.assert_array_equal(
        got, HashingEmbedder().embed(["short one", text, "another short"])
    )


def test_split_text_cuts_before_whitespace_and_forces_long_runs() -> None:
    text = "alpha beta\tgamma\ndelta " + "x" * 25
    pieces = list(split_text(text, 8))
    assert pieces == [
        "alpha",
        " beta",
        "\tgamma",
        "\ndelta",
        " " + "x" * 7,  # no whitespace within reach: forced after 8 characters
        "x" * 8,
        "x" * 8,
        "x" * 2,
    ]
    assert list(split_text("short", 8)) == ["short"]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200), st.integers(1, 40))
def test_whitespace_cuts_commute_with_nfkc_and_lower(text: str, limit: int) -> None:
    pieces = list(split_text(text, limit))
    assert "".join(pieces) == text
    # a piece that starts with whitespace is a safe boundary for normalisation and lower-casing
    for k in range(1, len(pieces)):
        if pieces[k][0] in CUT_CHARS:
            head, tail = "".join(pieces[:k]), "".join(pieces[k:])
            both = unicodedata.normalize("NFKC", head + tail).lower()
            parts = (
                unicodedata.normalize("NFKC", head).lower()
                + unicodedata.normalize("NFKC", tail).lower()
            )
            assert both == parts
