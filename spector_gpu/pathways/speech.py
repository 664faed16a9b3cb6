"""Speech patterns: how the extractive distiller tells a turn's sentences apart — a statement,
a question, a reaction, a word to the listener, a shared image — by their shape alone (English
conversation, no model), and how it compares their words."""

from __future__ import annotations

import re

__all__ = [
    "EVALUATION",
    "FIRST_PERSON",
    "IMAGE",
    "PERSONAL",
    "REACTION",
    "SECOND_PERSON",
    "SENTENCE",
    "SPEAKER_FIRST",
    "WH",
    "WORD",
    "YES_NO",
    "overlap",
    "stem",
]

# a sentence: up to its end mark; a title's or a decimal's point ("Dr. Smith", "4.5 stars")
# does not end it
SENTENCE = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|Mx|Prof|St|Jr|Sr|vs)\.(?= )|\d\.\d|[^.!?\n])+[.!?]*")
WORD = re.compile(r"[A-Za-z0-9']+")
# the listener addressed: a compliment, advice or a question, not a statement about the speaker
SECOND_PERSON = re.compile(
    r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd|ya|u)\b", re.IGNORECASE
)
# reactions and small talk: what a statement about a person or the world never starts with
REACTION = re.compile(
    r"^(?:(?:that|this|it|which|what|how|there)(?:'s|\s+is|\s+was|\s+sounds?|\s+looks?|"
    r"\s+seems?|\s+must|\s+a|\s+an|\s+so|\s+really|\s+totally|\s+must)\b|"
    r"(?:so|such|sounds|looks|seems|glad|sorry|congrats|congratulations|thanks|thank|awesome|"
    r"amazing|great|cool|nice|wonderful|lovely|good|happy|hope|take care|talk|see|bye|same|"
    r"agreed|exactly|true|right|indeed|haha|lol|wishing|cheers|welcome|definitely|absolutely|"
    r"totally|can't wait|keep|let's|let me|enjoy|have fun|good luck|best)\b|"
    # agreement with what the other speaker said: "I totally agree", "Me too", "I know, right"
    r"(?:I|we)\s+(?:\w+\s+)?agree\b|me\s+too\b|I\s+know,?\s+right\b)",
    re.IGNORECASE,
)
SPEAKER_FIRST = re.compile(r"^(?:I|I'm|I've|I'd|I'll|My|We|We're|We've|Our)\b")
IMAGE = re.compile(r"\s*\[image: ([^\]]*)\]\s*$")
# "That charity race sounds great": an evaluation of what the other speaker said
EVALUATION = re.compile(
    r"^(?:that|this|it|those|these|what|how)\b[^.!?]{0,40}\b(?:sounds?|looks?|seems?)\b",
    re.IGNORECASE,
)
# an answer that opens with a yes or a no
YES_NO = re.compile(
    r"^\W*(?:yes|yeah|yep|yup|yea|no|nope|nah|sure|of course|definitely|absolutely|totally)\b",
    re.IGNORECASE,
)
# an open question (not a yes-no one)
WH = re.compile(r"^(?:what|which|who|whom|whose|when|where|why|how)\b", re.IGNORECASE)
# the speaker or their group, anywhere in a sentence
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|we|our|us)\b")
# the same, also at a sentence start ("My", "We", "Our"): a statement its speaker makes
PERSONAL = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|[Mm]e|[Ww]e|[Oo]ur|[Uu]s)\b")


def stem(word: str) -> str:
    """``word`` lower-cased without an inflection's suffix ("painted", "paints" → "paint")."""
    w = word.lower().replace("'", "")
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared content words over the smaller statement's (1.0: one restates the other)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))
