"""The notebooks: saved without outputs, and executed end to end (small data) so they cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["01_quickstart.ipynb", "02_batched_evaluation.ipynb", "03_gpu_vs_cpu_dense.ipynb"]


@pytest.mark.parametrize("name", NAMES)
def test_saved_without_outputs(name: str) -> None:
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a notebook without code"
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, cell["source"][:1]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("SPECTOR_NB_SMALL", "1")  # small data in every notebook
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # kernel "python3" launched as this interpreter: jupyter_client maps the spec's "python"
    # to sys.executable, so the notebook imports the same (editable) spector_gpu.
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    expected = {
        "01_quickstart.ipynb": "verified: True",
        "02_batched_evaluation.ipynb": "fusion=rrf",
        "03_gpu_vs_cpu_dense.ipynb": "ids identical to cpu (torch): 100.00%",
    }[name]
    assert expected in text
