"""``examples/mcp_session.txt`` is what ``examples/mcp_session.py`` prints today (the official
SDK client driving ``spector-gpu mcp`` over stdio), up to its ids, times and scores."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_ID = re.compile(r"\b(?!0{13}\b)[0-9A-HJKMNP-TV-Z]{13}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
_SCORE = re.compile(r'("score": )-?\d+(\.\d+)?')


def _shape(transcript: str) -> str:
    """The transcript with each id named by its order of first appearance (so a fact's
    parents must still be the turns remembered first), and times and scores blanked."""
    names: dict[str, str] = {}
    text = _ID.sub(lambda m: names.setdefault(m.group(), f"<id{len(names)}>"), transcript)
    return _SCORE.sub(r"\1<score>", _TIME.sub("<time>", text))


def test_the_transcript_is_todays_output(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_session.py"), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    saved = (ROOT / "examples" / "mcp_session.txt").read_text(encoding="utf-8")
    assert _shape(run.stdout) == _shape(saved)
