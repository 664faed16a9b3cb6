"""Recall benchmarks through the public API (``SpectorMemory.recall`` / ``recall_batch``).

    python benchmarks/bench_recall.py                  # every figure below (full sizes)
    python benchmarks/bench_recall.py --quick          # 10k memories, smaller batches: a smoke run
    python benchmarks/bench_recall.py targets --only locomo,single
    python benchmarks/bench_recall.py compare          # issue 36's table: this tree vs 100e5d0
    python benchmarks/bench_recall.py gpu --memories 1000000 # all relays on CUDA (gpu_check.sh)
    python benchmarks/bench_recall.py dense -- --n 1000000   # kernel benchmark (bench_dense.py)
    python benchmarks/bench_recall.py bm25 -- --docs 100000  # kernel benchmark (bench_bm25.py)

Figures (medians of interleaved rounds, ratios from the same run; the machine's load average
is printed because other processes skew 2-core timings):

* ``locomo`` — LoCoMo dev evaluation throughput, all relays (``spector_gpu.eval.evaluate``);
* ``dense`` — dense-only ``recall_batch`` of 256 text queries over 200k memories against FAISS
  ``IndexFlatIP`` searching the same vectors (BLAS forced; its query embedding not timed);
* ``lexical`` — lexical-only ``recall_batch`` of 1,000 queries over 100k memories against bm25s
  (its tokenizer with the English stop list and stemmer, top-10; numpy backend, and numba
  where installed — the ratio is against the faster);
* ``batch`` — all relays, 100k memories, Zipf-like queries with common words: ``recall_batch``
  against a loop of ``recall`` over the same 200 queries;
* ``single`` — single ``recall`` p50 over 100k memories: the team's corpus (content words only)
  and the Zipf-like corpus with common words;
* ``busy`` — the single recall again beside one busy process (``while 1: pass``);

``compare`` builds the baseline commit (``--baseline``, default 100e5d0) once in a git
worktree beside this checkout (in the temp folder, or ``--baseline-dir``) with its native
kernels built in place, then runs the same figures in a fresh interpreter for each tree — the
baseline first — and prints both and their ratios: LoCoMo throughput, ``recall_batch`` against
a loop of ``recall`` idle and in five runs beside two CPU-bound processes the benchmark starts,
single-recall p50s, and dense / lexical against FAISS / bm25s (``--only`` picks figures;
``--repeat N`` alternates the trees N times and prints each pair and the medians). Build
this checkout's kernels first (``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FAST = {"store": {"durability": "none"}}


def team_corpus(n: int, n_queries: int, seed: int = 0) -> tuple[list[dict], list[str]]:
    """Zipf content words (the 50 most frequent ranks left out, as a stop list would)."""
    rng = random.Random(seed)
    vocab = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze")
             for b in range(800)]  # fmt: skip
    weights = [1.0 / (i + 51) for i in range(len(vocab))]
    return _corpus(rng, vocab, weights, n, n_queries)


def zipf_corpus(n: int, n_queries: int, seed: int = 1) -> tuple[list[dict], list[str]]:
    """Zipf over 20,000 words including the most common ones (queries share common words)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20_000)]
    return _corpus(rng, vocab, [1.0 / (i + 1) for i in range(len(vocab))], n, n_queries)


def _corpus(
    rng: random.Random, vocab: list[str], weights: list[float], n: int, n_queries: int
) -> tuple[list[dict], list[str]]:
    def sentence(k: int) -> str:
        return " ".join(rng.choices(vocab, weights=weights, k=k))

    items = [
        {"text": sentence(28), "session_id": i // 24, "speaker": ("Ann", "Bo")[i % 2]}
        for i in range(n)
    ]
    return items, [sentence(6) for _ in range(n_queries)]


EMBEDDER: str | None = None  # --embedder: None is the library's default (static, 128-d)


def scratch_dir(prefix: str) -> str:
    """A new temporary folder, removed when the interpreter exits (the stores of a 100k
    benchmark hold 130-380 MB each)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def open_store(items: list[dict], embedder: str | None = None) -> Any:
    """A new store of ``items`` (``embedder``: a spec, default ``--embedder``) in a
    :func:`scratch_dir`."""
    from spector_gpu import SpectorMemory

    path = scratch_dir("bench-recall-") + "/s"
    mem = SpectorMemory.open(path, config=FAST, embedder=embedder or EMBEDDER)
    for lo in range(0, len(items), 10_000):
        mem.remember_batch(items[lo : lo + 10_000])
    return mem


def interleaved(methods: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds per method, timed in rounds (A B A B …) so load spikes hit all alike."""
    for fn in methods.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds):
        for name, fn in methods.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def p50_recall(mem: Any, queries: list[str], opts: Any) -> float:
    """Median seconds of one ``recall`` (hydrated results), after a warm-up."""
    return p50_recall_times(mem, queries, opts)[0]


def p50_recall_times(mem: Any, queries: list[str], opts: Any) -> tuple[float, float]:
    """Median wall and thread-CPU seconds of one ``recall``, after a warm-up. The thread
    time is what the recall itself spent; other processes on the machine inflate only the wall
    time (and, less, the thread time through shared caches)."""
    for q in queries[:10]:
        mem.recall(q, opts)
    wall, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.thread_time()
        mem.recall(q, opts)
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - t)
    return statistics.median(wall), statistics.median(cpu)


def row(name: str, value: str, target: str) -> None:
    print(f"  {name:<58s} {value:<34s} target {target}")


def bench_locomo(rounds: int) -> float | None:
    from spector_gpu.eval.locomo import load_locomo
    from spector_gpu.eval.runner import evaluate

    path = HERE.parent.parent / "shared" / "data" / "locomo10" / "locomo10-dev.json"
    if not path.exists():
        print(f"  locomo: {path} not found, skipped")
        return None
    ds = load_locomo(path)
    rates = []
    for _ in range(rounds):
        result = evaluate(ds, progress=False)
        rates.append(result.metrics["configs"]["default"]["queries_per_s"])
    r10 = result.metrics["configs"]["default"]["recall@10"]
    row(
        "LoCoMo dev eval, all relays, CPU (evaluate(), batches of 128)",
        f"{statistics.median(rates):,.0f} q/s (recall@10 {r10:.4f})",
        ">= 5,000 q/s",
    )
    return float(statistics.median(rates))


def bench_dense(n: int, n_queries: int, rounds: int) -> float:
    import faiss

    from spector_gpu import RecallOptions

    items, queries = team_corpus(n, n_queries, seed=3)
    mem = open_store(items, embedder="hashing")  # issue 16's row: 384-d rows, whatever --embedder
    opts = RecallOptions(k=10, relays=("dense",), mode="observe")
    flat = faiss.IndexFlatIP(mem.embedder.dim)
    flat.add(mem.embedder.embed([it["text"] for it in items]))
    qvec = mem.embedder.embed(queries)
    faiss.cvar.distance_compute_blas_threshold = 0
    med = interleaved(
        {"ours": lambda: mem.recall_batch(queries, opts), "faiss": lambda: flat.search(qvec, 10)},
        rounds,
    )
    row(
        f"dense-only recall_batch, {n:,} x {mem.embedder.dim}, {n_queries} q",
        f"{med['ours'] * 1e3:,.0f} ms vs FAISS flat {med['faiss'] * 1e3:,.0f} ms: "
        f"{med['faiss'] / med['ours']:.2f}x",
        ">= 1.0x",
    )
    mem.close()
    return med["faiss"] / med["ours"]


def bench_lexical(n: int, n_queries: int, rounds: int) -> float:
    import bm25s
    import Stemmer

    from spector_gpu import RecallOptions

    items, queries = team_corpus(n, n_queries, seed=4)
    mem = open_store(items)
    opts = RecallOptions(k=10, relays=("lexical",), mode="observe")
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(method="lucene")
    corpus_tokens = bm25s.tokenize(
        [it["text"] for it in items], stopwords="en", stemmer=stemmer, show_progress=False
    )
    retriever.index(corpus_tokens, show_progress=False)

    def alternative(backend: str) -> Callable[[], Any]:
        def run() -> None:
            tok = bm25s.tokenize(
                queries, stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False
            )
            retriever.retrieve(tok, k=10, show_progress=False, backend_selection=backend)

        return run

    methods = {"ours": lambda: mem.recall_batch(queries, opts), "numpy": alternative("numpy")}
    try:
        import numba  # noqa: F401  (bm25s's fast backend, when installed)

        methods["numba"] = alternative("numba")
    except ImportError:
        pass
    med = interleaved(methods, rounds)
    best = min(v for name, v in med.items() if name != "ours")
    others = ", ".join(f"{name} {n_queries / med[name]:,.0f}" for name in methods if name != "ours")
    row(
        f"lexical-only recall_batch, {n:,} memories, {n_queries} q",
        f"{n_queries / med['ours']:,.0f} q/s vs bm25s ({others} q/s): "
        f"{best / med['ours']:.2f}x the fastest",
        ">= 3x",
    )
    mem.close()
    return best / med["ours"]


def bench_batch_and_single(n: int, n_queries: int, rounds: int, busy: bool) -> None:
    from spector_gpu import RecallOptions

    opts = RecallOptions(k=10, mode="observe")
    zipf_items, zipf_queries = zipf_corpus(n, n_queries)
    mem = open_store(zipf_items)
    med = interleaved(
        {
            "batch": lambda: mem.recall_batch(zipf_queries, opts),
            "loop": lambda: [mem.recall(q, opts) for q in zipf_queries],
        },
        rounds,
    )
    row(
        f"all relays, {n:,} memories, Zipf queries: recall_batch vs recall loop",
        f"{med['batch'] / n_queries * 1e3:.2f} vs {med['loop'] / n_queries * 1e3:.2f} ms/q: "
        f"{med['loop'] / med['batch']:.1f}x",
        ">= 10x",
    )
    zipf_p50, zipf_cpu = p50_recall_times(mem, zipf_queries, opts)
    mem.close()
    team_items, team_queries = team_corpus(n, n_queries)
    mem = open_store(team_items)
    team_p50, team_cpu = p50_recall_times(mem, team_queries, opts)
    row(
        f"single recall p50, {n:,} memories, CPU (team / Zipf corpus)",
        f"{team_p50 * 1e3:.2f} / {zipf_p50 * 1e3:.2f} ms "
        f"(thread time {team_cpu * 1e3:.2f} / {zipf_cpu * 1e3:.2f})",
        "<= 2 ms",
    )
    if busy:
        idle = p50_recall(mem, team_queries, opts)
        hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
        try:
            time.sleep(0.5)
            loaded = p50_recall(mem, team_queries, opts)
        finally:
            hog.kill()
            hog.wait()
        row(
            "single recall p50 beside one busy process (team corpus)",
            f"{loaded * 1e3:.2f} ms vs {idle * 1e3:.2f} ms idle: {loaded / idle:.2f}x",
            "<= 2x idle",
        )
    mem.close()


def bench_gpu(n: int, n_queries: int, rounds: int) -> None:
    """All relays on CUDA: ``recall_batch`` of ``n_queries`` over ``n`` memories (wall time
    around the call, which ends with the results on the host), single recall p50, and the
    same ids and scores as the CPU on a sample."""

    import torch

    from spector_gpu import RecallOptions, SpectorMemory

    items, queries = team_corpus(n, max(n_queries, 300), seed=5)
    queries = (queries * (n_queries // len(queries) + 1))[:n_queries]
    path = scratch_dir("bench-gpu-") + "/s"
    t = time.perf_counter()
    with SpectorMemory.open(path, device="cpu", config=FAST) as mem:
        for lo in range(0, n, 50_000):
            mem.remember_batch(items[lo : lo + 50_000])
    print(f"  built {n:,} memories in {time.perf_counter() - t:.1f} s")
    opts = RecallOptions(k=10, mode="observe")
    gpu_path = path + "-gpu"
    shutil.copytree(path, gpu_path)
    with SpectorMemory.open(gpu_path, device="cuda", config=FAST) as gpu:
        gpu.recall_batch(queries[:64], opts)  # caches and kernels warm
        walls = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            t = time.perf_counter()
            gpu.recall_batch(queries, opts)
            walls.append(time.perf_counter() - t)
        wall = statistics.median(walls)
        row(
            f"CUDA all relays recall_batch, {n:,} memories, {n_queries:,} q",
            f"{wall * 1e3:,.1f} ms ({n_queries / wall:,.0f} q/s)",
            "<= 50 ms (H200)",
        )
        single = p50_recall(gpu, queries[:200], opts)
        sample = queries[:32]
        g = gpu.recall_batch(sample, opts)
    with SpectorMemory.open(path, device="cpu", config=FAST) as cpu:
        cpu_single = p50_recall(cpu, queries[:200], opts)
        c = cpu.recall_batch(sample, opts)
    row(
        f"single recall p50, {n:,} memories, CUDA / CPU",
        f"{single * 1e3:.2f} / {cpu_single * 1e3:.2f} ms",
        "CUDA <= CPU",
    )
    same = bool((g.ids == c.ids).all() and (g.scores == c.scores).all())
    print(f"  CPU == CUDA ids and scores on {len(sample)} queries: {same}")


BASELINE = "100e5d0"  # the build issue 36's targets are measured against
COMPARE_FIGURES = ("locomo", "batch", "busy", "single", "dense", "lexical")


def _hogs(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` CPU-bound processes (``while 1: pass``), started now."""
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def measure(a: argparse.Namespace) -> dict[str, Any]:
    """The figures of one build (the ``spector_gpu`` this interpreter imports), as numbers:
    what ``compare`` runs in each tree."""
    from spector_gpu import RecallOptions

    only = set(a.only.split(",")) if a.only else set(COMPARE_FIGURES)
    got: dict[str, Any] = {}
    if "locomo" in only:
        got["locomo_qps"] = bench_locomo(a.rounds)
    if "dense" in only:
        got["dense_vs_faiss"] = bench_dense(a.dense_memories, a.dense_queries, a.rounds)
    if "lexical" in only:
        got["lexical_vs_bm25s"] = bench_lexical(a.memories, a.lexical_queries, a.rounds)
    opts = RecallOptions(k=10, mode="observe")
    if only & {"batch", "busy", "single"}:
        items, queries = zipf_corpus(a.memories, a.batch_queries)
        mem = open_store(items)
        methods = {
            "batch": lambda: mem.recall_batch(queries, opts),
            "loop": lambda: [mem.recall(q, opts) for q in queries],
        }
        same = [[r.id for r in res] for res in mem.recall_batch(queries, opts)] == [
            [r.id for r in mem.recall(q, opts)] for q in queries
        ]
        got["batch_equals_loop"] = same
        if "batch" in only:
            med = interleaved(methods, a.rounds)
            got["batch_vs_loop_idle"] = med["loop"] / med["batch"]
            got["batch_ms_per_query_idle"] = med["batch"] / len(queries) * 1e3
        if "busy" in only:
            hogs = _hogs(2)
            try:
                time.sleep(0.5)
                runs = [interleaved(methods, 1) for _ in range(5)]
            finally:
                _stop(hogs)
            got["batch_vs_loop_busy"] = [r["loop"] / r["batch"] for r in runs]
        if "single" in only:
            got["single_p50_zipf_ms"] = p50_recall(mem, queries, opts) * 1e3
        mem.close()
        if "single" in only:
            items, queries = team_corpus(a.memories, a.batch_queries)
            mem = open_store(items)
            got["single_p50_team_ms"] = p50_recall(mem, queries, opts) * 1e3
            mem.close()
    return got


def baseline_tree(commit: str, where: Path | None) -> Path:
    """A git worktree of ``commit`` beside this checkout with its native kernels built in
    place (made once, then reused). The editable install's finder maps ``spector_gpu.kernels``
    to this checkout's ``kernels/``, so the tree gets its own ``spector_gpu/kernels`` link."""
    root = HERE.parent
    tree = where or Path(tempfile.gettempdir()) / f"spector-gpu-baseline-{commit}"
    if not (tree / "kernels").is_dir():
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", str(tree), commit], check=True
        )
    link = tree / "spector_gpu" / "kernels"
    if not link.exists():
        link.symlink_to(Path("..") / "kernels")
    if not list((tree / "kernels").glob("_native*.so")):
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import setuptools; setuptools.setup()",
                "build_ext",
                "--inplace",
            ],
            cwd=tree,
            check=True,
        )
    return tree


def _worker(tree: Path, a: argparse.Namespace, dot: str = "") -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter importing ``spector_gpu`` from ``tree``; ``dot``
    pins that build's hand-written dot and selection paths (``native.set_dot_impl``)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "_measure", "--only", a.only]
    argv += ["--memories", str(a.memories), "--batch-queries", str(a.batch_queries)]
    argv += ["--dense-memories", str(a.dense_memories), "--dense-queries", str(a.dense_queries)]
    argv += ["--lexical-queries", str(a.lexical_queries), "--rounds", str(a.rounds)]
    env = {**os.environ, "PYTHONPATH": str(tree), "SPECTOR_BENCH_DOT": dot}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=tree)
    line = [x for x in out.stdout.splitlines() if x.startswith("JSON ")][-1]
    return dict(json.loads(line[5:]))


def compare(a: argparse.Namespace) -> None:
    """Each figure of issue 36's target table for this checkout and the ``--baseline`` build,
    measured in the same run (baseline first, then this tree), and their ratios."""
    import torch

    flags = _cpu_flags()
    print(
        f"compare with {a.baseline}: {os.cpu_count()} CPUs ({flags}), torch threads "
        f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f} at start"
    )
    print(_vector_scaling())
    tree = baseline_tree(a.baseline, a.baseline_dir)
    if a.baseline_dot:
        print(f"the baseline's dot and selection paths pinned to {a.baseline_dot}")
    bases, ourses = [], []
    for _ in range(a.repeat):  # baseline, this tree, baseline, ...: load drifts hit both
        bases.append(_worker(tree, a, a.baseline_dot))
        ourses.append(_worker(HERE.parent, a))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if a.repeat > 1:
        for i, (b, o) in enumerate(zip(bases, ourses, strict=True)):
            print(f"pair {i + 1}:")
            _print_compare(a.baseline, b, o)
        print(f"medians of {a.repeat} pairs:")
    _print_compare(a.baseline, _median(bases), _median(ourses))


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over runs (lists element-wise; anything else from the first)."""
    out: dict[str, Any] = {}
    for key, first in runs[0].items():
        values = [r[key] for r in runs]
        if isinstance(first, float):
            out[key] = statistics.median(values)
        elif isinstance(first, list):
            out[key] = [statistics.median(col) for col in zip(*values, strict=True)]
        else:
            out[key] = first if all(v == first for v in values) else values
    return out


def _cpu_flags() -> str:
    """The SIMD instruction sets of this host (``/proc/cpuinfo``), for the record."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "flags unknown"
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    keep = [f for f in flags if f.startswith(("avx", "sse4", "fma", "amx"))]
    return " ".join(sorted(keep)) or "no AVX"


def _vector_scaling(rounds: int = 60) -> str:
    """float32 GEMM throughput of one thread and of two threads at once (torch, one intra-op
    thread each), for the record: on a VM whose two vCPUs share one vector unit (the AVX2-only
    EPYC of issue 36's kind) two threads together reach about one thread's best, which bounds
    every GEMM-bound figure (dense-only, FAISS itself) there."""
    import threading

    import torch

    from spector_gpu.device import single_threaded

    a, b = torch.randn(2048, 384), torch.randn(384, 128)
    flop = 2 * 2048 * 384 * 128 * rounds

    def work() -> None:
        out = torch.empty(2048, 128)
        for _ in range(rounds):
            torch.mm(a, b, out=out)

    with single_threaded():
        work()  # warm
        t0 = time.perf_counter()
        work()
        one = flop / (time.perf_counter() - t0) / 1e9
        pair = [threading.Thread(target=work) for _ in range(2)]
        t0 = time.perf_counter()
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        two = 2 * flop / (time.perf_counter() - t0) / 1e9
    return (
        f"float32 GEMM (2048 x 384 by 384 x 128): one thread {one:.0f} GFLOP/s, two threads "
        f"at once {two:.0f} GFLOP/s together ({two / one:.2f}x one)"
    )


def _print_compare(name: str, base: dict[str, Any], ours: dict[str, Any]) -> None:
    def fmt(v: Any) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(f"{x:.2f}" for x in v) + "]"
        return f"{v:,.2f}" if isinstance(v, float) else str(v)

    rows = [
        ("locomo_qps", "LoCoMo dev evaluate() q/s", ">= 1.5x and >= 5,000"),
        ("batch_vs_loop_idle", "batch vs loop, idle (x)", ">= 4"),
        ("batch_vs_loop_busy", "batch vs loop, 2 busy processes, 5 runs (x)", "every run >= 2"),
        ("single_p50_team_ms", "single recall p50, team (ms)", "<= 1.2x baseline"),
        ("single_p50_zipf_ms", "single recall p50, Zipf (ms)", "<= 1.2x baseline"),
        ("dense_vs_faiss", "dense-only batch vs FAISS flat (x)", "no lower than baseline"),
        ("lexical_vs_bm25s", "lexical-only batch vs bm25s (x)", "no lower than baseline"),
        ("batch_ms_per_query_idle", "batch ms per query, idle", "-"),
        ("batch_equals_loop", "batch ids and order equal the loop's", "True"),
    ]
    print(f"  {'figure':<46s} {name:>22s} {'this tree':>22s} {'ratio':>7s}  target")
    for key, label, target in rows:
        if key not in ours:
            continue
        b, o = base.get(key), ours[key]
        ratio = ""
        if isinstance(b, float) and isinstance(o, float) and b:
            ratio = f"{o / b:.2f}"
        print(f"  {label:<46s} {fmt(b):>22s} {fmt(o):>22s} {ratio:>7s}  {target}")


def _run_script(name: str, argv: list[str]) -> None:
    saved = sys.argv
    sys.argv = [name, *argv]
    try:
        runpy.run_path(str(HERE / name), run_name="__main__")
    finally:
        sys.argv = saved


def targets(a: argparse.Namespace) -> None:
    import torch

    only = set(a.only.split(",")) if a.only else {"locomo", "dense", "lexical", "batch", "single"}
    from spector_gpu.embedders import make_embedder

    print(
        f"recall targets (public API), embedder {make_embedder(EMBEDDER).name}, torch threads "
        f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f} at start (a shared "
        "2-core machine skews timings)"
    )
    if "locomo" in only:
        bench_locomo(a.rounds)
    if "dense" in only:
        bench_dense(a.dense_memories, a.dense_queries, a.rounds)
    if "lexical" in only:
        bench_lexical(a.memories, a.lexical_queries, a.rounds)
    if only & {"batch", "single", "busy"}:
        bench_batch_and_single(a.memories, a.batch_queries, a.rounds, busy=not a.no_busy)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def _pin_dot(name: str) -> None:
    """Pin the build's dot implementation (the 100e5d0 build has ``set_dot_impl``)."""
    if not name:
        return
    from spector_gpu.kernels.native import native

    setter = getattr(native, "set_dot_impl", None)
    if setter is None:
        raise SystemExit(f"this build cannot pin its dot implementation to {name!r}")
    setter(name)


def main() -> None:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "what",
        nargs="?",
        default="all",
        choices=("all", "targets", "compare", "_measure", "gpu", "dense", "bm25"),
    )
    ap.add_argument("--baseline", default=BASELINE, help="commit that compare measures against")
    ap.add_argument("--repeat", type=int, default=1, help="compare: pairs of runs (medians)")
    ap.add_argument(
        "--baseline-dir", type=Path, default=None, help="where compare keeps the baseline tree"
    )
    ap.add_argument(
        "--baseline-dot",
        default="",
        choices=("", "avx2", "scalar"),
        help="compare: pin the baseline's hand-written dot and selection paths (avx2: as they "
        "run on the AVX2 machine kind of issue 36, on a host that also has AVX-512)",
    )
    ap.add_argument("--only", default="", help="comma list of locomo,dense,lexical,batch,single")
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--dense-memories", type=int, default=200_000)
    ap.add_argument("--dense-queries", type=int, default=256)
    ap.add_argument("--lexical-queries", type=int, default=1_000)
    ap.add_argument("--batch-queries", type=int, default=200)
    ap.add_argument("--gpu-queries", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-busy", action="store_true", help="skip the busy-neighbour figure")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--embedder", default=None, help="embedder spec of the stores (default: the library's)"
    )
    a = ap.parse_args(argv)
    global EMBEDDER
    EMBEDDER = a.embedder
    if a.quick:
        a.memories, a.dense_memories, a.lexical_queries, a.rounds = 10_000, 20_000, 200, 1
        extra = extra or ["--quick"]
    if a.what == "_measure":
        _pin_dot(os.environ.get("SPECTOR_BENCH_DOT", ""))
        print("JSON " + json.dumps(measure(a)))
        return
    if a.what == "compare":
        compare(a)
        return
    if a.what in ("all", "targets"):
        targets(a)
    if a.what == "gpu":
        bench_gpu(a.memories, a.gpu_queries, a.rounds)
    if a.what in ("all", "dense"):
        print("\n== dense kernel (benchmarks/bench_dense.py) ==")
        _run_script("bench_dense.py", extra)
    if a.what in ("all", "bm25"):
        print("\n== lexical kernel (benchmarks/bench_bm25.py) ==")
        _run_script("bench_bm25.py", extra)


if __name__ == "__main__":
    main()
