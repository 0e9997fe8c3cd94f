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
        evidence: exact             # exact | statistical | illustration
        notebook: 01_lp_check
        check:
          reproduced: {max: 1.0e-6}   # conditions: min, max, equals; all must hold
          partial: {max: 1.0e-3}      # optional
        # or per profile:  check: {reduced: {needs_full: true}, full: {reproduced: ...}}
        # or, for a claim no profile of this book can measure:  check: {not_checkable: "why"}
        no_effect: 0                # statistical claims with a partial bar:
                                    # the value under no effect
        revisions:                  # a check or metric changed after a value was recorded
          - {check: {reproduced: {max: 1.0e-9}}, gave: "3e-8 (not reproduced)", why: "..."}

Evidence decides how a value becomes a verdict:

- ``exact``: a deterministic check of a mathematical statement (an optimum against an LP, an
  identity to float tolerance). The recorded value is compared with the bars.
- ``statistical``: a stochastic measurement. Its value is recorded with an interval (over
  seeds, a bootstrap, a binomial interval) and the *interval* is compared with the bars: the
  whole interval clears a bar, lies wholly on its wrong side, or straddles it
  (``inconclusive``). A bar that a value of no effect (``no_effect``) would clear is refused.
- ``illustration``: shows the phenomenon but cannot decide the claim (a slope that is linear
  by construction, say). Its verdict is ``illustrated`` whatever its value.

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

VERDICTS = (
    "reproduced",
    "partial",
    "inconclusive",
    "not_reproduced",
    "illustrated",
    "needs_full",
    "not_checkable",
    "not_run",
)
VERDICT_LABELS = {
    "reproduced": "reproduced",
    "partial": "partially reproduced",
    "inconclusive": "inconclusive",
    "not_reproduced": "not reproduced",
    "illustrated": "illustrated",
    "needs_full": "needs the full profile",
    "not_checkable": "not checkable here",
    "not_run": "not run",
}
# what each verdict means, for readers (the introduction's table is generated from it)
VERDICT_MEANINGS = {
    "reproduced": "the value (for a statistical claim, its whole interval) "
    "passes the claim's check",
    "partial": "it passes the weaker check the claims file gives, and (for a statistical claim, "
    "wholly) fails the full one",
    "inconclusive": "the interval straddles one of the check's bars: more data could go either way",
    "not_reproduced": "it fails the check (the whole interval lies on the wrong side): a result, "
    "shown as such",
    "illustrated": "an illustration was shown; it does not decide the claim",
    "needs_full": "the claim cannot be decided at the reduced scale",
    "not_checkable": "no profile of this book can measure it (the chapter says why)",
    "not_run": "nothing was measured (the notebook did not run)",
}
# verdicts that decide a claim, strongest first; "inconclusive" sits between partial and not
DECIDING = ("reproduced", "partial", "inconclusive", "not_reproduced")
SOURCES = ("abstract", "full text", "reconstruction", "extension")
EVIDENCE = ("exact", "statistical", "illustration")
# what the evidence for a claim rests on, from the strongest to the weakest
BASES = ("release", "method", "reconstruction", "simulation", "own code")
BASIS_MEANINGS = {
    "release": "the paper's released artefacts (data, outputs, models), rescored with the "
    "paper's metric",
    "method": "the paper's method (from its official code or a full description) run on data "
    "of the kind the paper uses",
    "reconstruction": "our reconstruction of a method or data the paper only sketches: the "
    "result could have gone against the paper, but it speaks for our stand-in first",
    "simulation": "a simulation of ours whose settings could set the direction of the result: "
    "it illustrates the claim and cannot test it",
    "own code": "a property of our own code (an identity, a checksum, a timing): it checks the "
    "book, not the paper",
}
#: bases on which a claim is tested on the paper's own terms
PAPERS_TERMS = ("release", "method")
#: bases whose direction our construction sets: such a claim is an illustration or an extension
CONSTRUCTED = ("simulation", "own code")
# what the replicates behind a statistical claim's interval are
REPLICATES = ("training seeds", "runs", "items")
# how a statistical claim over several comparisons is decided
AGGREGATES = ("single", "each", "min", "max")
# words of a metric that take a minimum or maximum over several comparisons
EXTREME_WORDS = re.compile(
    r"\b(min|max|minimum|maximum|smallest|largest|worst|best|lowest|highest)\b", re.IGNORECASE
)
CONDITION_KEYS = ("min", "max", "equals")
#: an interval narrower than this, relative to its ends, has zero width (equal replicates whose
#: mean and standard deviation carry rounding: three seeds at 0.18 give a width of about 1e-16)
ZERO_WIDTH_RTOL = 1e-9
REQUIRED_KEYS = {
    "id",
    "claim",
    "metric",
    "paper_value",
    "source",
    "basis",
    "evidence",
    "notebook",
    "check",
}
CLAIM_KEYS = REQUIRED_KEYS | {
    "note",
    "no_effect",
    "revisions",
    "replicates",
    "trained",
    "aggregate",
    "units",
    "baseline",
    "equivalence",
}
REVISION_KEYS = {"check", "metric", "gave", "why", "date"}


class ClaimsFileError(ValueError):
    """A claims.yml that does not follow the format."""


@dataclass(frozen=True)
class Revision:
    """A check or metric a claim had before (with what it gave, and why it changed)."""

    gave: str
    why: str
    check: dict[str, Any] | None = None
    metric: str | None = None
    date: str = ""


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
    evidence: str = "exact"
    no_effect: float | None = None
    revisions: tuple[Revision, ...] = ()
    basis: str = "method"
    replicates: str | None = None
    trained: bool = False
    aggregate: str = "single"
    units: tuple[str, ...] = ()
    baseline: str | None = None
    equivalence: bool = False

    @property
    def revised(self) -> bool:
        return bool(self.revisions)

    @property
    def is_papers(self) -> bool:
        """A claim of the paper (not our extension), whether or not a value can decide it."""
        return self.source != "extension"

    @property
    def group(self) -> str:
        """Where the claim counts in the headline: ``papers_terms`` (tested on the paper's
        own terms: its release, or its method on its kind of data), ``reconstruction`` (tested
        only on our reconstruction), ``illustration`` (shown, not tested: an illustration, or a
        claim whose direction our simulation or code sets) or ``extension`` (ours)."""
        if self.source == "extension":
            return "extension"
        if self.evidence == "illustration" or self.basis in CONSTRUCTED:
            return "illustration"
        return "papers_terms" if self.basis in PAPERS_TERMS else "reconstruction"

    def check_for(self, profile: str) -> dict[str, Any]:
        """The check that applies at ``profile`` (a per-profile entry, else the shared one). The
        smoke profile runs the full profile's code path, so it takes the full profile's check
        (its values are never verdicts: the book never shows them)."""
        if any(p in self.check for p in ("reduced", "full")):
            # the file's loader makes sure both profiles are there
            return self.check["full" if profile == "smoke" else profile]
        return self.check

    def verdict(self, value: Any, profile: str, interval: tuple[float, float] | None = None) -> str:
        """The verdict for a measured ``value`` (None: not measured) at ``profile``.

        An illustration is ``illustrated`` whatever its value. A statistical claim is decided
        on its ``interval`` (low, high), one bar at a time: ``reproduced`` when the whole interval
        clears the reproduced bar; ``partial`` when it clears the partial bar and lies wholly
        short of the reproduced one; ``not_reproduced`` when it lies wholly on the wrong side of
        the weakest bar; and ``inconclusive`` when it straddles a bar, so that a verdict never
        moves between two decided verdicts on noise alone. Without an interval a statistical
        claim cannot be decided, and a ValueError says so. Exact claims compare the value itself."""
        check = self.check_for(profile)
        if check.get("not_checkable"):
            return "not_checkable"
        if check.get("needs_full"):
            return "needs_full"
        if value is None:
            return "not_run"
        if self.evidence == "illustration":
            return "illustrated"
        if self.evidence == "statistical":
            if interval is None:
                raise ValueError(
                    f"claim {self.id} is statistical: its verdict needs an interval (low, high)"
                )
            low, high = float(interval[0]), float(interval[1])
            if high - low <= ZERO_WIDTH_RTOL * max(abs(low), abs(high)):
                # equal replicates (three seeds on one lattice point, a metric that never moved)
                # say nothing about the spread: such an interval never decides a claim
                return "inconclusive"
            rep = check.get("reproduced")
            if _clears(rep, low, high):
                return "reproduced"
            if "partial" in check:
                if _clears(check["partial"], low, high) and _misses(rep, low, high):
                    return "partial"
                return "not_reproduced" if _misses(check["partial"], low, high) else "inconclusive"
            return "not_reproduced" if _misses(rep, low, high) else "inconclusive"
        if _holds(check.get("reproduced"), value):
            return "reproduced"
        if "partial" in check and _holds(check["partial"], value):
            return "partial"
        return "not_reproduced"


#: the deciding verdicts from the worst to the best: a claim about each of several units takes
#: the worst of its units' verdicts
WORST_FIRST = ("not_reproduced", "inconclusive", "partial", "reproduced")


def worst_verdict(verdicts: list[str]) -> str:
    """The worst of several units' verdicts (``not_run`` when there are none)."""
    if not verdicts:
        return "not_run"
    for v in verdicts:
        if v not in WORST_FIRST:
            return v  # needs_full, not_checkable, illustrated, not_run: the same for every unit
    return min(verdicts, key=WORST_FIRST.index)


def unit_verdicts(claim: Claim, units: dict[str, Any] | None, profile: str) -> dict[str, str]:
    """unit -> its verdict, for a claim decided on each of several units (``aggregate: each``);
    ``units`` maps each unit to what was recorded for it ({"value", "interval"})."""
    return {
        name: claim.verdict(u.get("value"), profile, u.get("interval"))
        for name, u in (units or {}).items()
    }


def recorded_verdict(
    claim: Claim, value: Any, profile: str, interval: Any = None, units: Any = None
) -> tuple[str, list[str]]:
    """The verdict of a value read back from a results file, and the problems that kept it
    from counting: a statistical claim's value recorded without an interval (by an older
    notebook, say) is not decided, and reads ``not_run`` with the reason; so is a claim about
    each of several units recorded without every unit. A claim about each unit takes the worst
    unit's verdict."""
    try:
        if claim.aggregate == "each" and value is not None and claim.evidence == "statistical":
            got = set(units or {})
            missing = [u for u in claim.units if u not in got]
            if missing:
                return "not_run", [f"recorded without unit(s) {', '.join(missing)}"]
            return worst_verdict(list(unit_verdicts(claim, units, profile).values())), []
        return claim.verdict(value, profile, interval), []
    except ValueError:
        return "not_run", ["recorded without an interval"]


def _clears(condition: dict[str, Any] | None, low: float, high: float) -> bool:
    """The whole interval [low, high] meets the bar."""
    if not condition:
        return False
    return ("min" not in condition or low >= condition["min"]) and (
        "max" not in condition or high <= condition["max"]
    )


def _misses(condition: dict[str, Any], low: float, high: float) -> bool:
    """The whole interval [low, high] lies on the wrong side of the bar."""
    return ("min" in condition and high < condition["min"]) or (
        "max" in condition and low > condition["max"]
    )


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
        raise ClaimsFileError(
            f"{where}: a condition is a mapping with keys among {', '.join(CONDITION_KEYS)}"
        )
    bad = sorted(set(condition) - set(CONDITION_KEYS))
    if bad:
        raise ClaimsFileError(
            f"{where}: unknown condition key(s) {', '.join(bad)}; "
            f"valid: {', '.join(CONDITION_KEYS)}"
        )
    for key in ("min", "max"):
        if key in condition and (
            isinstance(condition[key], bool) or not isinstance(condition[key], (int, float))
        ):
            raise ClaimsFileError(f"{where}: {key} must be a number, got {condition[key]!r}")


def _check_block(
    where: str,
    block: Any,
    evidence: str = "exact",
    no_effect: float | None = None,
    equivalence: bool = False,
) -> None:
    if not isinstance(block, dict):
        raise ClaimsFileError(f"{where}: check must be a mapping")
    if "not_checkable" in block:
        why = block["not_checkable"]
        if set(block) != {"not_checkable"} or not isinstance(why, str) or not why.strip():
            raise ClaimsFileError(
                f"{where}: not_checkable stands alone and gives the reason as text, "
                f'e.g. {{not_checkable: "the data cannot be downloaded here"}}'
            )
        return
    if block.get("needs_full"):
        return
    extra = sorted(set(block) - {"reproduced", "partial", "needs_full"})
    if extra:
        raise ClaimsFileError(
            f"{where}: unknown key(s) {', '.join(extra)}; valid: reproduced, partial, needs_full, "
            "not_checkable"
        )
    if "reproduced" not in block:
        raise ClaimsFileError(
            f"{where}: a check needs a 'reproduced' condition (or needs_full: true, "
            "or not_checkable: <reason>)"
        )
    _check_condition(f"{where}.reproduced", block["reproduced"])
    if "partial" in block:
        _check_condition(f"{where}.partial", block["partial"])
    if evidence == "statistical":
        for name in ("reproduced", "partial"):
            cond = block.get(name)
            if cond is None:
                continue
            if "equals" in cond:
                raise ClaimsFileError(
                    f"{where}.{name}: a statistical claim is decided on an interval; use min "
                    "and max, not equals"
                )
            if "partial" in block and no_effect is None:
                raise ClaimsFileError(
                    f"{where}: a statistical claim with a partial bar declares no_effect, "
                    "the value its metric takes when the claimed effect is absent "
                    "(0 for a difference, 1 for a ratio)"
                )
            if equivalence:
                if no_effect is None or not (
                    "min" in cond and "max" in cond and cond["min"] < no_effect < cond["max"]
                ):
                    raise ClaimsFileError(
                        f"{where}.{name}: an equivalence claim (the claimed difference is absent) "
                        "has a two-sided bar {min, max} around its no_effect value, got "
                        f"{cond} around {no_effect}"
                    )
                continue
            if no_effect is not None and _holds(cond, no_effect):
                raise ClaimsFileError(
                    f"{where}.{name}: the bar {cond} is met by the no-effect value {no_effect}: "
                    "a claim with no effect would pass it. Put the bar past the no-effect point. "
                    "(A claim that a difference is absent, 'all rules perform alike', is an "
                    "equivalence claim: say equivalence: true, with a two-sided bar around "
                    "no_effect, and show in the notebook that the compared things differ at all.)"
                )


def _load_revisions(where: str, entries: Any) -> tuple[Revision, ...]:
    if entries is None:
        return ()
    if not isinstance(entries, list) or not entries:
        raise ClaimsFileError(
            f"{where}.revisions: a non-empty list of mappings with keys "
            f"{', '.join(sorted(REVISION_KEYS))}"
        )
    out = []
    for j, rev in enumerate(entries):
        at = f"{where}.revisions[{j}]"
        if not isinstance(rev, dict):
            raise ClaimsFileError(f"{at}: a revision is a mapping")
        extra = sorted(set(rev) - REVISION_KEYS)
        if extra:
            raise ClaimsFileError(
                f"{at}: unknown key(s) {', '.join(extra)}; "
                f"valid: {', '.join(sorted(REVISION_KEYS))}"
            )
        if "check" not in rev and "metric" not in rev:
            raise ClaimsFileError(
                f"{at}: a revision names the earlier check, the earlier metric, or both"
            )
        for key in ("gave", "why"):
            if not isinstance(rev.get(key), str) or not rev[key].strip():
                raise ClaimsFileError(
                    f"{at}: '{key}' is required text ("
                    + ("what the earlier check gave" if key == "gave" else "why it changed")
                    + ")"
                )
        if "check" in rev and not isinstance(rev["check"], dict):
            raise ClaimsFileError(f"{at}.check: the earlier check is a mapping, as under check:")
        out.append(
            Revision(
                gave=rev["gave"].strip(),
                why=rev["why"].strip(),
                check=rev.get("check"),
                metric=None if rev.get("metric") is None else str(rev["metric"]).strip(),
                date=str(rev.get("date", "")),
            )
        )
    return tuple(out)


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
        raise KeyError(
            f"chapter {self.slug} has no claim {claim_id!r}; "
            f"its claims: {', '.join(c.id for c in self.claims)}"
        )

    def notebook_stems(self) -> list[str]:
        return [p.stem for p in self.notebooks]


def load_claims_file(path: Path) -> tuple[dict[str, Any], tuple[Claim, ...]]:
    """Parse and validate a claims.yml; raises ClaimsFileError naming the faulty entry."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ClaimsFileError(f"{path}: not valid YAML: {err}") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("claims"), list)
        or not isinstance(data.get("paper"), dict)
    ):
        raise ClaimsFileError(f"{path}: needs a 'paper' mapping and a 'claims' list")
    claims = []
    seen = set()
    for i, entry in enumerate(data["claims"]):
        where = f"{path}: claims[{i}]"
        if not isinstance(entry, dict):
            raise ClaimsFileError(f"{where}: each claim is a mapping")
        missing = sorted(REQUIRED_KEYS - set(entry))
        if missing:
            raise ClaimsFileError(f"{where}: missing key(s) {', '.join(missing)}")
        extra = sorted(set(entry) - CLAIM_KEYS)
        if extra:
            raise ClaimsFileError(
                f"{where}: unknown key(s) {', '.join(extra)}; "
                f"valid: {', '.join(sorted(CLAIM_KEYS))}"
            )
        cid = str(entry["id"])
        if cid in seen:
            raise ClaimsFileError(f"{where}: duplicate claim id {cid}")
        seen.add(cid)
        if entry["source"] not in SOURCES:
            raise ClaimsFileError(
                f"{where}: source {entry['source']!r} is not one of {', '.join(SOURCES)}"
            )
        evidence = entry["evidence"]
        if evidence not in EVIDENCE:
            raise ClaimsFileError(
                f"{where}: evidence {evidence!r} is not one of {', '.join(EVIDENCE)}"
            )
        no_effect = entry.get("no_effect")
        if no_effect is not None and (
            isinstance(no_effect, bool)
            or not isinstance(no_effect, (int, float))
            or not math.isfinite(no_effect)
        ):
            raise ClaimsFileError(
                f"{where}: no_effect must be a finite number (the metric's value when the "
                f"claimed effect is absent), got {no_effect!r}"
            )
        shape = _check_basis_and_design(where, entry)
        check = entry["check"]
        if isinstance(check, dict) and any(p in check for p in ("reduced", "full")):
            for profile, block in check.items():
                if profile not in ("reduced", "full"):
                    raise ClaimsFileError(
                        f"{where}.check: unknown profile {profile!r}; valid: reduced, full"
                    )
                _check_block(
                    f"{where}.check.{profile}", block, evidence, no_effect, shape["equivalence"]
                )
            missing_profiles = [p for p in ("reduced", "full") if p not in check]
            if missing_profiles:
                raise ClaimsFileError(
                    f"{where}.check: a per-profile check names both profiles; "
                    f"missing: {', '.join(missing_profiles)}"
                )
        else:
            _check_block(f"{where}.check", check, evidence, no_effect, shape["equivalence"])
        claims.append(
            Claim(
                id=cid,
                claim=str(entry["claim"]).strip(),
                metric=str(entry["metric"]).strip(),
                paper_value=str(entry["paper_value"]),
                source=entry["source"],
                notebook=str(entry["notebook"]),
                check=check,
                note=str(entry.get("note", "")).strip(),
                evidence=evidence,
                no_effect=None if no_effect is None else float(no_effect),
                revisions=_load_revisions(where, entry.get("revisions")),
                **shape,
            )
        )
    return data["paper"], tuple(claims)


def _decides(check: Any) -> bool:
    """The check has a bar at some profile (it is not needs_full or not_checkable throughout)."""
    if not isinstance(check, dict):
        return False
    blocks = [check[p] for p in ("reduced", "full") if p in check] or [check]
    return any(isinstance(b, dict) and "reproduced" in b for b in blocks)


def _check_basis_and_design(where: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Validate what a claim rests on (``basis``) and, for a statistical claim, how it is
    decided: its replicates, its comparisons and its baseline. Returns the Claim fields."""
    basis = entry["basis"]
    if basis not in BASES:
        raise ClaimsFileError(
            f"{where}: basis {basis!r} is not one of {', '.join(BASES)} "
            "(what the evidence rests on)"
        )
    evidence, source = entry["evidence"], entry["source"]
    if basis in CONSTRUCTED and evidence != "illustration" and source != "extension":
        raise ClaimsFileError(
            f"{where}: basis {basis!r} sets the direction of the result by construction, so the "
            "claim cannot be counted as the paper's claim tested: make it evidence: illustration "
            "(or source: extension for a claim of ours)"
        )
    if basis in ("reconstruction", "simulation") and not str(entry.get("note", "")).strip():
        raise ClaimsFileError(
            f"{where}: a claim resting on our {basis} says in its note which part is ours"
        )
    trained = entry.get("trained", False)
    if not isinstance(trained, bool):
        raise ClaimsFileError(f"{where}: trained is true or false, got {trained!r}")
    equivalence = entry.get("equivalence", False)
    if not isinstance(equivalence, bool):
        raise ClaimsFileError(f"{where}: equivalence is true or false, got {equivalence!r}")
    if equivalence and evidence != "statistical":
        raise ClaimsFileError(
            f"{where}: equivalence: true is for statistical claims (a difference shown absent "
            "by an interval inside a two-sided bar)"
        )
    replicates = entry.get("replicates")
    aggregate = entry.get("aggregate")
    units = entry.get("units")
    baseline = entry.get("baseline")
    if replicates is not None and replicates not in REPLICATES:
        raise ClaimsFileError(
            f"{where}: replicates {replicates!r} is not one of {', '.join(REPLICATES)}"
        )
    if aggregate is not None and aggregate not in AGGREGATES:
        raise ClaimsFileError(
            f"{where}: aggregate {aggregate!r} is not one of {', '.join(AGGREGATES)}"
        )
    if units is not None and (
        not isinstance(units, list)
        or len(units) < 2
        or not all(isinstance(u, str) and u.strip() for u in units)
        or len(set(units)) != len(units)
    ):
        raise ClaimsFileError(
            f"{where}: units is a list of at least two distinct names (the graphs, ablations, "
            f"blocks or families the claim is about each of), got {units!r}"
        )
    if (aggregate == "each") != (units is not None):
        raise ClaimsFileError(
            f"{where}: a claim about each of several units has aggregate: each and lists them "
            "under units; units go with aggregate: each only"
        )
    if evidence == "statistical" and _decides(entry["check"]):
        if entry.get("no_effect") is None:
            raise ClaimsFileError(
                f"{where}: a statistical claim declares no_effect, the value its metric takes "
                "when the claimed effect is absent (0 for a difference, 1 for a ratio), so that "
                "no bar can be met by no effect"
            )
        if replicates is None:
            raise ClaimsFileError(
                f"{where}: a statistical claim says what its interval is over: replicates: "
                f"{' | '.join(REPLICATES)}"
            )
        if trained and replicates != "training seeds":
            raise ClaimsFileError(
                f"{where}: a claim about trained models is decided over training seeds "
                "(per-seed values, then a t or paired interval; test items may be nested "
                f"inside each seed), not over {replicates}: set replicates: training seeds"
            )
        if aggregate is None and EXTREME_WORDS.search(str(entry["metric"])):
            raise ClaimsFileError(
                f"{where}: the metric takes a {EXTREME_WORDS.search(str(entry['metric']))[0]}: "
                "a minimum or maximum over several noisy comparisons is decided per comparison "
                "(aggregate: each, with units) or on a simultaneous interval (aggregate: min or "
                "max); if the metric names one fixed comparison, say aggregate: single"
            )
        if baseline is None:
            raise ClaimsFileError(
                f"{where}: a statistical claim names what it is compared with: baseline: <the "
                "comparator, as the metric names it>, or baseline: none"
            )
    if baseline is not None:
        if not isinstance(baseline, str) or not baseline.strip():
            raise ClaimsFileError(f"{where}: baseline is text, got {baseline!r}")
        named = re.search(
            r"(?<!\w)" + re.escape(baseline.strip().lower()) + r"(?!\w)",
            " ".join(str(entry["metric"]).lower().split()),
        )
        if baseline.strip() != "none" and not named:
            raise ClaimsFileError(
                f"{where}: the baseline {baseline!r} is not named in the metric "
                f"{str(entry['metric'])!r}: a comparison names its baseline in the metric"
            )
    return {
        "basis": basis,
        "replicates": replicates,
        "trained": trained,
        "aggregate": aggregate or "single",
        "units": tuple(units or ()),
        "baseline": None if baseline is None else baseline.strip(),
        "equivalence": equivalence,
    }


def load_chapter(folder: Path) -> Chapter:
    folder = Path(folder).resolve()
    m = CHAPTER_DIR.match(folder.name)
    if not m:
        raise ClaimsFileError(
            f"{folder}: a chapter folder is named NN_slug (two digits, lower-case slug)"
        )
    claims_path = folder / "claims.yml"
    if not claims_path.is_file():
        raise ClaimsFileError(f"{folder}: has no claims.yml")
    paper, claims = load_claims_file(claims_path)
    notebooks = tuple(sorted(p for p in folder.glob("*.ipynb") if NOTEBOOK_FILE.match(p.name)))
    stems = {p.stem for p in notebooks}
    for c in claims:
        if c.notebook not in stems:
            raise ClaimsFileError(
                f"{claims_path}: claim {c.id} names notebook {c.notebook!r}; "
                f"the chapter's notebooks: {', '.join(sorted(stems))}"
            )
    return Chapter(
        number=m["number"],
        slug=m["slug"],
        folder=folder,
        title=str(paper.get("title", m["slug"])),
        paper=paper,
        claims=claims,
        notebooks=notebooks,
    )


def find_chapters(root: Path | None = None) -> list[Chapter]:
    """Every chapter under ``<root>/notebooks``, in number order."""
    root = root or book_root()
    folders = sorted(
        p for p in (root / "notebooks").iterdir() if p.is_dir() and CHAPTER_DIR.match(p.name)
    )
    return [load_chapter(p) for p in folders]


def get_chapter(key: str, root: Path | None = None) -> Chapter:
    """A chapter by slug (``spr_ldp``), folder name (``18_spr_ldp``) or number (``18``).

    Only the matching chapter's files are read, so a notebook of one chapter runs while
    another chapter's claims file is half-written."""
    root = root or book_root()
    folders = sorted(
        p for p in (root / "notebooks").iterdir() if p.is_dir() and CHAPTER_DIR.match(p.name)
    )
    for folder in folders:
        m = CHAPTER_DIR.match(folder.name)
        number, slug = m["number"], m["slug"]
        if key in (slug, folder.name, number, number.lstrip("0")):
            return load_chapter(folder)
    names = ", ".join(CHAPTER_DIR.match(p.name)["slug"] for p in folders)
    raise KeyError(f"no chapter {key!r}; chapters: {names}")
