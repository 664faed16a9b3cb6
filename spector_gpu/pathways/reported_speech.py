"""Reported speech: a turn's sentence restated as a fact about its speaker.

``reported("Caroline", "Wow, I went to my first support group yesterday!")`` is
``"Caroline said they went to their first support group yesterday!"``: leading interjections
are dropped ("Hey", "Wow,", "Aww," …), first-person singular words become the neutral third
person (I → they, me → them, my → their, I'm → they're, I was → they were …; "they" agrees
with the verb as "I" does, so no verb needs changing) and the sentence is attributed. The
result is a fact about the speaker that a reader can quote out of its conversation, and never
a verbatim copy of the turn it came from. Plural first person ("we") is kept: the speaker's
group is not known.
"""

from __future__ import annotations

import re

from ..cortex.analyzer import ENGLISH_STOPWORDS

__all__ = ["reported"]

_LEAD = re.compile(
    r"^(?:(?:hey|hi|hello|wow|whoa|aww+|oh+|ah+|um+|well|so|anyway|yeah|yep|yes|no|okay|ok|"
    r"haha+|lol|omg|gosh|great|cool|nice|sure|thanks|thank you)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(?:I\s+am|I'm|I’m|I\s+was|I've|I’ve|I'll|I’ll|I'd|I’d|I|me|my|mine|myself)\b",
    re.IGNORECASE,
)
_THIRD = {
    "i am": "they are",
    "i'm": "they're",
    "i was": "they were",
    "i've": "they've",
    "i'll": "they'll",
    "i'd": "they'd",
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
}


def _third(match: re.Match[str]) -> str:
    word = match.group(0)
    key = re.sub(r"\s+", " ", word.replace("’", "'")).lower()
    if key == "i" and word != "I":  # a lone lower-case "i" is not the pronoun in prose
        return word
    return _THIRD[key]


def reported(speaker: str, sentence: str) -> str:
    """``sentence`` as ``"<speaker> said <sentence in the third person>"``; the sentence alone,
    in the third person, when ``speaker`` is empty."""
    body = _LEAD.sub("", sentence.strip()).strip() or sentence.strip()
    body = _FIRST_PERSON.sub(_third, body)
    if not speaker:
        return body[:1].upper() + body[1:]
    first = body.split(" ", 1)[0]
    if first[:1].isupper() and first.lower() in ENGLISH_STOPWORDS:
        body = body[:1].lower() + body[1:]  # "Her friend" continues the clause; "Eva" stays
    return f"{speaker} said {body}"
