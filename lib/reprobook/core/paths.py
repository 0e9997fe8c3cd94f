"""Where the book lives on disk: the repository root, the chapters and the results folder."""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "REPROBOOK_ROOT"
RESULTS_ENV = "REPROBOOK_RESULTS"
TAG_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-.")


def _looks_like_root(path: Path) -> bool:
    return (path / "_toc.yml").is_file() and (path / "notebooks").is_dir()


def book_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root: ``$REPROBOOK_ROOT``, else the first folder above ``start`` (default:
    the working directory) holding ``_toc.yml`` and ``notebooks/``, else the checkout this
    package was installed from (an editable install).

    Raises FileNotFoundError, saying what was searched, when none of these is a book.
    """
    env = os.environ.get(ROOT_ENV)
    if env:
        root = Path(env).expanduser().resolve()
        if not _looks_like_root(root):
            raise FileNotFoundError(
                f"${ROOT_ENV}={env} is not a book root (no _toc.yml and notebooks/ there)"
            )
        return root
    here = Path(start or os.getcwd()).resolve()
    for candidate in (here, *here.parents):
        if _looks_like_root(candidate):
            return candidate
    installed = Path(__file__).resolve().parents[3]
    if _looks_like_root(installed):
        return installed
    raise FileNotFoundError(
        f"no book root above {here} nor at {installed}: set ${ROOT_ENV} to a checkout of the book"
    )


def results_dir(root: Path | None = None) -> Path:
    """The folder claim results are written to: ``$REPROBOOK_RESULTS`` or
    ``<root>/_build/results``."""
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return (root or book_root()) / "_build" / "results"


def results_file(profile: str, slug: str, notebook: str, root: Path | None = None) -> Path:
    """The results file of one notebook:
    ``<results>/<profile>/<chapter slug>/<notebook stem>.json``."""
    return results_dir(root) / profile / slug / f"{notebook}.json"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader never
    sees a half-written file and an interrupted write leaves the old file in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def check_tag(tag: str) -> str:
    """``tag`` when it names a run (lower-case letters, digits, '_', '-', '.'; '' for the
    untagged run), else a ValueError saying what a tag may hold."""
    if tag and (not set(tag) <= TAG_CHARS or tag.startswith(".")):
        raise ValueError(
            f"tag {tag!r}: use lower-case letters, digits, '_', '-' and '.' (not first)"
        )
    return tag


def build_dir(root: Path, tag: str = "") -> Path:
    """Where a run writes: ``<root>/_build`` for the default run, ``_build/tagged/<tag>`` else."""
    return Path(root) / "_build" if not tag else Path(root) / "_build" / "tagged" / check_tag(tag)


def tagged_results_dir(root: Path, tag: str = "") -> Path:
    """The results folder of a run: ``$REPROBOOK_RESULTS`` or ``_build/results`` untagged,
    ``_build/tagged/<tag>/results`` for a tagged run (``seed1`` for ``-p seed=1``)."""
    return results_dir(root) if not tag else build_dir(root, tag) / "results"
