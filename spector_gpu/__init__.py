"""spector_gpu: a memory engine for AI agents.

Remember conversation turns, facts and skills in durable memory-mapped region files; recall
them with a hybrid search (BM25, INT8 dense similarity on torch CPU/CUDA or FAISS, association,
strength); reflect episodes into facts with exact provenance.
"""

from .config import (
    AssociationConfig,
    Config,
    DenseConfig,
    DreamConfig,
    EmbedderConfig,
    LexicalConfig,
    LLMConfig,
    RecallConfig,
    ReflectConfig,
    SleepConfig,
    StoreConfig,
    StrengthConfig,
    WorkingConfig,
    load_config,
)
from .embedders import Embedder
from .errors import (
    CitationError,
    ConfigError,
    CorruptionError,
    DatasetError,
    DeviceUnavailableError,
    DuplicateIdError,
    EmbedderMismatchError,
    LockUpgradeError,
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
    StoreNotFoundError,
    UnknownIdError,
    ValidationError,
)
from .lifecycle import MemoryEvent, MemoryKind
from .memory import SpectorMemory
from .metadata import Filter
from .multistore import MultiStore
from .pathways.chat_distiller import ChatDistiller
from .pathways.chat_endpoint import ChatEndpoint
from .pathways.check import CheckReport, Problem
from .pathways.compact import CompactionReport
from .pathways.distill import Distiller, ExtractiveDistiller, FactDraft, TurnView
from .pathways.reflect import BackfillReport, MemoryProvenance, ReflectReport
from .provenance.bundle import BundleInfo
from .provenance.bundle_reader import BundleReport
from .provenance.citations import Citation
from .provenance.manifest import ManifestEntry
from .provenance.record import RecordProvenance
from .provenance.verification import ChainBreak, ChainReport
from .types import (
    CognitiveResult,
    DreamEntry,
    DreamReport,
    Explanation,
    HebbianChange,
    Location,
    MemoryType,
    RecallBatch,
    RecallOptions,
    Recovery,
    RelayExplanation,
    Role,
    SleepReport,
    Source,
    WanderStep,
)

__version__ = "0.1.0"

__all__ = [
    "AssociationConfig",
    "BackfillReport",
    "BundleInfo",
    "BundleReport",
    "ChainBreak",
    "ChainReport",
    "ChatDistiller",
    "ChatEndpoint",
    "CheckReport",
    "Citation",
    "CitationError",
    "CognitiveResult",
    "CompactionReport",
    "Config",
    "ConfigError",
    "CorruptionError",
    "DatasetError",
    "DenseConfig",
    "DeviceUnavailableError",
    "Distiller",
    "DreamConfig",
    "DreamEntry",
    "DreamReport",
    "DuplicateIdError",
    "Embedder",
    "EmbedderConfig",
    "EmbedderMismatchError",
    "Explanation",
    "ExtractiveDistiller",
    "FactDraft",
    "Filter",
    "HebbianChange",
    "LLMConfig",
    "LexicalConfig",
    "Location",
    "LockUpgradeError",
    "ManifestEntry",
    "MemoryEvent",
    "MemoryKind",
    "MemoryProvenance",
    "MemoryType",
    "MissingExtraError",
    "ModelEndpointError",
    "MultiStore",
    "Problem",
    "ReadOnlyStoreError",
    "RecallBatch",
    "RecallConfig",
    "RecallOptions",
    "RecordProvenance",
    "Recovery",
    "ReflectConfig",
    "ReflectReport",
    "RegionFullError",
    "RelayExplanation",
    "Role",
    "SleepConfig",
    "SleepReport",
    "Source",
    "SpectorError",
    "SpectorMemory",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreFailedError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StrengthConfig",
    "TurnView",
    "UnknownIdError",
    "ValidationError",
    "WanderStep",
    "WorkingConfig",
    "__version__",
    "load_config",
]
