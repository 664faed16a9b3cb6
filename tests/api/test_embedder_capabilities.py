"""An embedder's capabilities are declared members of the Embedder protocol (STYLE rule 19):
``fusion_weight`` is read as declared, defaults to one value, and an embedder that does not
declare it still works, with a DeprecationWarning naming the fix."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from spector_gpu import Embedder, RecallOptions, SpectorMemory, ValidationError
from spector_gpu.embedders import HashingEmbedder, make_embedder
from spector_gpu.embedders.protocol import DEFAULT_FUSION_WEIGHT

FAST = {"store": {"durability": "none"}}
TEXTS = ["the cat sat on the mat", "a dog in the park", "bread from the bakery"]


class Undeclared:
    """name, dim and embed only: the shape embedders had before fusion_weight was declared."""

    name = "undeclared-hashing"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(self.dim)
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.embed(texts)


class Declared(Embedder):
    """Subclasses the protocol: inherits its default fusion_weight."""

    name = "declared-hashing"
    dim = 64

    def __init__(self, weight: float | None = None) -> None:
        self.inner = HashingEmbedder(self.dim)
        if weight is not None:
            self.fusion_weight = weight

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)


def _dense_weight(path: Path, emb: object) -> tuple[float, list[str]]:
    opened = SpectorMemory.open(path, config=FAST, embedder=emb, device="cpu")  # type: ignore[arg-type]
    with opened as m:
        m.remember_batch(TEXTS)
        hits = m.recall("cat on a mat", RecallOptions(explain=True, relays=("lexical", "dense")))
        assert hits[0].breakdown is not None
        return hits[0].breakdown.relays["dense"].weight, [h.id[-4:] for h in hits]


def test_a_subclass_inherits_the_one_default() -> None:
    assert Declared().fusion_weight == DEFAULT_FUSION_WEIGHT == 1.0
    assert isinstance(Declared(), Embedder)
    assert not isinstance(Undeclared(), Embedder)


def test_the_declared_weight_scales_the_dense_relay(tmp_path: Path) -> None:
    base = SpectorMemory.open(tmp_path / "probe", config=FAST, embedder="hashing", device="cpu")
    with base:
        dense_weight = base.config.recall.dense_weight
    one, _ = _dense_weight(tmp_path / "a", Declared())
    two, _ = _dense_weight(tmp_path / "b", Declared(2.5))
    assert one == pytest.approx(dense_weight * 1.0)
    assert two == pytest.approx(dense_weight * 2.5)
    hashing, _ = _dense_weight(tmp_path / "c", HashingEmbedder(64))
    assert hashing == pytest.approx(dense_weight * HashingEmbedder(64).fusion_weight)


def test_an_undeclared_embedder_warns_naming_the_fix_and_still_works(tmp_path: Path) -> None:
    emb = Undeclared()
    with pytest.warns(DeprecationWarning, match=r"Undeclared declares no fusion_weight.*1\.0"):
        weight, ids = _dense_weight(tmp_path / "u", emb)
    assert emb.calls > 0  # the caller's own embed did the work
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        declared_weight, declared_ids = _dense_weight(tmp_path / "d", Declared())
    assert weight == declared_weight  # the default weight: the same fusion as a declared 1.0
    assert len(ids) == len(declared_ids)


def test_an_undeclared_embedder_keeps_its_own_members(tmp_path: Path) -> None:
    emb = Undeclared()
    with pytest.warns(DeprecationWarning):
        seen = make_embedder(emb)
    assert isinstance(seen, Embedder)
    assert (seen.name, seen.dim, seen.fusion_weight) == (emb.name, emb.dim, 1.0)
    assert seen.calls == 0  # type: ignore[attr-defined]  # its extra members stay reachable
    np.testing.assert_array_equal(seen.embed(["x"]), emb.inner.embed(["x"]))


def test_something_that_is_no_embedder_is_refused() -> None:
    with pytest.raises(ValidationError, match="not recognised"):
        make_embedder(42)  # type: ignore[arg-type]
