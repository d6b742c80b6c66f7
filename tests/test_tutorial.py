"""experiments/tutorial.ipynb runs top to bottom in a fresh kernel, so it cannot rot."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "experiments" / "tutorial.ipynb"


def test_tutorial_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
def test_tutorial_runs_top_to_bottom(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_TUTORIAL_OUT", str(tmp_path))  # the report goes here, not into figures/
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "experiments")}}
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "max |sum - final| = 0.0" in text
    query = next(line for line in text.splitlines() if line.startswith("query column"))
    assert [round(float(v), 2) for v in query.split("[")[1].rstrip("]").split()] == [0.0, 0.64, 0.9, 0.94]
    assert (tmp_path / "tutorial_report.html").stat().st_size > 100_000
