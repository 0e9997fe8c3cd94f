"""The book's own files: chapters, notebooks, configuration, bibliography."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from reprobook.core import chapters
from reprobook.runner import notebook_parameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from notebook_cells import COLAB_CELL  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = chapters.find_chapters(ROOT)
NOTEBOOKS = [nb for ch in CHAPTERS for nb in ch.notebooks]


def toc_files(node) -> list[str]:
    out = []
    if isinstance(node, dict):
        if "file" in node:
            out.append(node["file"])
        for value in node.values():
            out += toc_files(value)
    elif isinstance(node, list):
        for item in node:
            out += toc_files(item)
    return out


def test_config_pins_the_launch_settings() -> None:
    assert CONFIG["repository"]["branch"] == "main"
    assert CONFIG["repository"]["url"].startswith("https://github.com/")
    assert {"colab_url", "jupyterhub_url", "binderhub_url"} <= set(CONFIG["launch_buttons"])
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    assert CONFIG["only_build_toc_files"] is True


def test_every_chapter_and_notebook_is_in_the_toc() -> None:
    listed = toc_files(TOC)
    for ch in CHAPTERS:
        index = f"notebooks/{ch.name}/index"
        assert index in listed, f"{index} is missing from _toc.yml"
        assert [f for f in listed if f.startswith(f"notebooks/{ch.name}/") and f != index] == [
            f"notebooks/{ch.name}/{nb.stem}" for nb in ch.notebooks
        ]
    for f in listed:
        assert (ROOT / f"{f}.md").exists() or (ROOT / f"{f}.ipynb").exists(), f


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_contract(nb: Path) -> None:
    data = json.loads(nb.read_text())
    code = [c for c in data["cells"] if c["cell_type"] == "code"]
    for cell in code:
        assert not cell.get("outputs") and cell.get("execution_count") is None, (
            "commit notebooks without outputs"
        )
    # The first code cell installs the library in Colab only, from this repository, and never torch.
    first = "".join(code[0]["source"])
    assert first == COLAB_CELL, "the first code cell is tools/notebook_cells.COLAB_CELL"
    assert '"google.colab" in sys.modules' in first
    repo = CONFIG["repository"]
    assert f'"{repo["url"]}"' in first and f'"{repo["branch"]}"' in first
    assert not re.search(r"pip[^\n]*install[^\n]*\btorch\b", first)
    # The second is the parameters cell, with the reduced profile as its default.
    assert "parameters" in code[1]["metadata"].get("tags", [])
    params = notebook_parameters(nb)
    assert params["profile"] == "'reduced'" and "seed" in params
    source = "".join(code[1]["source"])
    for line in source.strip().splitlines():
        assert "#" in line, f"every parameter is commented: {line!r}"
        assert ":" in line.split("=")[0], f"every parameter is annotated: {line!r}"
    # The third is the set-up cell: it imports its paper package (one line, one style) and sets
    # up with one call, core.start(package, the notebook's file stem, profile, seed, ...).
    setup = "".join(code[2]["source"])
    slug = nb.parent.name.split("_", 1)[1]
    imports = re.findall(rf"^from reprobook\.papers import {slug}(?: as (\w+))?$", setup, re.M)
    assert len(imports) == 1, f"the set-up cell imports `from reprobook.papers import {slug} as ..`"
    alias = imports[0] or slug
    call = rf'^run, cfg = core\.start\(\s*{alias},\s*"{nb.stem}",\s*profile,\s*seed\b'
    assert re.search(call, setup, re.M), (
        f'run, cfg = core.start({alias}, "{nb.stem}", profile, seed'
    )
    body = "".join("".join(c["source"]) for c in code)
    assert "reprobook.papers." not in body, "import the paper package only as the set-up cell does"
    assert body.count("core.start(") == 1, "one set-up call per notebook"


def _bib_keys(text: str) -> list[str]:
    return re.findall(r"^@\w+\{([^,\s]+),", text, re.M)


def test_bibliography_keys_are_unique_and_every_citation_has_one() -> None:
    # a repeated key makes the bibliography unreadable to the book build (warnings are errors)
    keys = _bib_keys((ROOT / "book" / "references.bib").read_text(encoding="utf-8"))
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    assert not repeated, f"book/references.bib repeats the key(s) {repeated}"
    pages = [*(ROOT / "notebooks").glob("*/*.md"), *(ROOT / "notebooks").glob("*/*.ipynb")]
    pages += [*(ROOT / "book").glob("*.md")]
    cited = {
        key.strip()
        for page in pages
        for group in re.findall(r"\{cite[a-z:]*\}`([^`]+)`", page.read_text(encoding="utf-8"))
        for key in group.split(",")
    }
    missing = sorted(cited - set(keys))
    assert not missing, f"cited but not in book/references.bib: {missing}"


def test_bib_key_reader() -> None:
    text = "@misc{a1,\n title={x}}\n@article{b_2,\n}\n  @misc{indented, }"
    assert _bib_keys(text) == ["a1", "b_2"]


def test_every_paper_is_in_the_bibliography() -> None:
    bib = (ROOT / "book" / "references.bib").read_text()
    slugs = [ch.slug for ch in CHAPTERS]
    for ch in CHAPTERS:
        assert f"paper{ch.number}_{ch.slug}" in bib
        assert ch.paper.get("bibkey") == f"paper{ch.number}_{ch.slug}"
    assert slugs


def test_every_claim_has_a_notebook_that_records_it() -> None:
    for ch in CHAPTERS:
        for c in ch.claims:
            nb = ch.folder / f"{c.notebook}.ipynb"
            code = "\n".join(
                "".join(cell["source"])
                for cell in json.loads(nb.read_text())["cells"]
                if cell["cell_type"] == "code"
            )
            assert re.search(rf"""record\(\s*["']{c.id}["']""", code), (
                f"{c.id} is never recorded in {nb.name}"
            )


def test_status_box_puts_the_verdict_first_and_leaves_out_the_metric():
    from reprobook import site

    base = dict(
        note="",
        revisions=[],
        stale=[],
        papers=True,
        source="abstract",
        basis="method",
        group="papers_terms",
        evidence="exact",
        interval=None,
    )
    rows = [
        dict(
            base,
            claim="C1",
            metric="a very long metric " * 10,
            paper_value="0.5",
            value=0.25,
            verdict="reproduced",
        ),
        dict(
            base,
            claim="C2",
            metric="another",
            paper_value="theorem",
            value=None,
            verdict="needs_full",
        ),
        dict(
            base,
            claim="C3",
            metric="m",
            paper_value="> 0",
            value=0.1,
            interval=[0.05, 0.2],
            verdict="inconclusive",
            evidence="statistical",
            basis="reconstruction",
            group="reconstruction",
            verdict_label="inconclusive (our reconstruction)",
            note="Three seeds only. And a second sentence.",
            note_first="Three seeds only.",
            revisions=["was check {...}; it gave 0.2. Changed because z"],
        ),
        dict(
            base,
            claim="C4",
            metric="m",
            paper_value="n/a (extension)",
            value=1.0,
            verdict="reproduced",
            source="extension",
            group="extension",
            papers=False,
        ),
        dict(
            base,
            claim="C5",
            metric="m",
            paper_value="3",
            value=2.9,
            verdict="illustrated",
            evidence="illustration",
            basis="own code",
            group="illustration",
        ),
    ]
    box = site.status_box(rows, "reduced")
    assert box.startswith(
        "````{admonition} Status at the reduced profile. Of the paper's 4 claims, 2 were "
        "tested: 1 on the paper's terms (1 reproduced) and 1 only on our reconstruction "
        "(1 inconclusive); 1 is illustrated, not tested; 1 needs the full profile. "
        "Also 1 extension of ours (1 reproduced)"
    )
    header = next(line for line in box.splitlines() if line.startswith("|") and "claim" in line)
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "claim",
        "verdict",
        "ours",
        "paper",
        "rests on",
        "note",
    ]
    assert "very long metric" not in box and "0.25" in box and "ledger" in box
    # the note's first sentence sits beside the verdict; the rest stays in the fold-out
    assert (
        "| C3 | inconclusive (our reconstruction) (revised) | 0.1 [0.05, 0.2] | > 0 | "
        "reconstruction | Three seeds only. |"
    ) in box
    assert "| C5 | illustrated | 2.9 | 3 | our own code |" in box
    assert "**C3** (abstract, statistical). Rests on our reconstruction" in box
    assert "Three seeds only. And a second sentence. *Revised check:* was check" in box
    assert ":class: dropdown" in box


def test_repeated_scripts_are_dropped_from_a_page():
    from sphinx.builders.html._assets import _JavaScript

    from reprobook import sphinx_ext

    scripts = [
        _JavaScript("a.js"),
        _JavaScript(None, body="const X = 1"),
        _JavaScript("", body="const X = 1"),
        _JavaScript("a.js"),
        _JavaScript("a.js", **{"async": "async"}),
    ]
    ctx = {"script_files": scripts}
    sphinx_ext.dedupe_scripts(None, "p", "page.html", ctx, None)
    assert ctx["script_files"] is scripts and len(scripts) == 3
    assert [sphinx_ext.script_key(s) for s in scripts] == [
        ("a.js", ()),
        ("", (("body", "const X = 1"),)),
        ("a.js", (("async", "async"),)),
    ]


def test_config_serves_math_offline_and_loads_the_book_extension():
    extensions = CONFIG["sphinx"]["extra_extensions"]
    assert "sphinx-mathjax-offline" in extensions and "reprobook.sphinx_ext" in extensions


def test_toc_and_readme_are_written_from_the_chapters():
    from reprobook import registry

    for path, text in registry.expected(ROOT).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is out of step with the chapters: run `reprobook sync`"
        )
    toc = registry.toc_text(CHAPTERS)
    for ch in CHAPTERS:  # each chapter sits under the part its claims file names
        caption = toc.index(f"  - caption: {registry.part_of(ch)}\n")
        assert caption < toc.index(f"notebooks/{ch.name}/index") < toc.index("Back matter")


def test_readme_lists_every_chapter():
    readme = (ROOT / "README.md").read_text()
    listed = re.findall(r"^\| (\d\d) \| `([a-z0-9_]+)` \| (.+?) \|$", readme, flags=re.M)
    assert listed == [(ch.number, ch.slug, ch.title) for ch in CHAPTERS], (
        "README.md's chapter table differs from the chapters on disk (reprobook list)"
    )


def test_intro_lists_the_chapters_from_the_build():
    from reprobook import site

    assert site.CHAPTERS_MARK in (ROOT / "book" / "intro.md").read_text()
    table = site.chapters_table(ROOT, [])
    for ch in CHAPTERS:
        assert f"{{doc}}`{ch.title} </notebooks/{ch.name}/index>`" in table


def test_the_injected_parameters_cell_is_removed_from_the_page(tmp_path):
    from reprobook import site

    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "n = 1"},
            {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "n = 2"},
            {"cell_type": "code", "metadata": {}, "source": "print(n)"},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    src, dest = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    src.write_text(json.dumps(nb))
    site.hide_injected_parameters(src, dest)
    tags = [c["metadata"].get("tags", []) for c in json.loads(dest.read_text())["cells"]]
    assert tags == [["parameters"], ["injected-parameters", "remove-cell"], []]


def test_the_intro_verdict_table_is_generated_from_the_core():
    from reprobook import site
    from reprobook.core.chapters import VERDICT_LABELS, VERDICTS

    assert site.VERDICTS_MARK in (ROOT / "book" / "intro.md").read_text()
    rows = site.verdicts_table().splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == [VERDICT_LABELS[v] for v in VERDICTS]


def test_the_intro_basis_table_is_generated_from_the_core():
    from reprobook import site
    from reprobook.core.chapters import BASES

    assert site.BASES_MARK in (ROOT / "book" / "intro.md").read_text()
    rows = site.bases_table().splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == list(BASES)
    counted = [r.split(" | ")[2].rstrip(" |") for r in rows]
    assert counted.count("illustrated, not tested") == 2  # simulation and own code
