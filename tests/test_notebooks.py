"""Every notebook in notebooks/ executes top to bottom without error, and is stored with its outputs
(``make notebooks``: ``notebooks/execute.py``), so a reader on a code host sees its figures.

The notebooks share one scratch folder: 02 and 03 run the same tiny sweep into it, so the second finds
its runs finished (a sweep skips finished runs) and the sweep is trained once per test session.
"""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch, scratch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("INITMEM_SWEEP_DIR", raising=False)
    monkeypatch.setenv("INITMEM_NOTEBOOK_TMP", str(scratch))
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        out
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_with_its_outputs(path):
    """Every code cell was executed (in order) and the notebook holds at least one figure."""
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    counts = [cell.get("execution_count") for cell in code]
    assert all(isinstance(c, int) for c in counts), f"{path.name}: run `make notebooks`"
    assert counts == sorted(counts)
    images = sum("image/png" in out.get("data", {}) for cell in code for out in cell.outputs)
    assert images >= 1
    assert not any(out.get("output_type") == "error" for cell in code for out in cell.outputs)
