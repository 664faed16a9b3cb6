"""The BM25 index's persisted form: encoding :meth:`BM25Index.state` and validating it.

Layout (little-endian arrays; V terms, P postings, N documents): ``format`` uint32 (1,) =
BM25_STATE_VERSION · ``params`` float64 (4,) = [k1, b, epsilon, method (0 lucene, 1 okapi)] ·
``analyzer`` uint8 (UTF-8 name) · ``vocab_blob`` uint8 (UTF-8 terms, concatenated) ·
``vocab_offsets`` int64 (V+1) · ``indptr`` int64 (V+1), term-major postings of term t at
``[indptr[t], indptr[t+1])`` · ``doc`` int32 (P), strictly increasing within a term · ``tf``
int32 (P) ≥ 1 · ``doc_len`` int32 (N), = Σ tf of the document's postings.

Reading never trusts a stored length, offset, slot or count (:func:`validated_state`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from spector_gpu.errors import ConfigError, CorruptionError

__all__ = [
    "BM25_STATE_VERSION",
    "check_params",
    "encode_state",
    "same_analyzer",
    "validated_state",
]

#: Version of the :meth:`BM25Index.state` dictionary layout.
BM25_STATE_VERSION = 1
_METHODS: dict[str, int] = {"lucene": 0, "okapi": 1}
_STATE_DTYPES: dict[str, str] = {
    "format": "<u4",
    "params": "<f8",
    "analyzer": "|u1",
    "vocab_blob": "|u1",
    "vocab_offsets": "<i8",
    "indptr": "<i8",
    "doc": "<i4",
    "tf": "<i4",
    "doc_len": "<i4",
}


def check_params(k1: float, b: float, method: str, epsilon: float, err: type[Exception]) -> None:
    """Raise ``err`` naming the first BM25 parameter out of range."""
    if not (isinstance(k1, (int, float)) and math.isfinite(k1) and k1 >= 0):
        raise err(f"BM25 k1={k1!r}: use a finite number >= 0 (default 1.2)")
    if not (isinstance(b, (int, float)) and 0.0 <= b <= 1.0):
        raise err(f"BM25 b={b!r}: use a number in [0, 1] (default 0.75)")
    if method not in _METHODS:
        raise err(f"BM25 method={method!r}: use 'lucene' or 'okapi'")
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon)):
        raise err(f"BM25 epsilon={epsilon!r}: use a finite number (default 0.25)")


def encode_state(
    *,
    k1: float,
    b: float,
    epsilon: float,
    method: Literal["lucene", "okapi"],
    analyzer: str,
    terms: Sequence[str],
    indptr: np.ndarray,
    doc: np.ndarray,
    tf: np.ndarray,
    doc_len: np.ndarray,
) -> dict[str, np.ndarray]:
    """The state dict of a compacted index (read-only arrays; ``doc_len`` is copied)."""
    encoded = [t.encode("utf-8") for t in terms]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    params = [k1, b, epsilon, float(_METHODS[method])]
    out = {
        "format": np.array([BM25_STATE_VERSION], dtype="<u4"),
        "params": np.array(params, dtype="<f8"),
        "analyzer": np.frombuffer(analyzer.encode("utf-8"), dtype=np.uint8),
        "vocab_blob": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        "vocab_offsets": offsets,
        "indptr": indptr.view(),
        "doc": doc.view(),
        "tf": tf.view(),
        "doc_len": doc_len.copy(),
    }
    for arr in out.values():
        arr.flags.writeable = False
    return out


def same_analyzer(stored: str, given: str | None) -> str:
    """The analyzer a restored index keeps: the stored name, or ``given`` when the state was
    written without one; a different ``given`` name raises :class:`ConfigError`."""
    if given is None or not stored:
        return given if given is not None else stored
    if given != stored:
        raise ConfigError(
            f"BM25 index was built with analyzer {stored!r} but {given!r} was "
            "given: reopen with the same analyzer settings or rebuild the lexical index"
        )
    return stored


def _corrupt(what: str) -> CorruptionError:
    return CorruptionError(f"BM25 state: {what}; rebuild the lexical index", region="BM25")


def validated_state(
    state: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], tuple[float, float, float, float], list[str], str]:
    """Check every array of a :meth:`BM25Index.state` dict; never trusts a length or offset.

    Returns copies of the arrays, ``(k1, b, epsilon, method code)``, the terms and the
    analyzer name. Raises :class:`CorruptionError` naming the first problem.
    """
    arrays: dict[str, np.ndarray] = {}
    for key, dtype in _STATE_DTYPES.items():
        arr = state.get(key) if isinstance(state, Mapping) else None
        if not isinstance(arr, np.ndarray):
            raise _corrupt(f"array {key!r} is missing or not a numpy array")
        if arr.dtype != np.dtype(dtype) or arr.ndim != 1:
            raise _corrupt(f"array {key!r} is {arr.dtype}{arr.shape}, expected 1-D {dtype}")
        arrays[key] = np.array(arr, dtype=dtype, copy=True)
    if arrays["format"].shape != (1,) or int(arrays["format"][0]) != BM25_STATE_VERSION:
        raise _corrupt(f"format {arrays['format'].tolist()} is not [{BM25_STATE_VERSION}]")
    if arrays["params"].shape != (4,):
        raise _corrupt("params must hold 4 values [k1, b, epsilon, method]")
    k1, b, eps, code = (float(x) for x in arrays["params"])
    if code not in (0.0, 1.0):
        raise _corrupt(f"method code {code} is not 0 (lucene) or 1 (okapi)")
    try:
        check_params(k1, b, "lucene", eps, CorruptionError)
    except CorruptionError as exc:
        raise _corrupt(str(exc)) from None
    offsets, blob = arrays["vocab_offsets"], arrays["vocab_blob"]
    indptr, doc, tf, doc_len = arrays["indptr"], arrays["doc"], arrays["tf"], arrays["doc_len"]
    n_terms, n_docs = len(offsets) - 1, len(doc_len)
    if n_terms < 0 or offsets[0] != 0 or offsets[-1] != len(blob) or np.any(np.diff(offsets) < 0):
        raise _corrupt("vocab_offsets must start at 0, not decrease, and end at len(vocab_blob)")
    if len(indptr) != n_terms + 1:
        raise _corrupt(f"indptr has {len(indptr)} entries for {n_terms} terms (need V+1)")
    counts = np.diff(indptr)
    if indptr[0] != 0 or indptr[-1] != len(doc) or np.any(counts < 1):
        raise _corrupt("indptr must start at 0, rise by >= 1 per term, and end at len(doc)")
    if len(tf) != len(doc):
        raise _corrupt(f"tf has {len(tf)} entries, doc has {len(doc)}")
    if len(doc) and (doc.min() < 0 or doc.max() >= n_docs or tf.min() < 1):
        raise _corrupt(f"a posting's slot is outside [0, {n_docs}) or its tf is < 1")
    if len(doc) > 1:
        rising = doc[1:] > doc[:-1]
        rising[indptr[1:-1] - 1] = True  # a new term may restart from a lower slot
        if not rising.all():
            raise _corrupt("slots within a term's postings are not strictly increasing")
    if n_docs and (
        doc_len.min() < 0 or np.any(np.bincount(doc, weights=tf, minlength=n_docs) != doc_len)
    ):
        raise _corrupt("doc_len differs from the sum of the document's term frequencies")
    raw = blob.tobytes()
    try:
        terms = [raw[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_terms)]
        analyzer = arrays["analyzer"].tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _corrupt(f"a term or the analyzer name is not valid UTF-8 ({exc})") from None
    if len(set(terms)) != n_terms:
        raise _corrupt("the vocabulary holds a duplicate term")
    return arrays, (k1, b, eps, code), terms, analyzer
