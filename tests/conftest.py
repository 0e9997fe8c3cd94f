"""Shared fixtures: a throwaway book with a toy chapter, for the runner's tests."""

from __future__ import annotations

import json
import os
import textwrap
import warnings
from pathlib import Path

import pytest

from reprobook import kernels

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


# ---- each test's environment, and warm kernels for the notebooks nbval runs ---------------------
# `make test` names the kernel spec `reprobook-warm` (--nbval-kernel-name): each worker that runs
# notebook cells starts one kernel server (reprobook.kernels) before its first notebook, and every
# kernel it starts after that is forked from it with torch and Lightning already imported. Where
# no server can start, or the worker's environment no longer matches the server's, the same spec
# gives ordinary kernels.


@pytest.fixture(autouse=True)
def _environment_restored():
    """Whatever a unit test puts in ``os.environ`` ends with it. Lightning's ``seed_everything``
    sets ``PL_GLOBAL_SEED`` and ``PL_SEED_WORKERS``, and a deterministic ``Trainer`` sets
    ``CUBLAS_WORKSPACE_CONFIG``, in the process that calls them; left there, they reached every
    notebook kernel that nbval started later on the same worker (and turned its warm kernels
    into ordinary ones, since the kernel's environment no longer matched the server's).
    pytest's own ``PYTEST_*`` variables are left to pytest."""
    before = dict(os.environ)
    yield
    for key in [k for k in os.environ if k not in before and not k.startswith("PYTEST_")]:
        del os.environ[key]
    for key, value in before.items():
        if not key.startswith("PYTEST_") and os.environ.get(key) != value:
            os.environ[key] = value


class WarmKernels:
    """Registered as a plugin, not left as this conftest's hooks: a conftest's item hooks see
    only the items under its folder, and the notebooks are not under tests/.

    While notebook cells run, the worker's environment is the one it had when pytest started
    (plus pytest's own variables and the server's address): collecting the unit tests imports
    torch, RDKit and others, which put their own variables in the process (``TORCHINDUCTOR_*``,
    ``KMP_*``, ``RDBASE``, ...), and a kernel would inherit them, where a reader's kernel does
    not. The server starts from that same environment, so every notebook's kernel matches it;
    one that does not gets an ordinary kernel, and the run says so in its warnings summary (the
    kernel's own note goes to a stream nbval does not show). The unit tests get the worker's
    environment back, without the server's address, so their own kernels (the runner's,
    papermill's) stay ordinary ones."""

    def __init__(self):
        self.clean_env = dict(os.environ)
        self.server = None
        self.address: dict[str, str] = {}
        self.worker_env: dict[str, str] | None = None
        self.reported: set[str] = set()

    @staticmethod
    def _replace_environment(env: dict[str, str]) -> None:
        own = {k: v for k, v in os.environ.items() if k.startswith("PYTEST_")}
        os.environ.clear()
        os.environ.update({**env, **own})

    def pytest_runtest_setup(self, item):
        if not type(item).__module__.startswith("nbval"):
            if self.worker_env is not None:
                self._replace_environment(self.worker_env)
                self.worker_env = None
            return
        if self.server is None:
            self.server = kernels.KernelServer(self.clean_env)
            if self.server.start():
                self.address = self.server.env()
            else:
                warnings.warn(f"ordinary kernels: {self.server.failure}", stacklevel=1)
        if self.worker_env is None:
            self.worker_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
            self._replace_environment({**self.clean_env, **self.address})
        if self.address:
            differ = kernels.env_mismatch(self.server.base_env, dict(os.environ))
            if set(differ) - self.reported:
                self.reported.update(differ)
                warnings.warn(
                    f"{item.nodeid.split('::')[0]} gets an ordinary kernel: the worker's "
                    f"environment differs from the kernel server's in {', '.join(differ)}",
                    stacklevel=1,
                )

    def pytest_unconfigure(self, config):
        if self.worker_env is not None:
            self._replace_environment(self.worker_env)
        if self.server is not None:
            self.server.stop()


def pytest_configure(config):
    if config.getoption("nbval_kernel_name", None) == kernels.KERNEL_NAME:
        os.environ["JUPYTER_PATH"] = kernels.jupyter_path(dict(os.environ))
        config.pluginmanager.register(WarmKernels(), "reprobook-warm-kernels")
