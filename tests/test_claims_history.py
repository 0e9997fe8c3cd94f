"""A claim's check or metric may change after a value was recorded only in the open: every
claim whose check or metric differs from the first committed version of its claims file must
carry a ``revisions`` entry that names that first check (or metric), what it gave and why it
changed. The test walks the git history of every chapter's claims.yml."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from reprobook import scaffold
from reprobook.core import chapters

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout


def _history_available() -> str | None:
    if shutil.which("git") is None:
        return "git is not installed"
    try:
        if _git("rev-parse", "--is-inside-work-tree").strip() != "true":
            return "not a git checkout"
        if _git("rev-parse", "--is-shallow-repository").strip() == "true":
            return "a shallow clone has no first versions to compare with: clone with full history"
    except subprocess.CalledProcessError:
        return "not a git checkout"
    return None


def norm_metric(text) -> str:
    return " ".join(str(text).split())


def _scaffold_example() -> dict:
    names = scaffold._check_names("99", "example", "Example", "")
    return yaml.safe_load(scaffold._claims_yml(names))["claims"][0]


SCAFFOLD_EXAMPLE = _scaffold_example()


def _is_scaffold_example(entry: dict) -> bool:
    return (
        norm_metric(entry.get("metric", "")) == norm_metric(SCAFFOLD_EXAMPLE["metric"])
        and entry.get("check") == SCAFFOLD_EXAMPLE["check"]
    )


def first_versions(rel: str) -> dict[str, dict]:
    """claim id -> that claim's entry in the first commit whose claims file has it."""
    commits = _git("log", "--follow", "--reverse", "--format=%H", "--", rel).split()
    first: dict[str, dict] = {}
    names = [
        line
        for line in _git(
            "log", "--follow", "--reverse", "--format=", "--name-only", "--", rel
        ).splitlines()
        if line.strip()
    ]
    # --follow also takes a new chapter's skeleton for a copy of another chapter's claims file
    # (the scaffold writes the same text): keep only versions under this chapter's number.
    number = Path(rel).parent.name.split("_", 1)[0]
    for commit, name in zip(commits, names):
        if Path(name).parent.name.split("_", 1)[0] != number:
            continue
        try:
            text = _git("show", f"{commit}:{name}")
        except subprocess.CalledProcessError:
            continue  # the commit deleted the file
        data = yaml.safe_load(text) or {}
        for entry in data.get("claims") or []:
            cid = str(entry.get("id"))
            if _is_scaffold_example(entry):
                continue  # `reprobook new`'s placeholder, never a claim of the paper
            if cid not in first:
                first[cid] = entry
    return first


def unrecorded_changes(current: chapters.Claim, first: dict) -> list[str]:
    """What changed between ``first`` and ``current`` without a revision naming the first."""
    problems = []
    if first.get("check") != current.check:
        if not any(r.check == first.get("check") for r in current.revisions):
            problems.append(f"check changed from {first.get('check')} to {current.check}")
    if norm_metric(first.get("metric", "")) != norm_metric(current.metric):
        if not any(
            r.metric is not None and norm_metric(r.metric) == norm_metric(first.get("metric", ""))
            for r in current.revisions
        ):
            problems.append(f"metric changed from {norm_metric(first.get('metric', ''))!r}")
    return problems


CHAPTERS = chapters.find_chapters(ROOT)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda ch: ch.name)
def test_changed_checks_carry_their_revisions(chapter: chapters.Chapter) -> None:
    why = _history_available()
    if why:
        pytest.skip(why)
    rel = str((chapter.folder / "claims.yml").relative_to(ROOT))
    first = first_versions(rel)
    problems = []
    for claim in chapter.claims:
        if claim.id not in first:
            continue  # not committed yet: nothing recorded before it
        for p in unrecorded_changes(claim, first[claim.id]):
            problems.append(f"{claim.id}: {p}, and no revision names the first one")
    assert not problems, f"{rel}:\n" + "\n".join(problems)


def test_the_rule_catches_an_unrecorded_change() -> None:
    first = {"id": "C1", "metric": "a  gap", "check": {"reproduced": {"max": 0.1}}}
    same = chapters.Claim(
        id="C1",
        claim="c",
        metric="a gap",
        paper_value="0",
        source="abstract",
        notebook="01_x",
        check={"reproduced": {"max": 0.1}},
    )
    assert unrecorded_changes(same, first) == []
    looser = chapters.Claim(
        id="C1",
        claim="c",
        metric="a gap",
        paper_value="0",
        source="abstract",
        notebook="01_x",
        check={"reproduced": {"max": 0.2}},
    )
    assert unrecorded_changes(looser, first) == [
        "check changed from {'reproduced': {'max': 0.1}} to {'reproduced': {'max': 0.2}}"
    ]
    disclosed = chapters.Claim(
        id="C1",
        claim="c",
        metric="another gap",
        paper_value="0",
        source="abstract",
        notebook="01_x",
        check={"reproduced": {"max": 0.2}},
        revisions=(
            chapters.Revision(
                gave="0.15 (not reproduced)",
                why="a reason",
                check={"reproduced": {"max": 0.1}},
                metric="a gap",
            ),
        ),
    )
    assert unrecorded_changes(disclosed, first) == []
    wrong = chapters.Claim(
        id="C1",
        claim="c",
        metric="a gap",
        paper_value="0",
        source="abstract",
        notebook="01_x",
        check={"reproduced": {"max": 0.2}},
        revisions=(chapters.Revision(gave="x", why="y", check={"reproduced": {"max": 0.3}}),),
    )
    assert len(unrecorded_changes(wrong, first)) == 1  # the revision must name the first check


def test_only_the_scaffold_example_is_passed_over() -> None:
    assert _is_scaffold_example(dict(SCAFFOLD_EXAMPLE))
    changed = {**SCAFFOLD_EXAMPLE, "check": {"reproduced": {"max": 0.05}}}
    assert not _is_scaffold_example(changed)
