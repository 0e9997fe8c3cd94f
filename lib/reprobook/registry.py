"""The book's shared lists, made from the chapters themselves: the table of contents
(``_toc.yml``) and the README's chapter table. Each chapter names its part of the book in its
claims file (``paper: part:``); the parts' order is written once, here. ``reprobook sync`` (and
``reprobook new``) rewrite both files; ``tests/test_book.py`` fails when they drift.

Imports no paper package."""

from __future__ import annotations

from pathlib import Path

from .core.chapters import Chapter, find_chapters
from .core.paths import atomic_write_text, book_root

# The parts of the book, in the order the table of contents shows them. A chapter names one in
# its claims.yml; a part named by a chapter but not listed here comes after these, in chapter
# order (list it here to place it).
BOOK_PARTS = (
    "Statistics, privacy and learning theory",
    "Vision and language",
    "Benchmarks and agents",
    "Generative models",
    "Graphs, optimisation and security",
)
FRONT_MATTER = ("Using the book", ("book/how_to_run", "book/ledger"))
BACK_MATTER = ("Back matter", ("book/references",))
DEFAULT_PART = "Other papers"

TOC_HEADER = """\
# The book's table of contents, written by `reprobook sync` from the chapters (do not edit by
# hand): parts group the papers by field (each chapter's claims.yml names its part; the parts'
# order is reprobook.registry.BOOK_PARTS); each chapter's index page comes first, then its
# notebooks in order.
format: jb-book
root: book/intro
parts:
"""
README_START = "<!-- chapters: written by `reprobook sync` from the chapters -->"
README_END = "<!-- end of chapters -->"


class RegistryError(ValueError):
    """A shared file the chapters cannot be written into; the message says what to change."""


def part_of(chapter: Chapter) -> str:
    """The part of the book the chapter's claims file names (``paper: part:``)."""
    part = chapter.paper.get("part")
    return str(part) if part else DEFAULT_PART


def parts(chapters: list[Chapter]) -> list[tuple[str, list[Chapter]]]:
    """The parts in the book's order, each with its chapters in number order."""
    named = list(BOOK_PARTS)
    for ch in chapters:
        if part_of(ch) not in named:
            named.append(part_of(ch))
    grouped = [(p, [ch for ch in chapters if part_of(ch) == p]) for p in named]
    return [(p, chs) for p, chs in grouped if chs]


def toc_text(chapters: list[Chapter]) -> str:
    """``_toc.yml`` for these chapters."""
    lines = [TOC_HEADER.rstrip("\n")]

    def caption(name: str) -> None:
        lines.extend([f"  - caption: {name}", "    chapters:"])

    caption(FRONT_MATTER[0])
    lines.extend(f"      - file: {f}" for f in FRONT_MATTER[1])
    for name, chs in parts(chapters):
        caption(name)
        for ch in chs:
            lines.append(f"      - file: notebooks/{ch.name}/index")
            if ch.notebooks:
                lines.append("        sections:")
                lines.extend(
                    f"          - file: notebooks/{ch.name}/{nb.stem}" for nb in ch.notebooks
                )
    caption(BACK_MATTER[0])
    lines.extend(f"      - file: {f}" for f in BACK_MATTER[1])
    return "\n".join(lines) + "\n"


def readme_table(chapters: list[Chapter]) -> str:
    """The README's chapter table, between its markers."""
    rows = [f"| {ch.number} | `{ch.slug}` | {ch.title} |" for ch in chapters]
    return "\n".join([README_START, "", "| # | chapter | paper |", "|---|---|---|", *rows, "",
                      README_END])  # fmt: skip


def readme_with_table(text: str, chapters: list[Chapter]) -> str:
    """README.md's text with the chapter table between its markers replaced."""
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise RegistryError(
            f"README.md has no chapter table between the lines {README_START!r} and "
            f"{README_END!r}: put both lines where the table goes"
        )
    return text[:start] + readme_table(chapters) + text[end + len(README_END) :]


def expected(root: Path | None = None) -> dict[Path, str]:
    """The shared files as the chapters under ``root`` make them."""
    root = root or book_root()
    chapters = find_chapters(root)
    readme = (root / "README.md").read_text(encoding="utf-8")
    return {
        root / "_toc.yml": toc_text(chapters),
        root / "README.md": readme_with_table(readme, chapters),
    }


def sync(root: Path | None = None) -> list[Path]:
    """Rewrite ``_toc.yml`` and the README's chapter table from the chapters; returns the files
    that changed."""
    changed = []
    for path, text in expected(root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
            changed.append(path)
    return changed
