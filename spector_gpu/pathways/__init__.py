"""Pathways: what the delegates run, each composing the cortex's stores and indexes.

remember (validate → one journaled write), recall (relays → pool → fusion → hydration),
reflect (consolidation with lineage, backfill), reinforcement (onRecall, reinforce, forget),
check (integrity) and export (forensic bundles). Pathways never touch bytes: the stores own
their codecs.
"""

from .check import CheckReport, check_store
from .distill import Distiller, ExtractiveDistiller, FactDraft, TurnView
from .export import export_bundle
from .recall import RecallPathway
from .reflect import BackfillReport, MemoryProvenance, ReflectPathway, ReflectReport
from .reinforcement import StrengthUpdater
from .remember import RememberPathway

__all__ = [
    "BackfillReport",
    "CheckReport",
    "Distiller",
    "ExtractiveDistiller",
    "FactDraft",
    "MemoryProvenance",
    "RecallPathway",
    "ReflectPathway",
    "ReflectReport",
    "RememberPathway",
    "StrengthUpdater",
    "TurnView",
    "check_store",
    "export_bundle",
]
