"""``reprobook new``: the scaffold of a chapter passes the book's own tests as it stands, and
``--remove`` leaves the tree exactly as it was. Runs on a copy of the repository."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from reprobook import scaffold

ROOT = Path(__file__).resolve().parents[1]


def _copy_of_the_book(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    archive = dest / "book.tar"
    with tarfile.open(archive, "w") as tar:
        for name in files:
            if (ROOT / name).is_file():
                tar.add(ROOT / name, arcname=name)
    book = dest / "book"
    with tarfile.open(archive) as tar:
        tar.extractall(book, filter="data")
    archive.unlink()
    return book


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_build" not in p.parts and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    return _copy_of_the_book(tmp_path_factory.mktemp("scaffold"))


def test_a_new_chapter_passes_the_tests_and_removing_it_restores_the_tree(book: Path) -> None:
    before = _digests(book)
    env = {
        **os.environ,
        "PYTHONPATH": str(book / "lib"),
        "REPROBOOK_ROOT": str(book),
        "REPROBOOK_RESULTS": str(book / "_build" / "test-results"),
    }
    cli = [sys.executable, "-m", "reprobook.cli"]
    made = subprocess.run(
        [*cli, "new", "99", "demo", "Demo"], cwd=book, env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    for rel in (
        "notebooks/99_demo/index.md",
        "notebooks/99_demo/claims.yml",
        "notebooks/99_demo/01_first.ipynb",
        "lib/reprobook/papers/demo/config.py",
        "tests/papers/test_demo.py",
    ):
        assert (book / rel).is_file(), rel
    assert "notebooks/99_demo/01_first" in (book / "_toc.yml").read_text()
    assert "| 99 | `demo` | Demo |" in (book / "README.md").read_text()
    assert "@misc{paper99_demo," in (book / "book" / "references.bib").read_text()

    # The house's own tests, run on the copy: the chapter's rules, its notebook end to end
    # through nbval, its unit tests, the table of contents, README and bibliography checks.
    select = (
        "demo or 01_first or toc or bibliography or readme or intro_lists or claim_has_a_notebook"
    )
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_house.py",
            "tests/test_book.py",
            "tests/test_prose.py",
            "tests/papers/test_demo.py",
            "notebooks/99_demo",
            "--nbval-lax",
            "--nbval-current-env",
            "-k",
            select,
        ],
        cwd=book,
        env=env,
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "passed" in tests.stdout and "failed" not in tests.stdout
    ruff = Path(sys.executable).with_name("ruff")
    new = ["notebooks/99_demo", "lib/reprobook/papers/demo", "tests/papers/test_demo.py"]
    for command in (["check"], ["format", "--check"]):
        lint = subprocess.run(
            [str(ruff), *command, "--no-cache", *new], cwd=book, capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout[-2000:]

    again = subprocess.run(
        [*cli, "new", "99", "demo", "Demo"], cwd=book, env=env, capture_output=True, text=True
    )
    assert again.returncode == 2 and "chapter number 99 is taken" in again.stderr
    gone = subprocess.run(
        [*cli, "new", "99", "demo", "Demo", "--remove"],
        cwd=book,
        env=env,
        capture_output=True,
        text=True,
    )
    assert gone.returncode == 0, gone.stderr
    assert _digests(book) == before


def test_remove_refuses_a_chapter_someone_changed(book: Path) -> None:
    scaffold.new_chapter("98", "demo_two", "Demo two", root=book)
    method = book / "lib" / "reprobook" / "papers" / "demo_two" / "method.py"
    method.write_text(method.read_text() + "# work in progress\n")
    with pytest.raises(scaffold.ScaffoldError, match="differ from the scaffold.*method.py"):
        scaffold.remove_chapter("98", "demo_two", "Demo two", root=book)
    assert method.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (("5", "x1", "T"), "two-digit chapter number"),
        (("97", "Bad-Slug", "T"), "slug must be lower-case"),
        (("97", "ok_slug", 'a "quoted" title'), "title must be"),
        (("97", "ok_slug", "T", "not-an-id"), "arxiv must be an arXiv id"),
        (("97", "ok_slug", "T", "", "a: b"), "part must be a caption"),
        (("02", "other", "T"), "chapter number 02 is taken"),
        (("97", "spr_ldp", "T"), "slug 'spr_ldp' is taken"),
    ],
)
def test_bad_requests_are_refused_and_change_nothing(book: Path, args, message) -> None:
    before = _digests(book)
    with pytest.raises(scaffold.ScaffoldError, match=message):
        scaffold.new_chapter(*args[:4], root=book, part=(args[4:] or [None])[0])
    assert _digests(book) == before


def test_a_planned_paper_keeps_its_bibliography_entry(book: Path) -> None:
    bib = book / "book" / "references.bib"
    before = bib.read_text()
    planned = [
        (number, slug)
        for number, slug in re.findall(r"^@misc\{paper(\d\d)_(\w+),", before, flags=re.M)
        if not list((book / "notebooks").glob(f"{number}_*"))
    ]
    if not planned:
        pytest.skip("every planned paper has its chapter")
    number, slug = planned[0]
    part = "Generative models"
    scaffold.new_chapter(number, slug, "A planned paper", root=book, part=part)
    assert bib.read_text() == before  # the hand-written entry is used, not duplicated
    toc = (book / "_toc.yml").read_text()
    here = toc.index(f"notebooks/{number}_{slug}/index")
    assert toc.index(f"  - caption: {part}") < here < toc.index("  - caption: Graphs")
    scaffold.remove_chapter(number, slug, "A planned paper", root=book, part=part)
    assert bib.read_text() == before and f"{number}_{slug}" not in (book / "_toc.yml").read_text()
