"""Finished runs kept in the repository, so that the book can show what a machine it does not
build on measured (a full-profile run on a GPU node or a cluster).

``reprobook archive CHAPTER ... --profile full`` copies a chapter's results files, as the run
wrote them, to ``archive/<profile>/<slug>/`` and writes ``archive/manifests/<profile>/<slug>.json``:
when it was archived, and for each notebook its wall time, peak memory and when it finished,
with the commit, hardware and package versions the results record. The archive has the layout
of a results folder, so the ledger reads it like one (:func:`reprobook.ledger.collect` with
``results=archive_dir(root)``); an archived value whose claims file or notebook changed since
is marked stale, as any result is.

An archive is refused, naming why, for a chapter that has a notebook without results, a result
made under other versions of its claims file or notebook, or a result from another profile.
It replaces the chapter's earlier archive at that profile as a whole.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .core.chapters import Chapter
from .core.claims import load_results, stale_sources
from .core.paths import atomic_write_text

__all__ = ["ArchiveError", "archive_dir", "manifest_path", "archive_chapter", "read_manifest"]


class ArchiveError(ValueError):
    """A run that cannot be archived; the message says why."""


def archive_dir(root: Path) -> Path:
    """``<root>/archive``: the committed results of archived runs, by profile and chapter."""
    return root / "archive"


def manifest_path(root: Path, profile: str, slug: str) -> Path:
    return archive_dir(root) / "manifests" / profile / f"{slug}.json"


def read_manifest(root: Path, profile: str, slug: str) -> dict[str, Any] | None:
    """The manifest of a chapter's archived run at ``profile``, or None."""
    path = manifest_path(root, profile, slug)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _timings(state: dict[str, Any], slug: str, results: Path) -> dict[str, dict[str, Any]]:
    """notebook stem -> the run state's entry (wall time, peak memory, finished) when it
    belongs to the results file there now (same digest)."""
    from .runner import file_digest

    out = {}
    for key, entry in state.items():
        nb = Path(key)
        path = results / f"{nb.stem}.json"
        if nb.parent.name.endswith(slug) and path.is_file():
            if entry.get("results_sha256") == file_digest(path):
                out[nb.stem] = entry
    return out


def archive_chapter(
    root: Path, chapter: Chapter, profile: str, results: Path, state: dict[str, Any]
) -> Path:
    """Copy ``chapter``'s results at ``profile`` from the results folder ``results`` into the
    archive, with its manifest (see the module doc); ``state`` is the run's state (the
    runner's record of each notebook's wall time and peak memory). Returns the manifest's
    path."""
    files = {d.get("notebook"): d for d in load_results(profile, root, chapter.slug, results)}
    stems = chapter.notebook_stems()
    missing = [s for s in stems if s not in files]
    if missing:
        raise ArchiveError(
            f"chapter {chapter.slug}: no {profile}-profile results for {', '.join(missing)}; "
            f"run `reprobook run {chapter.slug} --profile {profile}` first"
        )
    for stem in stems:
        data = files[stem]
        changed = stale_sources(chapter, data)
        if changed:
            raise ArchiveError(
                f"chapter {chapter.slug}: the result of {stem} was made under other versions of "
                f"{' and '.join(changed)}; run it again before archiving"
            )
        if data.get("profile") != profile:
            raise ArchiveError(
                f"chapter {chapter.slug}: {stem}'s result is at profile {data.get('profile')!r}, "
                f"not {profile!r}"
            )
    jobs = _timings(state, chapter.slug, results / profile / chapter.slug)
    first = files[stems[0]]
    manifest = {
        "chapter": chapter.slug,
        "profile": profile,
        "archived": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": first.get("facts", {}).get("git_commit"),
        "hardware": first.get("facts", {}).get("hardware"),
        "python": first.get("facts", {}).get("python"),
        "packages": first.get("facts", {}).get("packages"),
        "notebooks": [
            {
                "notebook": stem,
                "started": files[stem].get("started"),
                "seed": files[stem].get("seed"),
                "overrides": files[stem].get("overrides") or {},
                "commit": files[stem].get("facts", {}).get("git_commit"),
                "wall_s": jobs.get(stem, {}).get("wall_s"),
                "peak_mb": jobs.get(stem, {}).get("peak_mb"),
                "finished": jobs.get(stem, {}).get("finished"),
            }
            for stem in stems
        ],
    }
    target = archive_dir(root) / profile / chapter.slug
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{chapter.slug}-", dir=target.parent))
    try:
        for stem in stems:
            shutil.copy2(results / profile / chapter.slug / f"{stem}.json", staging)
        old = target.with_name(f".{chapter.slug}-old")
        if target.exists():
            os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    path = manifest_path(root, profile, chapter.slug)
    atomic_write_text(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path
