"""``reprobook new NN slug "Title"``: a new chapter that passes ``make test`` as it stands.

It writes the chapter's folder (``index.md`` with the standard sections and one labelled
equation, ``claims.yml`` with one example claim, one notebook with the title cell, the Colab
cell, the parameters cell and the closing sections), its paper package (``__init__.py``,
``config.py`` with both profiles, ``method.py`` with the example estimator the equation
describes), its tests, and its entry in ``book/references.bib``; then ``_toc.yml`` and the
README's chapter table are written again from the chapters (:mod:`reprobook.registry`).
Every example is marked "replace": the chapter is a template, not a result. ``reprobook new NN
slug --remove`` takes an unmodified scaffold out again and leaves the tree as it was.

The shared Colab cell lives here too (``tools/notebook_cells.py`` re-exports it), so that the
scaffold and the committed notebooks use one text.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import registry
from .core.paths import atomic_write_text, book_root

__all__ = [
    "ScaffoldError",
    "colab_cell",
    "notebook_json",
    "new_chapter",
    "remove_chapter",
]


class ScaffoldError(ValueError):
    """A request the scaffold cannot carry out; the message says what to change."""


def colab_cell(root: Path | None = None) -> str:
    """The first code cell of every notebook: in Colab (or with ``REPROBOOK_COLAB=1``) it clones
    the book at the branch the pages were built from and installs the library; elsewhere it
    does nothing. The repository and branch come from ``_config.yml``."""
    root = root or book_root()
    repo = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["repository"]
    return f'''\
# Colab only: clone the book at the branch these pages were built from; install it.
# Colab keeps its own torch (nothing here installs torch); elsewhere this does nothing.
# REPROBOOK_COLAB=1, REPROBOOK_REPO and REPROBOOK_HOME rehearse it offline (see tests).
import os
import subprocess
import sys

if "google.colab" in sys.modules or os.environ.get("REPROBOOK_COLAB") == "1":
    REPO = os.environ.get("REPROBOOK_REPO", "{repo["url"]}")
    REF = os.environ.get("REPROBOOK_REF", "{repo["branch"]}")
    HOME = os.environ.get("REPROBOOK_HOME", "/content/reprobook")
    if not os.path.isdir(HOME):
        subprocess.run(
            ["git", "clone", "--depth", "1", "--branch", REF, REPO, HOME], check=True
        )
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "-e", HOME], check=True
        )
    sys.path.insert(0, os.path.join(HOME, "lib"))
    os.environ["REPROBOOK_ROOT"] = HOME'''


def notebook_json(cells: list[tuple[str, str]], root: Path | None = None) -> str:
    """A notebook (JSON text, no outputs) from ``(kind, source)`` pairs, kind ``"md"``,
    ``"code"`` or ``"parameters"``: the first pair (the title) first, then the Colab cell."""
    out = []
    for kind, source in cells:
        source = source.strip("\n")
        if kind not in ("md", "code", "parameters"):
            raise ScaffoldError(f"cell kind must be 'md', 'code' or 'parameters', got {kind!r}")
        if kind == "md":
            out.append({"cell_type": "markdown", "metadata": {}, "source": source})
        else:
            tags = {"tags": ["parameters"]} if kind == "parameters" else {}
            out.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": tags,
                    "outputs": [],
                    "source": source,
                }
            )
    colab = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": ["colab", "hide-input"]},
        "outputs": [],
        "source": colab_cell(root),
    }
    out.insert(1 if out and out[0]["cell_type"] == "markdown" else 0, colab)
    for i, cell in enumerate(out):
        cell["id"] = f"cell-{i:02d}"
    nb = {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class _Names:
    number: str
    slug: str
    title: str
    arxiv: str
    part: str = registry.DEFAULT_PART

    @property
    def folder(self) -> str:
        return f"{self.number}_{self.slug}"

    @property
    def label(self) -> str:  # equation labels are global in the book: prefix them
        return self.slug.replace("_", "-")

    @property
    def alias(self) -> str:  # the name notebooks import the paper package as
        parts = self.slug.split("_")
        return "".join(p[0] for p in parts) if len(parts) > 1 else self.slug

    @property
    def bibkey(self) -> str:
        return f"paper{self.number}_{self.slug}"


def _check_names(number: str, slug: str, title: str, arxiv: str, part: str | None = None) -> _Names:
    number = str(number)
    if not re.fullmatch(r"\d\d", number) or number == "00":
        raise ScaffoldError(f"NN must be a two-digit chapter number 01-99, got {number!r}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*[a-z0-9]", slug) or "__" in slug:
        raise ScaffoldError(
            f"slug must be lower-case letters, digits and single underscores, starting with a "
            f"letter (a Python package name such as spr_ldp), got {slug!r}"
        )
    title = " ".join(str(title).split())
    if not title or any(c in title for c in '"{}\\|'):
        raise ScaffoldError(
            f"title must be the paper's title, without the characters \" {{ }} \\ |, got {title!r}"
        )
    if arxiv and not re.fullmatch(r"\d{4}\.\d{4,5}", arxiv):
        raise ScaffoldError(f"arxiv must be an arXiv id such as 2606.07443, got {arxiv!r}")
    part = " ".join(str(part or registry.DEFAULT_PART).split())
    if not part or any(c in part for c in '"{}\\|:#'):
        raise ScaffoldError(
            f"part must be a caption such as {registry.BOOK_PARTS[0]!r}, without the characters "
            f"\" {{ }} \\ | : #, got {part!r}; the book's parts: {', '.join(registry.BOOK_PARTS)}"
        )
    return _Names(number, slug, title, arxiv, part)


# --- the files ---------------------------------------------------------------------------------


def _index_md(n: _Names) -> str:
    arxiv = (
        f"arXiv [{n.arxiv}](https://arxiv.org/abs/{n.arxiv}), " if n.arxiv else "(no arXiv id), "
    )
    return f"""\
({n.label})=
# {n.title}

**Paper:** *{n.title}*, the authors (replace), {arxiv}NeurIPS 2026 {{cite}}`{n.bibkey}`.

<!-- reprobook:status -->

## The question

Replace: two paragraphs on what the paper asks, what was known before it, and what it claims.

## How we rebuilt the method

Replace: where the method comes from (the full text, the released code, or only the abstract:
say plainly when it is our reconstruction), and the equations the library implements, each
labelled and cited by the docstring of the function that computes it. The example below is the
template's own.

The example estimator is the sample mean of $n$ independent draws $x_1, \\dots, x_n$:

$$
\\hat\\mu_n = \\frac{{1}}{{n}} \\sum_{{i=1}}^{{n}} x_i
$$ ({n.label}-estimator)

`{n.slug}.method.estimate` implements {{eq}}`{n.label}-estimator`; the first notebook shows its
code.

## What is checked, and where

- {{doc}}`01_first` checks the example claim C1: the estimator {{eq}}`{n.label}-estimator` is
  unbiased, decided on a Student-t interval over repetitions.

## What cannot be checked here

Replace: the claims no profile of this book can measure, and why.
"""


def _claims_yml(n: _Names) -> str:
    arxiv = f'"{n.arxiv}"' if n.arxiv else '""'
    return f"""\
# Claims of "{n.title}". C1 is the template's example: replace it with the paper's claims,
# each with its check written before its notebook first runs (see CONTRIBUTING.md).
paper:
  title: "{n.title}"
  arxiv: {arxiv}
  bibkey: {n.bibkey}
  part: "{n.part}"
  full_text: false

claims:
  - id: C1
    claim: >-
      Example (replace): the estimator of the chapter's first equation is unbiased.
    metric: mean over repetitions of (estimate - true mean)
    paper_value: "0 (example)"
    source: extension
    basis: method
    evidence: statistical
    notebook: 01_first
    check:
      reproduced: {{min: -0.1, max: 0.1}}
    no_effect: 0
    equivalence: true
    replicates: runs
    baseline: none
"""


def _notebook(n: _Names, root: Path) -> str:
    mod, alias = n.slug, n.alias
    return notebook_json(
        [
            (
                "md",
                f"""\
# 1. First notebook (C1)

Replace: what this notebook checks and what it costs. The example checks that the estimator
{{eq}}`{n.label}-estimator` is unbiased, over repeated samples, in a few seconds.""",
            ),
            (
                "parameters",
                """\
profile: str = "reduced"  # "reduced": 2 CPU cores, about a minute; "full": paper scale
seed: int = 0  # seed of the samples
n_repeats: int | None = None  # repetitions of the estimate; None keeps the profile's""",
            ),
            (
                "code",
                f"""\
import numpy as np

from reprobook import core
from reprobook.papers import {mod}{"" if alias == mod else f" as {alias}"}

run, cfg = core.start({alias}, "01_first", profile, seed, n_repeats=n_repeats)""",
            ),
            (
                "md",
                f"""\
## The method

The library computes {{eq}}`{n.label}-estimator`:""",
            ),
            ("code", f"core.show_source({alias}.method.estimate)"),
            (
                "md",
                """\
## Is it unbiased? (C1)

Each repetition draws a fresh sample and records the estimate's error; the claim is decided on
the Student-t interval of the mean error.""",
            ),
            (
                "code",
                f"""\
rng = np.random.default_rng(seed)
errors = [
    {alias}.method.estimate(rng.normal(cfg.true_mean, 1.0, cfg.n)) - cfg.true_mean
    for _ in range(cfg.n_repeats)
]
run.record("C1", core.t_interval(errors))
run.claims_table()""",
            ),
            ("md", "## What we found"),
            (
                "code",
                """\
iv = core.t_interval(errors)
core.md(
    f"Over {iv.n} repetitions the mean error is {iv.mean:.4f}, with a 95% interval of "
    f"[{iv.low:.4f}, {iv.high:.4f}]: C1 is {run.verdict_label('C1')}."
)""",
            ),
            (
                "md",
                f"""\
## Things to try

- `reprobook run {n.folder} -p n_repeats=20`: fewer repetitions widen the interval; watch
  the verdict turn inconclusive when it straddles a bar.""",
            ),
        ],
        root,
    )


def _init_py(n: _Names) -> str:
    return f'''\
"""{n.title}.

Library of chapter {n.number} (notebooks/{n.folder}): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from reprobook import core

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
__getattr__ = core.lazy_submodules(__name__)  # any other module on first use
'''


def _config_py(n: _Names) -> str:
    return f'''\
"""Profiles of the notebooks of chapter {n.number}: one frozen dataclass per notebook, with a
``reduced`` instance (2 CPU cores, about a minute a notebook), a ``full`` one (the paper's
scale) and a ``smoke`` one (the full one with its sizes cut to seconds). Notebooks call
``core.start(<package>, "01_first", profile, seed, ...)``: each table's key is the notebook's
file stem.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Resources


@dataclass(frozen=True)
class FirstConfig:
    """C1 (example): the estimator's error over repeated samples."""

    n: int = 100  # draws per sample
    n_repeats: int = 200  # repeated samples
    true_mean: float = 1.0  # the mean the draws come from


FULL_FIRST = FirstConfig(n=10_000, n_repeats=10_000)
PROFILES = {{
    "01_first": {{
        "reduced": FirstConfig(),
        "full": FULL_FIRST,
        "smoke": replace(FULL_FIRST, n=50, n_repeats=20),
    }},
}}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {{
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.25),
}}
'''


def _method_py(n: _Names) -> str:
    return f'''\
"""The example method of chapter {n.number} (replace with the paper's): the sample mean."""

from __future__ import annotations

import numpy as np

from reprobook.core import checks


def estimate(x) -> float:
    """The sample mean of the draws ``x`` (1-D, finite, at least one).

    Implements eq. `{n.label}-estimator` of notebooks/{n.folder}/index.md.
    """
    x = checks.array(x, "x", ndim=1)
    if x.size == 0:
        raise checks.InputError("x must hold at least one draw, got an empty array")
    return float(np.sum(x) / x.size)  # eq. {n.label}-estimator: (1 / n) sum_i x_i
'''


def _test_py(n: _Names) -> str:
    return f'''\
"""Tests of chapter {n.number}'s library (replace with the paper's exact properties)."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.{n.slug} import config, method


def test_estimate_is_the_sample_mean():
    assert method.estimate([1.0, 2.0, 6.0]) == 3.0
    x = np.random.default_rng(0).normal(size=50)
    assert method.estimate(x) == pytest.approx(x.mean(), abs=1e-12)


def test_estimate_refuses_bad_input():
    with pytest.raises(ValueError, match="x must be a 1-D array"):
        method.estimate(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least one draw"):
        method.estimate([])


def test_profiles_resolve():
    table = config.PROFILES["01_first"]
    reduced = core.resolve(table, "reduced")
    assert core.resolve(table, "reduced", n_repeats=7).n_repeats == 7
    assert core.resolve(table, "full").n > reduced.n
'''


def _bib_entry(n: _Names) -> str:
    eprint = (
        f"  eprint        = {{{n.arxiv}}},\n  archivePrefix = {{arXiv}},\n"
        f"  url           = {{https://arxiv.org/abs/{n.arxiv}}},\n"
        if n.arxiv
        else ""
    )
    return (
        f"@misc{{{n.bibkey},\n  author        = {{{{The authors}}}},\n"
        f"  title         = {{{n.title}}},\n  year          = {{2026}},\n{eprint}"
        f"  note          = {{NeurIPS 2026}}\n}}\n"
    )


def _files(n: _Names, root: Path) -> dict[Path, str]:
    pkg = root / "lib" / "reprobook" / "papers" / n.slug
    folder = root / "notebooks" / n.folder
    return {
        folder / "index.md": _index_md(n),
        folder / "claims.yml": _claims_yml(n),
        folder / "01_first.ipynb": _notebook(n, root),
        pkg / "__init__.py": _init_py(n),
        pkg / "config.py": _config_py(n),
        pkg / "method.py": _method_py(n),
        root / "tests" / "papers" / f"test_{n.slug}.py": _test_py(n),
    }


# --- the shared file: references.bib ---------------------------------------------------------


def _bib_with(text: str, n: _Names) -> str:
    return text.rstrip("\n") + "\n\n" + _bib_entry(n)


def _bib_without(text: str, n: _Names) -> str:
    """The bibliography without the scaffold's own entry (an entry written by hand stays)."""
    entry = _bib_entry(n)
    if ("\n\n" + entry) in text:
        return text.replace("\n\n" + entry, "\n", 1)
    return text.replace(entry, "", 1)


# --- the commands ------------------------------------------------------------------------------


def new_chapter(
    number: str,
    slug: str,
    title: str,
    arxiv: str = "",
    root: Path | None = None,
    part: str | None = None,
) -> list[Path]:
    """Write the scaffold of chapter ``number``/``slug`` in ``part`` of the book (one of
    ``registry.BOOK_PARTS``; default: a part of its own after them); returns the files written
    or changed. Refuses (changing nothing) when the number, slug, folder or package is taken."""
    root = root or book_root()
    n = _check_names(number, slug, title, arxiv, part)
    taken = [p.name for p in (root / "notebooks").glob(f"{n.number}_*")]
    if taken:
        raise ScaffoldError(f"chapter number {n.number} is taken by notebooks/{taken[0]}")
    if list((root / "notebooks").glob(f"[0-9][0-9]_{n.slug}")):
        raise ScaffoldError(f"slug {n.slug!r} is taken by another chapter")
    files = _files(n, root)
    existing = [str(p.relative_to(root)) for p in files if p.exists()]
    if existing:
        raise ScaffoldError(f"these files exist already: {', '.join(existing)}")
    bib = (root / "book" / "references.bib").read_text(encoding="utf-8")
    if not re.search(rf"@\w+\{{{n.bibkey},", bib):  # a planned paper has its entry already
        bib = _bib_with(bib, n)
    shared = {root / "book" / "references.bib": bib}
    written: list[Path] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
            written.append(path)
    except OSError:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    for path, text in shared.items():
        atomic_write_text(path, text)
    return [*files, *shared, *registry.sync(root)]


def remove_chapter(
    number: str,
    slug: str,
    title: str,
    arxiv: str = "",
    root: Path | None = None,
    part: str | None = None,
) -> None:
    """Take out a scaffold that ``new_chapter`` wrote with these arguments, as long as none of
    its files was changed since (a chapter someone worked on is never deleted this way)."""
    root = root or book_root()
    n = _check_names(number, slug, title, arxiv, part)
    files = _files(n, root)
    changed = [
        str(p.relative_to(root))
        for p, text in files.items()
        if p.exists() and p.read_text(encoding="utf-8") != text
    ]
    if changed:
        raise ScaffoldError(
            f"refusing to remove chapter {n.folder}: these files differ from the scaffold "
            f"(delete them by hand if that is what you want): {', '.join(changed)}"
        )
    for path in files:
        path.unlink(missing_ok=True)
    for folder in (root / "notebooks" / n.folder, root / "lib" / "reprobook" / "papers" / n.slug):
        shutil.rmtree(folder / "__pycache__", ignore_errors=True)
        shutil.rmtree(folder / ".ipynb_checkpoints", ignore_errors=True)
        if folder.exists() and not any(folder.iterdir()):
            folder.rmdir()
    bib = root / "book" / "references.bib"
    atomic_write_text(bib, _bib_without(bib.read_text(encoding="utf-8"), n))
    registry.sync(root)
