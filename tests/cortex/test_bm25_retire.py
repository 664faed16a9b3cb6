"""BM25Index.retire: a retired document leaves N, avgdl and the document frequencies, so the
other documents score exactly as in a fresh build without it (bm25s-style reference)."""

from __future__ import annotations

import numpy as np
import pytest

from spector_gpu.cortex.bm25 import BM25Index

DOCS = [
    ["apple", "pear", "apple"],
    ["pear", "plum"],
    ["kiwi"],
    ["apple", "kiwi", "kiwi", "fig"],
    ["fig", "plum", "pear", "pear"],
]


@pytest.mark.parametrize("method", ["lucene", "okapi"])
@pytest.mark.parametrize("gone", [[0], [3], [1, 4], [0, 2, 3]])
def test_retired_documents_leave_the_statistics(method: str, gone: list[int]) -> None:
    index = BM25Index(method=method)  # type: ignore[arg-type]
    index.add(DOCS[:3])
    index.compact()  # some postings in the main segment, some in the tail
    index.add(DOCS[3:])
    for slot in gone:
        index.retire(slot, DOCS[slot])
    index.retire(gone[0], DOCS[gone[0]])  # idempotent
    keep = [i for i in range(len(DOCS)) if i not in gone]
    ref = BM25Index(method=method)  # type: ignore[arg-type]
    ref.add([DOCS[i] for i in keep])
    allowed = np.zeros(len(DOCS), dtype=bool)
    allowed[keep] = True
    queries = [["apple", "kiwi"], ["pear"], ["fig", "plum", "plum"]]
    got = index.score_dense(queries, allowed=allowed)[:, keep]
    np.testing.assert_allclose(got, ref.score_dense(queries), rtol=1e-6)
    assert index.live == len(keep) and index.avgdl == pytest.approx(ref.avgdl)
    assert index.retired()[gone].all() and not index.retired()[keep].any()
    np.testing.assert_allclose(index.ceiling(queries), ref.ceiling(queries))


def test_ceiling_bounds_every_score() -> None:
    index = BM25Index()
    index.add(DOCS)
    queries = [["apple", "kiwi"], ["pear", "pear"], ["unknown"]]
    scores = index.score_dense(queries)
    ceiling = index.ceiling(queries)
    assert (scores <= ceiling[:, None] + 1e-9).all() and ceiling[2] == 0.0
    assert (scores.max(axis=1)[:2] > 0.3 * ceiling[:2]).all()
