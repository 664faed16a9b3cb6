"""The ``spector-gpu`` command line (console script ``spector_gpu.cli:main``).

Subcommands: ``eval``, ``ingest``, ``recall``, ``explain``, ``check``, ``provenance backfill``,
``export-bundle``, ``verify-bundle``, ``consolidate``, ``mcp``, ``demo``. Exit codes: 0
success, 1 a check that found problems (``check``, ``verify-bundle``), 2 a usage or input error
(missing file, malformed dataset, unknown id, …) reported as one line naming the file or
record, never a traceback. Existing stores are opened with the configuration saved in them
(``config.json``), so a store written with another embedder or analyzer opens as it was written.

Layout: :mod:`.app` (the parser and ``main``), one module per verb group — :mod:`.datasets`
(``eval``, ``ingest``, ``demo``), :mod:`.queries` (``recall``, ``explain``),
:mod:`.maintenance` (``check``, ``provenance backfill``, ``consolidate``, ``compact``),
:mod:`.bundles` (``export-bundle``, ``verify-bundle``), :mod:`.serving` (``mcp``) — over
:mod:`.store` (opening a saved store), :mod:`.output` (how results print) and :mod:`.arguments`
(shared parser pieces).
"""

from .app import build_parser, main
from .store import open_store

__all__ = ["build_parser", "main", "open_store"]
