"""Shared fixtures: a throwaway book with a toy chapter, for the runner's tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def make_notebook(cells: list[tuple[str, str, list[str]]]) -> dict:
    """A minimal nbformat-4 notebook from (cell_type, source, tags) triples."""
    out = []
    for kind, source, tags in cells:
        cell = {
            "cell_type": kind,
            "metadata": {"tags": tags},
            "source": textwrap.dedent(source).strip(),
        }
        if kind == "code":
            cell.update(outputs=[], execution_count=None)
        out.append(cell)
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


TOY_CLAIMS = """
paper: {title: A toy paper, arxiv: "0000.00000", bibkey: toy}
claims:
  - id: T1
    claim: A uniform draw lies below one half.
    metric: the draw
    paper_value: "< 0.5"
    source: reconstruction
    basis: method
    evidence: exact
    notebook: 01_draw
    check:
      reproduced: {max: 0.5}
  - id: T2
    claim: n is positive.
    metric: n
    paper_value: "> 0"
    source: extension
    basis: own code
    evidence: exact
    notebook: 02_count
    check:
      reproduced: {min: 1}
"""


def toy_notebook(name: str, body: str, params: str = "", slug: str = "toy") -> dict:
    return make_notebook(
        [
            ("markdown", f"# {name}", []),
            (
                "code",
                'profile: str = "reduced"  # the profile\nseed: int = 0  # the seed\n' + params,
                ["parameters"],
            ),
            (
                "code",
                f"""
            from reprobook import core
            run = core.begin("{slug}", "{name}", profile=profile, seed=seed, threads=1)
        """,
                [],
            ),
            ("code", body, []),
        ]
    )


@pytest.fixture
def toy_book(tmp_path: Path, monkeypatch) -> Path:
    """A book root with one chapter, ``01_toy``, of two notebooks that record claims."""
    monkeypatch.delenv(
        "REPROBOOK_RESULTS", raising=False
    )  # results under the toy book's own _build
    root = tmp_path / "book"
    chapter = root / "notebooks" / "01_toy"
    chapter.mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (chapter / "index.md").write_text("# Toy\n")
    (chapter / "claims.yml").write_text(TOY_CLAIMS)
    (root / "lib" / "reprobook" / "papers" / "toy").mkdir(parents=True)
    (root / "lib" / "reprobook" / "papers" / "toy" / "__init__.py").write_text("X = 1\n")
    (root / "requirements.lock").write_text("numpy==2.4.6\n")
    write_nb(
        chapter / "01_draw.ipynb",
        toy_notebook(
            "01_draw",
            """
        import numpy as np
        run.record("T1", float(np.random.rand()) * 0.5)
    """,
        ),
    )
    write_nb(
        chapter / "02_count.ipynb",
        toy_notebook(
            "02_count",
            """
        run.record("T2", n if n is not None else 3)
    """,
            params="n: int | None = None  # an override\n",
        ),
    )
    return root


def write_nb(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1))


# ---- how `make test` shares its work between xdist workers ---------------------------------
# With `--dist loadfile`, xdist gives each file to one worker. Here a chapter's notebooks count as
# one unit instead: one worker runs them in order, 01 first, as `reprobook run` does, so a later
# notebook loads the models the earlier ones trained (instead of a second worker training the same
# model at the same moment) and sees what they recorded. Every other test file stays a unit of
# its own. xdist hands out the units with the most items first, so the chapters start early and
# short test files fill the end. (xdist's own loadgroup would be the usual way, but xdist 3.8 sets
# Node._nodeid, which pytest 9.2 no longer reads, so its groups are silently ignored.) The hook
# is read when pytest starts with `tests` among its paths, as `make test` does.


def unit_of(nodeid: str) -> str:
    """A chapter's folder for the cells of its notebooks; the file for anything else."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "notebooks" and parts[2].endswith(".ipynb"):
        return f"notebooks/{parts[1]}"
    return path


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ChapterScheduling(config, log)
