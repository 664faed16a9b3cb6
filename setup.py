"""Package discovery only; everything else is declared in pyproject.toml.

setuptools' static ``packages.find`` cannot express the one mapping this project needs (the
top-level ``kernels/`` folder installs as ``spector_gpu.kernels``), and a hand-kept list missed
``spector_gpu.delegates`` for a whole round. Both trees are walked here instead.
"""

import os

from setuptools import find_packages, setup


def _packages() -> list[str]:
    found = find_packages(include=["spector_gpu", "spector_gpu.*"])
    kernels = find_packages(include=["kernels", "kernels.*"])
    return sorted(set(found) | {"spector_gpu." + name for name in kernels})


def _jobs() -> int:
    """Extensions compiled at once (build_ext's ``parallel``): one per core this process may
    use, so a wheel's five modules build in about half the time on two cores."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


setup(packages=_packages(), options={"build_ext": {"parallel": _jobs()}})
