"""Shared pytest fixtures and options."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        # Triton kernels (kernels/fused.py) run on CPU tensors through Triton's interpreter,
        # which must be switched on before triton is first imported.
        os.environ["TRITON_INTERPRET"] = "1"

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    import torch

    # Under pytest-xdist (`make test`) the workers share the cores: each gets its part for
    # torch's intra-op threads, so two workers on two cores do not oversubscribe them. Tests
    # that depend on a thread count set it themselves.
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
LOCOMO_DEV = SHARED / "data" / "locomo10" / "locomo10-dev.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run reliability suites at 10-100x their CI sizes",
    )


@pytest.fixture
def soak(request: pytest.FixtureRequest) -> int:
    """Multiplier for crash/fuzz loop sizes: 1 in CI, 20 with --soak."""
    return 20 if request.config.getoption("--soak") else 1


@pytest.fixture
def locomo_dev() -> Path:
    if not LOCOMO_DEV.exists():
        pytest.skip("../shared/data/locomo10/locomo10-dev.json is not present")
    return LOCOMO_DEV


@pytest.fixture
def rows_shared_finely(monkeypatch: pytest.MonkeyPatch) -> None:
    """The native kernels' batches (BM25 selection, token relay, the pool's columns) offered
    to helper threads from their first two rows on (their own minimum is for speed), so that
    small test batches are shared too (with ``helpers_for`` or ``[recall] helper_threads``)."""
    from spector_gpu.kernels.native import native

    if native is None:
        return
    from spector_gpu.kernels import _lexical
    from spector_gpu.kernels.sharing import share_rows

    from spector_gpu.pathways.recall import columns

    monkeypatch.setattr(_lexical, "share_rows", lambda rows, _min, run: share_rows(rows, 1, run))
    monkeypatch.setattr(columns, "SHARE_MEMBERS", 1)
