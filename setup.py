"""Package discovery only; everything else is declared in pyproject.toml.

setuptools' static ``packages.find`` cannot express the one mapping this project needs (the
top-level ``kernels/`` folder installs as ``spector_gpu.kernels``), and a hand-kept list missed
``spector_gpu.delegates`` for a whole round. Both trees are walked here instead.
"""

from setuptools import find_packages, setup


def _packages() -> list[str]:
    found = find_packages(include=["spector_gpu", "spector_gpu.*"])
    kernels = find_packages(include=["kernels", "kernels.*"])
    return sorted(set(found) | {"spector_gpu." + name for name in kernels})


setup(packages=_packages())
