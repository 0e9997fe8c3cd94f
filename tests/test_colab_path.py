"""The Colab path, rehearsed offline: the first cell of a notebook, with the Colab marker set
(``REPROBOOK_COLAB=1``) and the repository address pointed at a local clone
(``REPROBOOK_REPO``), clones the book into a fresh folder (``REPROBOOK_HOME``), installs its
library without touching torch, and the notebook runs to the end from a folder outside any
checkout.

The kernel runs in a new virtual environment that sees the book's installed packages (a path
file) but not the library itself, as Colab sees its own torch and numpy but not reprobook; pip
may use no index, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "10_tactile_mnist" / "01_interface.ipynb"


def _base_python() -> str:
    base = (
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )
    return str(base) if base.exists() else shutil.which("python3") or sys.executable


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_colab_cell_clones_installs_without_torch_and_runs(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(origin)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    book_site = Path(sysconfig.get_path("purelib"))
    (site / "book-packages.pth").write_text(f"{book_site}\n")
    import torch

    torch_record = next(book_site.glob("torch-*.dist-info")) / "RECORD"
    before = torch_record.stat().st_mtime_ns
    fresh = tmp_path / "somewhere"
    fresh.mkdir()
    home = tmp_path / "content" / "reprobook"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOOK_")}
    env.update(
        {
            "REPROBOOK_COLAB": "1",
            "REPROBOOK_REPO": f"file://{origin}",
            "REPROBOOK_HOME": str(home),
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    out = fresh / "out.ipynb"
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "papermill",
            str(NOTEBOOK),
            str(out),
            "-p",
            "n_episodes",
            "2",
            "--no-progress-bar",
            "--cwd",
            str(fresh),
        ],
        cwd=fresh,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (home / "notebooks" / NOTEBOOK.parent.name / "claims.yml").exists()  # cloned
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import reprobook, torch; print(reprobook.__file__); print(torch.__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert installed[0].startswith(str(home)), installed  # the library comes from the clone
    assert installed[1].startswith(str(book_site)) and torch.__file__.startswith(str(book_site))
    assert torch_record.stat().st_mtime_ns == before  # torch untouched
    assert not list(site.glob("torch*"))
    results = home / "_build" / "results" / "reduced" / "tactile_mnist" / "01_interface.json"
    assert json.loads(results.read_text())["claims"]  # ran to the end and recorded
