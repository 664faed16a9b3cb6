"""The recall pathway: gates → relays → pool → fusion → hydration (DESIGN §5 Recall).

Batched tensor work end to end on the store's device (:mod:`.pathway` orchestrates,
:mod:`.scorer` computes); relays in :mod:`.relays`, the padded pool in :mod:`.pool`, fusion in
:mod:`.fusion`, gates in :mod:`.gates`, typed results in :mod:`.hydration`; the tables the
batch gathers from are cached per store version (:mod:`.state`, :mod:`.columns`,
:mod:`.tables`).
"""

from .hydration import Hydrator, retrieval_strength
from .pathway import RecallPathway, StrengthWriter

__all__ = ["Hydrator", "RecallPathway", "StrengthWriter", "retrieval_strength"]
