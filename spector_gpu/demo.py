"""The main job (``spector-gpu demo`` / ``make demo``): evaluate, consolidate, explain.

1. Build one store per conversation of the bundled synthetic LoCoMo-format set (and of
   ``../shared/data/locomo10/locomo10-dev.json`` relative to the working directory when present),
   and run the batched recall evaluation with ablations on each: the table is printed,
   ``<out>/<dataset>/metrics.json``, ``per_question.jsonl`` and the plots are written, the
   stores are kept in ``<out>/stores/<dataset>/<conv_id>``.
2. Open one conversation's store (LoCoMo's first when present, else the synthetic set's first),
   consolidate it, and print ``explain`` for one fact with its parent turns, the session's
   provenance, a recall that now finds facts, a forensic bundle and its verification,
   ``check()`` and ``verify_chain()``.
3. Run a sleep cycle with its dream phase on that store and print its report, one dream of the
   journal (seed, fragments, what it wrote) and a wander from the question.

Everything is printed to ``stream`` (stdout by default): this is a script-like entry point.
Rerunning with the same ``out`` replaces the demo's own stores (directories holding a
``store.json``) and refuses to touch anything else.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .errors import DatasetError, ValidationError
from .paths import output_path, store_dir_name

if TYPE_CHECKING:
    from .eval.dataset import Dataset

__all__ = ["DEFAULT_LOCOMO", "DemoResult", "resolve_locomo", "run_demo"]

DEFAULT_LOCOMO = Path("..") / "shared" / "data" / "locomo10" / "locomo10-dev.json"
"""Where ``locomo="auto"`` looks, relative to the current working directory."""


@dataclass
class DemoResult:
    """What :func:`run_demo` produced.

    ``metrics``: ``{dataset name: path of its metrics.json}``; ``store``: the consolidated
    store; ``fact_id``: the explained fact (None when consolidation produced none);
    ``check_ok`` / ``chain_ok`` / ``bundle_ok``: the integrity results; ``dreams``: dreams the
    sleep cycle journaled; ``seconds``: wall time.
    """

    out_dir: Path
    metrics: dict[str, Path] = field(default_factory=dict)
    store: Path | None = None
    fact_id: str | None = None
    check_ok: bool = False
    chain_ok: bool = False
    bundle_ok: bool = False
    dreams: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every integrity check passed."""
        return self.check_ok and self.chain_ok and self.bundle_ok


def resolve_locomo(locomo: str | Path | None) -> Path | None:
    """``"auto"`` → :data:`DEFAULT_LOCOMO` if it exists else None; ``None``/``"none"``/``""``
    → None; any other path must exist (``DatasetError`` naming it otherwise)."""
    if locomo is None or str(locomo).strip().lower() in ("", "none"):
        return None
    if str(locomo) == "auto":
        return DEFAULT_LOCOMO if DEFAULT_LOCOMO.is_file() else None
    path = Path(locomo)
    if not path.is_file():
        raise DatasetError(
            f"--locomo {str(path)!r} does not exist; pass 'auto' or 'none' to skip it"
        )
    return path


def _fresh_store_root(root: Path) -> Path:
    """Empty the demo's store folder of earlier demo stores; refuse anything else."""
    if root.exists():
        for child in sorted(root.iterdir()):
            if child.is_dir() and (child / "store.json").is_file():
                shutil.rmtree(child)
            else:
                raise ValidationError(
                    f"{child}: not a spector_gpu store from an earlier demo; "
                    "pass a fresh --out directory"
                )
    root.mkdir(parents=True, exist_ok=True)
    return root


class _Printer:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, *parts: object) -> None:
        print(*parts, file=self.stream, flush=True)

    def step(self, title: str) -> None:
        self(f"\n== {title} " + "=" * max(3, 74 - len(title)))


def _evaluate(
    dataset: Dataset, slug: str, out: Path, progress: bool, say: _Printer
) -> tuple[Path, Path]:
    from .eval import evaluate

    stores = _fresh_store_root(out / "stores" / slug)
    t0 = time.perf_counter()
    result = evaluate(
        dataset, out_dir=out / slug, ablations=True, store_root=stores, progress=progress
    )
    say(
        f"{dataset.name}: {len(dataset.conversations)} conversations, {dataset.n_turns} turns, "
        f"{result.metrics['configs']['default']['n_questions']} scored questions (categories 1-4), "
        f"{len(result.metrics['configs'])} configurations in {time.perf_counter() - t0:.1f} s "
        f"(device {result.metrics['device']}, embedder {result.metrics['embedder']})"
    )
    say(result.table())
    written = sorted(p.name for p in (out / slug).iterdir())
    say(f"wrote {', '.join(written)} to {out / slug}")
    return out / slug / "metrics.json", stores


def _consolidate_and_explain(
    store: Path, question: str | None, out: Path, res: DemoResult, say: _Printer
) -> None:
    from .memory import SpectorMemory
    from .types import MemoryType, RecallOptions

    with SpectorMemory.open(store) as mem:
        say(f"opened {mem}")
        t0 = time.perf_counter()
        report = mem.consolidate()
        say(f"{report} in {time.perf_counter() - t0:.2f} s")
        fact_id = report.fact_ids[0] if report.fact_ids else None
        if question is not None:
            say(f"\nrecall after consolidation (turns and facts): {question!r}")
            hits = mem.recall(question, RecallOptions(k=5, mode="observe"))
            for hit in hits:
                say(f"  {hit.format(show_provenance=True)}")
            facts = [h.id for h in hits if h.memory_type == MemoryType.SEMANTIC]
            fact_id = facts[0] if facts else fact_id  # explain the fact this recall surfaced
        if fact_id is None:
            say("no facts were distilled; nothing to explain")
        else:
            _explain_fact(mem, fact_id, out, res, say)
        check, chain = mem.check(), mem.verify_chain()
        say(f"\n{check}")
        say(
            f"verify_chain: {'ok' if chain.ok else 'BROKEN'} ({chain.events} events, "
            f"{len(chain.breaks)} breaks, head {chain.head_hash.hex()[:16]}…)"
        )
        res.check_ok, res.chain_ok = check.ok, chain.ok


def _explain_fact(mem: Any, fact_id: str, out: Path, res: DemoResult, say: _Printer) -> None:
    res.fact_id = fact_id
    fact = mem.get(fact_id)
    say(f"\nfact {fact.format(show_provenance=True)}")
    lineage = mem.explain(fact_id, include_parents=True)
    say(f"explain: {lineage}")
    say("parent turns (* = a turn the fact was distilled from):")
    sources = set((fact.metadata or {}).get("parents", ()))
    for parent in lineage.parents or ():
        ext = f"  ({parent.external_id})" if parent.external_id else ""
        mark = "*" if parent.id in sources else " "
        say(f"  {mark} {parent.format(show_provenance=True)}{ext}")
    rows = mem.session_provenance(lineage.session_id)
    say(f"session {lineage.session_id} provenance: {len(rows)} fact(s) derived")
    for row in rows[:5]:
        say(f"  {row}")
    if len(rows) > 5:
        say(f"  … and {len(rows) - 5} more")
    bundle = out / "fact_bundle.tar"
    info = mem.export_bundle(fact_id, bundle)
    verdict = mem.verify_bundle(bundle)
    res.bundle_ok = bool(verdict.ok)
    say(
        f"forensic bundle {bundle} ({len(info.files)} files, sha256 {info.sha256[:16]}…): "
        f"{'verified' if verdict.ok else 'NOT OK'}"
    )


def _sleep_cycle(store: Path, question: str | None, res: DemoResult, say: _Printer) -> None:
    from .memory import SpectorMemory

    with SpectorMemory.open(store) as mem:
        t0 = time.perf_counter()
        report = mem.sleep(dream=True)
        say(f"sleep cycle in {time.perf_counter() - t0:.2f} s:\n{report}")
        journal = mem.dream_journal()
        res.dreams = len(journal)
        if journal:
            first = journal[0]
            say(
                f"dream #{first.seq}: seed {first.seed_id}, {len(first.fragments)} fragments, "
                f"{len(first.changes)} link change(s)"
            )
            for hit in (mem.get(f) for f in first.fragments):
                say(f"  fragment {hit.format() if hit is not None else '(gone)'}")
            dreamt = mem.get(first.wrote) if first.wrote is not None else None
            if dreamt is not None:
                say(
                    f"  wrote {dreamt.format(show_provenance=True)} (simulated: "
                    "recall leaves it out unless include_simulated=True)"
                )
        if question is not None:
            say(f"wander from {question!r}:")
            for step in mem.wander(question, steps=4):
                say(f"  {step.kind:<8} w={step.weight:.2f} D={step.strength:.2f} {step.text[:70]}")
        res.check_ok = res.check_ok and mem.check().ok


def run_demo(
    out_dir: str | Path = "demo_out",
    *,
    locomo: str | Path | None = "auto",
    quick: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
) -> DemoResult:
    """Run the main job; see the module docstring. ``quick`` = bundled synthetic data only.

    Returns a :class:`DemoResult`; raises ``DatasetError`` for an explicit ``locomo`` path that
    does not exist or does not parse.
    """
    from .eval import load_dataset
    from .eval.synthetic import bundled_sample_path

    say = _Printer(stream if stream is not None else sys.stdout)
    t_start = time.perf_counter()
    out = output_path(out_dir, "out_dir")
    out.mkdir(parents=True, exist_ok=True)
    res = DemoResult(out_dir=out)
    datasets: list[tuple[str, Dataset]] = [("synthetic", load_dataset(bundled_sample_path()))]
    locomo_path = None if quick else resolve_locomo(locomo)
    if locomo_path is not None:
        datasets.append(("locomo", load_dataset(locomo_path)))
    elif not quick:
        say(f"LoCoMo not found at {DEFAULT_LOCOMO} (relative to {Path.cwd()}); synthetic data only")
    store, question = None, None
    for slug, dataset in datasets:
        say.step(f"batched evaluation with ablations: {slug} ({dataset.name})")
        metrics, stores = _evaluate(dataset, slug, out, progress, say)
        res.metrics[dataset.name] = metrics
        conv = dataset.conversations[0]
        store = stores / store_dir_name(conv.conv_id)
        asked = [q for q in dataset.questions_for(conv.conv_id) if q.category in (1, 2, 3, 4)]
        question = asked[0].text if asked else None
    if store is not None:
        say.step(f"consolidate and explain: {store}")
        res.store = store
        _consolidate_and_explain(store, question, out, res, say)
        say.step(f"sleep, dream and wander: {store}")
        _sleep_cycle(store, question, res, say)
    res.seconds = time.perf_counter() - t_start
    say.step("done")
    say(
        f"demo finished in {res.seconds:.1f} s; outputs in {out}"
        f"{'' if res.ok else ' — INTEGRITY CHECKS FAILED'}"
    )
    return res
