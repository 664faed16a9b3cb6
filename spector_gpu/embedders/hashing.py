"""The default embedder: signed feature hashing of word and character n-grams (no weights).

Deterministic across processes and machines; needs no model files and no network.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np

from spector_gpu.errors import ValidationError

from .pieces import split_text
from .rows import check_texts, normalise_rows

__all__ = ["HashingEmbedder"]

_P = 0x01000193  # FNV-1 32-bit prime (odd, so invertible mod 2**32)
_Q = pow(_P, -1, 1 << 32)
_GOLD = 0x9E3779B9
_BYTE_MAP = np.arange(256, dtype=np.uint8)
_BYTE_MAP[ord("A") : ord("Z") + 1] += 32  # ASCII lower-case
_WORD = np.ones(256, dtype=bool)  # bytes >= 0x80 (non-ASCII UTF-8) count as word bytes
_WORD[:128] = [chr(c).isalnum() for c in range(128)]
_BYTE_MAP[:128][~_WORD[:128]] = 0x20  # every ASCII non-word byte reads as one space
#: A word, as the byte tables define it: ASCII letters and digits, and every non-ASCII character.
_WORD_RE = re.compile(r"[0-9A-Za-z\x80-\U0010ffff]+")


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, in place on a uint32 array."""
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


class HashingEmbedder:
    """Signed feature hashing of word and character n-grams, L2-normalised (no weights).

    Text is NFKC-normalised and lower-cased (ASCII text skips the no-op normalisation). Words are
    maximal runs of ASCII letters/digits and non-ASCII characters. Features:

    * word n-grams for n in ``word_ngrams`` (inclusive range; ``None`` disables);
    * character n-grams for n in ``char_ngrams`` over the UTF-8 bytes of each word padded with
      one space on each side (``" ann "`` → ``" an"``, ``"ann"``, ``"nn "``), like scikit-learn's
      ``char_wb``.

    Each feature's bytes are hashed with a 32-bit polynomial hash (FNV prime, computed for all
    substrings at once from prefix sums) salted by kind and length and finished with MurmurHash3's
    finaliser; the hash picks a bucket in ``[0, dim)`` and a sign. Word and character blocks are
    L2-normalised separately, weighted, summed and normalised again. Everything is integer
    arithmetic on numpy arrays: identical on every machine and process (no Python ``hash()``).

    Memory is bounded by ``chunk_bytes``, whatever the input: texts are hashed in chunks of at
    most ``chunk_texts`` texts and about ``chunk_bytes`` bytes of UTF-8, and a text of more than
    ``chunk_bytes // 32`` characters is hashed in pieces cut before ASCII whitespace
    (:mod:`.pieces`), each piece preceded by the last ``max_n - 1`` words before it so that the
    word n-grams across a cut are counted once. The counts, and so the vector, are those of the
    whole text; only a run of more than ``chunk_bytes // 32`` characters without whitespace is
    cut inside, as a space would cut it.

    Args:
        dim: output dimension (> 0).
        word_ngrams: ``(min_n, max_n)`` for word n-grams, or ``None``.
        char_ngrams: ``(min_n, max_n)`` for character (UTF-8 byte) n-grams, or ``None``.
        word_weight, char_weight: weights of the two blocks (≥ 0).
        chunk_texts: texts hashed per vectorised chunk (≥ 1).
        chunk_bytes: bytes of UTF-8 hashed per chunk (≥ 32); temporary memory is about
            70 × ``chunk_bytes`` plus 50 × ``dim`` bytes per text of a chunk.
    """

    def __init__(
        self,
        dim: int = 384,
        *,
        word_ngrams: tuple[int, int] | None = (1, 2),
        char_ngrams: tuple[int, int] | None = (3, 5),
        word_weight: float = 1.0,
        char_weight: float = 1.0,
        chunk_texts: int = 1024,
        chunk_bytes: int = 1 << 18,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError(f"dim must be a positive int, got {dim!r}")
        self.word_ngrams = _check_range(word_ngrams, "word_ngrams")
        self.char_ngrams = _check_range(char_ngrams, "char_ngrams")
        if self.word_ngrams is None and self.char_ngrams is None:
            raise ValidationError("word_ngrams and char_ngrams cannot both be None")
        for label, w in (("word_weight", word_weight), ("char_weight", char_weight)):
            if not np.isfinite(w) or w < 0:
                raise ValidationError(f"{label} must be finite and ≥ 0, got {w!r}")
        for label, value, least in (
            ("chunk_texts", chunk_texts, 1),
            ("chunk_bytes", chunk_bytes, 32),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValidationError(f"{label} must be an int ≥ {least}, got {value!r}")
        self.dim = dim
        self.word_weight = float(word_weight)
        self.char_weight = float(char_weight)
        self.chunk_texts = chunk_texts
        self.chunk_bytes = chunk_bytes
        wtag = "".join(map(str, self.word_ngrams)) if self.word_ngrams else "0"
        ctag = "".join(map(str, self.char_ngrams)) if self.char_ngrams else "0"
        self.name = f"hashing-v1-d{dim}-w{wtag}-c{ctag}"
        self.fusion_weight = 0.3
        if (self.word_weight, self.char_weight) != (1.0, 1.0):
            self.name += f"-ww{self.word_weight:g}-cw{self.char_weight:g}"
        # one tuple, replaced whole: threads embedding at once never see a mismatched pair
        self._pows = (np.ones(1, dtype=np.uint32), np.ones(1, dtype=np.uint32))

    def __repr__(self) -> str:
        return f"HashingEmbedder({self.name!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: float32 (n, dim), rows L2-normalised; all-zero for featureless text."""
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        carry: tuple[int, np.ndarray, np.ndarray] | None = None  # a text the next chunk goes on
        for rows, data, skips, goes_on in self._chunks(items):
            texts_in, slot = np.unique(np.asarray(rows, dtype=np.intp), return_inverse=True)
            words, chars = self._count_chunk(data, skips, slot, len(texts_in))
            if carry is not None:
                words[0] += carry[1]
                chars[0] += carry[2]
                carry = None
            if goes_on:
                carry = (int(texts_in[-1]), words[-1].copy(), chars[-1].copy())
                texts_in, words, chars = texts_in[:-1], words[:-1], chars[:-1]
            out[texts_in] = self._combine(words, chars)
        return out

    # -- internals ---------------------------------------------------------------
    def _chunks(self, items: list[str]) -> Iterator[tuple[list[int], list[bytes], list[int], bool]]:
        """``(text of each piece, UTF-8 of each piece, context bytes of each piece, whether the
        last text goes on in the next chunk)``, chunk by chunk."""
        rows: list[int] = []
        data: list[bytes] = []
        skips: list[int] = []
        size = count = 0
        for t, text in enumerate(items):
            for piece, skip in self._pieces(text):
                new_text = not rows or rows[-1] != t
                full = size + len(piece) > self.chunk_bytes or (
                    new_text and count == self.chunk_texts
                )
                if rows and full:
                    yield rows, data, skips, not new_text
                    rows, data, skips, size, count, new_text = [], [], [], 0, 0, True
                rows.append(t)
                data.append(piece)
                skips.append(skip)
                size += len(piece) + 1
                count += new_text
        if rows:
            yield rows, data, skips, False

    def _pieces(self, text: str) -> Iterator[tuple[bytes, int]]:
        """The prepared UTF-8 pieces of one text, each with the byte length of the context
        words put before it (their features were counted with the piece before)."""
        limit = self.chunk_bytes // 32
        if len(text) <= limit:
            yield _prep(text).encode("utf-8", "surrogatepass"), 0
            return
        keep = self.word_ngrams[1] - 1 if self.word_ngrams is not None else 0
        context: list[str] = []
        for raw in split_text(text, limit):
            piece = _prep(raw)
            head = "".join(w + " " for w in context).encode("utf-8", "surrogatepass")
            yield head + piece.encode("utf-8", "surrogatepass"), len(head)
            if keep:
                context = (context + _WORD_RE.findall(piece))[-keep:]

    def _powers(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        ppow, qpow = self._pows
        if ppow.size < length:
            size = max(length, 2 * ppow.size)
            ppow = np.cumprod(np.full(size, _P, dtype=np.uint32), dtype=np.uint32) * np.uint32(_Q)
            qpow = np.cumprod(np.full(size, _Q, dtype=np.uint32), dtype=np.uint32) * np.uint32(_P)
            self._pows = (ppow, qpow)
        return ppow[:length], qpow[:length]

    def _count_chunk(
        self, data: list[bytes], skips: list[int], slot: np.ndarray, m: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Signed word and character bucket counts of the ``m`` texts of one chunk: int64
        (m, dim) each; ``slot[j]`` is the row of piece ``j``'s text."""
        raw = np.frombuffer(b"\x00" + b"\x00".join(data) + b"\x00", np.uint8)
        doc = np.cumsum(raw == 0, dtype=np.int32) - 1  # piece index of every byte
        word = _WORD[raw]
        ppow, qpow = self._powers(raw.size)
        prefix = np.zeros(raw.size + 1, dtype=np.uint32)
        np.cumsum(_BYTE_MAP[raw].astype(np.uint32) * qpow, dtype=np.uint32, out=prefix[1:])
        first = None  # per piece: the first byte whose features it counts (after its context)
        if any(skips):
            first = np.flatnonzero(raw == 0)[:-1] + 1 + np.asarray(skips, dtype=np.intp)
        words = np.zeros((m, self.dim), dtype=np.int64)
        chars = np.zeros((m, self.dim), dtype=np.int64)
        if self.word_ngrams is not None and self.word_weight > 0:
            for h, d in self._word_keys(word, doc, prefix, ppow, first):
                words += self._count(h, slot[d], m)
        if self.char_ngrams is not None and self.char_weight > 0:
            for h, d in self._char_keys(word, doc, prefix, ppow, first):
                chars += self._count(h, slot[d], m)
        return words, chars

    def _word_keys(
        self,
        word: np.ndarray,
        doc: np.ndarray,
        prefix: np.ndarray,
        ppow: np.ndarray,
        first: np.ndarray | None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(hashes, piece of each)`` of the word n-grams, one size after another; a gram
        counts where its last word starts at or after its piece's ``first`` byte."""
        lo, hi = self.word_ngrams or (0, 0)
        edges = np.diff(word.astype(np.int8))
        starts = np.flatnonzero(edges == 1) + 1
        ends = np.flatnonzero(edges == -1) + 1
        uni = (prefix[ends] - prefix[starts]) * ppow[ends - 1]
        uni = _fmix32(uni ^ (np.uint32(_GOLD) * (ends - starts).astype(np.uint32)))
        wdoc = doc[starts]
        gram = uni
        for size in range(1, hi + 1):
            if size > 1:  # n-gram at i = mix(its (n-1)-gram at i, word i+n-1)
                gram = gram[:-1] * np.uint32(_P) + uni[size - 1 :]
                gram = _fmix32(gram ^ np.uint32((size * _GOLD) & 0xFFFFFFFF))
            if size >= lo and gram.size:
                keep = wdoc[: gram.size] == wdoc[size - 1 :]
                if first is not None:
                    keep &= starts[size - 1 :] >= first[wdoc[size - 1 :]]
                yield gram[keep], wdoc[: gram.size][keep]

    def _char_keys(
        self,
        word: np.ndarray,
        doc: np.ndarray,
        prefix: np.ndarray,
        ppow: np.ndarray,
        first: np.ndarray | None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(hashes, piece of each)`` of the character n-grams, one length after another; a
        gram counts where its first word byte is at or after its piece's ``first`` byte."""
        lo, hi = self.char_ngrams or (0, 0)
        size = word.size
        nonword = np.zeros(size + 1, dtype=np.int32)
        np.cumsum(~word, dtype=np.int32, out=nonword[1:])
        for length in range(lo, min(hi, size) + 1):
            count = size - length + 1
            # interior bytes p+1 .. p+length-2 must all be word bytes (char_wb windows)
            ok = (
                nonword[length - 1 : length - 1 + count] == nonword[1 : 1 + count]
                if length >= 2
                else word.copy()
            )
            if length <= 2:
                ok &= (
                    nonword[length : length + count] - nonword[:count]
                ) < length  # >= 1 word byte
                pos = np.flatnonzero(ok)
                dpos = pos if length == 1 else np.where(word[pos], pos, pos + 1)
            else:
                pos = np.flatnonzero(ok)
                dpos = pos + 1
            del ok
            if first is not None:
                counted = dpos >= first[doc[dpos]]
                pos, dpos = pos[counted], dpos[counted]
            h = (prefix[pos + length] - prefix[pos]) * ppow[pos + length - 1]
            yield _fmix32(h ^ np.uint32((length * _GOLD) & 0xFFFFFFFF)), doc[dpos]

    def _count(self, h: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
        """Signed bucket counts of hashes ``h`` (uint32, consumed) in rows ``rows``: int64
        (m, dim)."""
        width = 2 * self.dim
        # top bits of h pick one of 2*dim cells: bucket = cell // 2, sign = cell % 2
        if width <= 1 << 16:  # 16 hash bits suffice and the arithmetic stays in uint32
            h >>= np.uint32(16)
            h *= np.uint32(width)
            h >>= np.uint32(16)
            cell = h.astype(np.intp)
        else:
            cell = ((h.astype(np.uint64) * np.uint64(width)) >> np.uint64(32)).astype(np.intp)
        cell += rows.astype(np.intp) * width
        counts = np.bincount(cell, minlength=m * width).reshape(m, self.dim, 2)
        return counts[:, :, 0] - counts[:, :, 1]

    def _combine(self, words: np.ndarray, chars: np.ndarray) -> np.ndarray:
        """Rows from bucket counts: each block L2-normalised, weighted, summed, normalised."""
        block = np.zeros(words.shape, dtype=np.float32)
        if self.word_ngrams is not None and self.word_weight > 0:
            block += self.word_weight * normalise_rows(words.astype(np.float32))
        if self.char_ngrams is not None and self.char_weight > 0:
            block += self.char_weight * normalise_rows(chars.astype(np.float32))
        return normalise_rows(block)


def _check_range(value: tuple[int, int] | None, label: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{label} must be (min_n, max_n) or None, got {value!r}") from exc
    if not 1 <= lo <= hi <= 9:
        raise ValidationError(f"{label} must satisfy 1 <= min_n <= max_n <= 9, got {value!r}")
    return (lo, hi)


def _prep(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if text.isascii():
        return text  # NFKC is the identity on ASCII; the byte map lower-cases it
    return unicodedata.normalize("NFKC", text).lower()
