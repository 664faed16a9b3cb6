"""Frames: the clauses of a fact, each read as a subject, its content words and its values, so
that reconciliation can tell "the same thing with a new value" from two compatible facts.

A fact of several statements ("Ann is taking painting classes. She has completed 4 projects
since starting, and she feels confident.") is split into clauses at sentence ends, semicolons
and ", and" / ", but" / ", which" / ", so" joins. Each :class:`Frame` holds:

- ``subject`` — whom the clause is about: the fact's subject (its first name) unless the clause
  opens with another name ("Bo has 3 kids") or with a relative of the subject ("their sister
  has 3 kids" → ``"<subject>'s sister"``);
- ``words`` — its content words, stemmed, without numbers; ``context`` its sentence's;
- ``quantities`` — each number (:class:`Quantity`) with what it counts: the first content
  word after it that is not a plain adjective ("4 projects" → project, "the 5th project" →
  project, "27 different species" → species), else the two before it ("the species count is
  32") and any "<thing> count" before it ("my follower count - close to 1300"); a number in
  a photo's description or a time ago ("3 years ago") is not a count;
- ``names`` — its capitalised words other than its subject (names, places, days);
- ``dated`` — whether it names a date, a day or a time of day ("on 7 May 2023", "last
  Tuesday", "in 2022", "10:30 PM"): a dated count is an event's, and two events with
  different numbers are two events (a date dates the numbers of its own part of the clause,
  up to a dash);
- ``current`` — whether it says its value holds now ("now", "currently", "these days",
  "switched to", "no longer", "anymore", "instead").

:func:`changed_value` compares a new clause with an old one: the same subject, the same frame
and another value (see its docstring).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "Quantity", "changed_value", "fact_subject", "frames", "stem"]

_SENTENCE_END = re.compile(r"[.!?;]+(?!\d)\s*")
_JOIN = re.compile(r",\s+(?=(?:and|but|which|so|while|whereas|though|although)\b)")
_TOKEN = re.compile(r"\$?\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th|s)?|[A-Za-z][A-Za-z'-]*")


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _ranks(words: str) -> dict[str, int]:
    return {w: k for k, w in enumerate(words.split())}


_NUMBER_WORDS = _ranks(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
# "first" is left out: as often an adverb ("I first met") as a rank
_ORDINAL_WORDS = _ranks("zeroth - second third fourth fifth sixth seventh eighth ninth tenth")
_MONTHS = "january february march april may june july august september october november december"
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_DATED = re.compile(
    r"\b(?:(?:on|last|next|this|every)\s+(?:" + _DAYS.replace(" ", "|") + r")s?|"
    r"\d{1,2}(?:st|nd|rd|th)?\s+(?:" + _MONTHS.replace(" ", "|") + r")|"
    r"(?:" + _MONTHS.replace(" ", "|") + r")\s+\d{1,2}(?:st|nd|rd|th)?\b|"
    r"(?:in|since|of)\s+(?:19|20)\d\d|today|tonight|yesterday|tomorrow|"
    r"this (?:morning|afternoon|evening)|last night|"
    r"\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock))\b",
    re.IGNORECASE,
)
_CURRENT = re.compile(
    r"(?<!from )(?<!right )(?<!for )(?<!by )(?<!until )(?<!just )\bnow\b(?! on\b)|"
    r"\b(?:currently|these days|nowadays|at the moment|switched to|changed to|"
    r"no longer|not anymore|anymore|instead|any more)\b",
    re.IGNORECASE,
)
# an opening aside is not the clause's subject: "By the way, …", "Speaking of bikes, …"
_ASIDE = re.compile(
    r"^(?:(?:by the way|speaking of [^,]+|anyway|also|actually|in fact|as for [^,]+|"
    r"besides|plus|and|but|so)\s*,?\s*)+",
    re.IGNORECASE,
)
_ADDITIVE = re.compile(r"\b(?:also|too|as well|another|more)\b", re.IGNORECASE)
# a simple past not after "has" / "have": an event, not a state that holds
_PAST = re.compile(
    r"(?<!\bhas )(?<!\bhave )(?<!\bhad )\b(?:went|took|saw|met|got|made|did|ate|bought|came|"
    r"gave|left|ran|spent|told|wore|wrote|won|lost|found|flew|drove|visited|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
# "a photo of two children": a picture's content, not the subject's
_DEPICTION = re.compile(
    r"\b(?:photo|photograph|photography|picture|pic|image|video|screenshot|drawing|painting)s?"
    r" (?:of|showing|with)\b",
    re.IGNORECASE,
)
_AGO = re.compile(r"\s+(?:\w+\s+)?(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\s+ago\b")
# adjectives a number may stand before without being what it counts
_PLAIN = _wordset(
    "different new more other total whole full extra additional separate unique distinct big "
    "small great good old young whole entire"
)
_CONNECTORS = _wordset(
    "and but which so while whereas though although also then plus since because"
)
_PRONOUNS = _wordset("they he she them their his her it its we our i")
_POSSESSIVES = _wordset("their his her our its my")
# a relative or acquaintance of the subject: the clause is about them, not the subject
_RELATIVES = _wordset(
    "sister brother mother mom mum father dad parent parents son daughter kid kids child "
    "children husband wife partner boyfriend girlfriend fiance fiancee friend friends "
    "colleague coworker boss manager neighbor neighbour cousin aunt uncle grandma "
    "grandmother grandpa grandfather roommate team teammate family"
)
_STOP = _wordset(
    "a an the and or but of to in on at for with from by as is are was were be been being "
    "am it its this that these those there they them their he she his her him we our you "
    "your i my me so very really just also now then than too have has had do does did will "
    "would can could should might may must about into over after before since up out some "
    "any all more most much many such which who whom what when where while how not no "
    "currently actually pretty quite still already ever lately recently per"
)


@dataclass(frozen=True)
class Quantity:
    """A number in a clause: its ``value``, the content words it ``counted`` (stemmed: the
    first after it, else the two before it) and whether its part of the clause is ``dated``
    (a date, a day or a time of day)."""

    value: float
    counted: frozenset[str]
    dated: bool
    follows: bool = True  # what it counts comes after it ("4 projects"), not before
    of: bool = False  # what it counts is qualified: "3 species of owls"


@dataclass(frozen=True)
class Frame:
    """One clause of a fact (module docstring); ``context`` is its sentence's content words."""

    text: str
    subject: str
    words: frozenset[str]
    context: frozenset[str]
    quantities: tuple[Quantity, ...]
    names: frozenset[str]
    dated: bool
    current: bool
    mentions: frozenset[str] = frozenset()  # the stemmed capitalised words of the whole fact


def stem(word: str) -> str:
    """A crude stem: lower case, without a possessive or a plural, -ing or -ed ending."""
    w = word.lower().replace("'s", "").replace("'", "")
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def _number(token: str) -> float | None:
    low = token.lower()
    if low in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[low])
    if low in _ORDINAL_WORDS:
        return float(_ORDINAL_WORDS[low])
    m = re.fullmatch(r"\$?(\d[\d,]*(?:\.\d+)?)(?:st|nd|rd|th|s)?", low)
    return float(m.group(1).replace(",", "")) if m else None


def fact_subject(text: str) -> str:
    """The fact's subject: its first capitalised word that is not an aside, a stop word or a
    date ("Ann moved …", "By the way, Ann …" → ``"ann"``), the source of an "According to
    Ann, …" statement, else ``""``."""
    m = re.match(r"^According to ([A-Z][\w'-]*)", text.strip())
    if m:
        return stem(m.group(1))
    for token in _TOKEN.findall(_ASIDE.sub("", text.strip())):
        low = token.lower()
        if token[:1].isupper() and low not in _STOP and low not in _MONTHS and low not in _DAYS:
            return stem(token)
        if token[:1].isupper() or _number(token) is not None or low in _STOP:
            continue
        break
    return ""


def frames(text: str) -> list[Frame]:
    """The clauses of ``text`` as frames; ``text`` is a fact, its subject its first name."""
    subject = fact_subject(text)
    body = re.sub(r"^According to [^,]+,\s*", "", text.strip())
    mentions = frozenset(stem(t) for t in _TOKEN.findall(text) if t[:1].isupper())
    out = []
    for sentence in _SENTENCE_END.split(body):
        context = frozenset(stem(t) for t in _TOKEN.findall(sentence) if _content(t))
        for part in _JOIN.split(sentence):
            clause = part.strip(" ,-–—*")
            if clause:
                out.append(_frame(clause, subject, context, mentions))
    return out


def _frame(clause: str, subject: str, context: frozenset[str], mentions: frozenset[str]) -> Frame:
    body = _ASIDE.sub("", clause)
    spans = list(_TOKEN.finditer(body))
    tokens = [m.group(0) for m in spans]
    lead = 0
    while lead < len(tokens) and tokens[lead].lower() in _CONNECTORS:
        lead += 1
    who = _clause_subject(tokens[lead : lead + 2], subject)
    # a date dates the numbers of its own part of the clause ("on 8 May they got a ball -
    # that's 15 balls": the count is not the event's)
    parts = [(m.start(), m.end()) for m in re.finditer(r"[^–—]+?(?=\s[-–—]\s|$)", body)]
    dated_parts = [bool(_DATED.search(body[i:j])) for i, j in parts]
    quantities = []
    words = set()
    depicted = bool(_DEPICTION.search(body))
    for k, token in enumerate(tokens):
        value = _number(token)
        if value is not None and (depicted or _AGO.match(body, spans[k].end())):
            continue  # what a picture shows, or a time ago, is not a count the subject has
        if value is None:
            if _content(token) and stem(token) not in (subject, who):
                words.add(stem(token))
            continue
        # what it counts: the first content word after it that is not a plain adjective
        # ("27 different species"), else the two content words before it ("the species
        # count is 32")
        ahead = [j for j in range(k + 1, min(k + 4, len(tokens))) if _counted(tokens[j])][:1]
        after = [stem(tokens[j]) for j in ahead]
        before = [stem(t) for t in tokens[max(0, k - 4) : k] if _content(t)][-2:]
        if not after:  # "my follower count - I'm close to 1300": the count names its thing
            before += [stem(tokens[j]) for j in range(k - 1) if tokens[j + 1].lower() == "count"]
        where = spans[k].start()
        dated = any(d for (i, j), d in zip(parts, dated_parts, strict=True) if i <= where < j)
        # "3 species of owls": the count of a kind of the counted thing
        of = bool(ahead) and tokens[ahead[0] + 1 : ahead[0] + 2] == ["of"]
        quantities.append(Quantity(value, frozenset(after or before), dated, bool(after), of))
    names = frozenset(
        stem(t) for k, t in enumerate(tokens) if k > lead and t[:1].isupper() and stem(t) != subject
    )
    return Frame(
        text=clause,
        subject=who,
        words=frozenset(words),
        context=context - {subject, who},
        quantities=tuple(quantities),
        names=names,
        dated=bool(_DATED.search(clause)),
        current=bool(_CURRENT.search(clause)),
        mentions=mentions,
    )


def _counted(token: str) -> bool:
    return _content(token) and token.lower() not in _PLAIN


def _content(token: str) -> bool:
    return token.lower() not in _STOP and stem(token) not in _STOP and _number(token) is None


def _clause_subject(head_tokens: list[str], subject: str) -> str:
    """Whom a clause opening with ``head_tokens`` (its first two words) is about."""
    head = [t.lower() for t in head_tokens]
    if len(head) > 1 and head[0] in _POSSESSIVES and head[1] in _RELATIVES:
        return f"{subject}'s {head[1]}"  # "their sister has 3 kids"
    if len(head) > 1 and head[0].endswith("'s") and head[1] in _RELATIVES:
        return f"{stem(head[0])}'s {head[1]}"  # "Ann's sister has 3 kids"
    if head and head[0] in _RELATIVES:
        return f"{subject}'s {head[0]}"
    if head and head_tokens[0][:1].isupper() and head[0] not in _PRONOUNS | _STOP:
        return stem(head_tokens[0])  # another name opens the clause: "Bo has 3 kids"
    return subject


def changed_value(new: Frame, old: Frame) -> str | None:
    """Why ``new`` states the frame of ``old`` with another value, or None when it does not.

    Both must be about the same subject (or ``old`` about no one, in a fact that mentions
    ``new``'s subject: then only a changed count counts); then, in this order:

    - **a count changed**: both count the same thing with different numbers ("4 projects" →
      "the 5th project"), neither clause is dated (an event on a day is not a state), neither
      names a name the other lacks while lacking one of the other's (two projects), and they
      share at least two other content words (the frame: "completed … since starting
      painting classes") or all of them ("Ann has 3 cats" → "Ann has 4 cats"), or both say
      their count holds now and they share one other ("1250 followers on Instagram now" →
      "my follower count - close to 1300 now");
    - **a named value changed**: the same counts, the same content words besides the names
      (at least three, or two when the new clause says the value holds "now"), in the present
      (a past event in another place is another event), and no name in common ("a cooking
      class on Thursdays" → "a cooking class on Fridays");
    - **a value that holds now**: the new clause says so ("now", "currently", "switched to",
      "no longer"), is not additive ("also", "too", "as well"), shares at least two content
      words with the old one and each has at most three the other lacks ("drinks black
      coffee every morning" → "now drinks green tea every morning").
    """
    # an old clause that names no subject ("27 species in a small park is a great
    # achievement", said back to the speaker) may restate the new subject's count, when its
    # fact mentions that subject; only the count rule applies to it
    unnamed = not old.subject and new.subject in old.mentions
    if not new.subject or (new.subject != old.subject and not unnamed):
        return None
    clash = bool(new.names - old.names) and bool(old.names - new.names)
    for q in new.quantities:
        for o in old.quantities:
            thing = q.counted & o.counted
            # two numbers that only follow the same words ("it cost them $12" / "$20") are
            # two prices or times, not one count
            if not thing or q.value == o.value or not (q.follows or o.follows):
                continue
            if clash or q.dated or o.dated or (unnamed and (q.of or o.of)):
                return None
            frame = (new.context & old.context) - thing
            now = new.current and old.current and bool(frame)
            if len(frame) >= 2 or new.words == old.words or now:
                return f"the count of {min(thing)} changed"
            return None
    if unnamed:
        return None
    same_counts = sorted(q.value for q in new.quantities) == sorted(q.value for q in old.quantities)
    if clash and same_counts:
        return _named_value(new, old)
    if new.current and same_counts and not _ADDITIVE.search(new.text):
        gone, came = old.words - new.words, new.words - old.words
        if len(old.words & new.words) >= 3 and 0 < len(gone) <= 3 and 0 < len(came) <= 3:
            return "a value that holds now"
    return None


def _named_value(new: Frame, old: Frame) -> str | None:
    if new.names & old.names or _PAST.search(new.text) or _PAST.search(old.text):
        return None
    rest_new, rest_old = new.words - new.names, old.words - old.names
    if rest_new == rest_old and len(rest_old) >= (2 if new.current else 3):
        return "the same statement with another name"
    return None
