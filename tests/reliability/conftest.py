"""Fixtures shared by the reliability suites."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from spector_gpu.storage.io import set_observer

from .harness import FaultInjector


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """Scratch space on tmpfs when there is one: crash images are written thousands of times,
    and a page-cache-only filesystem keeps each reopen well under a millisecond of I/O."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="spector-crash-") as d:
            yield Path(d)
    else:
        yield tmp_path


@pytest.fixture
def injector() -> Iterator[list[FaultInjector]]:
    """Holds the test's fault injectors; the I/O observer is removed afterwards."""
    holder: list[FaultInjector] = []
    yield holder
    set_observer(None)
