"""What the MCP server tells a model when a call fails: one line in the project's words.

An argument the tool's schema refuses becomes ``invalid arguments for recall: k must be at
least 1, got 0`` (never the validator's own text or its links); an engine refusal keeps the
engine's message, which names the field and the rule, with the store's path taken out; an
id that is not stored reads the same in every tool (:func:`not_found`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import SpectorError, UnknownIdError
from ._extras import missing_extra

try:
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError as ArgumentsError
except ImportError as exc:
    raise missing_extra("mcp", "mcp", exc) from exc

__all__ = ["ToolRefusalError", "arguments_message", "not_found", "refusals", "without_paths"]


class ToolRefusalError(ToolError):
    """A call the server refuses, with the one line to show (the server turns it into an MCP
    error result)."""


def not_found(memory_id: str) -> ToolRefusalError:
    """The one wording of an id that names no live memory."""
    return ToolRefusalError(f"no memory with id {memory_id!r} in this store")


def without_paths(message: str, store: Path) -> str:
    """``message`` in a tool's terms: the store's directory taken out (a model sees file
    names, never the server's paths) and recall's options named as the tool's arguments."""
    root = str(store)
    message = message.replace(root + "/", "").replace(root, "the store")
    return message.replace("RecallOptions.", "")


@contextmanager
def refusals(store: Path, memory_id: str | None = None) -> Iterator[None]:
    """Turn an engine refusal into a :class:`ToolRefusalError`; an unknown id (``memory_id``
    given) into :func:`not_found`'s wording."""
    try:
        yield
    except UnknownIdError as exc:
        if memory_id is None:
            raise ToolRefusalError(without_paths(str(exc), store)) from exc
        raise not_found(memory_id) from exc
    except SpectorError as exc:
        raise ToolRefusalError(without_paths(str(exc), store)) from exc


def _shown(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)  # the caller's JSON, not Python's repr
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "arguments"


def _length(what: str) -> Callable[[dict[str, Any]], str]:
    def rule(ctx: dict[str, Any]) -> str:
        n = ctx.get("min_length", ctx.get("max_length"))
        return f"{what} {n} character{'s' * (n != 1)}"

    return rule


def _items(what: str) -> Callable[[dict[str, Any]], str]:
    def rule(ctx: dict[str, Any]) -> str:
        n = ctx.get("min_length", ctx.get("max_length"))
        return f"a list of {what} {n} item{'s' * (n != 1)}"

    return rule


_RULES: dict[str, Callable[[dict[str, Any]], str]] = {
    "greater_than_equal": lambda c: f"at least {c['ge']}",
    "less_than_equal": lambda c: f"at most {c['le']}",
    "greater_than": lambda c: f"above {c['gt']}",
    "less_than": lambda c: f"below {c['lt']}",
    "string_too_short": _length("at least"),
    "string_too_long": _length("at most"),
    "too_short": _items("at least"),
    "too_long": _items("at most"),
    "int_type": lambda c: "an integer",
    "int_parsing": lambda c: "an integer",
    "int_from_float": lambda c: "an integer",
    "float_type": lambda c: "a number",
    "float_parsing": lambda c: "a number",
    "finite_number": lambda c: "a finite number",
    "bool_type": lambda c: "true or false",
    "bool_parsing": lambda c: "true or false",
    "string_type": lambda c: "a string",
    "dict_type": lambda c: "a JSON object",
    "list_type": lambda c: "a list",
    "literal_error": lambda c: f"one of {c.get('expected', '')}",
}


def _problem(err: Any, arguments: Sequence[str]) -> str:
    field, kind, ctx = _field(err["loc"]), err["type"], err.get("ctx") or {}
    if kind == "missing":
        return f"{field} is required"
    if kind == "extra_forbidden":
        takes = ", ".join(arguments) or "no arguments"
        return f"{field!r} is not an argument of this tool (it takes {takes})"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return f"{field} must not be empty"
    rule = _RULES.get(kind)
    if rule is None:  # a rule this server does not use today: the validator's one-line text
        text = str(err.get("msg", "is invalid")).removeprefix("Input ")
        return f"{field} {text[:1].lower()}{text[1:]}"
    return f"{field} must be {rule(ctx)}, got {_shown(err.get('input'))}"


def arguments_message(tool: str, exc: ArgumentsError, arguments: Sequence[str]) -> str:
    """One line naming every argument of ``tool`` its schema refused, and the rule."""
    problems = dict.fromkeys(_problem(e, arguments) for e in exc.errors())
    return f"invalid arguments for {tool}: " + "; ".join(problems)
