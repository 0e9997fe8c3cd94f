"""``reprobook times`` (make bench): each notebook's wall time, import time and peak memory
from a run's manifest and executed notebooks, against the book's budgets."""

from __future__ import annotations

import json
from pathlib import Path

from reprobook import bench
from reprobook.cli import main


def _executed(path: Path, durations: list[float], start_at: int) -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# t"}]
    for i, d in enumerate(durations):
        source = "run, cfg = core.start(x)\n" if i == start_at else f"y = {i}\n"
        cells.append(
            {"cell_type": "code", "metadata": {"papermill": {"duration": d}}, "source": source}
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}}))


def test_import_seconds_add_the_cells_up_to_the_set_up_call(tmp_path: Path) -> None:
    nb = tmp_path / "a.ipynb"
    _executed(nb, [0.25, 0.5, 2.0, 9.0], start_at=2)
    assert bench.import_seconds(nb) == 2.75  # Colab cell, parameters, set-up; not the work
    _executed(nb, [0.5, 1.0], start_at=-1)
    assert bench.import_seconds(nb) == 1.5  # no set-up cell: every code cell
    assert bench.import_seconds(tmp_path / "missing.ipynb") is None


def _book(tmp_path: Path, walls: list[float], imports: list[float]) -> Path:
    root = tmp_path / "book"
    (root / "notebooks").mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\n")
    jobs = []
    for i, (wall, imp) in enumerate(zip(walls, imports)):
        out = f"_build/tagged/bench/executed/reduced/notebooks/01_x/0{i}_n.ipynb"
        _executed(root / out, [0.0, 0.0, imp, wall - imp], start_at=2)
        jobs.append(
            {
                "notebook": f"notebooks/01_x/0{i}_n.ipynb",
                "status": "ok",
                "wall_s": wall,
                "peak_mb": 500.0 + i,
                "output": out,
            }  # fmt: skip
        )
    manifest = root / "_build/tagged/bench/runs/reduced/manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps({"notebooks": jobs, "load_average": {"start": [1, 1, 1], "end": [2, 2, 2]}})
    )
    return root


def test_the_report_names_every_budget_it_exceeds(tmp_path: Path) -> None:
    data, rows = bench.read_times(_book(tmp_path, [30.0, 61.0, 20.0], [1.0, 3.5, 2.0]), tag="bench")
    assert [r.import_s for r in rows] == [1.0, 3.5, 2.0]
    text, over = bench.report(data, rows)
    assert "wall times summed: 111 s" in text and "load average" in text
    assert len(over) == 2  # one notebook over 60 s, one importing for over 3 s; the sum is fine
    assert "01_x/01_n.ipynb (61 s)" in over[0] and "01_x/01_n.ipynb (3.5 s)" in over[1]
    data, rows = bench.read_times(_book(tmp_path / "b", [50.0] * 31, [1.0] * 31), tag="bench")
    assert bench.report(data, rows)[1] == ["the wall times sum to 1550 s, over 1500 s"]


def test_reprobook_times_reads_the_tagged_run_and_says_when_there_is_none(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    root = _book(tmp_path, [10.0], [1.0])
    monkeypatch.setenv("REPROBOOK_ROOT", str(root))
    assert main(["times", "--tag", "bench"]) == 0
    assert "budgets (sum, each notebook, imports): all met" in capsys.readouterr().out
    assert main(["times"]) == 2  # no untagged run
    assert "no run to report" in capsys.readouterr().err
    root = _book(tmp_path / "c", [70.0], [1.0])
    monkeypatch.setenv("REPROBOOK_ROOT", str(root))
    assert main(["times", "--tag", "bench", "--strict"]) == 1
