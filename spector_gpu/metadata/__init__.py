"""Per-memory JSON metadata: validation and canonical bytes, the filter language, and the
columnar index that evaluates filters as numpy masks before top-k."""

from __future__ import annotations

from .filters import Filter, compile_filter
from .index import MetadataIndex
from .paths import format_path, parse_path
from .values import (
    DEFAULT_MAX_BYTES,
    JSONValue,
    decode_metadata,
    encode_metadata,
    validate_metadata,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Filter",
    "JSONValue",
    "MetadataIndex",
    "compile_filter",
    "decode_metadata",
    "encode_metadata",
    "format_path",
    "parse_path",
    "validate_metadata",
]
