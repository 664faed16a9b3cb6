"""Token rows: each memory's distinct WordPiece tokens, for the ``token`` relay.

The ``token`` relay (:mod:`spector_gpu.pathways.recall.token_relay`) re-scores a recall's
fused top list by late interaction over the static embedder's token vectors: every query
token meets its most similar token of the memory (MaxSim, as ColBERT scores, here over static
vectors). It needs each memory's tokens at recall time, without reading its payload: this
index keeps them, one row of distinct token ids per memory ordinal (CSR: ``offsets`` int64
(n + 1), ``ids`` int32), appended with the other derived indexes and saved in their snapshot.

What is tokenised is the memory's own words — its speaker (who "I" is in a turn), its text,
and a skill's name and steps — never its tags or a conversation turn's context: the signal is
what the memory says. The
vocabulary and vectors are the packaged static table (``spector_gpu/data/static_minilm.npz``)
whatever embedder the store uses; tokens whose vector is zero (the analyzer's stop words,
punctuation) and the unknown token are left out, so a row holds only tokens that carry
meaning.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..embedders.static import static_codes, static_table_path, static_tables
from ..errors import CorruptionError
from .growable import Growable
from .payload import Payload, attributed

__all__ = ["TokenRows", "TokenVocab", "token_vocab"]


@dataclass(frozen=True)
class TokenVocab:
    """The static table as the token relay reads it: ``codes`` int8 (V, dim) the packaged
    token rows, ``norm`` float64 (V,) each row's length (0 for zero rows and the unknown token),
    ``weight`` float64 (V,) each token's vector norm after its scale (its SIF weight: frequent
    tokens weigh little), and the tokeniser. Two tokens' cosine is :meth:`cosines`: their
    integer dot product (exact) over the product of their lengths — the same bits in numpy and
    in the compiled kernel, and a quarter of the float32 rows' memory traffic."""

    codes: np.ndarray
    norm: np.ndarray
    weight: np.ndarray
    tokenizer: object  # embedders.wordpiece.WordPiece

    def ids(self, text: str) -> np.ndarray:
        """The distinct meaningful token ids of ``text``, int32 ascending."""
        # set arithmetic over a few dozen ids: a tenth of np.unique and a mask at this size
        ids = set(self.tokenizer.ids(text)).intersection(self.meaningful)  # type: ignore[attr-defined]
        return np.array(sorted(ids), dtype=np.int32)

    def rows(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`ids` of many texts at once: ``lengths`` int64 (len(texts),) and the rows'
        ids int32, concatenated in text order (the same rows, in one sort for the batch
        instead of a set, a sort and an array per text)."""
        lists = [self.tokenizer.ids(t) for t in texts]  # type: ignore[attr-defined]
        n, vocab = len(lists), len(self.weight)
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=n)
        flat = np.fromiter(itertools.chain.from_iterable(lists), np.int64, int(lengths.sum()))
        keep = self.meaningful_mask[flat]
        keys = np.repeat(np.arange(n, dtype=np.int64) * vocab, lengths)[keep] + flat[keep]
        keys.sort()  # by text, then by id (np.unique costs ten times a sort here)
        first = np.ones(len(keys), dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        which, ids = np.divmod(keys[first], vocab)
        return np.bincount(which, minlength=n).astype(np.int64), ids.astype(np.int32)

    @functools.cached_property
    def meaningful(self) -> frozenset[int]:
        """The ids of the tokens with a length above 0."""
        return frozenset(np.flatnonzero(self.weight > 0).tolist())

    @functools.cached_property
    def meaningful_mask(self) -> np.ndarray:
        """bool (V,): :attr:`meaningful` as a lookup table."""
        mask = self.weight > 0
        mask.setflags(write=False)
        return mask

    def cosines(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """float64 (len(a), len(b)): the cosine of every pair of meaningful tokens."""
        # float64 products and sums of int8 codes are exact integers (below 2**53), so BLAS
        # gives the integer dot product whatever its order
        dots = self.codes[a].astype(np.float64) @ self.codes[b].astype(np.float64).T
        out: np.ndarray = dots / (self.norm[a][:, None] * self.norm[b][None, :])
        return out


@functools.lru_cache(maxsize=1)
def token_vocab() -> TokenVocab:
    """The packaged table, loaded once per process (its tokeniser shared with the static
    embedder)."""
    table, tokenizer = static_tables(static_table_path())
    codes = static_codes(static_table_path())
    weight = np.linalg.norm(table.astype(np.float64), axis=1)
    weight[tokenizer.unk_id] = 0.0
    wide = codes.astype(np.int64)
    norm = np.sqrt(np.einsum("ij,ij->i", wide, wide).astype(np.float64))
    norm[weight == 0] = 0.0
    for array in (codes, norm, weight):
        array.setflags(write=False)
    return TokenVocab(codes, norm, weight, tokenizer)


def memory_words(p: Payload) -> str:
    """What a memory's token row is made of: its speaker, its text, and a skill's name and
    steps. The first line is the text as a conversation turn's dense text ends
    (``"<speaker>: <text>"``) and as any other memory is embedded (its text), so the
    tokeniser's line cache has usually split it already; the colon is punctuation, which
    no row holds."""
    lines = [attributed(p.speaker, p.text)]
    if p.skill_name:
        lines.append(p.skill_name)
    lines.extend(p.steps)
    return "\n".join(lines)


def payload_rows(payloads: Sequence[Payload]) -> tuple[np.ndarray, np.ndarray]:
    """The token rows of ``payloads``: ``(lengths, ids)`` (:meth:`TokenVocab.rows`)."""
    return token_vocab().rows([memory_words(p) for p in payloads])


class TokenRows:
    """Distinct token ids per memory ordinal (see the module docstring)."""

    def __init__(self) -> None:
        self._ids = Growable(np.int32)
        self._offsets = Growable(np.int64)
        self._offsets.extend(np.zeros(1, dtype=np.int64))

    @property
    def n(self) -> int:
        return len(self._offsets) - 1

    def append(
        self, payloads: Sequence[Payload], rows: tuple[np.ndarray, np.ndarray] | None = None
    ) -> None:
        """Add the rows of the next memories (in ordinal order): ``rows`` when given (made
        by :func:`payload_rows` beside their embedding), else made from the payloads."""
        if not payloads:
            return
        lengths, ids = payload_rows(payloads) if rows is None else rows
        end = int(self._offsets.view()[-1])
        self._offsets.extend(end + np.cumsum(lengths))
        if len(ids):
            self._ids.extend(ids)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, ids)`` views (read-only use: they change with the next append)."""
        return self._offsets.view(), self._ids.view()

    def state(self) -> dict[str, np.ndarray]:
        return {"offsets": self._offsets.view().copy(), "ids": self._ids.view().copy()}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], n: int, where: str) -> TokenRows:
        """Rows saved by :meth:`state` for ``n`` memories; ``CorruptionError`` unless they are
        well formed (offsets from 0, non-decreasing, ending at the ids; ids meaningful tokens
        of the table, as :meth:`TokenVocab.ids` gives them: the kernel divides by their
        length)."""
        offsets = np.asarray(arrays["offsets"])
        ids = np.asarray(arrays["ids"])
        weight = token_vocab().weight
        vocab = len(weight)
        ok = (
            offsets.dtype == np.int64
            and ids.dtype == np.int32
            and offsets.shape == (n + 1,)
            and offsets[0] == 0
            and offsets[-1] == len(ids)
            and bool((np.diff(offsets) >= 0).all())
            and (len(ids) == 0 or (int(ids.min()) >= 0 and int(ids.max()) < vocab))
            and bool((weight[ids] > 0).all())
        )
        if not ok:
            raise CorruptionError(f"{where}: token rows are damaged", file=where)
        rows = cls()
        rows._offsets = Growable(np.int64)
        rows._offsets.extend(offsets)
        rows._ids.extend(ids)
        return rows
