"""Device resolution: the one place where a device argument becomes a ``torch.device``.

``None`` and ``"auto"`` mean CUDA when it is available, else the CPU; an explicit CUDA device
that is not there raises :class:`~spector_gpu.errors.DeviceUnavailableError` rather than
silently falling back. CUDA is probed when :func:`resolve_device` is called, never at import.
"""

from __future__ import annotations

import logging

import torch

from spector_gpu.errors import DeviceUnavailableError, ValidationError
from spector_gpu.forksafe import forked_cuda_error

__all__ = ["DeviceLike", "resolve_device"]

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
