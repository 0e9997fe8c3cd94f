"""Shared cells of every chapter notebook, and a helper that writes a notebook from cells.

Used by chapter authors (``python tools/notebook_cells.py --check`` verifies that every
notebook's first cell is the current Colab cell). Notebooks are committed without outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat

from reprobook.scaffold import colab_cell

ROOT = Path(__file__).resolve().parents[1]

# The cell's text lives in the library (the chapter scaffold writes it too).
COLAB_CELL = colab_cell(ROOT)


def notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook from (kind, source) pairs; kind is "md", "code" or "parameters"."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    out = [nbformat.v4.new_code_cell(COLAB_CELL, metadata={"tags": ["colab", "hide-input"]})]
    for kind, source in cells:
        source = source.strip("\n")
        if kind == "md":
            out.append(nbformat.v4.new_markdown_cell(source))
        elif kind == "parameters":
            out.append(nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]}))
        else:
            out.append(nbformat.v4.new_code_cell(source))
    # a title cell first, then the Colab cell
    if out[1].cell_type == "markdown":
        out[0], out[1] = out[1], out[0]
    for i, cell in enumerate(out):
        cell.id = f"cell-{i:02d}"
    nb.cells = out
    return nb


def write(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.validate(nb)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def check() -> int:
    bad = []
    for path in sorted((ROOT / "notebooks").rglob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        if "".join(code[0]["source"]) != COLAB_CELL:
            bad.append(str(path.relative_to(ROOT)))
    for b in bad:
        print(f"{b}: its first code cell is not the current Colab cell", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(check() if "--check" in sys.argv else 0)
