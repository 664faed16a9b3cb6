"""A store records its embedder's fingerprint (outputs on fixed probe texts) and refuses a
different function under the same name and dim; stores without one open as before and gain
one; the built-in embedders reopen as always."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import SpectorMemory
from spector_gpu.embedders import CallableEmbedder, HashingEmbedder, StaticEmbedder
from spector_gpu.embedders.fingerprint import PROBES, fingerprint
from spector_gpu.errors import (
    CorruptionError,
    EmbedderMismatchError,
    StoreError,
    ValidationError,
)

FAST = {"store": {"durability": "none"}}
DIM = 16


def _fn(seed: int, noise: float = 0.0) -> Callable[[list[str]], np.ndarray]:
    """A deterministic toy model: each text's vector from its bytes and a per-model table."""
    table = np.random.default_rng(seed).standard_normal((256, DIM))
    jitter = np.random.default_rng(99)

    def embed(texts: list[str]) -> np.ndarray:
        rows = np.stack([table[list(t.encode())].sum(axis=0) for t in texts])
        return rows + noise * jitter.standard_normal(rows.shape)

    return embed


def _open(path: Path, embedder: Any, **kw: Any) -> SpectorMemory:
    return SpectorMemory.open(path, embedder=embedder, config=FAST, **kw)


def _identity(path: Path) -> dict[str, Any]:
    return dict(json.loads((path / "store.json").read_text()))


def test_a_different_function_with_the_same_name_and_dim_is_refused(tmp_path: Path) -> None:
    written = CallableEmbedder(_fn(1), name="team-model", dim=DIM)
    with _open(tmp_path, written) as mem:
        ids = mem.remember_batch(["Ann moved to Lisbon", "Bo bakes bread"])
    record = _identity(tmp_path)["fingerprint"]
    assert record["class"] == "spector_gpu.embedders.adapters.CallableEmbedder"
    other = CallableEmbedder(_fn(2), name="team-model", dim=DIM)
    with pytest.raises(EmbedderMismatchError) as caught:
        _open(tmp_path, other)
    message = str(caught.value)
    assert "'team-model'" in message and "CallableEmbedder(name='team-model'" in message
    assert "spector_gpu.embedders.adapters.CallableEmbedder" in message and "cosine" in message
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, ValueError)
    with _open(tmp_path, written) as mem:  # nothing was touched
        assert [r.id for r in mem.list(limit=10)] == ids
    assert _identity(tmp_path)["fingerprint"] == record


def test_the_same_function_reopens_despite_float_noise(tmp_path: Path) -> None:
    with _open(tmp_path, CallableEmbedder(_fn(1), name="m", dim=DIM)) as mem:
        mem.remember("kept")
    with _open(tmp_path, CallableEmbedder(_fn(1, noise=1e-3), name="m", dim=DIM)) as mem:
        assert mem.count() == 1


@pytest.mark.parametrize(
    "make",
    [StaticEmbedder, HashingEmbedder, lambda: HashingEmbedder(dim=64)],
    ids=["static", "hashing", "hashing-64"],  # stable across processes (pytest-xdist)
)
def test_built_in_embedders_reopen_and_record_a_fingerprint(
    tmp_path: Path, make: Callable[[], Any]
) -> None:
    for _ in range(3):
        with _open(tmp_path, make()) as mem:
            mem.remember("one more")
    assert _identity(tmp_path)["fingerprint"]["probes"] == "v1"
    with _open(tmp_path, make(), read_only=True) as mem:
        assert mem.count() == 3


def test_a_store_without_a_fingerprint_opens_and_gains_one(tmp_path: Path) -> None:
    emb = CallableEmbedder(_fn(1), name="m", dim=DIM)
    with _open(tmp_path, emb) as mem:
        mem.remember("before fingerprints")
    legacy = _identity(tmp_path)
    del legacy["fingerprint"]
    (tmp_path / "store.json").write_text(json.dumps(legacy))
    with _open(tmp_path, CallableEmbedder(_fn(3), name="m", dim=DIM), read_only=True) as mem:
        assert mem.count() == 1  # read-only: opens, records nothing
    assert "fingerprint" not in _identity(tmp_path)
    with _open(tmp_path, emb) as mem:  # the first writable open records the opener's
        assert mem.count() == 1
    assert _identity(tmp_path)["fingerprint"] == fingerprint(emb)
    assert {k: v for k, v in _identity(tmp_path).items() if k != "fingerprint"} == legacy
    with pytest.raises(EmbedderMismatchError):
        _open(tmp_path, CallableEmbedder(_fn(3), name="m", dim=DIM))


def test_all_zero_probe_rows_compare_as_equal_only_to_zero(tmp_path: Path) -> None:
    zeros = CallableEmbedder(lambda xs: np.zeros((len(xs), DIM)), name="z", dim=DIM)
    with _open(tmp_path, zeros) as mem:
        mem.remember("a zero vector")
    with _open(tmp_path, zeros) as mem:
        assert mem.count() == 1
    with pytest.raises(EmbedderMismatchError):
        _open(tmp_path, CallableEmbedder(_fn(1), name="z", dim=DIM))


@pytest.mark.parametrize(
    "damage",
    [{"vectors": "not base64!"}, {"vectors": "AAAA"}, "a string", {"probes": "v1"}],
    ids=["bad-base64", "wrong-length", "not-an-object", "no-vectors"],
)
def test_a_damaged_fingerprint_is_corruption(tmp_path: Path, damage: Any) -> None:
    emb = CallableEmbedder(_fn(1), name="m", dim=DIM)
    with _open(tmp_path, emb):
        pass
    ident = _identity(tmp_path)
    ident["fingerprint"] = damage if isinstance(damage, str) else {"probes": "v1", **damage}
    (tmp_path / "store.json").write_text(json.dumps(ident))
    with pytest.raises(CorruptionError, match="fingerprint"):
        _open(tmp_path, emb)


def test_an_embedder_failing_the_probes_still_opens_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = CallableEmbedder(lambda xs: None, name="m", dim=DIM)  # type: ignore[arg-type,return-value]
    with caplog.at_level(logging.WARNING), _open(tmp_path, broken) as mem:
        with pytest.raises(ValidationError):
            mem.remember("its writes meet the same refusal")
        assert mem.count() == 0
    assert "fingerprint not taken" in caplog.text
    assert "fingerprint" not in _identity(tmp_path)
    with _open(tmp_path, CallableEmbedder(_fn(1), name="m", dim=DIM)):
        pass
    assert "fingerprint" in _identity(tmp_path)


def test_probes_are_fixed() -> None:
    # changing them would make every recorded fingerprint unreadable: bump PROBES_VERSION
    assert len(PROBES) == 4 and all(p.strip() for p in PROBES)
    assert PROBES[0] == "Ann moved to Lisbon in May 2023 and adopted a dog called Pixel."
