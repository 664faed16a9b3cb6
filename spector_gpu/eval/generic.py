"""A generic BEIR / ir_measures style dataset directory.

Layout::

    corpus.jsonl    {"_id": "d1", "text": "...", "title": "...",            # title optional
                     "conv_id": "c1", "session": 2, "speaker": "Ann",      # metadata optional
                     "timestamp_ms": 1683554160000, "caption": "..."}
    queries.jsonl   {"_id": "q1", "text": "...", "conv_id": "c1", "category": 4,
                     "answer": "..."}                                      # last three optional
    qrels.tsv       query-id <TAB> corpus-id <TAB> score     (one header line), or
    qrels/*.tsv     the same, one file per split (all are read), or TREC 4-column
                    "qid 0 docid rel" (whitespace separated, no header)

Documents with relevance > 0 are a query's evidence. A title is prefixed to the text
(``"<title> <text>"``, as BEIR retrievers index it). Documents without ``conv_id`` form one
conversation ``"corpus"``. Document ids are scoped by conversation (LoCoMo's ``D1:1`` recurs in
every conversation); qrels name a document id, resolved in the query's conversation. A query
without ``conv_id`` goes to the one conversation holding all its evidence, else to
``"corpus"``. Without ``category`` a query is uncategorised (0).
:func:`save_generic` writes this layout (``qrels.tsv`` with a header) so datasets round-trip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import DatasetError, ValidationError
from ..paths import output_path
from .dataset import Dataset
from .files import write_atomic
from .records import UNCATEGORISED, Conversation, Question, Turn

__all__ = ["DEFAULT_CONVERSATION", "load_generic", "read_qrels", "save_generic"]

DEFAULT_CONVERSATION = "corpus"


def load_generic(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load a generic dataset directory (see the module docstring for the layout)."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"generic dataset directory {str(root)!r} does not exist")
    turns_by_conv = _read_corpus(root / "corpus.jsonl")
    qrels = read_qrels(root)
    doc_conv: dict[str, set[str]] = {}
    for conv_id, turns in turns_by_conv.items():
        for t in turns:
            doc_conv.setdefault(t.dia_id, set()).add(conv_id)
    questions = [
        _to_question(rec, where, qrels, doc_conv) for rec, where in _jsonl(root / "queries.jsonl")
    ]
    conversations = tuple(
        Conversation(conv_id, tuple(turns), _speakers(turns))
        for conv_id, turns in turns_by_conv.items()
    )
    dataset = Dataset(name or root.name, conversations, tuple(questions))
    unknown = set(qrels) - {q.qid for q in questions}
    if unknown:
        raise DatasetError(
            f"{root}: qrels name queries absent from queries.jsonl: {sorted(unknown)[:5]}"
        )
    dataset.validate()
    return dataset


def _speakers(turns: list[Turn]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.speaker for t in turns if t.speaker))


def _jsonl(path: Path) -> Iterator[tuple[dict[str, Any], str]]:
    if not path.is_file():
        raise DatasetError(f"dataset file {str(path)!r} does not exist")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path} line {lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: invalid JSON: {exc.msg}") from None
            except RecursionError:
                raise DatasetError(f"{where}: JSON nested too deeply") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield record, where


def _get(record: Mapping[str, Any], key: str, kind: Any, where: str, default: Any = ...) -> Any:
    if key not in record or record[key] is None:
        if default is ...:
            raise DatasetError(f"{where}: missing {key!r}")
        return default
    value = record[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise DatasetError(f"{where}: {key!r} must be an integer, got {value!r}")
    if kind is str and not isinstance(value, (str, int)):
        raise DatasetError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    return str(value) if kind is str else value


def _read_corpus(path: Path) -> dict[str, list[Turn]]:
    out: dict[str, list[Turn]] = {}
    for rec, where in _jsonl(path):
        title = _get(rec, "title", str, where, "")
        text = _get(rec, "text", str, where)
        turn = Turn(
            dia_id=_get(rec, "_id", str, where),
            speaker=_get(rec, "speaker", str, where, ""),
            text=f"{title} {text}" if title else text,
            session=_get(rec, "session", int, where, 0),
            timestamp_ms=_get(rec, "timestamp_ms", int, where, 0),
            caption=_get(rec, "caption", str, where, None),
        )
        out.setdefault(_get(rec, "conv_id", str, where, DEFAULT_CONVERSATION), []).append(turn)
    return out


def _to_question(
    rec: Mapping[str, Any],
    where: str,
    qrels: Mapping[str, Mapping[str, float]],
    doc_conv: Mapping[str, set[str]],
) -> Question:
    qid = _get(rec, "_id", str, where)
    evidence = tuple(d for d, rel in qrels.get(qid, {}).items() if rel > 0)
    conv_id = _get(rec, "conv_id", str, where, None)
    if conv_id is None:
        homes = [doc_conv.get(d, set()) for d in evidence]
        owners = set.intersection(*homes) if homes else set()
        conv_id = owners.pop() if len(owners) == 1 else DEFAULT_CONVERSATION
    if not any(conv_id in convs for convs in doc_conv.values()):
        raise DatasetError(
            f"{where}: query {qid!r} belongs to conversation {conv_id!r}, which has no documents; "
            "give the query a 'conv_id' present in corpus.jsonl"
        )
    return Question(
        qid=qid,
        conv_id=conv_id,
        text=_get(rec, "text", str, where),
        evidence=evidence,
        category=_get(rec, "category", int, where, UNCATEGORISED),
        answer=_get(rec, "answer", str, where, None),
    )


def read_qrels(root: str | Path) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: relevance}}`` from ``root/qrels.tsv`` and/or ``root/qrels/*.tsv``.

    Each file is either ``query-id, corpus-id, score`` tab separated with a header line, or
    TREC ``qid iter docid rel`` (whitespace separated). Later files override earlier ones.
    """
    base = Path(root)
    files = ([base / "qrels.tsv"] if (base / "qrels.tsv").is_file() else []) + sorted(
        (base / "qrels").glob("*.tsv") if (base / "qrels").is_dir() else []
    )
    if not files:
        raise DatasetError(f"{base}: no qrels found; add qrels.tsv or qrels/<split>.tsv")
    qrels: dict[str, dict[str, float]] = {}
    for f in files:
        for qid, doc, rel in _qrels_rows(f):
            qrels.setdefault(qid, {})[doc] = rel
    return qrels


def _qrels_rows(path: Path) -> Iterator[tuple[str, str, float]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t") if "\t" in line else line.split()
            parts = [p.strip() for p in parts]
            if lineno == 1 and len(parts) == 3 and not _is_number(parts[2]):
                continue  # BEIR header: query-id corpus-id score
            if len(parts) == 4:
                parts = [parts[0], parts[2], parts[3]]  # TREC: qid iter docid rel
            if len(parts) != 3 or not _is_number(parts[2]):
                raise DatasetError(
                    f"{path} line {lineno}: expected 'query-id<TAB>corpus-id<TAB>score' or TREC "
                    f"'qid 0 docid rel', got {line.strip()!r}"
                )
            yield parts[0], parts[1], float(parts[2])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def save_generic(dataset: Dataset, path: str | Path) -> Path:
    """Write ``dataset`` as a generic directory (``corpus.jsonl``, ``queries.jsonl``,
        ``qrels.tsv`` with header). Every field is written, so :func:`load_generic` returns an
        equal dataset (conversation, turn and question order kept; conversations without turns are
    not written). Ids holding tabs or newlines, or a path into a store directory, raise
    ``ValidationError``. Returns the path.
    """
    root = output_path(path)
    for q in dataset.questions:
        for ident in (q.qid, *q.evidence):
            if not ident or any(ch in ident for ch in "\t\n\r"):
                raise ValidationError(
                    f"save_generic: id {ident!r} of question {q.qid!r} is empty or holds a tab or "
                    "newline, which qrels.tsv cannot carry"
                )
    root.mkdir(parents=True, exist_ok=True)
    corpus = [
        {
            "_id": t.dia_id,
            "text": t.text,
            "conv_id": c.conv_id,
            "session": t.session,
            "speaker": t.speaker,
            "timestamp_ms": t.timestamp_ms,
            "caption": t.caption,
        }
        for c in dataset.conversations
        for t in c.turns
    ]
    queries = [
        {
            "_id": q.qid,
            "text": q.text,
            "conv_id": q.conv_id,
            "category": q.category,
            "answer": q.answer,
        }
        for q in dataset.questions
    ]
    write_atomic(root / "corpus.jsonl", _jsonl_text(corpus))
    write_atomic(root / "queries.jsonl", _jsonl_text(queries))
    rows = ["query-id\tcorpus-id\tscore\n"]
    rows += [f"{q.qid}\t{e}\t1\n" for q in dataset.questions for e in q.evidence]
    write_atomic(root / "qrels.tsv", "".join(rows))
    return root


def _jsonl_text(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
