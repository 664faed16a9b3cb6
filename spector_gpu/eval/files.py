"""Dataset files on disk: reading JSON with errors that name the file, writing atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import DatasetError
from ..paths import output_path

__all__ = ["read_json", "write_atomic"]


def read_json(path: Path) -> object:
    """Parse a JSON file, turning I/O and syntax errors into ``DatasetError`` naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise DatasetError(f"dataset file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset file {str(path)!r}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{str(path)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from exc
    except RecursionError:  # nesting deeper than the parser's stack: refuse, no traceback
        raise DatasetError(f"{str(path)!r} nests JSON arrays or objects too deeply") from None


def write_atomic(path: Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` through ``<path>.partial`` and ``os.replace``, so a
    reader never sees a half-written file; ``ValidationError`` for a path into a store
    directory (:func:`spector_gpu.paths.output_path`). Returns ``path``."""
    output_path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path
