"""Every notebook in notebooks/ executes top to bottom without error (outputs are not committed).

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
