"""An MCP session against ``spector-gpu mcp --store DIR``, driven by the official SDK's client
over stdio, printed as a transcript (the one in ``examples/mcp_session.txt``).

Run: ``python examples/mcp_session.py [STORE_DIR]`` (needs ``pip install 'spector-gpu[mcp]'``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("remember", {"text": "Ann moved to Lisbon in May", "session_id": 1, "speaker": "Ann"}),
    ("remember", {"text": "Ann adopted a dog called Pixel", "session_id": 1, "speaker": "Ann"}),
    ("remember", {"text": "Bo works at the pottery studio", "user_id": "bo"}),  # a fact: no session
    ("recall", {"query": "where does Ann live?", "k": 2}),
    ("recall", {"query": "where does Ann live?", "min_score": 0.8}),
    ("consolidate", {}),
    ("recall", {"query": "what is the dog called", "k": 1, "full": True}),
    ("list", {"user_id": "bo"}),
    ("recall", {"query": "", "k": 0}),
    ("remember", {"text": "Bo plays the cello", "userid": "bo"}),
    ("get", {"id": "0000000000000"}),
]


def _short(result: Any) -> str:
    if result.is_error:
        return "ERROR " + result.content[0].text
    return json.dumps(_rounded(result.structured_content), ensure_ascii=False)


def _rounded(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _rounded(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_rounded(v) for v in doc]
    return round(doc, 3) if isinstance(doc, float) else doc


async def session(store: str) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "spector_gpu.cli", "mcp", "--store", store],
        env={"SPECTOR_DENSE__DEVICE": "cpu"},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        info = init.server_info
        print(f"server: {info.name} {info.version}, protocol {init.protocol_version}")
        tools = (await s.list_tools()).tools
        print("tools:", ", ".join(t.name for t in tools))
        calls = list(CALLS)
        for i, (name, args) in enumerate(calls):
            result = await s.call_tool(name, args)
            print(f"> {name} {json.dumps(args, ensure_ascii=False)}\n< {_short(result)}")
            if name == "consolidate" and not result.is_error and result.structured_content:
                fact = result.structured_content["fact_ids"][0]
                calls.insert(i + 1, ("explain", {"id": fact}))
                calls.insert(i + 2, ("update", {"id": fact, "text": "Ann lives in Lisbon"}))
                calls.insert(i + 3, ("history", {"id": fact}))
                calls.insert(i + 4, ("delete", {"id": fact}))


def main() -> None:
    store = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="mcp-session-")
    anyio.run(session, store)


if __name__ == "__main__":
    main()
