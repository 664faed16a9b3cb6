"""spector_gpu: a memory engine for AI agents.

Remember conversation turns, facts and skills in durable memory-mapped region files; recall
them with a hybrid search (BM25, INT8 dense similarity on torch CPU/CUDA or FAISS, association,
strength); reflect episodes into facts with exact provenance.
"""

from .config import Config, load_config
from .errors import (
    CitationError,
    ConfigError,
    CorruptionError,
    DatasetError,
    DeviceUnavailableError,
    DuplicateIdError,
    EmbedderMismatchError,
    MissingExtraError,
    ModelEndpointError,
    ReadOnlyStoreError,
    RegionFullError,
    SpectorError,
    StoreClosedError,
    StoreError,
    StoreFailedError,
    StoreFormatError,
    StoreLockedError,
    UnknownIdError,
    ValidationError,
)
from .lifecycle import MemoryEvent, MemoryKind
from .memory import SpectorMemory
from .pathways.chat_distiller import ChatDistiller
from .pathways.chat_endpoint import ChatEndpoint
from .pathways.check import CheckReport
from .pathways.distill import ExtractiveDistiller, FactDraft, TurnView
from .pathways.reflect import BackfillReport, MemoryProvenance, ReflectReport
from .provenance.citations import Citation
from .provenance.record import RecordProvenance
from .types import (
    CognitiveResult,
    Explanation,
    Location,
    MemoryType,
    RecallBatch,
    RecallOptions,
    RelayExplanation,
    Role,
    Source,
)

__version__ = "0.1.0"

__all__ = [
    "BackfillReport",
    "ChatDistiller",
    "ChatEndpoint",
    "CheckReport",
    "Citation",
    "CitationError",
    "CognitiveResult",
    "Config",
    "ConfigError",
    "CorruptionError",
    "DatasetError",
    "DeviceUnavailableError",
    "DuplicateIdError",
    "EmbedderMismatchError",
    "Explanation",
    "ExtractiveDistiller",
    "FactDraft",
    "Location",
    "MemoryEvent",
    "MemoryKind",
    "MemoryProvenance",
    "MemoryType",
    "MissingExtraError",
    "ModelEndpointError",
    "ReadOnlyStoreError",
    "RecallBatch",
    "RecallOptions",
    "RecordProvenance",
    "ReflectReport",
    "RegionFullError",
    "RelayExplanation",
    "Role",
    "Source",
    "SpectorError",
    "SpectorMemory",
    "StoreClosedError",
    "StoreError",
    "StoreFailedError",
    "StoreFormatError",
    "StoreLockedError",
    "TurnView",
    "UnknownIdError",
    "ValidationError",
    "__version__",
    "load_config",
]
