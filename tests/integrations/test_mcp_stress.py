"""Pipelined concurrent requests through one MCP server (the official SDK client over a real
subprocess): remembers, deletes (which compact the store as dead rows pile up), recalls and
gets in flight together on the server's worker threads. Every text a tool returns is checked
against what was stored under that id; after the deletes, no deleted memory comes back."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

_ENV = {k: v for k, v in os.environ.items() if k.startswith("SPECTOR_") or k == "PYTHONPATH"}
_ENV |= {"PYTHONUNBUFFERED": "1", "SPECTOR_DENSE__DEVICE": "cpu"}

WORDS = [
    "amber",
    "birch",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "heron",
    "iris",
    "juniper",
    "kelp",
    "lotus",
]
FIRST, LATER, DELETES, RECALLS = 48, 16, 32, 160


def _text(i: int, rng: random.Random) -> str:
    return f"note {i}: the {rng.choice(WORDS)} {rng.choice(WORDS)} by the {rng.choice(WORDS)}"


class Run:
    """What was sent and what came back."""

    def __init__(self) -> None:
        self.stored: dict[str, str] = {}  # id -> text, from remember's results
        self.seen: list[tuple[str, str, str]] = []  # (tool, id, text) of every returned memory
        self.deleted: set[str] = set()
        self.errors: list[str] = []

    def returned(self, tool: str, result: Any, key: str) -> None:
        if result.is_error:
            self.errors.append(f"{tool}: {result.content[0].text}")
            return
        doc = result.structured_content
        for m in doc[key] if key else [doc]:
            self.seen.append((tool, m["id"], m["text"]))


async def _remember(s: ClientSession, run: Run, text: str) -> None:
    result = await s.call_tool("remember", {"text": text})
    assert not result.is_error, result
    run.stored[result.structured_content["id"]] = text


async def _delete(s: ClientSession, run: Run, mid: str) -> None:
    result = await s.call_tool("delete", {"id": mid})
    assert not result.is_error, result
    run.deleted.add(mid)


async def _recall(s: ClientSession, run: Run, query: str) -> None:
    run.returned("recall", await s.call_tool("recall", {"query": query, "k": 8}), "hits")


async def _get(s: ClientSession, run: Run, mid: str) -> None:
    result = await s.call_tool("get", {"id": mid})
    if not (result.is_error and "no memory with id" in result.content[0].text):
        run.returned("get", result, "")  # deleted meanwhile: the one not-found answer is right


async def _stress(store: Path, errlog: Any) -> Run:
    rng, run = random.Random(7), Run()
    with anyio.fail_after(300):  # a lost answer fails the test instead of hanging it
        await _session(store, errlog, rng, run)
    return run


async def _session(store: Path, errlog: Any, rng: random.Random, run: Run) -> None:
    async with (
        stdio_client(_params(store), errlog=errlog) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        async with anyio.create_task_group() as tg:
            for i in range(FIRST):
                tg.start_soon(_remember, s, run, _text(i, rng))
        doomed = rng.sample(sorted(run.stored), DELETES)
        jobs: list[Any] = [(_delete, mid) for mid in doomed]
        jobs += [(_remember, _text(FIRST + i, rng)) for i in range(LATER)]
        jobs += [(_recall, f"{rng.choice(WORDS)} {rng.choice(WORDS)}") for _ in range(RECALLS)]
        jobs += [(_get, mid) for mid in rng.sample(sorted(run.stored), 24)]
        rng.shuffle(jobs)
        async with anyio.create_task_group() as tg:  # all in flight at once
            for job, arg in jobs:
                tg.start_soon(job, s, run, arg)
        for word in WORDS:  # after every delete returned
            result = await s.call_tool("recall", {"query": word, "k": 20})
            run.returned("after", result, "hits")


def _params(store: Path) -> StdioServerParameters:
    args = ["-m", "spector_gpu.cli", "mcp", "--store", str(store), "--device", "cpu"]
    return StdioServerParameters(command=sys.executable, args=args, env=_ENV)


def test_pipelined_requests_return_only_stored_texts(tmp_path: Path) -> None:
    with open(tmp_path / "server.log", "w", encoding="utf-8") as errlog:
        run = anyio.run(_stress, tmp_path / "mem", errlog)
    wrong = [(tool, mid, text) for tool, mid, text in run.seen if run.stored.get(mid) != text]
    assert (len(run.errors), len(wrong)) == (0, 0), (
        f"{len(run.errors)} calls failed ({run.errors[:3]}); {len(wrong)} of {len(run.seen)} "
        f"returned texts are not their id's ({wrong[:3]})"
    )
    assert len(run.stored) == FIRST + LATER and len(run.deleted) == DELETES
    assert sum(tool == "recall" for tool, _, _ in run.seen) >= RECALLS  # the recalls found memories
    after = {mid for tool, mid, _ in run.seen if tool == "after"}
    assert after and not after & run.deleted
