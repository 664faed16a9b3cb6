"""Subprocess body of the memory-bound tests: one ``remember_batch``, its peak RSS measured.

Run as ``python -m tests.reliability.peak_worker KIND COUNT BYTES STORE``; prints one JSON line
``{"peak": bytes above the baseline, "text_bytes": ..., "items": ..., "dim": ...}``. The peak is
the kernel's high-water mark (``VmHWM``) after resetting it (``/proc/self/clear_refs``) once the
store is open and warm, so only the call itself is measured.
"""

from __future__ import annotations

import gc
import json
import random
import sys
from pathlib import Path

from spector_gpu import SpectorMemory


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def _texts(kind: str, count: int, size: int) -> list[str]:
    rng = random.Random(20250605)
    if kind == "fdfa":  # NFKC expands U+FDFA (3 bytes) to 18 characters of 4 words
        return ["\ufdfa" * (size // 3)] * count
    vocab = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(5000)
    ]
    out = []
    for _ in range(count):
        words: list[str] = []
        length = 0
        while length < size:
            words.append(rng.choice(vocab))
            length += len(words[-1]) + 1
        out.append(" ".join(words)[:size])
    return out


def main() -> None:
    kind, count, size, store = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    texts = _texts(kind, count, size)
    with SpectorMemory.open(store, config={"store": {"durability": "none"}}) as mem:
        mem.remember_batch(["warm up the embedder, analyzer and stores", "a second turn"])
        gc.collect()
        base = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        mem.remember_batch(texts)
        peak = _status("VmHWM") - base
        dim = int(mem.embedder.dim)
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print(json.dumps({"peak": peak, "text_bytes": text_bytes, "items": count, "dim": dim}))


if __name__ == "__main__":
    main()
