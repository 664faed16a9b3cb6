"""The README's "What consolidation writes" block is what consolidating the demo's first
conversation writes (its report and its first facts, each after its parent turns' ids)."""

from __future__ import annotations

from pathlib import Path

from spector_gpu import SpectorMemory
from spector_gpu.eval.ingest import ingest_records
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.synthetic import bundled_sample_path

README = Path(__file__).resolve().parents[2] / "README.md"
OPENING = "turns on the left):\n\n```\n"


def _shown() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(OPENING) + len(OPENING)
    return text[start : text.index("```", start)].strip().splitlines()


def test_the_readme_shows_the_facts_the_demo_conversation_gives(tmp_path: Path) -> None:
    shown = _shown()
    conv = load_dataset(bundled_sample_path()).conversations[0]
    records = ingest_records(conv)
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as mem:
        dia = dict(
            zip(mem.remember_batch(records), (r["external_id"] for r in records), strict=True)
        )
        report = mem.consolidate()
        lines = [str(report)]
        for fid in report.fact_ids[: len(shown) - 1]:
            fact = mem.get(fid)
            assert fact is not None and fact.metadata is not None
            parents = " ".join(dia[p] for p in fact.metadata["parents"])
            lines.append(f"{parents} {fact.text}")
    assert lines == shown
    assert len(shown) >= 4  # the block shows real facts, not an empty run
