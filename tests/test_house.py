"""The house rules every chapter follows (CONTRIBUTING.md, "Adding a chapter"), checked so that
a new chapter copying an old one copies the rules too:

- the book stands alone: no file points at notes outside the repository;
- each chapter states the equations its library implements, labelled on its index page, and
  the library's docstrings cite those labels (and only labels that exist);
- each chapter shows its method's core functions on a page (``core.show_source``);
- notebooks teach: short code cells, and a closing "What we found" and "Things to try" with
  the ``-p`` overrides a reader can change, which are real parameters of the notebook;
- one way to check inputs (``reprobook.core.checks``); one set-up call per notebook
  (``core.start``) reading the profile table keyed by the notebook's file stem; one import of
  the paper package per notebook, under one alias per chapter; one Lightning alias (``L``);
  one interval type (``core.Interval``), defined in core only; each paper package has its tests
  under its own name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reprobook import runner
from reprobook.core import find_chapters
from reprobook.core.chapters import VERDICT_LABELS, VERDICT_MEANINGS, VERDICTS

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = find_chapters(ROOT)
NOTEBOOKS = sorted(
    p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
MAX_CELL_LINES = 25

# Spelled in pieces so that this file does not match itself.
OUTSIDE = [
    re.compile(r"\.\./" + "shared"),
    re.compile(r"\b" + "brief" + r"(s|'s)?\b", re.IGNORECASE),
    re.compile("BOOK_" + "DESIGN"),
]
# $$ ... $$ (label), or a {math} directive with a :label: option
EQ_LABEL = re.compile(
    r"^\$\$\s*\(([A-Za-z][\w-]*)\)\s*$|^```\{math\}\s*\n:label:\s*([A-Za-z][\w-]*)\s*$", re.M
)
EQ_CITE = re.compile(r"eq\.\s+`([A-Za-z][\w-]*)`")  # eq. `label` in a docstring or comment


def _labels(text: str) -> set[str]:
    return {a or b for a, b in EQ_LABEL.findall(text)}


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = []
    for name in out.stdout.splitlines():
        path = ROOT / name
        if path.suffix in {".png", ".jpg", ".gz", ".parquet", ".npz", ".pt"} or not path.is_file():
            continue
        files.append(path)
    return files


def _cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def test_no_file_points_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for pattern in OUTSIDE:
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                hits.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not hits, (
        "the book must stand alone; put what these point at on the chapter's page:\n"
        + "\n".join(hits)
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_equations_are_labelled_on_the_page_and_cited_by_the_library(chapter):
    pages = [chapter.folder / "index.md"]
    labels: set[str] = set()
    for page in pages:
        labels |= _labels(page.read_text(encoding="utf-8"))
    for nb in sorted(chapter.folder.glob("*.ipynb")):
        for cell in _cells(nb):
            if cell["cell_type"] == "markdown":
                labels |= _labels(_source(cell))
    assert labels, f"{chapter.folder.name}/index.md states no labelled equation ($$ ... $$ (label))"
    package = ROOT / "lib" / "reprobook" / "papers" / chapter.slug
    cited: dict[str, list[str]] = {}
    for py in sorted(package.rglob("*.py")):
        for label in EQ_CITE.findall(py.read_text(encoding="utf-8")):
            cited.setdefault(label, []).append(py.name)
    unknown = {k: v for k, v in cited.items() if k not in labels}
    assert not unknown, f"the library cites equations no page of {chapter.slug} labels: {unknown}"
    uncited = sorted(labels - set(cited))
    assert not uncited, f"labelled equations of {chapter.slug} that no docstring cites: {uncited}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_each_chapter_shows_its_method_on_a_page(chapter):
    shown = [
        nb.name
        for nb in chapter.folder.glob("*.ipynb")
        if "core.show_source(" in nb.read_text(encoding="utf-8")
    ]
    assert shown, f"no notebook of {chapter.slug} shows its method's code with core.show_source"


def _parameters(nb: Path) -> set[str]:
    """The names a run accepts as ``-p`` overrides (the runner's own reading of the cell)."""
    try:
        return set(runner.parameters_cell(nb))
    except runner.RunError:  # no parameters cell
        return set()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_cell_ids_are_unique(nb):
    """nbformat 4.5 requires each cell's id to be unique in its notebook; a reader's Jupyter
    (and nbval, papermill) otherwise renames the duplicates on every load, with a warning."""
    ids = [c.get("id") for c in _cells(nb)]
    assert all(ids), f"{nb.name}: cells without an id"
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"{nb.name}: cell ids used more than once: {twice}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_cells_are_short_and_it_closes_with_findings_and_things_to_try(nb):
    cells = _cells(nb)
    long = [
        f"cell {i} ({len(_source(c).splitlines())} lines)"
        for i, c in enumerate(cells)
        if c["cell_type"] == "code"
        and "colab" not in c.get("metadata", {}).get("tags", [])
        and len(_source(c).splitlines()) > MAX_CELL_LINES
    ]
    assert not long, (
        f"code cells over {MAX_CELL_LINES} lines (move the logic to the library): {long}"
    )
    headings = [
        line.strip().lstrip("#").strip().lower()
        for c in cells
        if c["cell_type"] == "markdown"
        for line in _source(c).splitlines()
        if line.startswith("## ")
    ]
    assert "what we found" in headings, 'no closing "## What we found" section'
    assert "things to try" in headings, 'no closing "## Things to try" section'
    assert headings.index("things to try") > headings.index("what we found")
    tries = next(
        _source(c)
        for c in cells
        if c["cell_type"] == "markdown" and "## Things to try" in _source(c)
    )
    overrides = set(re.findall(r"-p\s+([a-z_][a-z0-9_]*)=", tries))
    assert overrides, '"Things to try" names no `-p name=value` override'
    unknown = overrides - _parameters(nb)
    assert not unknown, (
        f'"Things to try" overrides {sorted(unknown)}, which are not parameters of the notebook'
    )


def test_paper_packages_check_inputs_through_core_checks():
    copies = []
    for py in sorted((ROOT / "lib" / "reprobook" / "papers").rglob("*.py")):
        for i, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"isinstance\([^)]*\bbool\b", line):
                copies.append(f"{py.relative_to(ROOT)}:{i}")
    assert not copies, "a hand-written bool/int test; use reprobook.core.checks:\n" + "\n".join(
        copies
    )


def test_profiles_resolve_through_the_core():
    wrappers = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "lib" / "reprobook" / "papers").glob("*/config.py")
        if re.search(r"^def resolve\(", p.read_text(encoding="utf-8"), re.M)
    ]
    assert not wrappers, (
        f"use core.start(package, stem, profile, seed, ...), not a wrapper: {wrappers}"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_profile_tables_are_keyed_by_the_notebooks_file_stems(chapter):
    import importlib

    table = importlib.import_module(f"reprobook.papers.{chapter.slug}.config").PROFILES
    stems = chapter.notebook_stems()
    assert sorted(table) == sorted(stems), (
        f"{chapter.slug}.config.PROFILES has keys {sorted(table)}; each notebook's file stem is "
        f"its key, one per notebook: {stems}"
    )


def test_one_alias_per_chapter_for_its_paper_package():
    for ch in CHAPTERS:
        aliases = set()
        for nb in ch.notebooks:
            text = "".join(
                "".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                if c["cell_type"] == "code"
            )  # fmt: skip
            found = re.findall(
                rf"^from reprobook\.papers import {ch.slug}(?: as (\w+))?$", text, re.M
            )
            aliases.update(a or ch.slug for a in found)
        assert len(aliases) == 1, f"chapter {ch.slug} imports its package under {sorted(aliases)}"


def _lib_sources():
    return sorted((ROOT / "lib" / "reprobook").rglob("*.py"))


def test_one_lightning_alias():
    other = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _lib_sources()
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"\s*import (lightning(\.pytorch)?|pytorch_lightning) as (?!L\b)", line)
        or re.match(r"\s*import pytorch_lightning\b", line)
    ]
    assert not other, "import Lightning as `import lightning as L`:\n" + "\n".join(other)


def test_one_interval_type_defined_in_core():
    copies = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _lib_sources()
        if "core" not in p.relative_to(ROOT / "lib" / "reprobook").parts[:1]
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"class \w*Interval\b", line)
    ]
    assert not copies, "use core.Interval (core/stats.py), not a chapter's own:\n" + "\n".join(
        copies
    )


def test_each_paper_package_has_tests_under_its_name():
    slugs = sorted(
        p.name
        for p in (ROOT / "lib" / "reprobook" / "papers").iterdir()
        if (p / "__init__.py").exists()
    )
    files = sorted(p.name for p in (ROOT / "tests" / "papers").glob("test_*.py"))
    for slug in slugs:
        assert any(re.fullmatch(rf"test_{slug}(_\w+)?\.py", f) for f in files), (
            f"no tests/papers/test_{slug}.py"
        )
    strays = [f for f in files if not any(re.fullmatch(rf"test_{s}(_\w+)?\.py", f) for s in slugs)]
    assert not strays, f"test files named after no paper package (test_<slug>[_part].py): {strays}"


def test_every_verdict_has_a_label_and_a_meaning():
    assert set(VERDICT_LABELS) == set(VERDICTS) == set(VERDICT_MEANINGS)


def _imports_of(path: Path, package: str | None = None) -> set[str]:
    """The absolute module names a file imports (relative imports resolved against its
    package, by default the one its place under lib/ says), at any depth."""
    import ast

    if package is None:
        package = ".".join(path.relative_to(ROOT / "lib").parent.parts)
    package = package.split(".")
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def test_imports_point_one_way() -> None:
    """The rules CONTRIBUTING states: core imports no paper; no paper imports another; the
    runner, its executor, the Slurm executor, the ledger, the site and the command line import
    no paper; and what the runner and the Slurm executor share lives in execute.py, which
    imports neither (no circle between them)."""
    lib = ROOT / "lib" / "reprobook"
    wrong = []
    for path in sorted(lib.rglob("*.py")):
        names = _imports_of(path)
        rel = path.relative_to(lib).as_posix()
        papers = {n.split(".")[2] for n in names if n.startswith("reprobook.papers.")}
        papers |= {"*"} if "reprobook.papers" in names and rel.startswith("core/") else set()
        if rel.startswith("core/") and papers:
            wrong.append(f"{rel} imports paper(s) {sorted(papers)}")
        if rel.startswith("papers/"):
            own = rel.split("/")[1]
            others = papers - {own}
            if others:
                wrong.append(f"{rel} imports another paper: {sorted(others)}")
        if "/" not in rel and rel != "__init__.py" and papers:
            wrong.append(f"{rel} imports paper(s) {sorted(papers)}")
        if rel in ("slurm.py", "execute.py") and "reprobook.runner" in names:
            wrong.append(f"{rel} imports the runner")
        if rel == "execute.py" and "reprobook.slurm" in names:
            wrong.append("execute.py imports the Slurm executor")
    assert wrong == []


def test_the_import_rule_sees_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from ..tagbo import config\nfrom . import lp\nfrom ...runner import run\n"
        "def f():\n    import reprobook.papers.tailcon\n"
    )
    names = _imports_of(probe, "reprobook.papers.spr_ldp")
    assert "reprobook.papers.tailcon" in names
    assert {"reprobook.papers.tagbo", "reprobook.papers.spr_ldp.lp", "reprobook.runner"} <= names


# Libraries that take a second or more to import (with what they import in turn); a notebook pays
# for them only where it uses them. `import reprobook.core` and its plotting theme import none of
# them, and a paper package imports none of the frameworks when it is imported: each loads with
# the submodule that uses it, on first use. tagbo imports botorch on purpose: importing its
# acquisition functions draws from NumPy's global generator, so that must come before a notebook
# seeds its run.
CORE_FREE_OF = ("pandas", "matplotlib.pyplot", "seaborn", "scipy.stats", "torch", "lightning")
PACKAGE_FREE_OF = ("lightning", "torch_geometric", "transformers", "seaborn", "datasets", "ap_gym")
EAGER_ON_PURPOSE = {"tagbo": {"botorch"}}


def _imported_by(statements: str, names) -> list[str]:
    """Which of ``names`` a fresh interpreter has imported after running ``statements``."""
    script = f"import sys\n{statements}\nprint([m for m in {tuple(names)!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_core_and_its_theme_import_no_heavy_library():
    assert _imported_by("import reprobook.core as c\nc.set_theme()", CORE_FREE_OF) == []


@pytest.mark.parametrize("slug", sorted(c.slug for c in CHAPTERS))
def test_paper_package_imports_its_frameworks_on_first_use(slug):
    names = PACKAGE_FREE_OF + tuple(EAGER_ON_PURPOSE.get(slug, ()))
    found = set(_imported_by(f"import reprobook.papers.{slug}", names))
    assert found <= EAGER_ON_PURPOSE.get(slug, set()), (
        f"importing reprobook.papers.{slug} imports {sorted(found)}: import it in the "
        "submodule that uses it and let the package load that submodule on first use"
    )


def _tests_conftest():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "reprobook_tests_conftest", ROOT / "tests" / "conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_xdist_gives_each_chapter_to_one_worker_and_each_test_file_to_one():
    from types import SimpleNamespace

    conf = _tests_conftest()

    def config(dist):
        return SimpleNamespace(
            getoption=lambda name: {"dist": dist}[name],
            getvalue=lambda name: {"tx": ["2*popen"]}[name],
        )

    assert conf.pytest_xdist_make_scheduler(config("load"), None) is None
    scheduler = conf.pytest_xdist_make_scheduler(config("loadfile"), None)
    unit = scheduler._split_scope
    notebooks = sorted(ROOT.glob("notebooks/*/*.ipynb"))
    units = {unit(f"{nb.relative_to(ROOT).as_posix()}::Cell 3") for nb in notebooks}
    assert units == {f"notebooks/{c.folder.name}" for c in CHAPTERS}
    assert unit("tests/papers/test_spr_ldp.py::test_lp[3-0.5]") == "tests/papers/test_spr_ldp.py"
    assert unit("tests/test_core.py::test_x") == "tests/test_core.py"
    assert unit("notebooks/ruff.toml") == "notebooks/ruff.toml"
