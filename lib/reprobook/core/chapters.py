"""The chapters of the book and their claims files.

A chapter is a folder ``notebooks/NN_slug/`` holding ``index.md``, ``claims.yml`` and two to
four notebooks ``01_topic.ipynb`` ... . The claims file lists the paper's claims and, for each,
the check that turns a measured value into a verdict (see CONTRIBUTING.md for the format)::

    paper: {title: ..., arxiv: "2606.07443", bibkey: ghazi2026spr}
    claims:
      - id: C1
        claim: An SPR mechanism attains the optimum over all eps-LDP mechanisms.
        metric: largest relative gap (LP - DP) / LP
        paper_value: "0 (theorem)"
        source: abstract            # abstract | full text | reconstruction | extension
        notebook: 01_lp_check
        check:
          reproduced: {max: 1.0e-6}   # conditions: min, max, equals; all must hold
          partial: {max: 1.0e-3}      # optional
        # or per profile:  check: {reduced: {needs_full: true}, full: {reproduced: ...}}
        # or, for a claim no profile of this book can measure:  check: {not_checkable: "why"}

This module reads no paper package: the runner and the ledger use it too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .paths import book_root

CHAPTER_DIR = re.compile(r"^(?P<number>\d\d)_(?P<slug>[a-z][a-z0-9_]*)$")
NOTEBOOK_FILE = re.compile(r"^\d\d_[A-Za-z0-9_]+\.ipynb$")

VERDICTS = ("reproduced", "partial", "not_reproduced", "needs_full", "not_checkable", "not_run")
VERDICT_LABELS = {
    "reproduced": "reproduced",
    "partial": "partially reproduced",
    "not_reproduced": "not reproduced",
    "needs_full": "needs the full profile",
    "not_checkable": "not checkable here",
    "not_run": "not run",
}
SOURCES = ("abstract", "full text", "reconstruction", "extension")
CONDITION_KEYS = ("min", "max", "equals")
CLAIM_KEYS = {"id", "claim", "metric", "paper_value", "source", "notebook", "check", "note"}


class ClaimsFileError(ValueError):
    """A claims.yml that does not follow the format."""


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    metric: str
    paper_value: str
    source: str
    notebook: str
    check: dict[str, Any]
    note: str = ""

    def check_for(self, profile: str) -> dict[str, Any]:
        """The check that applies at ``profile`` (a per-profile entry, else the shared one)."""
        if any(p in self.check for p in ("reduced", "full")):
            return self.check[profile]  # the file's loader makes sure both profiles are there
        return self.check

    def verdict(self, value: Any, profile: str) -> str:
        """The verdict for a measured ``value`` (None: not measured) at ``profile``."""
        check = self.check_for(profile)
        if check.get("not_checkable"):
            return "not_checkable"
        if check.get("needs_full"):
            return "needs_full"
        if value is None:
            return "not_run"
        if _holds(check.get("reproduced"), value):
            return "reproduced"
        if "partial" in check and _holds(check["partial"], value):
            return "partial"
        return "not_reproduced"


def _holds(condition: dict[str, Any] | None, value: Any) -> bool:
    if not condition:
        return False
    if "equals" in condition:
        target = condition["equals"]
        if isinstance(target, bool) or isinstance(value, bool):
            if not (isinstance(value, bool) and isinstance(target, bool) and value == target):
                return False
        elif value != target:
            return False
    if isinstance(value, bool) and ("min" in condition or "max" in condition):
        return False
    if "min" in condition and not (isinstance(value, (int, float)) and value >= condition["min"]):
        return False
    if "max" in condition and not (isinstance(value, (int, float)) and value <= condition["max"]):
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return True


def _check_condition(where: str, condition: Any) -> None:
    if not isinstance(condition, dict) or not condition:
        raise ClaimsFileError(f"{where}: a condition is a mapping with keys among {', '.join(CONDITION_KEYS)}")
    bad = sorted(set(condition) - set(CONDITION_KEYS))
    if bad:
        raise ClaimsFileError(f"{where}: unknown condition key(s) {', '.join(bad)}; valid: {', '.join(CONDITION_KEYS)}")
    for key in ("min", "max"):
        if key in condition and (isinstance(condition[key], bool) or not isinstance(condition[key], (int, float))):
            raise ClaimsFileError(f"{where}: {key} must be a number, got {condition[key]!r}")


def _check_block(where: str, block: Any) -> None:
    if not isinstance(block, dict):
        raise ClaimsFileError(f"{where}: check must be a mapping")
    if "not_checkable" in block:
        why = block["not_checkable"]
        if set(block) != {"not_checkable"} or not isinstance(why, str) or not why.strip():
            raise ClaimsFileError(f"{where}: not_checkable stands alone and gives the reason as text, "
                                  f"e.g. {{not_checkable: \"the data cannot be downloaded here\"}}")
        return
    if block.get("needs_full"):
        return
    extra = sorted(set(block) - {"reproduced", "partial", "needs_full"})
    if extra:
        raise ClaimsFileError(f"{where}: unknown key(s) {', '.join(extra)}; valid: reproduced, partial, needs_full, "
                              "not_checkable")
    if "reproduced" not in block:
        raise ClaimsFileError(f"{where}: a check needs a 'reproduced' condition (or needs_full: true, "
                              "or not_checkable: <reason>)")
    _check_condition(f"{where}.reproduced", block["reproduced"])
    if "partial" in block:
        _check_condition(f"{where}.partial", block["partial"])


@dataclass(frozen=True)
class Chapter:
    number: str
    slug: str
    folder: Path
    title: str
    paper: dict[str, Any]
    claims: tuple[Claim, ...]
    notebooks: tuple[Path, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.folder.name

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise KeyError(f"chapter {self.slug} has no claim {claim_id!r}; its claims: {', '.join(c.id for c in self.claims)}")

    def notebook_stems(self) -> list[str]:
        return [p.stem for p in self.notebooks]


def load_claims_file(path: Path) -> tuple[dict[str, Any], tuple[Claim, ...]]:
    """Parse and validate a claims.yml; raises ClaimsFileError naming the faulty entry."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ClaimsFileError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not isinstance(data.get("paper"), dict):
        raise ClaimsFileError(f"{path}: needs a 'paper' mapping and a 'claims' list")
    claims = []
    seen = set()
    for i, entry in enumerate(data["claims"]):
        where = f"{path}: claims[{i}]"
        if not isinstance(entry, dict):
            raise ClaimsFileError(f"{where}: each claim is a mapping")
        missing = sorted({"id", "claim", "metric", "paper_value", "source", "notebook", "check"} - set(entry))
        if missing:
            raise ClaimsFileError(f"{where}: missing key(s) {', '.join(missing)}")
        extra = sorted(set(entry) - CLAIM_KEYS)
        if extra:
            raise ClaimsFileError(f"{where}: unknown key(s) {', '.join(extra)}; valid: {', '.join(sorted(CLAIM_KEYS))}")
        cid = str(entry["id"])
        if cid in seen:
            raise ClaimsFileError(f"{where}: duplicate claim id {cid}")
        seen.add(cid)
        if entry["source"] not in SOURCES:
            raise ClaimsFileError(f"{where}: source {entry['source']!r} is not one of {', '.join(SOURCES)}")
        check = entry["check"]
        if isinstance(check, dict) and any(p in check for p in ("reduced", "full")):
            for profile, block in check.items():
                if profile not in ("reduced", "full"):
                    raise ClaimsFileError(f"{where}.check: unknown profile {profile!r}; valid: reduced, full")
                _check_block(f"{where}.check.{profile}", block)
            missing_profiles = [p for p in ("reduced", "full") if p not in check]
            if missing_profiles:
                raise ClaimsFileError(f"{where}.check: a per-profile check names both profiles; "
                                      f"missing: {', '.join(missing_profiles)}")
        else:
            _check_block(f"{where}.check", check)
        claims.append(Claim(
            id=cid, claim=str(entry["claim"]).strip(), metric=str(entry["metric"]).strip(),
            paper_value=str(entry["paper_value"]), source=entry["source"], notebook=str(entry["notebook"]),
            check=check, note=str(entry.get("note", "")).strip(),
        ))
    return data["paper"], tuple(claims)


def load_chapter(folder: Path) -> Chapter:
    folder = Path(folder).resolve()
    m = CHAPTER_DIR.match(folder.name)
    if not m:
        raise ClaimsFileError(f"{folder}: a chapter folder is named NN_slug (two digits, lower-case slug)")
    claims_path = folder / "claims.yml"
    if not claims_path.is_file():
        raise ClaimsFileError(f"{folder}: has no claims.yml")
    paper, claims = load_claims_file(claims_path)
    notebooks = tuple(sorted(p for p in folder.glob("*.ipynb") if NOTEBOOK_FILE.match(p.name)))
    stems = {p.stem for p in notebooks}
    for c in claims:
        if c.notebook not in stems:
            raise ClaimsFileError(
                f"{claims_path}: claim {c.id} names notebook {c.notebook!r}; the chapter's notebooks: {', '.join(sorted(stems))}"
            )
    return Chapter(number=m["number"], slug=m["slug"], folder=folder, title=str(paper.get("title", m["slug"])),
                   paper=paper, claims=claims, notebooks=notebooks)


def find_chapters(root: Path | None = None) -> list[Chapter]:
    """Every chapter under ``<root>/notebooks``, in number order."""
    root = root or book_root()
    folders = sorted(p for p in (root / "notebooks").iterdir() if p.is_dir() and CHAPTER_DIR.match(p.name))
    return [load_chapter(p) for p in folders]


def get_chapter(key: str, root: Path | None = None) -> Chapter:
    """A chapter by slug (``spr_ldp``), folder name (``18_spr_ldp``) or number (``18``)."""
    chapters = find_chapters(root)
    for ch in chapters:
        if key in (ch.slug, ch.name, ch.number, ch.number.lstrip("0")):
            return ch
    raise KeyError(f"no chapter {key!r}; chapters: {', '.join(ch.slug for ch in chapters)}")
