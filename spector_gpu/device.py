"""Device resolution, and the CPU thread policy of small work.

``None`` and ``"auto"`` mean CUDA when it is available, else the CPU; an explicit CUDA device
that is not there raises :class:`~spector_gpu.errors.DeviceUnavailableError` rather than
silently falling back. CUDA is probed when :func:`resolve_device` is called, never at import.

:func:`single_threaded` runs a block with torch's CPU thread pool at one thread and restores
the caller's setting after: a multi-threaded op waits at its barrier for every thread, and on
a machine where another process is busy one of them waits a whole scheduler slice (a 1M-element
``mul`` measured 0.1 ms idle and 16 ms beside one busy process), so small work is faster and
steadier on one thread. :func:`embedder_threads` lifts that for an embedder's forward pass
over a group of memories being written: the caller's model is large work, worth the cores the
caller gave torch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import torch

from spector_gpu.errors import DeviceUnavailableError, ValidationError
from spector_gpu.forksafe import forked_cuda_error

__all__ = [
    "EMBED_THREADED_MIN",
    "DeviceLike",
    "embedder_threads",
    "resolve_device",
    "single_threaded",
]

logger = logging.getLogger(__name__)

DeviceLike = str | torch.device | None
"""What public APIs accept as ``device=``.

``None``/``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
"""

_CHOICES = '"auto" (or None), "cpu", "cuda", "cuda:N"'


def resolve_device(device: DeviceLike = None) -> torch.device:
    """Turn a device argument into a ``torch.device``.

    Args:
        device: ``None`` or ``"auto"`` → ``cuda`` if ``torch.cuda.is_available()`` else ``cpu``;
            ``"cpu"``; ``"cuda"`` or ``"cuda:N"`` (also as a ``torch.device``).

    Returns:
        The resolved device; ``"cuda"`` resolves to ``cuda:<current device>`` so that callers can
        compare devices with ``==``.

    Raises:
        DeviceUnavailableError: CUDA was asked for explicitly but is not available, or the index
            is out of range.
        ValidationError: anything else (unknown device type, malformed string, wrong type).
    """
    if device is None:
        return _auto()
    if isinstance(device, str):
        text = device.strip().lower()
        if text == "auto":
            return _auto()
        try:
            parsed = torch.device(text)
        except (RuntimeError, ValueError) as exc:
            raise ValidationError(
                f"device={device!r} is not a device; use one of {_CHOICES}"
            ) from exc
    elif isinstance(device, torch.device):
        parsed = device
    else:
        raise ValidationError(
            f"device must be a str, torch.device or None, not {type(device).__name__}; "
            f"use one of {_CHOICES}"
        )
    if parsed.type == "cpu":
        return torch.device("cpu")
    if parsed.type == "cuda":
        return _cuda(parsed, requested=device)
    raise ValidationError(f"device={device!r} is not supported; use one of {_CHOICES}")


def _bad_fork() -> bool:
    """A child forked after its parent initialised CUDA cannot use CUDA (torch's own flag)."""
    return bool(getattr(torch.cuda, "_is_in_bad_fork", lambda: False)())


def _auto() -> torch.device:
    if _bad_fork():
        logger.warning("%s; using the CPU", forked_cuda_error("auto"))
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _cuda(parsed: torch.device, *, requested: object) -> torch.device:
    if _bad_fork():
        raise forked_cuda_error(requested)
    if not torch.cuda.is_available():
        raise DeviceUnavailableError(
            f"device={requested!r} was requested but CUDA is not available here "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            'pass device="cpu" or device="auto", or install a CUDA build of torch on a GPU machine'
        )
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if parsed.index is None else parsed.index
    if not 0 <= index < count:
        raise DeviceUnavailableError(
            f"device={requested!r} names CUDA device {index} but only {count} are visible "
            f"(indices 0..{count - 1}); check CUDA_VISIBLE_DEVICES"
        )
    return torch.device("cuda", index)


_threads_lock = threading.Lock()
_threads_depth = 0
_threads_saved = 1


@contextlib.contextmanager
def single_threaded(enabled: bool = True) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``, restoring the previous count after.

    Nested and concurrent uses share one change: the first entry saves the count, the last
    exit restores it. The setting is process-wide, so other threads' torch work runs on one
    thread while a block is inside (it stays correct, and such blocks are short). With
    ``enabled=False`` it does nothing.
    """
    global _threads_depth, _threads_saved
    if not enabled:
        yield
        return
    with _threads_lock:
        if _threads_depth == 0:
            _threads_saved = torch.get_num_threads()
            if _threads_saved != 1:
                torch.set_num_threads(1)
        _threads_depth += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_depth -= 1
            if _threads_depth == 0 and _threads_saved != 1:
                torch.set_num_threads(_threads_saved)


EMBED_THREADED_MIN = 16  # texts per embedder call from which it runs on the caller's threads
_lifted = 0


@contextlib.contextmanager
def embedder_threads(n_texts: int) -> Iterator[None]:
    """Run an embedder's call over ``n_texts`` texts with the thread count the caller had
    before the enclosing :func:`single_threaded` blocks, when there are at least
    :data:`EMBED_THREADED_MIN` of them. The write path uses it: ``evaluate()`` builds its
    stores inside one, and a sentence model's forward pass over a group of memories is large
    work.

    Measured with all-MiniLM-L6-v2 on the 2-core host, alternating with the build before:
    ``evaluate()`` of 4 LongMemEval_S dev stores 42 -> 28 s idle and level beside a busy
    process; 2 LoCoMo dev conversations 27 -> 18 s idle, 26 -> 35 s beside a busy process
    (the caller's own setting, as the model runs outside the library). Queries stay on one
    thread: 32 short queries embedded on two ran 92 -> 64 ms idle but 97 -> 290 ms beside a
    busy process. Outside any single-threaded block, or when the caller had one thread, it
    does nothing."""
    global _lifted
    with _threads_lock:
        lift = n_texts >= EMBED_THREADED_MIN and _threads_depth > 0 and _threads_saved != 1
        if lift:
            if _lifted == 0:
                torch.set_num_threads(_threads_saved)
            _lifted += 1
    try:
        yield
    finally:
        if lift:
            with _threads_lock:
                _lifted -= 1
                if _lifted == 0 and _threads_depth > 0:
                    torch.set_num_threads(1)
