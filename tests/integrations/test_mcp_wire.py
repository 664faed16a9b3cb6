"""Every input line the MCP server cannot read gets a JSON-RPC error (the SDK's own reader
drops such lines and a client would wait forever): malformed JSON, lone surrogate escapes,
JSON nested deeper than the SDK parses, JSON that is no JSON-RPC message — and the session
goes on serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp.types import INVALID_REQUEST, PARSE_ERROR

from spector_gpu.integrations.mcp_wire import refusal

_ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "SPECTOR_DENSE__DEVICE": "cpu"}


def _call(rid: int, name: str, arguments: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
    )


NESTED = '{"a":' * 200 + "1" + "}" * 200
# line -> (id of the answer, code, words of its message)
CASES: dict[str, tuple[int | str | None, int, str]] = {
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"': (None, PARSE_ERROR, "Parse error"),
    "not json at all": (None, PARSE_ERROR, "Parse error"),
    _call(3, "remember", '{"text":"a\\ud800b"}'): (3, INVALID_REQUEST, "lone UTF-16 surrogate"),
    _call(4, "recall", f'{{"query":"x","where":{NESTED}}}'): (4, INVALID_REQUEST, "levels deep"),
    '"a bare string"': (None, INVALID_REQUEST, "not a JSON-RPC 2.0 message"),
    '{"jsonrpc":"2.0","id":"s5","params":{}}': ("s5", INVALID_REQUEST, "not a JSON-RPC"),
    "[1, 2]": (None, INVALID_REQUEST, "not a JSON-RPC 2.0 message"),
    "[" * 5000 + "]" * 5000: (None, PARSE_ERROR, "nested too deeply"),
}


@pytest.mark.parametrize("line", list(CASES), ids=range(len(CASES)))
def test_each_unreadable_line_has_its_answer(line: str) -> None:
    rid, code, words = CASES[line]
    answer = refusal(line)
    assert answer is not None
    assert (answer.id, answer.error.code) == (rid, code) and words in answer.error.message


def test_a_readable_line_passes() -> None:
    assert refusal(_call(1, "recall", '{"query":"caf\\u00e9 \\ud83d\\ude00"}')) is None
    assert refusal('{"jsonrpc":"2.0","method":"notifications/initialized"}') is None


def test_the_server_answers_and_keeps_serving(tmp_path: Path) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    lines = [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}', ""]
    lines += list(CASES)
    data = "".join(line + "\n" for line in lines).encode()
    data += b'{"jsonrpc":"2.0","id":7,"method":"tools/list"\xff}\n'  # invalid UTF-8
    data += (_call(8, "remember", '{"text":"still serving"}') + "\n").encode()
    expected = [(rid, code) for rid, code, _ in CASES.values()] + [(None, PARSE_ERROR)]
    cmd = [sys.executable, "-m", "spector_gpu.cli", "mcp", "--store", str(tmp_path / "m")]
    proc = subprocess.Popen(
        [*cmd, "--device", "cpu"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_ENV,
    )
    watchdog = threading.Timer(120, proc.kill)  # a server that stays silent fails the test
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(data)
        proc.stdin.flush()
        # every answer before end of input: the error answers and the two results
        answers = [json.loads(proc.stdout.readline()) for _ in range(len(expected) + 2)]
        _, err = proc.communicate()
    finally:
        watchdog.cancel()
    assert proc.returncode == 0, err.decode()
    errors = [a for a in answers if "error" in a]
    assert sorted((e["id"] is None, str(e["id"]), e["error"]["code"]) for e in errors) == sorted(
        (rid is None, str(rid), code) for rid, code in expected
    )
    served = {a["id"]: a for a in answers if "result" in a}
    assert set(served) == {1, 8}
    assert served[8]["result"]["structuredContent"]["text"] == "still serving"
