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
    if first.get("evidence", current.evidence) != current.evidence:
        # an exact claim turned illustration (or back) decides differently: say so in the open
        if not any(r.check == first.get("check") for r in current.revisions):
            problems.append(f"evidence changed from {first.get('evidence')} to {current.evidence}")
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


# ----------------------------------------------------------------------------- claims first

#: chapters whose claims file was first committed on or after this date commit their claims
#: before any notebook that records into them (the rule came in on 2026-12-05)
CLAIMS_FIRST_SINCE = "2026-12-06"


#: the record call of the scaffold's example notebook, which is not a result of the paper
SCAFFOLD_RECORD = 'run.record(\\"C1\\", core.t_interval(errors))'


def _records(text: str) -> bool:
    """The notebook's text records a claim other than the scaffold's example."""
    return text.count(".record(") > text.count(SCAFFOLD_RECORD)


def _first_where(rel: str, root: Path, accept, follow: bool = True) -> tuple[str, str] | None:
    """(commit, ISO date) of the first commit whose version of ``rel`` exists and whose text
    ``accept`` takes; None when there is none."""
    args = ["log", *(["--follow"] if follow else []), "--reverse", "--format=%H %cI", "--", rel]
    log = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    for line in filter(None, log):
        commit, date = line.split()
        shown = subprocess.run(
            ["git", "-C", str(root), "show", f"{commit}:{rel}"], capture_output=True, text=True
        )
        if shown.returncode == 0 and accept(shown.stdout):
            return commit, date
    return None


def _first_commit(rel: str, root: Path) -> tuple[str, str] | None:
    """The first commit in which a notebook records a claim (not the scaffold's example)."""
    return _first_where(rel, root, _records)


def _has_claims(text: str) -> bool:
    claims = (yaml.safe_load(text) or {}).get("claims") or []
    return any(not _is_scaffold_example(c) for c in claims if isinstance(c, dict))


def _claims_commit(rel: str, root: Path) -> tuple[str, str] | None:
    """The first commit of a claims file that holds a claim other than the scaffold's example."""
    return _first_where(rel, root, _has_claims, follow=False)


def results_before_claims(folder: Path, root: Path, since: str = CLAIMS_FIRST_SINCE) -> list[str]:
    """The notebooks of a chapter (added on or after ``since``) that recorded into its claims
    before the claims were committed: the claims file must come first, in an earlier commit."""
    rel_folder = folder.relative_to(root).as_posix()
    first_claims = _claims_commit(f"{rel_folder}/claims.yml", root)
    if first_claims is not None and first_claims[1][:10] < since:
        return []
    problems = []
    for nb in sorted(folder.glob("*.ipynb")):
        rel = f"{rel_folder}/{nb.name}"
        recording = _first_commit(rel, root)
        if recording is None:
            continue
        if first_claims is None:
            problems.append(f"{nb.name} records claims, but no claims were ever committed")
            continue
        before = (
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(root),
                    "merge-base",
                    "--is-ancestor",
                    first_claims[0],
                    recording[0],
                ]
            ).returncode
            == 0
        )
        if recording[0] == first_claims[0] or not before:
            problems.append(
                f"{nb.name} recorded into claims.yml in {recording[0][:10]}, not after the claims "
                f"were committed ({first_claims[0][:10]})"
            )
    return problems


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda ch: ch.name)
def test_new_chapters_commit_their_claims_before_any_result(chapter: chapters.Chapter) -> None:
    why = _history_available()
    if why:
        pytest.skip(why)
    problems = results_before_claims(chapter.folder, ROOT)
    assert not problems, f"{chapter.name}:\n" + "\n".join(problems)


def test_the_claims_first_rule_catches_a_notebook_committed_with_its_claims(tmp_path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )

    folder = tmp_path / "notebooks" / "20_new"
    folder.mkdir(parents=True)
    git("init", "-q")
    claims = "paper: {title: t}\nclaims:\n  - {id: C1, metric: a gap}\n"
    (folder / "claims.yml").write_text(claims)
    (folder / "01_a.ipynb").write_text('{"cells": ["run.record(\'C1\', x)"]}')
    git("add", "-A")
    git("commit", "-qm", "claims and results together")
    recorded = _first_commit("notebooks/20_new/01_a.ipynb", tmp_path)[0][:10]
    claimed = _claims_commit("notebooks/20_new/claims.yml", tmp_path)[0][:10]
    assert results_before_claims(folder, tmp_path, since="2000-01-01") == [
        f"01_a.ipynb recorded into claims.yml in {recorded}, "
        f"not after the claims were committed ({claimed})"
    ]
    # claims first, then a notebook that records: accepted
    (folder / "02_b.ipynb").write_text('{"cells": ["run.record(\'C1\', y)"]}')
    git("add", "-A")
    git("commit", "-qm", "a second notebook")
    assert len(results_before_claims(folder, tmp_path, since="2000-01-01")) == 1  # only 01_a
    # the scaffold's example notebook records its example claim: not a result of the paper
    assert _records('"run.record(\\"C1\\", x)"') and not _records(f'"{SCAFFOLD_RECORD}"')
    # chapters older than the rule are not held to it
    assert results_before_claims(folder, tmp_path, since="2999-01-01") == []
