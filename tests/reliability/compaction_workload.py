"""The store the compaction crash suites compact, and how they judge what a crash left."""

from __future__ import annotations

from pathlib import Path

from spector_gpu import SpectorMemory
from spector_gpu.cortex.ids import decode_tsid, encode_tsid
from spector_gpu.testing import cortex_of

__all__ = ["CFG", "DEAD", "compact_child", "prefill", "problems_of"]

CFG = {"store": {"durability": "flush", "compact_dead_share": 1.0}}  # compact when told
DEAD = 12


def _token(i: int) -> str:
    return "zq" + "".join(chr(ord("a") + (i * 7 + k * 3) % 26) for k in range(10)) + "xv"


def prefill(store: Path) -> tuple[dict[str, str], int, int]:
    """A store to compact: ``{live id: text}``, the row count before and after."""
    with SpectorMemory.open(store, config=CFG) as mem:
        turns = [{"text": f"turn {i}: we spoke of boats", "session_id": i % 3} for i in range(24)]
        mem.remember_batch(turns)
        mem.consolidate()
        secrets = [{"text": f"secret {i} is {_token(i)}", "session_id": 9} for i in range(DEAD)]
        ids = mem.remember_batch(secrets)
        c = cortex_of(mem)
        dead = [c.id_map[decode_tsid(tsid)] for tsid in ids[:DEAD]]
        mem.delete_batch(ids[:DEAD])
        live = {encode_tsid(int(c.cols.ids[o])): c.text_of(o) for o in range(c.n) if o not in dead}
        return live, c.n, c.n - DEAD


def compact_child(store: str) -> None:
    with SpectorMemory.open(store, config=CFG) as mem:
        mem.compact()


def problems_of(store: Path, live: dict[str, str], rows: tuple[int, int], *, ro: bool) -> str:
    """What is wrong with the store one open finds (empty when it is one whole store)."""
    with SpectorMemory.open(store, config=None if ro else CFG, read_only=ro) as mem:
        out = []
        n = cortex_of(mem).n
        if n not in rows:
            out.append(f"{n} rows, expected one of {rows}")
        if not mem.check().ok:
            out.append(f"check: {mem.check()}")
        if not mem.verify_chain().ok:
            out.append("event chain broken")
        for i, text in live.items():
            got = mem.get(i)
            if got is None or got.text != text:
                out.append(f"{i} reads {got.text if got else None!r}")
                break
    if n == rows[1] and not ro:
        leaked = [
            p.name
            for p in store.rglob("*")
            if p.is_file() and any(_token(i).encode() in p.read_bytes() for i in range(DEAD))
        ]
        if leaked:
            out.append(f"dead tokens in {leaked}")
    return "; ".join(out)
