"""Record provenance: the declared origin of every stored record (DESIGN §7).

Each record header stores one ``u8`` (EncodingHeader byte 47) with a :class:`RecordProvenance`
code. ``0`` means *unknown* and is never guessed: a legacy or unstamped record stays unknown
until a backfill finds evidence for it.

======  ===============  =====================================================================
 code    name             written by
======  ===============  =====================================================================
 0       unknown          nobody (legacy rows, or a code this version does not know)
 1       verbatim         episodic capture: conversation turns, transcript and dataset imports
 2       user_authored    a caller stating a fact, skill or working memory
 3       extracted        consolidation (facts distilled from episodes)
 4       derived          mechanical transforms of other records (merges)
======  ===============  =====================================================================

Display contract (the seed's ``--show-provenance``): known values are quiet unless asked for;
unknown is always flagged.
"""

from __future__ import annotations

from spector_gpu.enums import NamedIntEnum
from spector_gpu.errors import ValidationError

__all__ = [
    "UNKNOWN_PROVENANCE_FLAG",
    "RecordProvenance",
    "format_provenance",
    "parse_provenance",
]

#: What :func:`format_provenance` prints for an unknown value, shown or not.
UNKNOWN_PROVENANCE_FLAG = "⚠ provenance: unknown"


class RecordProvenance(NamedIntEnum):
    """Record provenance code, stored as a ``u8`` in each record header."""

    UNKNOWN = 0
    VERBATIM = 1
    USER_AUTHORED = 2
    EXTRACTED = 3
    DERIVED = 4

    @property
    def label(self) -> str:
        """Lower-case name as shown to users and accepted by :func:`parse_provenance`."""
        return self.name.lower()


_BY_LABEL: dict[str, RecordProvenance] = {p.name.lower(): p for p in RecordProvenance}


def parse_provenance(value: str | int | RecordProvenance) -> RecordProvenance:
    """Parse a provenance name (``"verbatim"``, ``"user_authored"``, …) or code (0–4).

    Names are matched case-insensitively. ``bool`` is refused even though it is an ``int``.

    Raises:
        ValidationError: for any other string, an out-of-range code or another type.
    """
    if isinstance(value, RecordProvenance):
        return value
    if isinstance(value, bool):
        raise ValidationError(f"provenance: expected a name or code 0-4, got bool {value!r}")
    if isinstance(value, int):
        try:
            return RecordProvenance(value)
        except ValueError:
            raise ValidationError(
                f"provenance: code {value} is not one of 0-4 "
                f"({', '.join(f'{p.value} {p.label}' for p in RecordProvenance)})"
            ) from None
    if isinstance(value, str):
        found = _BY_LABEL.get(value.lower())
        if found is None:
            raise ValidationError(
                f"provenance: {value!r} is not a known value; use one of "
                f"{', '.join(sorted(_BY_LABEL))}"
            )
        return found
    raise ValidationError(
        f"provenance: expected str, int or RecordProvenance, got {type(value).__name__}"
    )


def format_provenance(value: str | int | RecordProvenance, *, show: bool = False) -> str:
    """Render a record's provenance for display.

    Known values render as ``""`` (quiet) unless ``show=True``, then as
    ``"provenance: verbatim"`` etc. Unknown always renders as ``"⚠ provenance: unknown"``.
    A header byte outside 0–4 (a newer writer, or damage) is displayed as unknown with its
    code, ``"⚠ provenance: unknown (code 9)"``, rather than raising: display never guesses and
    never hides that the value is not understood.

    Raises:
        ValidationError: for a string that is not a provenance name, or a non-int/str value.
    """
    is_code = isinstance(value, int) and not isinstance(value, (bool, RecordProvenance))
    if is_code and not 0 <= int(value) <= max(RecordProvenance):
        return f"{UNKNOWN_PROVENANCE_FLAG} (code {value})"
    prov = parse_provenance(value)
    if prov is RecordProvenance.UNKNOWN:
        return UNKNOWN_PROVENANCE_FLAG
    return f"provenance: {prov.label}" if show else ""
