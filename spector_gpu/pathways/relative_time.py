"""Relative time words resolved against the time a turn was said.

``resolve_relative_time("I went there yesterday", t)`` with ``t`` on 8 May 2023 gives
``"I went there on 7 May 2023"``: a fact read out of its conversation keeps its date. Dates are
UTC calendar days of ``timestamp_ms``. Resolved: today / tonight / this morning / this
afternoon / this evening, yesterday, last night, tomorrow, last / next week, weekend, month and
year, this week / month / year, and "<n> days / weeks ago". Anything else is left as said.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["resolve_relative_time"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _day(d: date) -> str:
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


def _month(d: date) -> str:
    return f"{_MONTHS[d.month - 1]} {d.year}"


def _shift_month(d: date, by: int) -> date:
    m = d.year * 12 + d.month - 1 + by
    return date(m // 12, m % 12 + 1, 1)


def _phrases(today: date) -> list[tuple[str, str]]:
    week = today - timedelta(days=today.weekday())  # the Monday of this week
    return [
        (r"last night", f"on the night of {_day(today - timedelta(days=1))}"),
        (r"yesterday", f"on {_day(today - timedelta(days=1))}"),
        (r"tomorrow", f"on {_day(today + timedelta(days=1))}"),
        (r"today|tonight", f"on {_day(today)}"),
        (r"this (?:morning|afternoon|evening)", f"on {_day(today)}"),
        (r"last weekend", f"the weekend before {_day(today)}"),
        (r"last week", f"the week of {_day(week - timedelta(days=7))}"),
        (r"next week", f"the week of {_day(week + timedelta(days=7))}"),
        (r"this week", f"the week of {_day(week)}"),
        (r"last month", f"in {_month(_shift_month(today, -1))}"),
        (r"next month", f"in {_month(_shift_month(today, 1))}"),
        (r"this month", f"in {_month(today)}"),
        (r"last year", f"in {today.year - 1}"),
        (r"next year", f"in {today.year + 1}"),
        (r"this year", f"in {today.year}"),
    ]


_AGO = re.compile(r"\b(a|one|two|three|four|five|six|\d+)\s+(day|week)s?\s+ago\b", re.IGNORECASE)
_NUM = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def resolve_relative_time(text: str, timestamp_ms: int) -> str:
    """``text`` with its relative time words replaced by the dates they name, counted from
    ``timestamp_ms`` (ms since the epoch, UTC)."""
    try:
        today = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).date()
    except (OverflowError, OSError, ValueError):
        return text
    for pattern, value in _phrases(today):
        text = re.sub(rf"\b(?:on |in )?(?:{pattern})\b", value, text, flags=re.IGNORECASE)

    def ago(m: re.Match[str]) -> str:
        n = _NUM.get(m.group(1).lower()) or int(m.group(1))
        days = n * (7 if m.group(2).lower() == "week" else 1)
        if days > 3660:
            return m.group(0)
        return f"around {_day(today - timedelta(days=days))}"

    return _AGO.sub(ago, text)
