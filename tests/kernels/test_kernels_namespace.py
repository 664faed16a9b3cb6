"""The checkout's ``kernels/`` folder is ``spector_gpu.kernels``, never a top-level ``kernels``.

Run from the checkout's root, the current directory is on ``sys.path`` and ``import kernels``
finds the folder; that name belongs to another distribution (Hugging Face's, which
``transformers`` imports), so the folder hands it over or reports it missing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(*args: str, env_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if env_path is not None:
        env["PYTHONPATH"] = env_path
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_top_level_kernels_is_the_other_distribution(tmp_path: Path) -> None:
    other = tmp_path / "site" / "kernels"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("WHO = 'the other kernels'\n")
    (other / "extra.py").write_text("VALUE = 7\n")
    code = (
        "import kernels, kernels.extra, spector_gpu.kernels as ours\n"
        "print(kernels.WHO, kernels.extra.VALUE)\n"
        "print(ours.__name__, ours.topk_stable.__module__)\n"
        "print(hasattr(kernels, 'DenseIndex'))\n"
    )
    out = _python("-c", code, env_path=str(tmp_path / "site"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "the other kernels 7",
        "spector_gpu.kernels spector_gpu.kernels.topk",
        "False",
    ]


def test_top_level_kernels_missing_reads_as_missing() -> None:
    code = (
        "import sys\n"
        "try:\n"
        "    import kernels\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('missing', exc.name, 'kernels' in sys.modules)\n"
    )
    out = _python("-S", "-c", code)  # -S: no site-packages, so no other `kernels` anywhere
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "missing kernels False"
