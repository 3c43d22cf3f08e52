"""The example notebooks (examples/*.ipynb) are stored without outputs and run as committed.

Each notebook is executed with nbclient in a ``python3`` kernel, with examples/ as the working
directory (as Jupyter and ``jupyter execute`` run it). The kernel must be this interpreter's
environment (ipykernel's kernelspec names ``python``, which jupyter_client replaces with
``sys.executable``): a cell appended to the in-memory copy checks it.

The kernel runs with OMP_NUM_THREADS=1: the notebooks' models are tiny, and on a busy 2-core machine
torch's OpenMP threads spin against each other (one notebook took 67 s with torch's default of 2
threads and 11 s with 1, at a load average of 4.5).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import HANG_S

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def test_there_are_example_notebooks_and_the_readme_lists_them():
    assert [p.name for p in NOTEBOOKS] == ["01-quickstart.ipynb", "02-optimal-tau.ipynb", "03-own-algorithm.ipynb"]
    readme = (EXAMPLES / "README.md").read_text()
    for path in NOTEBOOKS:
        assert path.name in readme


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_stripped(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert set(nb.metadata) == {"kernelspec"}, "notebook metadata beyond the kernelspec"
    assert nb.metadata.kernelspec.name == "python3"
    for i, cell in enumerate(nb.cells):
        assert not cell.get("metadata"), f"cell {i} has metadata"
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has outputs"
            assert cell.execution_count is None, f"cell {i} has an execution count"


@pytest.mark.e2e  # a kernel, a whole process, per notebook (about 40 s of CPU for the three): `make test-e2e`
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # inherited by the kernel
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import json, sys\nprint(json.dumps(sys.prefix))"))
    before = sorted(p.name for p in EXAMPLES.iterdir())
    # every wait a guard against a hang, never a window a loaded machine can miss: nbclient's defaults give the kernel
    # 60 s to start and, after a cell's reply, 4 s for its outputs (then it warns and goes on without them: an error
    # or the last cell's print lost)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=HANG_S,
        startup_timeout=HANG_S,
        iopub_timeout=HANG_S,
        raise_on_iopub_timeout=True,
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and the traceback, on an error
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
    assert not errors
    prefix = json.loads(nb.cells[-1].outputs[0].text)
    assert Path(prefix).resolve() == Path(sys.prefix).resolve(), "the python3 kernel is another environment"
    assert sorted(p.name for p in EXAMPLES.iterdir()) == before, "the notebook wrote into examples/"
