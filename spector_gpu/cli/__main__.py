"""``python -m spector_gpu.cli``: the same as the ``spector-gpu`` console script."""

import sys

from .app import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
