"""Loading an evaluation dataset from disk, whatever its format.

:func:`load_dataset` reads any of the three formats into a :class:`~.dataset.Dataset`: the
LoCoMo ``locomo10.json`` format (:mod:`.locomo`), LongMemEval's JSON (:mod:`.longmemeval`) and a
BEIR / ir_measures style directory of JSONL + qrels TSV (:mod:`.generic`);
:func:`detect_format` tells them apart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from ..errors import DatasetError
from .dataset import Dataset, DatasetFormat
from .generic import load_generic
from .locomo import load_locomo
from .longmemeval import load_longmemeval

__all__ = ["detect_format", "load_dataset"]

# Keys only a LongMemEval record has; one of them sits near the start of the first record
# whether its keys are in the release's order (question_id first) or sorted (answer_session_ids).
_LONGMEMEVAL_KEYS = re.compile(rb'"(question_id|answer_session_ids|haystack_session_ids)"\s*:')
_SNIFF_BYTES = 65536


def detect_format(path: str | Path) -> Literal["locomo", "longmemeval", "generic"]:
    """``"longmemeval"`` for a JSON list whose first 64 KiB name a LongMemEval key
    (``question_id``, ``answer_session_ids`` or ``haystack_session_ids``); ``"locomo"`` for any
    other JSON list; ``"generic"`` for a directory with ``corpus.jsonl`` and ``queries.jsonl``.
    Raises ``DatasetError`` otherwise."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"dataset path {str(p)!r} does not exist")
    if p.is_dir():
        if (p / "corpus.jsonl").is_file() and (p / "queries.jsonl").is_file():
            return "generic"
        raise DatasetError(
            f"dataset directory {str(p)!r} lacks corpus.jsonl and queries.jsonl; a generic "
            "dataset needs both plus qrels.tsv or qrels/*.tsv"
        )
    with open(p, "rb") as fh:
        head = fh.read(_SNIFF_BYTES).lstrip()
    if head.startswith(b"["):
        return "longmemeval" if _LONGMEMEVAL_KEYS.search(head) else "locomo"
    raise DatasetError(
        f"cannot tell the format of {str(p)!r}: expected a LoCoMo or LongMemEval .json list or a "
        "generic dataset directory; pass format='locomo', 'longmemeval' or 'generic'"
    )


def load_dataset(path: str | Path, *, format: DatasetFormat = "auto") -> Dataset:
    """Load an evaluation dataset.

    ``format="auto"`` detects it (:func:`detect_format`): a ``.json`` list of LongMemEval
    questions → LongMemEval (every turn, both roles); any other ``.json`` list → LoCoMo; a
    directory with ``corpus.jsonl`` + ``queries.jsonl`` + qrels → generic.
    A missing path raises ``DatasetError`` naming it; malformed data raises ``DatasetError``
    naming the file and the record (e.g. ``sample 3 (conv-41) session_2 turn 5: missing
    'dia_id'``).
    """
    p = Path(path)
    if format not in ("auto", "locomo", "longmemeval", "generic"):
        raise DatasetError(
            f"unknown dataset format {format!r}; use 'auto', 'locomo', 'longmemeval' or 'generic'"
        )
    if not p.exists():
        raise DatasetError(f"dataset path {str(p)!r} does not exist")
    fmt = detect_format(p) if format == "auto" else format
    if fmt == "longmemeval":
        if p.is_dir():
            raise DatasetError(
                f"LongMemEval dataset {str(p)!r} is a directory; pass the .json file"
            )
        return load_longmemeval(p)
    if fmt == "locomo":
        if p.is_dir():
            raise DatasetError(f"LoCoMo dataset {str(p)!r} is a directory; pass the .json file")
        return load_locomo(p)
    if not p.is_dir():
        raise DatasetError(f"generic dataset {str(p)!r} must be a directory")
    return load_generic(p)
