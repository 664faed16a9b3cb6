"""``[dense] scan_threads`` is deprecated: the dense scan runs on the calling thread. Set by a
user (environment, arguments, a TOML file) it is ignored with a DeprecationWarning saying what to
do; a store whose saved ``config.json`` still lists it opens without one; the recall is the same
either way."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.config import Config, load_config

FAST = {"store": {"durability": "none"}}
WORDS = [f"w{i}" for i in range(400)]


def test_the_key_warns_from_every_user_origin(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("[dense]\nscan_threads = 2\n")
    for kwargs in (
        {"overrides": {"dense": {"scan_threads": 1}}},
        {"environ": {"SPECTOR_DENSE__SCAN_THREADS": "2"}},
        {"path": toml},
    ):
        with pytest.warns(DeprecationWarning, match=r"dense\.scan_threads .*delete the setting"):
            config = load_config(**kwargs)  # type: ignore[arg-type]
        assert config == Config()
        assert "scan_threads" not in config.to_dict()["dense"]
    with pytest.warns(DeprecationWarning, match="scan_threads"):
        Config().replace({"dense": {"scan_threads": 2}})


def test_a_saved_config_with_the_key_opens_quietly_and_recalls_the_same(tmp_path: Path) -> None:
    rng = random.Random(4)
    items = [
        {"text": " ".join(rng.choices(WORDS, k=12)), "session_id": i // 20} for i in range(600)
    ]
    queries = [" ".join(rng.choices(WORDS, k=4)) for _ in range(6)]
    opts = RecallOptions(k=10, mode="observe")
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as mem:
        mem.remember_batch(items)
        before = [mem.recall(q, opts) for q in queries]
    saved = path / "config.json"
    data = json.loads(saved.read_text())
    assert "scan_threads" not in data["dense"]
    data["dense"]["scan_threads"] = 2  # as a store saved before the key was deprecated
    saved.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SpectorMemory.open(path, config=FAST) as mem:
            after = [mem.recall(q, opts) for q in queries]
    assert [[(r.id, r.score) for r in a] for a in after] == [
        [(r.id, r.score) for r in b] for b in before
    ]
