"""Dataset types and loaders: LoCoMo format, generic JSONL + qrels, detection, errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.errors import DatasetError, ValidationError
from spector_gpu.eval.dataset import Dataset, Turn
from spector_gpu.eval.generic import load_generic, save_generic
from spector_gpu.eval.loaders import detect_format, load_dataset
from spector_gpu.eval.locomo import normalize_evidence, parse_locomo, parse_session_datetime
from spector_gpu.eval.synthetic import generate_locomo_like

MAY_8_2023_1356 = 1683554160000  # 2023-05-08T13:56:00Z


def _sample(sample_id: str = "c1") -> dict:
    """A tiny hand-written LoCoMo sample (sessions given out of order, session_10 included)."""
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_10_date_time": "9:00 am on 1 June, 2023",
            "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Late news."}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
                {
                    "speaker": "Bo",
                    "dia_id": "D1:02",
                    "text": "Look!",
                    "blip_caption": "a photo of a dog",
                },
            ],
            "session_2_date_time": "12:05 am on 9 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Morning."}],
        },
        "qa": [
            {
                "question": "What did Ann adopt?",
                "answer": "a dog",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {"question": "Year?", "answer": 2023, "evidence": ["D1:1; D1:2", "D"], "category": 2},
            {
                "question": "What did Bo adopt?",
                "adversarial_answer": "a dog",
                "evidence": ["D:1:1"],
                "category": 5,
            },
        ],
    }


def test_turn_index_text() -> None:
    assert Turn("D1:1", "Ann", "Hi", 1, 0).index_text == "Ann: Hi"
    assert Turn("D1:1", "Ann", "Hi", 1, 0, "a photo").index_text == "Ann: Hi [image: a photo]"
    assert Turn("d7", "", "plain doc", 0, 0).index_text == "plain doc"


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("1:56 pm on 8 May, 2023", MAY_8_2023_1356),
        ("1:56 PM on 8 May 2023", MAY_8_2023_1356),
        ("1:56 pm on 8 may, 2023", MAY_8_2023_1356),
        ("12:05 am on 1 January, 2024", 1704067500000),  # 00:05
        ("12:30 pm on 1 Jan, 2024", 1704112200000),  # 12:30
    ],
)
def test_parse_session_datetime(text: str, expected_ms: int) -> None:
    assert parse_session_datetime(text) == expected_ms


@pytest.mark.parametrize(
    "bad",
    [
        "yesterday",
        "13:00 pm on 1 May, 2023",
        "1:00 pm on 31 April, 2023",
        "1:00 pm on 1 Mayo, 2023",
    ],
)
def test_parse_session_datetime_rejects(bad: str) -> None:
    with pytest.raises(DatasetError, match="unparseable session date"):
        parse_session_datetime(bad)


def test_normalize_evidence() -> None:
    assert normalize_evidence(["D1:3"]) == (("D1:3",), ())
    assert normalize_evidence(["D8:6; D9:17"]) == (("D8:6", "D9:17"), ())
    assert normalize_evidence(["D:11:26", " D2 : 04 ", "D"]) == (("D11:26", "D2:4"), ("D",))
    assert normalize_evidence(["D1:3", "D1:03"]) == (("D1:3",), ())


def test_parse_locomo_mapping() -> None:
    ds = parse_locomo([_sample()], name="tiny")
    conv = ds.conversations[0]
    assert conv.conv_id == "c1" and conv.speakers == ("Ann", "Bo")
    assert conv.turn_ids == (
        "D1:1",
        "D1:2",
        "D2:1",
        "D10:1",
    )  # numeric session order; D1:02 canonical
    t0, t1 = conv.turns[0], conv.turns[1]
    assert (t0.session, t0.timestamp_ms) == (1, MAY_8_2023_1356)
    assert t1.timestamp_ms == MAY_8_2023_1356 + 1000 and t1.caption == "a photo of a dog"
    assert conv.turns[3].session == 10
    q0, q1, q2 = ds.questions
    assert (q0.qid, q0.evidence, q0.category, q0.answer) == ("c1/q0", ("D1:1",), 4, "a dog")
    assert q1.evidence == ("D1:1", "D1:2") and q1.answer == "2023"
    assert q2.adversarial and q2.answer is None and q2.evidence == ("D1:1",)


def test_load_dataset_locomo_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample("a"), _sample("b")]))
    assert detect_format(path) == "locomo"
    ds = load_dataset(path)
    assert ds.name == "tiny" and [c.conv_id for c in ds.conversations] == ["a", "b"]
    assert len(ds.questions_for("b")) == 3 and ds.questions_for("b")[0].qid == "b/q0"


def _with(mutate: Callable[[dict[str, Any]], object]) -> list[dict[str, Any]]:
    samples = [_sample("ok"), _sample("conv-41")]
    mutate(samples[1])
    return samples


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda s: s["conversation"]["session_2"][0].pop("dia_id"),
            r"sample 1 \(conv-41\) session_2 turn 0: missing 'dia_id'",
        ),
        (
            lambda s: s["conversation"].pop("session_1_date_time"),
            r"sample 1 \(conv-41\): missing 'session_1_date_time'",
        ),
        (
            lambda s: s["conversation"].update(session_2_date_time="soon"),
            r"conv-41\) session_2_date_time: unparseable",
        ),
        (
            lambda s: s["qa"][1].update(category=9),
            r"conv-41\) qa 1: 'category' must be an int in 1..5",
        ),
        (lambda s: s["qa"][0].pop("question"), r"conv-41\) qa 0: missing 'question'"),
        (lambda s: s.pop("sample_id"), r"sample 1: missing 'sample_id'"),
        (
            lambda s: s["conversation"]["session_1"].append(
                dict(s["conversation"]["session_1"][0])
            ),
            r"repeats turn id 'D1:1'",
        ),
    ],
)
def test_malformed_locomo_names_file_and_record(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], object], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_with(mutate)))
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(path)
    assert "bad.json" in str(info.value)


def test_missing_and_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist") as info:
        load_dataset(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(bad)
    obj = tmp_path / "obj.json"
    obj.write_text("{}")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        load_dataset(obj)
    with pytest.raises(DatasetError, match="holds a JSON list"):
        load_dataset(obj, format="locomo")
    with pytest.raises(DatasetError, match=r"lacks corpus\.jsonl"):
        load_dataset(tmp_path)


def _write_generic(root: Path, qrels_name: str = "qrels.tsv", trec: bool = False) -> None:
    root.mkdir(parents=True, exist_ok=True)
    docs = [
        {
            "_id": "d1",
            "title": "Pets",
            "text": "Ann adopted a dog.",
            "conv_id": "c1",
            "speaker": "Ann",
            "session": 1,
        },
        {"_id": "d2", "text": "Bo plays cello.", "conv_id": "c1", "timestamp_ms": 5},
        {"_id": "d3", "text": "Loose document."},
    ]
    queries = [
        {"_id": "q1", "text": "Ann's pet?", "conv_id": "c1", "category": 4},
        {"_id": "q2", "text": "instrument?"},  # conv inferred from evidence d2
        {"_id": "q3", "text": "loose?", "answer": "yes"},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n\n")
    if trec:
        body = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d2 2\nq3 0 d3 1\n"
    else:
        body = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td2\t2\nq3\td3\t1\n"
    target = root / qrels_name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body)


@pytest.mark.parametrize(
    ("qrels_name", "trec"),
    [("qrels.tsv", False), ("qrels/test.tsv", False), ("qrels/test.tsv", True)],
)
def test_load_generic(tmp_path: Path, qrels_name: str, trec: bool) -> None:
    root = tmp_path / "gen"
    _write_generic(root, qrels_name, trec)
    assert detect_format(root) == "generic"
    ds = load_dataset(root)
    assert [c.conv_id for c in ds.conversations] == ["c1", "corpus"]
    c1 = ds.conversation("c1")
    assert c1.turns[0] == Turn("d1", "Ann", "Pets Ann adopted a dog.", 1, 0, None)
    assert c1.turns[1].timestamp_ms == 5 and c1.speakers == ("Ann",)
    q1, q2, q3 = ds.questions
    assert (q1.evidence, q1.category) == (("d1",), 4)  # relevance 0 is not evidence
    assert (q2.conv_id, q2.evidence, q2.category) == ("c1", ("d2",), 0)
    assert (q3.conv_id, q3.answer) == ("corpus", "yes")


def test_generic_errors(tmp_path: Path) -> None:
    root = tmp_path / "gen"
    _write_generic(root)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n")
    with pytest.raises(DatasetError, match=r"qrels.tsv line 2"):
        load_generic(root)
    (root / "qrels.tsv").write_text("q9\td1\t1\n")
    with pytest.raises(DatasetError, match=r"absent from queries\.jsonl"):
        load_generic(root)
    (root / "qrels.tsv").unlink()
    with pytest.raises(DatasetError, match="no qrels found"):
        load_generic(root)
    _write_generic(root)
    (root / "corpus.jsonl").write_text('{"_id": "d1"}\n')
    with pytest.raises(DatasetError, match=r"corpus.jsonl line 1: missing 'text'"):
        load_generic(root)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "x", "conv_id": "c1"}\n')
    with pytest.raises(
        DatasetError, match=r"queries.jsonl line 2: query 'q2' belongs to conversation 'corpus'"
    ):
        load_generic(root)


def test_generic_round_trip_of_locomo_data(tmp_path: Path) -> None:
    original = parse_locomo(
        generate_locomo_like(n_conversations=2, questions_per_conversation=8), name="rt"
    )
    save_generic(original, tmp_path / "rt")
    loaded = load_generic(tmp_path / "rt")
    assert loaded == original  # dia_ids recur across conversations: ids are scoped per conversation


def test_save_generic_rejects_tabs(tmp_path: Path) -> None:
    ds = parse_locomo([_sample()])
    bad = Dataset(
        ds.name, ds.conversations, (ds.questions[0].__class__("a\tb", "c1", "x", ("D1:1",), 1),)
    )
    with pytest.raises(ValidationError, match="tab or newline"):
        save_generic(bad, tmp_path / "out")


def test_dataset_helpers() -> None:
    ds = parse_locomo([_sample("a"), _sample("b")])
    assert ds.n_turns == 8
    assert [q.qid for q in ds.filter(categories={4, 2}).questions] == [
        "a/q0",
        "a/q1",
        "b/q0",
        "b/q1",
    ]
    only_b = ds.filter(conversations=["b"])
    assert [c.conv_id for c in only_b.conversations] == ["b"] and {
        q.conv_id for q in only_b.questions
    } == {"b"}
    assert ds.qrels()["a/q1"] == {"D1:1": 1, "D1:2": 1}
    assert ds.categories()["b/q2"] == 5
    assert set(ds.questions_by_conversation()) == {"a", "b"}
    with pytest.raises(KeyError, match="no conversation 'zz'"):
        ds.conversation("zz")
