"""A reader's habit: papermill on one notebook, from any folder, without `reprobook run`.

The notebook must find the book, run, and write its results where the ledger finds them: the
book's own results at seed 0, ``_build/tagged/seed<N>`` at another seed (``reprobook ledger
--tag seedN`` reads them); and it says where they went.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "18_spr_ldp" / "01_lp_check.ipynb"
SEED = 97  # a seed no other test or run uses, so its folder is this test's own


def test_papermill_from_another_folder_writes_where_the_ledger_reads(tmp_path: Path) -> None:
    tagged = ROOT / "_build" / "tagged" / f"seed{SEED}"
    shutil.rmtree(tagged, ignore_errors=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("REPROBOOK_ROOT", "REPROBOOK_RESULTS", "REPROBOOK_PROFILE", "REPROBOOK_OVERRIDES")
    }
    out = tmp_path / "out.ipynb"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "papermill",
                str(NOTEBOOK),
                str(out),
                "-p",
                "seed",
                str(SEED),
                "-p",
                "n_instances",
                "3",
                "--no-progress-bar",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = tagged / "results" / "reduced" / "spr_ldp" / "01_lp_check.json"
        data = json.loads(results.read_text())
        assert data["seed"] == SEED and data["claims"]["C1"]["value"] is not None
        texts = [
            o.get("text", "")
            for c in json.loads(out.read_text())["cells"]
            for o in c.get("outputs", [])
        ]
        printed = "".join("".join(t) if isinstance(t, list) else t for t in texts)
        assert (
            f"results in _build/tagged/seed{SEED}/results/reduced/spr_ldp/01_lp_check.json"
            in printed
        )
        ledger = subprocess.run(
            [
                sys.executable,
                "-m",
                "reprobook.cli",
                "ledger",
                "--tag",
                f"seed{SEED}",
                "--format",
                "json",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        rows = {(r["chapter"], r["claim"]): r for r in json.loads(ledger.stdout)}
        assert (
            rows[("spr_ldp", "C1")]["seed"] == SEED
            and rows[("spr_ldp", "C1")]["value"] == data["claims"]["C1"]["value"]
        )
    finally:
        shutil.rmtree(tagged, ignore_errors=True)


def test_the_runners_notebook_process_imports_papermill_without_pyarrow() -> None:
    """`python -m reprobook.execute`, which runs every notebook the runner executes, keeps
    pyarrow out of papermill's import (a third of its cost); papermill still imports."""
    code = (
        "import sys; from reprobook import execute; pm = execute.import_papermill(); "
        "from papermill import iorw; "
        "print(sys.modules['pyarrow'] is None, iorw.HadoopFileSystem.__name__, pm.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert out[0] == "True" and out[2] == "papermill"
    assert out[1] != "HadoopFileSystem"  # papermill's stand-in for a missing dependency
