"""Time cues: the moments an English query points at ("two weeks ago", "last Friday").

A query such as *"what gardening did I do two weeks ago?"* names a time as well as a topic.
:func:`time_cues` finds such phrases and turns each into a window of epoch milliseconds,
relative to the recall's clock (``RecallOptions.now_ms``, or the wall clock); the fusion then
lifts the members the query matched that were formed inside a window (their own
``timestamp_ms``) by ``[recall] time_cue_weight`` (1.5) × the row's best fused score ×
:func:`cue_kernel` — 1 inside a window, falling linearly to 0 one window-width (at least a
day) outside it (:func:`time_lift`). With a weight above 1 a matched member formed when the
query says outranks an equally relevant one formed at another time. Nothing is gated: a
memory outside every window keeps its score, and a query without a cue is untouched.
``RecallOptions(time_cues=False)`` switches the lift off for a call.

Phrases understood (case-insensitive, calendar arithmetic in UTC):

====================================  ==========================================================
``N days/weeks/months/years ago``     centred ``N`` units before now, ± 15 % (at least a day);
                                      ``N`` is a numeral, a number word up to twelve, ``a``,
                                      ``an``, ``a couple of``, ``a few``, ``several``
``yesterday`` / ``today``             the two days before now / the day so far
``last <weekday>`` / ``last weekend`` that day (±1 day) / that Saturday and Sunday
``last week/month/year``              the two units before now (both readings: the previous
                                      calendar unit and the last seven / thirty / 365 days)
``the past/last N units``             the ``N`` units before now
``this week/month/year``              the unit before now
``in/during/of <month name>``         that calendar month, in the latest year not after now
====================================  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import torch

__all__ = ["MAX_CUES", "TimeCue", "cue_kernel", "time_cues", "time_lift"]

DAY_MS = 86_400_000
#: Cues read from one query (the kernel's cost grows with them).
MAX_CUES = 8
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_MONTHS = (
    *("january", "february", "march", "april", "may", "june"),
    *("july", "august", "september", "october", "november", "december"),
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# longest alternatives first ("a couple of" before "a")
_NUM = r"(\d{1,4}|" + "|".join(sorted(_WORDS, key=len, reverse=True)) + ")"
_UNIT = r"(day|week|month|year)s?"
_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.I)
_PAST = re.compile(rf"\b(?:the\s+)?(past|last)\s+(?:{_NUM}\s+)?{_UNIT}\b", re.I)
_LAST_DAY = re.compile(rf"\blast\s+({'|'.join(_WEEKDAYS)}|weekend)\b", re.I)
_THIS = re.compile(rf"\bthis\s+{_UNIT}\b", re.I)
_MONTH = re.compile(rf"\b(?:in|during|of)\s+({'|'.join(_MONTHS)})\b", re.I)
_DAYWORD = re.compile(r"\b(yesterday|today)\b", re.I)
# Every rule above needs one of these whole words: a query with none of them has no cue, and
# one search answers that (most queries) instead of the six rules. The lookahead of their
# first letters only spares trying every word at every position (half the search's time).
_TRIGGERS = ("ago", "past", "last", "this", "yesterday", "today", *_MONTHS)
_TRIGGER = re.compile(
    rf"\b(?=[{''.join(sorted({w[0] for w in _TRIGGERS}))}])(?:{'|'.join(_TRIGGERS)})\b", re.I
)


@dataclass(frozen=True)
class TimeCue:
    """One phrase of a query and the window ``[lo_ms, hi_ms]`` (epoch ms) it points at."""

    phrase: str
    lo_ms: int
    hi_ms: int


def _count(word: str | None) -> int:
    if word is None:
        return 1
    w = " ".join(word.lower().split())
    return int(w) if w.isdigit() else _WORDS[w]


def _midnight(now_ms: int) -> datetime:
    day = datetime.fromtimestamp(now_ms / 1000, UTC)
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _ago(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
    centre = now_ms - days * DAY_MS
    half = int(max(1.0, 0.15 * days) * DAY_MS)
    return centre - half, centre + half


def _past(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    days = _count(m.group(2)) * _UNIT_DAYS[m.group(3).lower()]
    if m.group(2) is None and m.group(1).lower() == "last":
        days *= 2  # "last month": the previous calendar month or the last thirty days
    return now_ms - days * DAY_MS, now_ms


def _last_day(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    today = _midnight(now_ms)
    name = m.group(1).lower()
    if name == "weekend":
        back = (today.weekday() - 5) % 7 or 7
        start = _ms(today - timedelta(days=back))
        return start, start + 2 * DAY_MS
    back = (today.weekday() - _WEEKDAYS.index(name)) % 7 or 7
    start = _ms(today - timedelta(days=back))
    return start - DAY_MS, start + 2 * DAY_MS


def _this(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    return now_ms - _UNIT_DAYS[m.group(1).lower()] * DAY_MS, now_ms


def _month(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    today = _midnight(now_ms)
    month = _MONTHS.index(m.group(1).lower()) + 1
    year = today.year if month <= today.month else today.year - 1
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return _ms(start), _ms(end) - 1


def _dayword(m: re.Match[str], now_ms: int) -> tuple[int, int]:
    start = _ms(_midnight(now_ms))
    if m.group(1).lower() == "today":
        return start, now_ms
    return start - 2 * DAY_MS, start


_RULES = (
    (_AGO, _ago),
    (_PAST, _past),
    (_LAST_DAY, _last_day),
    (_THIS, _this),
    (_MONTH, _month),
    (_DAYWORD, _dayword),
)


def time_cues(text: str, now_ms: int) -> tuple[TimeCue, ...]:
    """The time cues of ``text`` as of ``now_ms`` (module docstring), by rule then position,
    at most :data:`MAX_CUES` (a query repeating a phrase a thousand times gets no bigger
    kernel). A calendar phrase whose date falls outside ``datetime``'s years (1–9999: a clock
    set near ``±2**62`` ms) points at nothing and is left out.

    >>> [c.phrase for c in time_cues("What did I plant two weeks ago?", 1_683_244_800_000)]
    ['two weeks ago']
    """
    if not _TRIGGER.search(text):
        return ()
    return _parse(text, now_ms)


def _parse(text: str, now_ms: int) -> tuple[TimeCue, ...]:
    """:func:`time_cues` without the trigger-word check (the tests compare the two)."""
    found: list[TimeCue] = []
    taken: list[tuple[int, int]] = []
    for pattern, window in _RULES:
        for m in pattern.finditer(text):
            if len(found) == MAX_CUES:
                return tuple(found)
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue  # "the last two weeks" is one cue, not also "last ... weeks"
            try:
                lo, hi = window(m, now_ms)
            except (OverflowError, ValueError, OSError):
                continue  # no such calendar date
            found.append(TimeCue(m.group(0), lo, hi))
            taken.append(m.span())
    return tuple(found)


def cue_kernel(
    formed_ms: torch.Tensor, cues: Sequence[Sequence[TimeCue]], device: torch.device
) -> torch.Tensor:
    """float64 (n, W): per row ``i`` of ``formed_ms`` (int64 (n, W) formation times), the best
    over ``cues[i]`` of 1 inside a window and ``max(0, 1 - gap / width)`` outside it, where
    ``width`` is the window's length (at least a day); 0 for a row without cues."""
    n = formed_ms.shape[0]
    most = max((len(c) for c in cues), default=0)
    if most == 0:
        return torch.zeros(formed_ms.shape, dtype=torch.float64, device=device)
    windows = np.zeros((3, n, most), dtype=np.float64)  # lo, hi, width (filled on the host)
    windows[2] = -1.0  # -1: no window (kernel 0)
    for i, row in enumerate(cues):
        for j, cue in enumerate(row):
            windows[:, i, j] = cue.lo_ms, cue.hi_ms, max(cue.hi_ms - cue.lo_ms, DAY_MS)
    lo, hi, width = torch.from_numpy(windows).to(device)[:, :, None]
    t = formed_ms.to(torch.float64)[:, :, None]
    gap = torch.clamp(lo - t, min=0.0) + torch.clamp(t - hi, min=0.0)
    k = torch.clamp(1.0 - gap / width.abs(), min=0.0)
    k = torch.where(width > 0, k, torch.zeros_like(k))
    return k.amax(dim=2)


def time_lift(
    fused: torch.Tensor,
    valid: torch.Tensor,
    matched: torch.Tensor,
    formed_ms: torch.Tensor,
    cues: Sequence[Sequence[TimeCue]],
    weight: float,
) -> torch.Tensor:
    """float64 (n, W) lift of each member: ``weight`` × the row's scale × :func:`cue_kernel`,
    for members the query ``matched`` (a relay scored them above 0: a memory the salience
    relay proposed for its strength alone is not lifted). The scale is the row's best fused
    score over ``valid`` members, or 1 (one relay's full weight) when none is above 0 — twins
    that the pool's min-max normalisation leaves at 0 are still ordered by the cue. Only the
    rows with cues are computed (the rest are 0: most queries name no time)."""
    rows = [i for i, row in enumerate(cues) if row]
    if len(rows) < len(cues):
        out = torch.zeros(fused.shape, dtype=torch.float64, device=fused.device)
        if rows:
            at = torch.tensor(rows, dtype=torch.int64, device=fused.device)
            some = [cues[i] for i in rows]
            out[at] = time_lift(fused[at], valid[at], matched[at], formed_ms[at], some, weight)
        return out
    finite = valid & torch.isfinite(fused)
    best = torch.where(finite, fused, torch.zeros_like(fused)).amax(dim=1, keepdim=True)
    scale = torch.where(best > 0, best, torch.ones_like(best))
    k = cue_kernel(formed_ms, cues, fused.device)
    w = torch.full_like(best, min(max(float(weight), 0.0), 1e6))
    return torch.where(finite & matched, w * scale * k, torch.zeros_like(k))
