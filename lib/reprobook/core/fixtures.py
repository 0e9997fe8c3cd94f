"""Tiny offline fixtures of a chapter's full-profile inputs, for the smoke profile.

The smoke profile runs the full profile's code path on CPU in seconds. Where the full profile
loads inputs from outside the locked environment (model weights, a hub dataset, a benchmark's
files), the smoke profile loads a fixture of the same schema instead: a randomly initialised
model of the same architecture family built from a small config and saved locally, a few rows
in the dataset's schema saved with ``datasets``, a few files in the benchmark's layout. Nothing
is downloaded.

A chapter with inputs writes ``lib/reprobook/papers/<slug>/fixtures.py`` with one builder per
input that is not a package::

    def tiny_qwen(dest: Path) -> None:      # writes into dest, an empty folder
        ...

    FIXTURES = {"hf-model:Qwen/Qwen2.5-7B-Instruct": tiny_qwen}

keyed by the input's ``find`` (see :class:`~reprobook.core.resources.Input`). The chapter's code
asks :func:`~reprobook.core.resources.locate` where to load an input from: the hub id (or the
path an environment variable names) at the full profile, the fixture's folder at smoke.
Fixtures are built on demand (:func:`ensure`; the runner calls it in a process of its own,
``python -m reprobook.core.fixtures ROOT SLUG FIND...``, so that it imports no paper) under
``_build/fixtures/<slug>-<digest>/``, the digest being that of the chapter's ``fixtures.py``,
so a changed builder is never served an old fixture; each is written to a temporary folder
and renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

FIXTURES_ENV = "REPROBOOK_FIXTURES"


class FixtureError(RuntimeError):
    """A chapter's smoke fixtures cannot be built: no builder for an input, or a builder that
    failed or wrote nothing."""


def fixtures_file(root: Path, slug: str) -> Path:
    return Path(root) / "lib" / "reprobook" / "papers" / slug / "fixtures.py"


def fixtures_root(root: Path) -> Path:
    """``$REPROBOOK_FIXTURES``, else ``<book>/_build/fixtures``."""
    env = os.environ.get(FIXTURES_ENV)
    return Path(env) if env else Path(root) / "_build" / "fixtures"


def chapter_fixture_dir(root: Path, slug: str) -> Path:
    """The folder of chapter ``slug``'s fixtures, named by the digest of its ``fixtures.py``."""
    source = fixtures_file(root, slug)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12] if source.is_file() else "none"
    return fixtures_root(root) / f"{slug}-{digest}"


def fixture_path(root: Path, slug: str, find: str) -> Path:
    """Where the fixture of the input checked as ``find`` (``"hf-model:Qwen/Qwen3-4B"``) lives."""
    way, _, what = find.partition(":")
    return chapter_fixture_dir(root, slug) / way / what.replace("/", "--")


def builders(root: Path, slug: str) -> dict:
    """The ``FIXTURES`` table of chapter ``slug`` of the book at ``root`` (``{}`` when it has no
    ``fixtures.py``): imported as ``reprobook.papers.<slug>.fixtures`` when that package is this
    book's, else loaded from the file."""
    import importlib
    import importlib.util

    source = fixtures_file(root, slug)
    if not source.is_file():
        return {}
    name = f"reprobook.papers.{slug}.fixtures"
    try:
        package = importlib.import_module(f"reprobook.papers.{slug}")
        ours = Path(package.__file__).resolve().parent == source.resolve().parent
    except ImportError:
        ours = False
    if ours:
        module = importlib.import_module(name)
    else:
        spec = importlib.util.spec_from_file_location(f"_fixtures_{slug}", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    table = getattr(module, "FIXTURES", None)
    if not isinstance(table, dict):
        raise FixtureError(f"{source.relative_to(root)} must define a dict FIXTURES")
    return table


def ensure(root: Path, slug: str, finds: Iterable[str]) -> dict[str, Path]:
    """Build (once) the fixtures of chapter ``slug`` for the inputs checked as ``finds`` and
    return where each lies. Package inputs (``module:``) have no fixture: the smoke profile
    imports the real package. Raises :class:`FixtureError` naming every input without a
    builder, or the builder that failed (its half-written folder is removed)."""
    wanted = [f for f in dict.fromkeys(finds) if not f.startswith("module:")]
    if not wanted:
        return {}
    table = builders(root, slug)
    lacking = [f for f in wanted if f not in table]
    if lacking:
        raise FixtureError(
            f"chapter {slug} has no smoke fixture for {', '.join(lacking)}: add a builder to "
            f"FIXTURES in {fixtures_file(root, slug).relative_to(root)}"
        )
    out = {}
    for find in wanted:
        path = fixture_path(root, slug, find)
        out[find] = path
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            table[find](tmp)
            if not any(tmp.iterdir()):
                raise FixtureError(f"chapter {slug}: the smoke fixture of {find} wrote nothing")
        except Exception as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(err, FixtureError):
                raise
            raise FixtureError(
                f"chapter {slug}: building the smoke fixture of {find} failed: "
                f"{type(err).__name__}: {err}"
            ) from err
        try:
            tmp.rename(path)
        except OSError:
            # built at the same time by another notebook of the chapter: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            if not path.exists():
                raise
    return out


def save_random_causal_lm(
    dest: Path, config, tokenizer, seed: int = 0, generation: dict | None = None
) -> None:
    """Save into ``dest``, as ``transformers`` saves a hub model, a causal language model with
    random weights built from ``config`` (a ``transformers`` config of the real architecture,
    made tiny) after seeding torch with ``seed``, its ``generation`` settings when given, and
    ``tokenizer``: the weights fixture the chapters' smoke profiles load in place of a
    pretrained model."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    if generation is not None:
        model.generation_config = GenerationConfig(**generation)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def main(argv: list[str] | None = None) -> int:
    """``python -m reprobook.core.fixtures ROOT SLUG FIND...``: build those fixtures; exit 1
    with the reason on one line when one cannot be built."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m reprobook.core.fixtures ROOT SLUG [FIND ...]", file=sys.stderr)
        return 2
    try:
        ensure(Path(args[0]), args[1], args[2:])
    except FixtureError as err:
        print(" ".join(str(err).split()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
