"""Execute the notebooks and store them with their outputs (``make notebooks``).

``python notebooks/execute.py [NOTEBOOK ...]`` runs each notebook (default: every ``*.ipynb`` here)
top to bottom in a fresh kernel, from this folder, with one scratch folder shared by all (02 and 03
train the same tiny sweep: the second finds it finished), and writes it back with its outputs and
figures, so a reader sees them on a code host. A cell that raises stops the run with its error;
nothing is written for that notebook. ``tests/test_notebooks.py`` executes them the same way
(:func:`execute`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent


def execute(path: Path, scratch: Path, timeout_s: int = 600):
    """The notebook at ``path`` executed in a fresh ``python3`` kernel (its outputs filled in)."""
    os.environ["INITMEM_NOTEBOOK_TMP"] = str(scratch)
    os.environ.pop("INITMEM_SWEEP_DIR", None)
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"  # figures as outputs
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return notebook


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted(HERE.glob("*.ipynb"))
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            start = time.monotonic()
            notebook = execute(path, Path(scratch))
            for cell in notebook.cells:  # no run-specific noise in the stored file
                cell.get("metadata", {}).pop("execution", None)
            nbformat.write(notebook, path)
            images = sum(
                "image/png" in out.get("data", {})
                for cell in notebook.cells
                for out in cell.get("outputs", [])
            )
            print(f"{path.name}: {time.monotonic() - start:.0f} s, {images} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
