"""A consolidation with the language-model distiller killed at every step asks the model once.

The plan (every fact's text and parents) is committed before any fact is written; a rerun after
a kill replays it, so the stub server (tests/chat_stub.py) sees exactly one request per pass
however many kills the pass survives, and the facts equal the model's answer, once each, with
their lineage visible from the moment they can be read.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from chat_stub import ChatStub

from spector_gpu import MemoryType, SpectorMemory
from spector_gpu.storage.killpoints import KILLPOINTS

from .harness import run_child

pytestmark = pytest.mark.crash

POINTS = tuple(p for p in KILLPOINTS if p.startswith("consolidate."))
TEXTS = ["I moved to Lisbon in May.", "How is it?", "I work at a bakery in Alfama now."]


def _config(url: str) -> dict[str, dict[str, object]]:
    return {
        "store": {"durability": "flush"},
        "reflect": {"distiller": "llm"},
        "llm": {"base_url": url, "model": "stub", "retries": 0},
    }


def consolidate_child(path: str, url: str) -> None:
    """Child body: consolidate with the configured endpoint."""
    with SpectorMemory.open(path, config=_config(url), device="cpu") as mem:
        mem.consolidate()


@pytest.mark.parametrize("point", POINTS)
def test_a_killed_llm_consolidation_never_asks_twice(point: str, workdir: Path) -> None:
    store = workdir / "s"
    with ChatStub() as stub:
        with SpectorMemory.open(store, config=_config(stub.url), device="cpu") as mem:
            ids = mem.remember_batch(
                [{"text": t, "speaker": "Ann", "session_id": 1} for t in TEXTS]
            )
        stub.replies = [
            {
                "facts": [
                    {"text": "Ann moved to Lisbon in May.", "parents": [ids[0]], "quote": None},
                    {"text": "Ann works at a bakery in Alfama.", "parents": [ids[2], ids[0]]},
                ]
            }
        ]
        code = run_child(consolidate_child, str(store), stub.url, armed=f"{point}:1")
        assert code == -signal.SIGKILL, f"{point}: exit {code}"
        with SpectorMemory.open(store, config=_config(stub.url), device="cpu") as mem:
            for fact in mem.list(memory_type=MemoryType.SEMANTIC):
                assert mem.explain(fact.id) is not None, f"{point}: {fact.id} without lineage"
            report = mem.consolidate()
            facts = sorted(f.text for f in mem.list(memory_type=MemoryType.SEMANTIC))
            # a kill after the records went LIVE leaves nothing to resume
            assert report.resumed_runs == (point != "consolidate.after_live")
            assert all(mem.explain(f.id) is not None for f in mem.list(memory_type="semantic"))
            assert mem.check().ok
        assert len(stub.requests) == 1, f"{point}: the model was asked {len(stub.requests)} times"
    assert facts == ["Ann moved to Lisbon in May.", "Ann works at a bakery in Alfama."]
