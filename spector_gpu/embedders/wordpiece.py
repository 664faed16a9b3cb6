"""BERT's uncased WordPiece tokenisation in pure Python: text → vocabulary ids.

The pipeline of BERT's ``BasicTokenizer`` + ``WordpieceTokenizer`` (uncased), which the
static embedder's table was distilled through (:mod:`.static`):

1. clean: drop NUL, U+FFFD and every other character of Unicode category C (controls,
   format, private use, unassigned); every whitespace character is a space;
2. surround each CJK ideograph with spaces (each is a token of its own);
3. split on whitespace; lower-case each word, decompose it (NFD) and drop combining marks;
4. split each word at punctuation (Unicode ``P*`` and the ASCII symbols), each mark a token;
5. WordPiece: the longest vocabulary prefix, then the longest ``##``-continuation of the rest,
   and so on; a word with no such split (or over 100 characters) is the unknown token.

:class:`WordPiece` caches the ids of each word it has split (bounded), since words repeat, and
of the last lines it tokenised (short ones, bounded). A newline separates words like any space,
so a text's ids are its lines' ids one after the other, each line looked up on its own: the
static embedder and the token relay both read a query's and a memory's ids, and a conversation
turn's dense text (its speaker, the previous turn, the turn: three lines) repeats two lines
tokenised before, so a turn's words are split once.
``tests/api/test_static_embedder.py`` checks the ids against the ``tokenizers`` package's
``BertWordPieceTokenizer`` over the same vocabulary.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence

__all__ = ["WordPiece"]

_MAX_WORD_CHARS = 100  # BERT's max_input_chars_per_word
_CACHE_MAX = 1 << 16  # words whose split is kept (cleared when full: a few MB at most)
_LINE_CACHE_MAX = 1 << 13  # lines whose ids are kept (cleared when full) ...
_LINE_CACHE_CHARS = 512  # ... of at most this length (bounded by count and length)
# CJK Unified Ideographs and their extensions, compatibility ideographs (BERT's list)
_CJK = (
    "\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\uf900-\ufaff\U0002f800-\U0002fa1f"
)
_CJK_RE = re.compile(f"([{_CJK}])")


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")  # Cc, Cf, Cs, Co, Cn


@functools.cache
def _clean_table() -> dict[int, str | None]:
    """str.translate table of step 1 for the Basic Multilingual Plane (characters above it
    are checked one by one in :func:`_clean`); built at first use, not at import."""
    table: dict[int, str | None] = {0: None, 0xFFFD: None}
    for cp in range(0x10000):
        ch = chr(cp)
        if ch in "\t\n\r" or ch == " " or unicodedata.category(ch) == "Zs":
            table[cp] = " "
        elif _is_control(ch):
            table[cp] = None
    return table


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


# ASCII characters step 1 removes (controls but tab, newline and carriage return); the three
# become spaces, which str.split() treats as it treats a space
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    if text.isascii() and _ASCII_CONTROL.search(text) is None:
        return text  # nothing to drop: the caller splits at whitespace
    text = text.translate(_clean_table())
    if text.isascii() or _ASTRAL.search(text) is None:
        return text
    return "".join(ch for ch in text if not _is_control(ch))


_ASCII_PIECES = re.compile(r"[0-9a-z]+|[^0-9a-z]")  # a lower-cased ASCII word's step 4


def _split_punct(word: str) -> list[str]:
    """Step 4 for one word as step 3 leaves it (cleaned, no whitespace, lower-cased): its
    runs between punctuation marks, and each mark."""
    if word.isalnum():  # letters and digits only (no punctuation is either): the common case
        return [word]
    if word.isascii():  # after step 1 every other ASCII character is punctuation to BERT
        return _ASCII_PIECES.findall(word)
    out: list[str] = []
    start = 0
    for i, ch in enumerate(word):
        if _is_punct(ch):
            if start < i:
                out.append(word[start:i])
            out.append(ch)
            start = i + 1
    if start < len(word):
        out.append(word[start:])
    return out


class WordPiece:
    """Uncased WordPiece over ``vocab`` (token strings in id order, continuations ``##…``).

    Args:
        vocab: the vocabulary; must hold ``unk`` (ids of unknown words are that token's id).
        unk: the unknown token.
    """

    def __init__(self, vocab: Sequence[str], *, unk: str = "[UNK]") -> None:
        self._ids = {tok: i for i, tok in enumerate(vocab)}
        if unk not in self._ids:
            raise ValueError(f"the vocabulary has no unknown token {unk!r}")
        self.unk_id = self._ids[unk]
        self._cache: dict[str, tuple[int, ...]] = {}
        self._lines: dict[str, tuple[int, ...]] = {}

    def ids(self, text: str) -> list[int]:
        """The vocabulary ids of ``text`` (unknown words → ``unk_id``)."""
        if "\n" not in text:
            return list(self._line(text))
        return list(itertools.chain.from_iterable(map(self._line, text.split("\n"))))

    def _line(self, text: str) -> tuple[int, ...]:
        """The ids of one line (no newline in ``text``), from the line cache when there."""
        hit = self._lines.get(text)
        if hit is None:
            hit = tuple(self._split(text))
            if len(text) <= _LINE_CACHE_CHARS:
                if len(self._lines) >= _LINE_CACHE_MAX:
                    self._lines.clear()
                self._lines[text] = hit
        return hit

    def _split(self, text: str) -> list[int]:
        """Steps 1–5 for one text, each word's split read from the word cache."""
        text = _clean(text)
        if not text.isascii() and _CJK_RE.search(text) is not None:
            text = _CJK_RE.sub(r" \1 ", text)
        words = text.split()
        cache = self._cache
        hits = list(map(cache.get, words))  # the common case, a known word, without a loop
        if None in hits:
            for k, word in enumerate(words):
                if hits[k] is None:
                    hit = cache.get(word)
                    if hit is None:
                        hit = self._word(word)
                        if len(cache) >= _CACHE_MAX:
                            cache.clear()
                        cache[word] = hit
                    hits[k] = hit
        return list(itertools.chain.from_iterable(hits))  # type: ignore[arg-type]

    def _word(self, word: str) -> tuple[int, ...]:
        """The ids of one whitespace-separated word (steps 3–5)."""
        low = word.lower()
        if not low.isascii():
            low = "".join(
                c for c in unicodedata.normalize("NFD", low) if unicodedata.category(c) != "Mn"
            )
        out: list[int] = []
        for piece in _split_punct(low):
            out.extend(self._pieces(piece))
        return tuple(out)

    def _pieces(self, token: str) -> list[int]:
        if len(token) > _MAX_WORD_CHARS:
            return [self.unk_id]
        ids = self._ids
        whole = ids.get(token)
        if whole is not None:
            return [whole]
        out: list[int] = []
        start, n = 0, len(token)
        while start < n:
            end = n
            found = None
            while start < end:
                sub = token[start:end] if start == 0 else "##" + token[start:end]
                found = ids.get(sub)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk_id]
            out.append(found)
            start = end
        return out
