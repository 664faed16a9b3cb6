"""The cortex layer: typed stores that own their codecs, derived indexes, quarantine.

Pathways write through :meth:`Cortex.write` with a :class:`WriteBatch` and read through the
cortex's stores and columns; nothing above this layer encodes a record or names a byte
offset. Re-exports only (no work at import time).
"""

# the crash-test kill points a pathway names its own steps with (SPECTOR_KILLPOINT)
from ..storage.killpoints import killpoint
from .analyzer import Analyzer
from .batch import NewMemories, WriteBatch
from .bm25 import BM25Index
from .columns import Columns
from .cortex import STORE_FORMAT, Cortex, DeferredStrength
from .cues import Cues
from .derived_indexes import DerivedIndexes
from .episodic import EpisodeRecord, EpisodicMemory
from .event_log import EventLog
from .fixed import FixedStrideStore
from .header import encode_headers, is_consolidated, is_tombstoned, tag_bloom
from .ids import TsidGenerator, decode_tsid, encode_tsid, encode_tsids, ids_digest
from .index import IndexMemory
from .links import Links
from .payload import Payload, attributed, build_payload, decode_payload, encode_payload
from .provenance_store import LineageRun, LineageState, ProvenanceMemory
from .quarantine import Quarantine
from .slots import ProceduralMemory, SemanticMemory, SlotMemory
from .stores import Stores, region_specs
from .strength import StrengthMemory, decayed
from .textpool import TextPool
from .vectors import VectorSlab
from .working import Thought, WorkingMemory

__all__ = [
    "STORE_FORMAT",
    "Analyzer",
    "BM25Index",
    "Columns",
    "Cortex",
    "Cues",
    "DeferredStrength",
    "DerivedIndexes",
    "EpisodeRecord",
    "EpisodicMemory",
    "EventLog",
    "FixedStrideStore",
    "IndexMemory",
    "LineageRun",
    "LineageState",
    "Links",
    "NewMemories",
    "Payload",
    "ProceduralMemory",
    "ProvenanceMemory",
    "Quarantine",
    "SemanticMemory",
    "SlotMemory",
    "Stores",
    "StrengthMemory",
    "TextPool",
    "Thought",
    "TsidGenerator",
    "VectorSlab",
    "WorkingMemory",
    "WriteBatch",
    "attributed",
    "build_payload",
    "decayed",
    "decode_payload",
    "decode_tsid",
    "encode_headers",
    "encode_payload",
    "encode_tsid",
    "encode_tsids",
    "ids_digest",
    "is_consolidated",
    "is_tombstoned",
    "killpoint",
    "region_specs",
    "tag_bloom",
]
