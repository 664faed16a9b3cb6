"""The one rule of optional extras: a missing framework is a ``MissingExtraError`` naming the
``pip install`` extra that brings it, raised when its adapter module is imported (never when
``spector_gpu`` or ``spector_gpu.integrations`` is)."""

from __future__ import annotations

from ..errors import MissingExtraError

__all__ = ["missing_extra"]


def missing_extra(framework: str, extra: str, cause: ImportError) -> MissingExtraError:
    """The error to raise when ``framework`` (e.g. ``"langgraph"``) cannot be imported.

    Args:
        framework: the distribution the adapter needs, as a user knows it.
        extra: the spector-gpu extra that installs it (``pip install 'spector-gpu[extra]'``).
        cause: the ``ImportError`` the import raised (its module name goes in the message,
            since a broken sub-dependency reads differently from an absent package).
    """
    missing = getattr(cause, "name", None) or framework
    return MissingExtraError(
        f"this adapter needs {framework} (module {missing!r} is not importable); "
        f"install the extra: pip install 'spector-gpu[{extra}]'"
    )
