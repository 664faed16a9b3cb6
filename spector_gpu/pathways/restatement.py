"""Restatement: a turn's sentence rewritten as a clean third-person statement of fact.

``restate("Caroline", "Wow, I went to my first support group yesterday!", 1683504000000)`` is
``"Caroline went to their first support group on 7 May 2023."`` — pure rules, no model:

- leading interjections and fillers are dropped ("Hey", "Wow,", "Aww," "Honestly," …);
- a sentence without its subject ("Gonna check out career options") gets the speaker's;
- the first person is resolved to the speaker: ``I`` / ``me`` become the speaker's name the
  first time and "they" / "them" after it, ``my`` the speaker's possessive, ``myself``
  "themselves"; ``we`` / ``us`` / ``our`` become "<speaker> and others" / "them" / "their";
- the verb after a resolved ``I`` agrees with its new subject (``I am`` → ``is``, ``I've`` →
  ``has``, ``I love`` → ``loves``, ``I don't`` → ``doesn't``; past tense and modals stay);
- the second person is resolved to the ``listener`` when one is given ("I'll visit you" →
  "Ann will visit Bo");
- relative time words are resolved against the turn's time (``yesterday`` → ``on 7 May 2023``,
  ``last year`` → ``in 2022``; :mod:`.relative_time`) when that time is known;
- a statement that does not name its speaker is reported as theirs ("According to Ann, the
  flat has a view.");
- the sentence ends with a full stop (an exclamation is a statement once restated).

:func:`restate_question` reports a question the same way: ``restate_question("Bo", "What got
you into running?", listener="Ann")`` is ``"Bo asked: what got Ann into running?"``.

The result never holds a first-person singular word, so a fact is never a verbatim first-person
sentence with an attribution in front of it.
"""

from __future__ import annotations

import re

from ..cortex.analyzer import ENGLISH_STOPWORDS
from .relative_time import resolve_relative_time

__all__ = ["restate", "restate_question", "strip_fillers"]

_LEAD = re.compile(
    r"^(?:(?:hey|hi|hello|wow|whoa|woah|aww+|oh+|ah+|um+|uh+|hmm+|well|so|anyway|yeah|yep|yup|"
    r"yes|no|nope|okay|ok|haha+|hah|lol|omg|gosh|great|cool|nice|sure|thanks|thank you|"
    r"honestly|actually|basically|totally|definitely|absolutely|oh my|man|dude|btw|"
    r"by the way|you know|guess what|funny you should ask|to be honest)\b[\s,!.:;-]*)+"
    # a name addressed after an interjection ("Hey Mel! ", "Wow, Caroline, ")
    r"(?:(?-i:[A-Z][a-z]+)[,!]\s*)?",
    re.IGNORECASE,
)
_VOCATIVE = re.compile(r"^[A-Z][a-z]+!\s+")  # "Mel! I went …": a name called out first
_ADVERBS = [
    "just",
    "also",
    "really",
    "still",
    "always",
    "never",
    "recently",
    "finally",
    "actually",
    "even",
    "only",
    "usually",
    "often",
    "sometimes",
    "already",
    "probably",
    "totally",
    "definitely",
    "absolutely",
    "truly",
    "honestly",
    "ever",
]
# past tenses, modals and adverbs keep their form after a third-person subject
_KEEP = frozenset(
    [
        "am",
        "are",
        "was",
        "were",
        "had",
        "did",
        "could",
        "would",
        "should",
        "might",
        "must",
        "may",
        "can",
        "will",
        "shall",
        "went",
        "got",
        "saw",
        "made",
        "took",
        "came",
        "found",
        "felt",
        "gave",
        "told",
        "thought",
        "knew",
        "left",
        "met",
        "ran",
        "bought",
        "brought",
        "began",
        "built",
        "caught",
        "chose",
        "drew",
        "drove",
        "ate",
        "fell",
        "flew",
        "forgot",
        "grew",
        "heard",
        "held",
        "kept",
        "lost",
        "paid",
        "put",
        "said",
        "sent",
        "set",
        "sat",
        "slept",
        "spent",
        "stood",
        "swam",
        "taught",
        "won",
        "wrote",
        "became",
        "read",
        "let",
        "cut",
        "hit",
        "hurt",
        "quit",
        "don't",
        "didn't",
        "can't",
        "won't",
        "couldn't",
        "wouldn't",
        "shouldn't",
    ]
    + _ADVERBS
)
# present-tense verbs that end in "ed" like a past tense
_BASE_ED = frozenset(
    [
        "need",
        "feed",
        "bleed",
        "breed",
        "speed",
        "seed",
        "succeed",
        "proceed",
        "exceed",
        "shed",
        "wed",
    ]
)
_IRREGULAR = {"be": "is", "have": "has", "do": "does", "go": "goes"}
_AUX = {
    "am": ("is", "are"),
    "'m": ("is", "are"),
    "was": ("was", "were"),
    "'ve": ("has", "have"),
    "have": ("has", "have"),
    "'ll": ("will", "will"),
    "'d": ("would", "would"),
    "do": ("does", "do"),
    "don't": ("doesn't", "don't"),
}
_LABEL = re.compile(r"^(?:[A-Za-z']+ ){0,2}[A-Za-z']+:\s+(?=\S)")
# "I" with what follows it: an auxiliary (contracted or not), or adverbs and a verb (an
# adverb: one of _ADVERBS or a word in -ly, "currently", not a verb in -ply, "apply")
_FIRST = re.compile(
    r"\b(?:I(?P<aux>'m|'ve|'ll|'d|\s+(?:am|was|have|do|don't)\b)"
    r"|I(?P<adv>(?:\s+(?:" + "|".join(_ADVERBS) + r"|[a-z]{2,}[a-oq-z]ly))*)\s+"
    r"(?P<verb>[A-Za-z']+)"
    r"|(?P<word>I|me|my|mine|myself|we're|we've|we'll|we'd|we|us|our|ours|ourselves))\b",
    re.IGNORECASE,
)
_PLURAL = {"we're": "are", "we've": "have", "we'll": "will", "we'd": "would"}
_LATER = {
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
    "we": "they",
    "us": "them",
    "our": "their",
    "ours": "theirs",
    "ourselves": "themselves",
}


def _third_singular(verb: str) -> str:
    """``verb`` inflected for a third-person singular subject (present tense)."""
    low = verb.lower()
    past = low.endswith("ed") and low not in _BASE_ED
    if low in _KEEP or past or not low.isalpha():
        return verb
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if re.search(r"(s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def strip_fillers(sentence: str) -> str:
    """``sentence`` without its leading interjections ("Wow, ", "Hey Mel! ", "So, ")."""
    body = _VOCATIVE.sub("", _LEAD.sub("", sentence.strip()).strip())
    body = _LABEL.sub("", body)  # "Big news: I moved" → "I moved"
    return body or sentence.strip()


def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def _resolve_person(speaker: str, body: str) -> str:
    """The first person of ``body`` resolved to ``speaker`` (named once, then pronouns)."""
    name = speaker or "they"
    named = [False]

    def sub(m: re.Match[str]) -> str:
        first = not named[0]
        subject = name if first else "they"
        if m.group(0) in ("US", "i"):
            return m.group(0)  # the country; a lone lower-case "i" is not the pronoun in prose
        named[0] = True
        if m.group("aux") is not None:
            aux = _AUX[m.group("aux").strip().lower()]
            return f"{subject} {aux[0] if first and speaker else aux[1]}"
        if m.group("verb") is not None:
            verb = m.group("verb")
            if first and speaker:
                verb = _third_singular(verb)
            return f"{subject}{m.group('adv')} {verb}"
        word = m.group("word")
        key = word.lower()
        if key in _PLURAL:
            return (
                f"{name} and others {_PLURAL[key]}" if first and speaker else f"they {_PLURAL[key]}"
            )
        if first and speaker:
            if key in ("i", "me"):
                return name
            if key in ("my", "mine"):
                return _possessive(name)
            if key == "we":
                return f"{name} and others"
        return _LATER[key]

    return _FIRST.sub(sub, body)


_NO_SUBJECT = re.compile(
    r"^(?:(gonna|going to|planning|hoping|trying|thinking|been)|(just|got|went|started|"
    r"finished|bought|took|made|had|found|visited|signed|joined|heading|moved|adopted|"
    r"booked|spent|learned|learnt|tried|volunteered|ran|painted|wrote|read|saw|met|"
    r"celebrated|picked|decided|love|loved|enjoy|enjoyed|need|want|plan))\b",
    re.IGNORECASE,
)
_SUBJECTLESS = {"gonna": "I'm going to", "going to": "I'm going to", "been": "I've been"}


def _with_subject(body: str) -> str:
    """``body`` with "I" in front when it starts with a verb and no subject."""
    m = _NO_SUBJECT.match(body)
    if not m:
        return body
    word = m.group(0).lower()
    lead = _SUBJECTLESS.get(word)
    if lead is not None:
        return lead + body[m.end() :]
    if m.group(1):
        return "I'm " + body[:1].lower() + body[1:]
    return "I " + body[:1].lower() + body[1:]


_YOU = re.compile(
    r"\b(?:you(?:'re|\s+are)|you(?:'ve|\s+have)|you(?:'ll|\s+will)|you(?:'d|\s+would)|"
    r"you\s+were|yourself|yours|your|you)\b",
    re.IGNORECASE,
)
_YOU_AS = {
    "'re": "is",
    "are": "is",
    "'ve": "has",
    "have": "has",
    "'ll": "will",
    "will": "will",
    "'d": "would",
    "would": "would",
    "were": "was",
}


def _resolve_listener(listener: str, body: str) -> str:
    """The second person of ``body`` resolved to ``listener``."""

    def sub(m: re.Match[str]) -> str:
        word = re.sub(r"\s+", " ", m.group(0).lower())
        if word in ("your", "yours"):
            return _possessive(listener)
        if word == "yourself":
            return listener
        if word == "you":
            return listener
        tail = word[3:].strip()
        return f"{listener} {_YOU_AS[tail]}"

    return _YOU.sub(sub, body)


def restate(speaker: str, sentence: str, timestamp_ms: int = 0, listener: str = "") -> str:
    """``sentence`` (said by ``speaker`` to ``listener`` at ``timestamp_ms``, 0 = unknown) as a
    third-person statement ending with a full stop; see the module docstring for the rules."""
    body = _with_subject(strip_fillers(sentence.replace("’", "'")))
    body = _resolve_person(speaker, body)
    if listener:
        body = _resolve_listener(listener, body)
    if timestamp_ms > 0:
        body = resolve_relative_time(body, timestamp_ms)
    body = re.sub(r"\s+", " ", body).strip()
    body = re.sub(r"[\s!.…~]+$", "", body)
    if not body:
        return body
    if speaker and not re.search(rf"\b{re.escape(speaker)}\b", body):
        # a statement that does not name its speaker is theirs to report
        first = body.split(" ", 1)[0]
        if first.lower() in ENGLISH_STOPWORDS and first != "I":
            body = body[:1].lower() + body[1:]
        body = f"According to {speaker}, {body}"
    body = re.sub(r"([.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), body)
    return body[:1].upper() + body[1:] + "."


_INVERTED_I = re.compile(
    r"\b(can|could|do|did|does|should|would|will|may|might|shall|must|am|was|have|had)\s+I\b",
    re.IGNORECASE,
)

_INVERTED_YOU = re.compile(
    r"\b(are|were|have|do|aren't|weren't|haven't|don't)\s+you\b(?!'|\s+(?:are|were|have)\b)",
    re.IGNORECASE,
)
_AS_THIRD = {
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "aren't": "isn't",
    "weren't": "wasn't",
    "haven't": "hasn't",
    "don't": "doesn't",
}


def restate_question(speaker: str, question: str, timestamp_ms: int = 0, listener: str = "") -> str:
    """``question`` (one or more sentences ending with "?", asked by ``speaker`` of
    ``listener``) reported as ``"<speaker> asked: <question>"``, the first and second person
    and relative times resolved as :func:`restate` resolves them; "" when nothing is left."""
    body = strip_fillers(question.replace("’", "'"))
    if speaker:  # "Can I see it?": the verb after an inverted "I" keeps its form
        body = _INVERTED_I.sub(lambda m: f"{m.group(1)} {speaker}", body)
    body = _resolve_person(speaker, body)
    if listener:  # "Are you coming?" → "is Ann coming?"
        body = _INVERTED_YOU.sub(
            lambda m: f"{_AS_THIRD.get(m.group(1).lower(), m.group(1))} {listener}", body
        )
        body = _resolve_listener(listener, body)
    if timestamp_ms > 0:
        body = resolve_relative_time(body, timestamp_ms)
    body = re.sub(r"\s+", " ", body).strip()
    if not body.rstrip("?!. "):
        return ""
    first = body.split(" ", 1)[0].lower()
    if first != "i" and (first in ENGLISH_STOPWORDS or first.split("'")[0] in ENGLISH_STOPWORDS):
        body = body[:1].lower() + body[1:]  # "What's up?" → "asked: what's up?"
    body = re.sub(r"([.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), body)
    return f"{speaker or 'Someone'} asked: {body}"
