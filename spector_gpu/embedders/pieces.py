"""Long texts in bounded pieces, cut where no text-processing step joins characters across.

A cut is placed *before* an ASCII whitespace character (or NUL). That boundary is safe for
every step the embedder and the analyzer apply: Unicode normalisation (an ASCII character has
canonical combining class 0 and is never the second half of a composition, so
``NFKC(a + b) == NFKC(a) + NFKC(b)`` when ``b`` starts with one), ``str.lower`` (whitespace is
neither cased nor case-ignorable, so the final-sigma rule never looks across it) and word
tokenisation (whitespace belongs to no word). Processing the pieces one after another therefore
gives what processing the whole text would, with memory bounded by the piece size. Only a run
of more than ``limit`` characters without such a character is cut inside the run (a *forced*
cut, which acts as a space would).
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["CUT_CHARS", "split_text"]

#: Characters a piece may start with (all but the first piece, unless the cut was forced).
CUT_CHARS = " \t\n\r\x0b\x0c\x00"


def split_text(text: str, limit: int) -> Iterator[str]:
    """Consecutive pieces of ``text`` (their concatenation is ``text``), each of at most
    ``limit`` (≥ 1) characters, every cut before the last ASCII whitespace or NUL character in
    reach (forced after ``limit`` characters where there is none). A text of at most ``limit``
    characters is one piece."""
    start, size = 0, len(text)
    while size - start > limit:
        end = start + limit
        cut = max(text.rfind(c, start + 1, end + 1) for c in CUT_CHARS)
        if cut <= start:
            cut = end
        yield text[start:cut]
        start = cut
    yield text[start:]
