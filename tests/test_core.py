"""reprobook.core: profiles, claims checks and records, seeding, atomic writes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import TOY_CLAIMS
from scipy import stats as sps

from reprobook import core
from reprobook.core import chapters, claims, paths, profiles, runtime


@dataclasses.dataclass(frozen=True)
class Sizes:
    n: int  # instances
    eps: tuple[float, ...]  # privacy levels
    lr: float = 0.1  # a float
    name: str = "a"  # a string
    k_max: int | None = None  # optional


PROFILES = {"reduced": Sizes(n=10, eps=(0.5, 1.0)), "full": Sizes(n=1000, eps=(0.1, 0.5, 1.0))}


def test_resolve_profile_and_overrides() -> None:
    assert profiles.resolve(PROFILES, "reduced") == PROFILES["reduced"]
    assert profiles.resolve(PROFILES, "full").n == 1000
    cfg = profiles.resolve(PROFILES, "reduced", n=3, eps=[1, 2], lr=1, k_max=None)
    assert cfg == Sizes(n=3, eps=(1, 2), lr=1.0)
    assert isinstance(cfg.lr, float) and isinstance(cfg.eps, tuple)
    assert profiles.resolve(PROFILES, "reduced", k_max=5).k_max == 5


def test_resolve_errors_name_the_valid_choices() -> None:
    with pytest.raises(
        core.ProfileError, match="unknown profile 'fast'; valid profiles: full, reduced"
    ):
        profiles.resolve(PROFILES, "fast")
    with pytest.raises(
        core.ProfileError, match="unknown override key.*nn.*valid keys: n, eps, lr, name, k_max"
    ):
        profiles.resolve(PROFILES, "reduced", nn=3)
    with pytest.raises(core.ProfileError, match="n='3' does not fit"):
        profiles.resolve(PROFILES, "reduced", n="3")
    with pytest.raises(core.ProfileError, match="n=True does not fit"):
        profiles.resolve(PROFILES, "reduced", n=True)
    with pytest.raises(core.ProfileError, match="eps="):
        profiles.resolve(PROFILES, "reduced", eps=["a"])


def _claim(check, evidence: str = "exact") -> chapters.Claim:
    return chapters.Claim(
        id="C",
        claim="c",
        metric="m",
        paper_value="p",
        source="abstract",
        notebook="01_x",
        check=check,
        evidence=evidence,
    )


def test_statistical_claims_are_decided_on_their_interval() -> None:
    c = _claim({"reproduced": {"min": 0.1}, "partial": {"min": 0.02}}, "statistical")
    assert c.verdict(0.2, "reduced", (0.12, 0.3)) == "reproduced"  # all of it clears 0.1
    assert c.verdict(0.05, "reduced", (0.03, 0.08)) == "partial"  # clears 0.02, wholly short of 0.1
    assert c.verdict(0.2, "reduced", (0.05, 0.3)) == "inconclusive"  # clears 0.02, straddles 0.1
    assert c.verdict(0.2, "reduced", (0.01, 0.3)) == "inconclusive"  # straddles the weakest bar
    assert c.verdict(0.0, "reduced", (-0.05, 0.019)) == "not_reproduced"  # wholly below it
    assert c.verdict(0.1, "reduced", (0.1, 0.12)) == "reproduced"  # bars are inclusive
    # equal replicates say nothing about the spread: a zero-width interval never decides
    assert c.verdict(0.2, "reduced", (0.2, 0.2)) == "inconclusive"
    assert c.verdict(0.0, "reduced", (0.0, 0.0)) == "inconclusive"
    two_sided = _claim({"reproduced": {"min": 2.5, "max": 3.5}}, "statistical")
    assert two_sided.verdict(3.0, "full", (2.6, 3.4)) == "reproduced"
    assert two_sided.verdict(3.3, "full", (3.1, 3.6)) == "inconclusive"
    assert two_sided.verdict(3.8, "full", (3.6, 4.0)) == "not_reproduced"
    assert two_sided.verdict(None, "full") == "not_run"
    with pytest.raises(ValueError, match="statistical: its verdict needs an interval"):
        two_sided.verdict(3.0, "full")


def test_illustrations_never_decide() -> None:
    c = _claim({"reproduced": {"min": 2.5, "max": 3.5}}, "illustration")
    assert c.verdict(3.0, "reduced") == c.verdict(9.0, "reduced") == "illustrated"
    assert c.verdict(None, "reduced") == "not_run"
    # an illustration is still one of the paper's claims, but it is shown, never tested
    assert c.is_papers and c.group == "illustration"
    assert _claim({"reproduced": {"max": 1}}).group == "papers_terms"


def test_verdicts_follow_the_check() -> None:
    c = _claim({"reproduced": {"max": 1e-6}, "partial": {"max": 1e-3}})
    assert c.verdict(0.0, "reduced") == "reproduced"
    assert c.verdict(1e-6, "reduced") == "reproduced"
    assert c.verdict(1e-4, "reduced") == "partial"
    assert c.verdict(0.1, "reduced") == "not_reproduced"
    assert c.verdict(None, "reduced") == "not_run"
    band = _claim({"reproduced": {"min": 2.5, "max": 3.5}})
    assert [band.verdict(v, "full") for v in (2.4, 3.0, 3.6)] == [
        "not_reproduced",
        "reproduced",
        "not_reproduced",
    ]
    flag = _claim({"reproduced": {"equals": True}})
    assert flag.verdict(True, "reduced") == "reproduced"
    assert flag.verdict(False, "reduced") == "not_reproduced"
    assert flag.verdict(1.0, "reduced") == "not_reproduced"
    per = _claim({"reduced": {"needs_full": True}, "full": {"reproduced": {"min": 0.9}}})
    assert per.verdict(0.95, "reduced") == "needs_full"
    assert per.verdict(None, "reduced") == "needs_full"
    assert per.verdict(0.95, "full") == "reproduced"
    assert per.verdict(None, "full") == "not_run"
    never = _claim({"not_checkable": "the meshes live on a hub these machines cannot reach"})
    assert never.verdict(None, "reduced") == never.verdict(0.3, "full") == "not_checkable"


@pytest.mark.parametrize(
    "text, message",
    [
        ("paper: {}\nclaims: [{id: C1}]", "missing key"),
        ("claims: []", "needs a 'paper' mapping"),
        (
            TOY_CLAIMS.replace("source: reconstruction", "source: blog"),
            "source 'blog' is not one of",
        ),
        (
            TOY_CLAIMS.replace("reproduced: {max: 0.5}", "reproduced: {maximum: 0.5}"),
            "unknown condition key",
        ),
        (
            TOY_CLAIMS.replace("reproduced: {max: 0.5}", "partial: {max: 0.5}"),
            "needs a 'reproduced' condition",
        ),
        (TOY_CLAIMS.replace("id: T2", "id: T1"), "duplicate claim id T1"),
        (
            TOY_CLAIMS.replace(
                "check:\n      reproduced: {max: 0.5}", "check:\n      full: {reproduced: {max: 1}}"
            ),
            "names both profiles; missing: reduced",
        ),
        (
            TOY_CLAIMS.replace(
                "check:\n      reproduced: {max: 0.5}", "check:\n      fast: {reproduced: {max: 1}}"
            ),
            "unknown key",
        ),
        ("paper: {}\nclaims: [", "not valid YAML"),
        (
            TOY_CLAIMS.replace(
                "    evidence: exact\n    notebook: 01_draw", "    notebook: 01_draw"
            ),
            "missing key.*evidence",
        ),
        (
            TOY_CLAIMS.replace(
                "evidence: exact\n    notebook: 01_draw",
                "evidence: anecdote\n    notebook: 01_draw",
            ),
            "evidence 'anecdote' is not one of exact, statistical, illustration",
        ),
        (
            TOY_CLAIMS.replace(
                "evidence: exact\n    notebook: 01_draw",
                "evidence: statistical\n    notebook: 01_draw",
            ).replace("reproduced: {max: 0.5}", "{reproduced: {min: 0.1}, partial: {min: 0.01}}"),
            "declares no_effect",
        ),
        (
            TOY_CLAIMS.replace(
                "evidence: exact\n    notebook: 01_draw",
                "evidence: statistical\n    no_effect: 0\n    replicates: runs\n"
                "    baseline: none\n    notebook: 01_draw",
            ).replace("reproduced: {max: 0.5}", "{reproduced: {min: 0.1}, partial: {min: 0}}"),
            "met by the no-effect value 0",
        ),
        (
            TOY_CLAIMS.replace(
                "evidence: exact\n    notebook: 01_draw",
                "evidence: statistical\n    no_effect: 1\n    replicates: runs\n"
                "    baseline: none\n    notebook: 01_draw",
            ).replace("reproduced: {max: 0.5}", "{reproduced: {max: 0.9}, partial: {max: 1.0}}"),
            "met by the no-effect value 1",
        ),
        (
            TOY_CLAIMS.replace(
                "evidence: exact\n    notebook: 01_draw",
                "evidence: statistical\n    notebook: 01_draw",
            )
            .replace("reproduced: {max: 0.5}", "reproduced: {equals: true}")
            .replace(
                "notebook: 01_draw",
                "no_effect: 0\n    replicates: runs\n    baseline: none\n    notebook: 01_draw",
                1,
            ),
            "use min and max, not equals",
        ),
        (
            TOY_CLAIMS.replace(
                "    notebook: 01_draw",
                "    revisions: [{check: {reproduced: {max: 1}}}]\n    notebook: 01_draw",
            ),
            "'gave' is required",
        ),
        (
            TOY_CLAIMS.replace(
                "    notebook: 01_draw", "    revisions: [{gave: x, why: y}]\n    notebook: 01_draw"
            ),
            "names the earlier check, the earlier metric, or both",
        ),
        (
            TOY_CLAIMS.replace(
                "    notebook: 01_draw",
                "    revisions: [{gave: x, why: y, check: {max: 1}, when: now}]\n"
                "    notebook: 01_draw",
            ),
            "unknown key.*when",
        ),
        (
            TOY_CLAIMS.replace("reproduced: {max: 0.5}", "not_checkable: ''"),
            "not_checkable stands alone",
        ),
        (
            TOY_CLAIMS.replace(
                "reproduced: {max: 0.5}", "{not_checkable: why, reproduced: {max: 1}}"
            ),
            "not_checkable stands alone",
        ),
    ],
)
def test_bad_claims_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "claims.yml"
    path.write_text(text)
    with pytest.raises(chapters.ClaimsFileError, match=message):
        chapters.load_claims_file(path)


def test_claim_naming_a_missing_notebook_is_refused(toy_book: Path) -> None:
    (toy_book / "notebooks" / "01_toy" / "02_count.ipynb").unlink()
    with pytest.raises(chapters.ClaimsFileError, match="claim T2 names notebook '02_count'"):
        chapters.find_chapters(toy_book)


def test_claims_table_of_a_notebook_without_claims_is_empty(toy_book: Path, monkeypatch) -> None:
    # an illustration-only notebook (a data tour) records nothing; its table has no rows
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    shutil.copy(
        toy_book / "notebooks" / "01_toy" / "02_count.ipynb",
        toy_book / "notebooks" / "01_toy" / "03_tour.ipynb",
    )
    run = core.begin("toy", "03_tour", profile="reduced", config=PROFILES["reduced"], threads=1)
    table = run.claims_table()
    assert table.empty and list(table.columns) == [
        "metric",
        "paper",
        "ours",
        "rests on",
        "evidence",
        "verdict",
    ]
    assert list(run.claims_table(whole_chapter=True).index) == ["T1", "T2"]


def test_run_records_atomically_and_validates(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.delenv("REPROBOOK_RESULTS", raising=False)
    run = core.begin(
        "toy", "01_draw", profile="reduced", seed=3, config=PROFILES["reduced"], threads=1
    )
    assert run.record("T1", np.float64(0.25), n=np.int64(4)) == "reproduced"
    data = json.loads(run.path.read_text())
    assert (
        run.path
        == toy_book / "_build" / "tagged" / "seed3" / "results" / "reduced" / "toy" / "01_draw.json"
    )
    assert data["claims"]["T1"]["value"] == 0.25 and data["claims"]["T1"]["details"] == {"n": 4}
    assert data["seed"] == 3 and data["config"]["eps"] == [0.5, 1.0]
    assert {"git_commit", "packages", "hardware", "python"} <= set(data["facts"])
    assert not list(run.path.parent.glob(".*tmp"))  # no temporary file left behind
    table = run.claims_table()
    assert table.loc["T1", "verdict"] == "reproduced" and table.loc["T1", "ours"] == "0.25"
    whole = run.claims_table(whole_chapter=True)
    assert list(whole.index) == ["T1", "T2"] and whole.loc["T2", "verdict"] == "not run"
    with pytest.raises(KeyError, match="no claim 'T9'; its claims: T1, T2"):
        run.record("T9", 1.0)
    with pytest.raises(ValueError, match="belongs to notebook 02_count"):
        run.record("T2", 1)
    with pytest.raises(ValueError, match="must be finite"):
        run.record("T1", float("nan"))
    with pytest.raises(TypeError, match="number or a bool"):
        run.record("T1", "0.3")
    with pytest.raises(ValueError, match="record the measured value, not None"):
        run.record("T1", None)  # None is only for claims that need the full profile
    with pytest.raises(ValueError, match="unknown profile 'big'"):
        core.begin("toy", "01_draw", profile="big")
    with pytest.raises(ValueError, match="no notebook '03_x'; its notebooks: 01_draw, 02_count"):
        core.begin("toy", "03_x")
    with pytest.raises(ValueError, match="no chapter 'nope'; chapters: toy"):
        core.begin("nope", "01_draw")


STAT_CLAIMS = TOY_CLAIMS.replace(
    "evidence: exact\n    notebook: 01_draw",
    "evidence: statistical\n    no_effect: 0.6\n    replicates: runs\n    baseline: none\n"
    "    notebook: 01_draw",
)


def test_statistical_claims_are_recorded_with_intervals(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    (toy_book / "notebooks" / "01_toy" / "claims.yml").write_text(STAT_CLAIMS)
    run = core.begin("toy", "01_draw", profile="reduced", seed=0, threads=1)
    with pytest.raises(ValueError, match="T1 is statistical: record it with an interval"):
        run.record("T1", 0.3)
    assert run.record("T1", core.t_interval([0.1, 0.2, 0.3])) == "reproduced"
    entry = json.loads(run.path.read_text())["claims"]["T1"]
    assert entry["value"] == pytest.approx(0.2) and entry["interval_n"] == 3
    assert entry["interval_method"] == "Student-t 95% over 3"
    assert entry["interval"][0] < 0.2 < entry["interval"][1] <= 0.5
    assert run.record("T1", core.t_interval([0.3, 0.45, 0.6])) == "inconclusive"  # straddles 0.5
    assert run.record("T1", core.proportion_interval(9, 10)) == "not_reproduced"  # wholly above 0.5
    assert run.verdict("T1") == "not_reproduced" and run.verdict_label("T1") == "not reproduced"
    assert run.describe("T1").startswith("0.9 [") and run.describe("T1").endswith(
        "(not reproduced)"
    )
    with pytest.raises(ValueError, match="not a detail"):
        run.record("T1", core.t_interval([0.1, 0.2]), interval=(0, 1))
    run2 = core.begin("toy", "02_count", profile="reduced", seed=0, threads=1)
    with pytest.raises(ValueError, match="T2 is exact in claims.yml: record its value alone"):
        run2.record("T2", core.t_interval([1, 2, 3]))


def test_a_hand_run_at_another_seed_keeps_apart(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.delenv("REPROBOOK_RESULTS", raising=False)
    run = core.begin("toy", "01_draw", profile="reduced", seed=2, threads=1)
    assert (
        run.path
        == toy_book / "_build" / "tagged" / "seed2" / "results" / "reduced" / "toy" / "01_draw.json"
    )
    monkeypatch.setenv(
        "REPROBOOK_RESULTS", str(toy_book / "elsewhere")
    )  # the runner or the tests decide
    assert (
        core.begin("toy", "01_draw", seed=2, threads=1).path
        == toy_book / "elsewhere" / "reduced" / "toy" / "01_draw.json"
    )


def test_results_know_when_they_are_stale(toy_book: Path, monkeypatch) -> None:
    from reprobook import ledger, site

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    run = core.begin("toy", "01_draw", profile="reduced", seed=0, threads=1)
    run.record("T1", 0.25)
    ch = core.get_chapter("toy", toy_book)
    assert claims.load_records(ch, "reduced", toy_book)["T1"]["stale"] == []
    nb = toy_book / "notebooks" / "01_toy" / "01_draw.ipynb"
    nb.write_text(nb.read_text().replace("# 01_draw", "# 01_draw, edited"))
    assert claims.load_records(ch, "reduced", toy_book)["T1"]["stale"] == ["01_draw.ipynb"]
    path = toy_book / "notebooks" / "01_toy" / "claims.yml"
    path.write_text(path.read_text() + "\n# a comment\n")
    rows = ledger.collect("reduced", toy_book)
    assert rows[0]["stale"] == ["claims.yml", "01_draw.ipynb"] and "STALE" in ledger.verdict_cell(
        rows[0]
    )
    assert "1 STALE result" in ledger.headline(rows)
    (toy_book / "_config.yml").write_text("title: toy\n")
    (toy_book / "book").mkdir()
    with pytest.raises(
        site.BuildError, match="toy T1 were produced under an earlier claims.yml or notebook"
    ):
        site.stage(toy_book, "reduced", source_only=True)
    staged = site.stage(toy_book, "reduced", source_only=True, allow_stale=True)
    assert staged.exists()


def test_a_statistical_value_without_interval_does_not_count(toy_book: Path, monkeypatch) -> None:
    from reprobook import ledger

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    run = core.begin("toy", "01_draw", profile="reduced", seed=0, threads=1)
    run.record("T1", 0.25)  # recorded while T1 was exact
    (toy_book / "notebooks" / "01_toy" / "claims.yml").write_text(STAT_CLAIMS)  # now statistical
    row = ledger.collect("reduced", toy_book)[0]
    assert row["verdict"] == "not_run" and "recorded without an interval" in row["stale"]


def test_placeholders_are_filled_from_the_results() -> None:
    from reprobook import site

    rows = [
        dict(
            claim="C1",
            verdict="inconclusive",
            value=0.25,
            interval=[0.1, 0.4],
            paper_value="0.3",
            details={"n": 3, "per": {"a": 0.5}},
        ),
        dict(
            claim="C2",
            verdict="not_run",
            value=None,
            interval=None,
            paper_value="theorem",
            details={},
        ),
    ]
    text = (
        "Gap [[C1]] ([[C1.verdict]]; paper [[C1.paper]]), n = [[C1.details.n]], "
        "a [[C1.details.per.a]], [[C2]]."
    )
    assert site.fill_placeholders(text, rows, "x.md") == (
        "Gap 0.25 [0.1, 0.4] (inconclusive; paper 0.3), n = 3, a 0.5, (not run)."
    )
    assert site.fill_placeholders("[[C1.interval]]", rows, "x.md") == "[0.1, 0.4]"
    with pytest.raises(
        site.BuildError, match=r"\[\[C9\]\] names no claim of this chapter; its claims: C1, C2"
    ):
        site.fill_placeholders("[[C9]]", rows, "x.md")
    with pytest.raises(site.BuildError, match="recorded no detail 'm'; its details: n, per"):
        site.fill_placeholders("[[C1.details.m]]", rows, "x.md")
    with pytest.raises(site.BuildError, match="unknown field 'colour'"):
        site.fill_placeholders("[[C1.colour]]", rows, "x.md")


def test_new_intervals_match_scipy_and_check_input() -> None:
    from scipy import stats

    iv = core.proportion_interval(3, 20)
    ref = stats.binomtest(3, 20).proportion_ci(method="exact")
    assert iv.estimate == 0.15 and (iv.low, iv.high) == pytest.approx((ref.low, ref.high))
    assert core.proportion_interval(0, 5).low == 0.0 and core.proportion_interval(5, 5).high == 1.0
    with pytest.raises(ValueError, match=r"successes must be an integer >= 0 and <= 5, got 6"):
        core.proportion_interval(6, 5)
    with pytest.raises(TypeError, match="successes must be an integer"):
        core.proportion_interval(2.5, 5)
    x = np.random.default_rng(0).normal(1.0, 1.0, size=200)
    b = core.bootstrap_interval(x)
    t = core.t_interval(x)
    assert (
        b.low < 1.0 < b.high
        and b.low == pytest.approx(t.low, abs=0.05)
        and b.high == pytest.approx(t.high, abs=0.05)
    )
    assert core.bootstrap_interval(x) == b  # seeded: the same values give the same interval
    assert core.bootstrap_interval([2.0, 2.0, 2.0])[:3] == (2.0, 2.0, 2.0)
    assert core.t_interval([1.0, 2.0], level=0.9).method == "Student-t 90% over 2"


@pytest.mark.parametrize("seed", range(6))
def test_bootstrap_interval_does_not_depend_on_rounding(seed) -> None:
    # Values equal up to rounding (here moved by 1e-12 relative, about what another machine's
    # sums differ by) must give the interval of the exactly equal values. Without the snap of
    # near-ties this fails twice: [2, 2, 2, 2] skips the all-equal case and goes to BCa, and
    # the median below gets the bound 2 instead of 5 for some seeds, because BCa's bias
    # correction counts the resampled medians that fall below the estimate.
    same = core.bootstrap_interval(core.jitter(np.full(4, 2.0), seed))
    assert same.method.endswith("(all equal)") and same.low == same.estimate == same.high
    assert same.estimate == pytest.approx(2.0, rel=1e-11)
    ties = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    exact = core.bootstrap_interval(ties, statistic=np.median)
    moved = core.bootstrap_interval(core.jitter(ties, seed), statistic=np.median)
    assert exact[:3] == (2.0, 1.0, 5.0)
    assert moved[:3] == pytest.approx(exact[:3], rel=1e-9)
    x = np.random.default_rng(seed).normal(1.0, 1.0, size=50)  # no near-ties: untouched
    assert np.array_equal(core.stats.snap_near_ties(x), x)
    assert core.bootstrap_interval(core.jitter(x, seed))[:3] == pytest.approx(
        core.bootstrap_interval(x)[:3], rel=1e-9
    )


def test_snap_near_ties_moves_each_value_by_at_most_the_tolerance() -> None:
    v = np.array([3.0, 1.0, 1.0 + 4e-10, 1.0 + 8e-10, 1.0 + 5e-9, -3.0 + 1e-9])
    snapped = core.stats.snap_near_ties(v, rtol=1e-9)  # tolerance 3e-9: runs anchored at the
    assert snapped.tolist() == [3.0, 1.0, 1.0, 1.0, 1.0 + 5e-9, -3.0 + 1e-9]  # run's smallest
    assert np.max(np.abs(snapped - v)) <= 3e-9
    assert core.stats.snap_near_ties([1.0]).tolist() == [1.0]
    with pytest.raises(ValueError, match="rtol"):
        core.stats.snap_near_ties(v, rtol=-1.0)


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "r.json"
    paths.atomic_write_text(target, "old")

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        paths.atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_seed_everything_is_deterministic_and_sets_threads() -> None:
    import random

    import torch

    draws = []
    for _ in range(2):
        assert runtime.seed_everything(11, threads=1) == 1
        draws.append((random.random(), np.random.rand(), torch.rand(1).item()))
    assert draws[0] == draws[1]
    assert torch.get_num_threads() == 1
    assert os.environ["PL_GLOBAL_SEED"] == "11"
    runtime.seed_everything(12, threads=1)
    assert np.random.rand() != draws[0][1]
    with pytest.raises(ValueError, match="seed must be an integer"):
        runtime.seed_everything(-1)


def test_seed_everything_seeds_torch_when_it_is_first_imported() -> None:
    """A kernel that has not imported torch does not import it to seed it: torch is seeded
    (with the latest seed asked for) and given its threads the moment it is imported, so its
    draws are those of seeding it first."""
    code = textwrap.dedent(
        """
        import sys
        from reprobook.core import runtime
        runtime.seed_everything(7, threads=1)
        runtime.seed_everything(8, threads=1)  # the latest call wins
        assert "torch" not in sys.modules
        import torch
        first = torch.rand(3).tolist()
        assert torch.initial_seed() == 8 and torch.get_num_threads() == 1
        torch.manual_seed(8)
        assert torch.rand(3).tolist() == first
        assert runtime._TorchOnImport._finder is None  # gone once torch is in
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_threads_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_THREADS", "1")
    assert runtime.default_threads() == 1
    monkeypatch.setenv("REPROBOOK_THREADS", "zero")
    with pytest.raises(ValueError, match="REPROBOOK_THREADS"):
        runtime.default_threads()


def test_plain_makes_numpy_json_ready() -> None:
    out = claims.plain({"a": np.arange(3), "b": np.float32(0.5), "c": (np.int8(2), True)})
    assert json.loads(json.dumps(out)) == {"a": [0, 1, 2], "b": 0.5, "c": [2, True]}


def test_lightning_trainer_is_quiet_and_deterministic(capfd) -> None:
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.lin(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    weights = []
    for _ in range(2):
        runtime.seed_everything(0, threads=1)
        x = torch.randn(32, 3)
        data = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8
        )
        model = Tiny()
        core.make_trainer(max_steps=8).fit(model, data)
        weights.append(model.lin.weight.detach().clone())
    assert torch.equal(weights[0], weights[1])
    printed = "".join(capfd.readouterr())
    for chatter in (
        "GPU available",
        "TPU available",
        "Seed set",
        "litlogger",
        "does not have many workers",
    ):
        assert chatter not in printed, printed


def test_resolve_notebook_names_the_notebooks() -> None:
    table = {"first": PROFILES, "second": PROFILES}
    assert profiles.resolve_notebook(table, "second", "full", n=2).n == 2
    with pytest.raises(
        core.ProfileError, match="unknown notebook 'third'; valid notebooks: first, second"
    ):
        profiles.resolve_notebook(table, "third", "reduced")


# --- checkpoints shared between notebooks -------------------------------------------------------


def _linear_factory(calls):
    import torch

    def build():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)

    def train(module):
        calls.append(1)
        with torch.no_grad():
            module.weight.add_(1.0)
        return module

    return build, train


def test_load_or_train_trains_once_then_loads(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    calls: list[int] = []
    build, train = _linear_factory(calls)
    first, loaded = core.load_or_train(
        "spr_ldp", "toy", profile="reduced", key={"a": 1, "b": (1, 2)}, build=build, train=train
    )
    assert not loaded and calls == [1]
    second, loaded = core.load_or_train(
        "spr_ldp", "toy", profile="reduced", key={"b": (1, 2), "a": 1}, build=build, train=train
    )
    assert loaded and calls == [1]
    assert torch.equal(first.weight, second.weight) and not second.training
    files = sorted(p.name for p in (tmp_path / "reduced" / "spr_ldp").iterdir())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".pt")
    # another key, another profile: trained again
    core.load_or_train(
        "spr_ldp", "toy", profile="reduced", key={"a": 2, "b": (1, 2)}, build=build, train=train
    )
    core.load_or_train(
        "spr_ldp", "toy", profile="full", key={"a": 1, "b": (1, 2)}, build=build, train=train
    )
    assert calls == [1, 1, 1]
    # checkpoint_path names the file before it exists and after
    key = {"a": 3, "b": (1, 2)}
    path = core.checkpoint_path("spr_ldp", "toy", profile="reduced", key=key)
    assert not path.exists()
    core.load_or_train("spr_ldp", "toy", profile="reduced", key=key, build=build, train=train)
    assert path.is_file() and path.parent == tmp_path / "reduced" / "spr_ldp"


def test_side_by_side_uses_the_cores_only_at_the_reduced_profile(monkeypatch):
    import operator

    from reprobook.core import runtime

    seen = []
    monkeypatch.setattr(runtime, "parallel_map", lambda fn, items, workers: seen.append(workers))
    core.side_by_side(operator.add, [(1, 2)], profile="reduced")
    core.side_by_side(operator.add, [(1, 2)], profile="full")
    assert seen == [None, 1]  # None: default_threads(), one process per core


def test_parallel_map_keeps_order_and_matches_the_serial_map():
    import operator

    items = [(i, 10 * i) for i in range(5)]
    expected = [operator.add(*it) for it in items]
    assert core.parallel_map(operator.add, items, workers=1) == expected
    assert core.parallel_map(operator.add, items, workers=2) == expected  # two processes
    assert core.parallel_map(operator.add, [], workers=2) == []
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be a positive integer"):
            core.parallel_map(operator.add, items, workers=bad)


def test_parallel_stages_run_in_order_on_one_pool_of_workers(monkeypatch):
    import concurrent.futures
    import operator

    pools = []
    real = concurrent.futures.ProcessPoolExecutor

    def counted(*args, **kwargs):
        pools.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counted)
    stages = [[(1, 2), (3, 4)], [], [(5, 6), (7, 8), (9, 10)]]
    expected = [[operator.add(*it) for it in stage] for stage in stages]
    assert core.parallel_stages(operator.add, stages, workers=1) == expected
    assert pools == []  # one worker: in this process
    assert core.parallel_stages(operator.add, stages, workers=2) == expected
    assert len(pools) == 1  # both stages on one pool, its workers started once
    assert core.parallel_stages(operator.add, [[], []], workers=2) == [[], []]
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        core.parallel_stages(operator.add, stages, workers=0)
    seen = []
    record = lambda fn, stages, workers: seen.append(workers)  # noqa: E731
    monkeypatch.setattr(core.runtime, "parallel_stages", record)
    core.side_by_side_stages(operator.add, stages, profile="reduced")
    core.side_by_side_stages(operator.add, stages, profile="full")
    assert seen == [None, 1]


def test_load_or_train_retrains_a_damaged_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    calls: list[int] = []
    build, train = _linear_factory(calls)
    core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train)
    (pt,) = (tmp_path / "reduced" / "spr_ldp").glob("*.pt")
    pt.write_bytes(b"not a checkpoint")
    with pytest.warns(UserWarning, match="could not be loaded"):
        _, loaded = core.load_or_train(
            "spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train
        )
    assert not loaded and calls == [1, 1]
    _, loaded = core.load_or_train(
        "spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train
    )
    assert loaded and calls == [1, 1]


def test_load_or_train_retrains_from_a_fresh_module_not_a_half_loaded_one(tmp_path, monkeypatch):
    """load_state_dict copies every entry that fits before it raises on one that does not
    (torch.nn.Module.load_state_dict, strict=True); the retraining must not start from that."""
    import torch

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    build, _ = _linear_factory([])
    seen = []

    def train(module):
        seen.append(module.weight.detach().clone())
        return module

    key = {"a": 1}
    path = core.checkpoint_path("spr_ldp", "toy", profile="reduced", key=key)
    path.parent.mkdir(parents=True)
    torch.save({"weight": torch.full((2, 3), 7.0), "bias": torch.zeros(5)}, path)  # bias unfit
    with pytest.warns(UserWarning, match="could not be loaded"):
        core.load_or_train("spr_ldp", "toy", profile="reduced", key=key, build=build, train=train)
    assert torch.equal(seen[0], build().weight)  # fresh weights, not the 7s of the bad file


def test_load_or_train_refuses_a_state_that_build_cannot_load(tmp_path, monkeypatch):
    """A buffer that training resizes (a loss curve made empty by build()) would make every
    later load fail and every notebook train again: refused when it is first saved."""
    import torch

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))

    def build():
        module = torch.nn.Linear(3, 2)
        module.register_buffer("curve", torch.zeros(0))
        return module

    def train(module):
        module.curve = torch.ones(4)  # resized in training
        return module

    with pytest.raises(RuntimeError, match=r"(?s)does not load into what build\(\) makes.*curve"):
        core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build,
                           train=train)  # fmt: skip
    assert not list((tmp_path / "reduced" / "spr_ldp").glob("*.pt"))  # nothing saved


def test_load_or_train_probe_keeps_the_random_state_and_dynamic_modules(tmp_path, monkeypatch):
    """The check that a trained state loads into a fresh build() draws nothing from the
    random generators, and a module that registers its buffers on load passes it."""
    import random

    import numpy as np
    import torch

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))

    def build():
        random.random(), np.random.rand()
        return torch.nn.Linear(3, 2)  # its initialisation draws from torch's generator

    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    for gen in (random.seed, np.random.seed, torch.manual_seed):
        gen(1)
    build()
    expected = draws()  # one build, no training, then the draws
    for gen in (random.seed, np.random.seed, torch.manual_seed):
        gen(1)
    core.load_or_train("spr_ldp", "lin", profile="reduced", key={"a": 1}, build=build,
                       train=lambda m: m)  # fmt: skip
    assert draws() == expected

    class Grows(torch.nn.Module):  # takes whatever buffers a state holds
        def _load_from_state_dict(self, state, prefix, *args, **kwargs):
            for k, v in state.items():
                self.register_buffer(k[len(prefix) :], v.clone())

    def fill(module):
        module.register_buffer("x", torch.arange(3.0))
        return module

    _, loaded = core.load_or_train("spr_ldp", "grows", profile="reduced", key={"a": 1},
                                   build=Grows, train=fill)  # fmt: skip
    again, loaded = core.load_or_train("spr_ldp", "grows", profile="reduced", key={"a": 1},
                                       build=Grows, train=fill)  # fmt: skip
    assert loaded and torch.equal(again.x, torch.arange(3.0))


def test_load_or_train_refuses_bad_names_and_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    build, train = _linear_factory([])
    with pytest.raises(ValueError, match="letters, digits"):
        core.load_or_train("spr_ldp", "../up", profile="reduced", key={}, build=build, train=train)
    with pytest.raises(TypeError, match="checkpoint key"):
        core.load_or_train(
            "spr_ldp", "toy", profile="reduced", key={"x": object()}, build=build, train=train
        )
    with pytest.raises(ValueError, match="no paper package"):
        core.load_or_train(
            "no_such_slug", "toy", profile="reduced", key={}, build=build, train=train
        )
    assert not any(tmp_path.iterdir())


def test_not_checkable_claims_record_none_only(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    claims = toy_book / "notebooks" / "01_toy" / "claims.yml"
    claims.write_text(
        TOY_CLAIMS.replace(
            "check:\n      reproduced: {max: 0.5}",
            "check:\n      not_checkable: the draw happens on another machine",
        )
    )
    run = core.begin(
        "toy", "01_draw", profile="reduced", seed=0, config=PROFILES["reduced"], threads=1
    )
    with pytest.raises(ValueError, match="not_checkable in claims.yml: record None"):
        run.record("T1", 0.2)
    assert run.record("T1", None, why="elsewhere") == "not_checkable"
    assert run.claims_table().loc["T1", "verdict"] == "not checkable here"


def test_t_interval_matches_scipy_and_checks_its_input():
    import numpy as np
    import pytest
    from scipy import stats

    from reprobook.core import t_interval

    x = np.array([0.81, 0.86, 0.78, 0.9, 0.84])
    iv = t_interval(x, 0.9)
    lo, hi = stats.t.interval(0.9, df=4, loc=x.mean(), scale=stats.sem(x))
    assert abs(iv.low - lo) < 1e-12 and abs(iv.high - hi) < 1e-12
    assert iv.mean == pytest.approx(x.mean()) and iv.se == pytest.approx(stats.sem(x)) and iv.n == 5
    assert t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0, "Student-t 95% over 3", 3, 0.0, 0.95)
    for bad, match in (
        ([1.0], "at least 2"),
        ([1.0, np.nan], "finite"),
        ([1.0, 2.0, 3.0], "level"),
    ):
        with pytest.raises(ValueError, match=match):
            t_interval(bad, 1.5 if match == "level" else 0.95)


def test_worst_group_interval_is_the_bonferroni_envelope():
    from reprobook.core import stats

    groups = {"a": [0.9, 0.8, 0.85, 0.95], "b": [0.5, 0.6, 0.55, 0.4], "c": [0.7, 0.75, 0.72]}
    out = stats.worst_group_interval(groups, level=0.9)
    each = [stats.t_interval(v, level=1 - 0.1 / 3) for v in groups.values()]
    assert out.group == "b"
    assert out.interval.estimate == pytest.approx(np.mean(groups["b"]))
    assert out.interval.low == pytest.approx(min(t.low for t in each))
    assert out.interval.high == pytest.approx(min(t.high for t in each))
    top = stats.worst_group_interval(groups, worst="max")
    assert top.group == "a" and top.interval.high == max(t.high for t in top.by_group.values())
    shared = stats.worst_group_interval(groups, n=4)  # groups measured on the same 4 seeds
    assert shared.interval.n == 4 and "4 units" in shared.interval.method
    assert out.interval.n == 11 and "11 units" in out.interval.method
    with pytest.raises(ValueError, match="worst must be one of 'min', 'max'"):
        stats.worst_group_interval(groups, worst="mean")
    with pytest.raises(ValueError, match="at least one group"):
        stats.worst_group_interval({})


def test_checks_return_clean_values_and_name_what_is_allowed():
    from reprobook.core import checks

    assert checks.integer(np.int64(3), "n", minimum=1) == 3 and type(checks.integer(3, "n")) is int
    assert checks.real(2, "x") == 2.0 and checks.probability(1, "p") == 1.0
    with pytest.raises(checks.InputError, match=r"n must be an integer >= 1, got 0"):
        checks.integer(0, "n", minimum=1)
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="n must be an integer"):
            checks.integer(bad, "n")
    with pytest.raises(ValueError, match=r"eta must be a finite real number >= 0 and < 0.5"):
        checks.real(0.5, "eta", minimum=0, below=0.5)
    with pytest.raises(ValueError, match="finite"):
        checks.real(float("nan"), "x")
    with pytest.raises(ValueError, match=r"p must be a finite real number > 0 and <= 1, got 0"):
        checks.probability(0, "p", open_low=True)
    with pytest.raises(ValueError, match="True or False"):
        checks.boolean(1, "flag")
    assert checks.choice("min", "worst", ("min", "max")) == "min"
    with pytest.raises(ValueError, match=r"rng must be a numpy.random.Generator"):
        checks.generator(0)
    X = checks.array([[1, 2], [3, 4]], "X", ndim=2, shape=(None, 2))
    assert X.dtype == float and X.shape == (2, 2)
    with pytest.raises(
        ValueError, match=r"X \(n, d\) must have shape \(any, 3\), got shape \(2, 2\)"
    ):
        checks.array(X, "X", shape=(None, 3), what="(n, d)")
    with pytest.raises(ValueError, match=r"w must have shape \(3,\), got shape \(2,\)"):
        checks.array([1, 2], "w", shape=(3,))
    with pytest.raises(ValueError, match=r"X \(n, d\) must be an array of float64 values"):
        checks.array([[1, "a"]], "X", what="(n, d)")
    with pytest.raises(ValueError, match="must be a 1-D or 2-D array"):
        checks.array(np.zeros((1, 1, 1)), "X", ndim=(1, 2))
    with pytest.raises(ValueError, match="NaN or infinite"):
        checks.array([1.0, np.inf], "v")
    with pytest.raises(
        ValueError, match=r"a and b must have the same shape, got \(2,\) and \(3,\)"
    ):
        checks.same_shape("a", np.zeros(2), "b", np.zeros(3))


def test_show_source_renders_a_function_without_its_docstring(capsys):
    from reprobook.core import display, stats

    assert core.show_source(stats.t_interval) is None  # a cell ending in it shows it once
    text = capsys.readouterr().out.strip()
    assert text == display.source_markdown(stats.t_interval)
    assert text.startswith("`reprobook.core.stats.t_interval` (reprobook/core/stats.py, line ")
    assert "```python\ndef t_interval(values" in text and "mean +- t_" not in text.split("```")[1]
    assert "mean +- t_" in text.split("```")[0]  # the docstring's first sentence is the caption
    assert '"""' in display.source_markdown(stats.t_interval, docstring=True)
    with pytest.raises(TypeError, match="needs a function"):
        core.show_source(42)


def test_a_broken_sibling_chapter_does_not_stop_another(toy_book: Path) -> None:
    broken = toy_book / "notebooks" / "02_wip"
    broken.mkdir()
    (broken / "claims.yml").write_text("claims: [{id: C1, notebook: 01_missing}]\n")
    assert chapters.get_chapter("toy", toy_book).slug == "toy"
    assert chapters.get_chapter("1", toy_book).name == "01_toy"
    with pytest.raises(chapters.ClaimsFileError):
        chapters.get_chapter("02", toy_book)
    with pytest.raises(KeyError, match="no chapter 'nope'; chapters: toy, wip"):
        chapters.get_chapter("nope", toy_book)


def test_unfilled_allocations_restores_the_setting_even_on_error():
    import torch.utils.deterministic as det

    from reprobook.core import unfilled_allocations

    before = det.fill_uninitialized_memory
    with unfilled_allocations():
        assert det.fill_uninitialized_memory is False
    assert det.fill_uninitialized_memory == before
    with pytest.raises(RuntimeError, match="boom"), unfilled_allocations():
        raise RuntimeError("boom")
    assert det.fill_uninitialized_memory == before


# --- the one set-up call, the training glue and the intervals of issue "one house" ------------


def _toy_package(name="reprobook.papers.toy", table=None):
    import types

    pkg = types.ModuleType(name)
    pkg.config = types.SimpleNamespace(
        PROFILES=table
        if table is not None
        else {"01_draw": {"reduced": Sizes(n=10, eps=(0.5,)), "full": Sizes(n=1000, eps=(0.1,))}}
    )
    return pkg


def test_start_resolves_the_notebooks_profile_and_begins_its_run(
    toy_book: Path, monkeypatch
) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    run, cfg = core.start(_toy_package(), "01_draw", "reduced", 4, threads=1, n=7)
    assert cfg == Sizes(n=7, eps=(0.5,))  # the override applied, None-free
    assert (run.chapter.slug, run.notebook, run.profile, run.seed) == (
        "toy",
        "01_draw",
        "reduced",
        4,
    )
    assert json.loads(run.path.read_text())["config"]["n"] == 7
    # the same seed gives the same draws as core.begin with the same configuration
    a = np.random.rand()
    core.begin("toy", "01_draw", "reduced", 4, cfg, 1)
    assert np.random.rand() == a


def test_start_names_what_is_wrong(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    with pytest.raises(ValueError, match="no notebook '02_count'; its notebooks: 01_draw"):
        core.start(_toy_package(), "02_count", "reduced", 0)
    with pytest.raises(ValueError, match="paper must be a paper package"):
        core.start(types_module("numpy"), "01_draw", "reduced", 0)
    with pytest.raises(ValueError, match="unknown profile 'big'"):
        core.start(_toy_package(), "01_draw", "big", 0)
    with pytest.raises(ValueError, match="unknown override key"):
        core.start(_toy_package(), "01_draw", "reduced", 0, m=3)


def types_module(name):
    import importlib

    return importlib.import_module(name)


@dataclass(frozen=True)
class Outer:
    net: Sizes = Sizes(n=1, eps=(0.5,))
    steps: int = 3


def test_nested_overrides_reach_the_nested_configuration() -> None:
    table = {"reduced": Outer(), "full": Outer(steps=9)}
    cfg = profiles.resolve(table, "reduced", net__n=5, steps=None, net__k_max=None)
    assert cfg == Outer(net=Sizes(n=5, eps=(0.5,)), steps=3)
    with pytest.raises(profiles.ProfileError, match="no nested configuration 'steps'"):
        profiles.resolve(table, "reduced", steps__n=2)
    with pytest.raises(profiles.ProfileError, match="unknown override key"):
        profiles.resolve(table, "reduced", net__width=2)


def test_lazy_submodules_import_on_first_use() -> None:
    import sys

    get = core.lazy_submodules("reprobook.core")
    assert get("stats") is sys.modules["reprobook.core.stats"]
    with pytest.raises(AttributeError, match="no attribute or submodule 'nope'"):
        get("nope")
    with pytest.raises(AttributeError):
        get("__wrapped__")


def test_lazy_exports_are_the_submodules_objects() -> None:
    """A name a paper package offers through ``exports`` is the defining submodule's object,
    loaded on first use and then kept on the package."""
    from reprobook.papers import vmf_sphere_flow as vf

    assert vf.psi is vf.geometry.psi
    assert vf.train_posterior is vf.model.train_posterior
    assert "psi" in vars(vf)
    get = core.lazy_submodules("reprobook.core", {"t_interval": "stats"})
    assert get("t_interval") is core.stats.t_interval


def _tiny_module():
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(2, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.w(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Tiny()


def test_fit_returns_every_steps_loss_and_matches_the_hand_written_loop() -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    make = torch.Generator().manual_seed
    data = TensorDataset(
        torch.randn(40, 2, generator=make(1)), torch.randn(40, 1, generator=make(2))
    )
    torch.manual_seed(0)
    a = _tiny_module()
    curve = core.fit(a, data, steps=7, batch=8, seed=3, drop_last=True)
    assert curve.shape == (7,) and curve.dtype == np.float32 and np.all(np.isfinite(curve))
    torch.manual_seed(0)
    b = _tiny_module()
    loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(3))  # fmt: skip
    core.make_trainer(max_steps=7).fit(b, loader)
    assert torch.equal(a.w.weight, b.w.weight)  # the same batches in the same order
    # the first loss is the untrained model's loss on the first batch
    torch.manual_seed(0)
    c = _tiny_module()
    x, y = next(iter(DataLoader(data, batch_size=8, shuffle=True,
                                generator=torch.Generator().manual_seed(3))))  # fmt: skip
    with torch.no_grad():
        first = float(torch.nn.functional.mse_loss(c.w(x), y))
    assert curve[0] == pytest.approx(first, rel=1e-6)


def test_make_trainer_keeps_given_callbacks_and_resumes(tmp_path: Path) -> None:
    from reprobook.core import training

    with training.resumable(tmp_path / "r"):
        trainer = core.make_trainer(max_steps=1, callbacks=[_curve()])
        kinds = [type(c).__name__ for c in trainer.callbacks]
    assert "LossCurve" in kinds and "ModelCheckpoint" in kinds


def _curve():
    from reprobook.core.training import _loss_curve_class

    return _loss_curve_class()()


def test_one_interval_type_for_t_paired_and_welch() -> None:
    x, y = np.array([1.0, 2.0, 4.0, 7.0]), np.array([0.5, 2.5, 3.0, 5.0])
    t = core.t_interval(x)
    assert isinstance(t, core.Interval) and t.mean == t.estimate == 3.5
    assert t.method == "Student-t 95% over 4" and t.se == pytest.approx(x.std(ddof=1) / 2)
    p = core.paired_interval(x, y)
    d = core.t_interval(x - y)
    assert (p.estimate, p.low, p.high) == (d.estimate, d.low, d.high)
    assert p.method == "paired Student-t 95.0% over 4"
    w = core.welch_interval(x, y, 0.9)
    ref = sps.ttest_ind(x, y, equal_var=False).confidence_interval(0.9)
    assert (w.low, w.high) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert core.welch_interval([1, 1, 1], [0, 0, 0]) == (1.0, 1.0, 1.0, w.method.replace(
        "90.0%", "95.0%").replace("4 + 4", "3 + 3"), 6, 0.0, 0.95)  # fmt: skip
    with pytest.raises(ValueError, match="same length"):
        core.paired_interval([1, 2, 3], [1, 2])


def test_replicate_interval_leaves_failures_out_and_decides_nothing_below_two() -> None:
    assert core.replicate_interval([1.0, np.nan, 2.0, 3.0]) == core.t_interval([1.0, 2.0, 3.0])
    one = core.replicate_interval([np.nan, 0.4], bars=(0.5, 0.0))
    assert (one.estimate, one.low, one.high, one.n) == (0.4, -1.0, 1.5, 1)
    none = core.replicate_interval([np.nan], bars=(2.0,))
    assert (none.estimate, none.low, none.high, none.n) == (0.0, -1.0, 3.0, 0)


def test_bca_from_replicates_is_the_percentile_interval_without_bias_or_skew() -> None:
    boot = np.arange(1.0, 101.0)  # half below the estimate 50.5: z0 = 0
    jack = np.array([1.0, -1.0, 1.0, -1.0])  # no skewness: a = 0
    low, high = core.bca_from_replicates(50.5, boot, jack, 0.9)
    assert (low, high) == pytest.approx(tuple(np.quantile(boot, [0.05, 0.95])), rel=1e-9)
    with pytest.raises(ValueError, match="at least 2 values"):
        core.bca_from_replicates(1.0, [1.0], [1.0, 2.0])


def test_smallest_proportion_interval_is_simultaneous() -> None:
    iv = core.smallest_proportion_interval({"a": (9, 10), "b": (3, 10)}, 0.9)
    each = [core.proportion_interval(k, 10, 0.95) for k in (9, 3)]
    assert (iv.estimate, iv.low, iv.high, iv.n) == (0.3, each[1].low, each[1].high, 10)
    assert core.bonferroni_level(0.9, 2) == pytest.approx(0.95)
    with pytest.raises(ValueError, match="counts is empty"):
        core.smallest_proportion_interval({})


def test_one_thread_holds_except_at_the_full_profile(toy_book: Path, monkeypatch) -> None:
    import torch

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.setenv("REPROBOOK_THREADS", "2")
    before = torch.get_num_threads()
    try:
        table = {"01_draw": {p: Sizes(n=1, eps=(0.5,)) for p in ("reduced", "full", "smoke")}}
        for profile, want in (("reduced", 1), ("smoke", 1), ("full", 2)):
            run, _ = core.start(_toy_package(table=table), "01_draw", profile, 0, one_thread=True)
            assert run.threads == want == torch.get_num_threads(), profile
        run, _ = core.start(_toy_package(table=table), "01_draw", "reduced", 0, threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _theme_state():
    import matplotlib as mpl

    rc = {k: v for k, v in mpl.rcParams.items() if k != "backend"}
    codes = {c: mpl.colors.to_rgb(c) for c in "bgrmyck"}
    return rc, codes


def test_theme_is_seaborns_white_grid_with_the_books_settings():
    """set_theme writes seaborn's theme out as matplotlib settings: applied from matplotlib's
    defaults it must give every setting and colour code that seaborn's own set_theme gives,
    then the book's settings on top."""
    import matplotlib as mpl
    import seaborn as sns

    from reprobook.core import plotting

    saved = dict(mpl.colors.colorConverter.colors), dict(mpl.colors.colorConverter.cache)
    try:
        with mpl.rc_context():
            mpl.rcdefaults()
            sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
            mpl.rcParams.update(plotting._BOOK_RC)
            want = _theme_state()
        for store, old in zip(
            (mpl.colors.colorConverter.colors, mpl.colors.colorConverter.cache), saved
        ):
            store.clear()
            store.update(old)
        with mpl.rc_context():
            mpl.rcdefaults()
            plotting.set_theme()
            got = _theme_state()
    finally:
        for store, old in zip(
            (mpl.colors.colorConverter.colors, mpl.colors.colorConverter.cache), saved
        ):
            store.clear()
            store.update(old)
    assert got[1] == want[1]
    differ = {k: (got[0][k], want[0][k]) for k in want[0] if got[0][k] != want[0][k]}
    assert differ == {}
    names = [f"m{i}" for i in range(13)]
    assert list(core.method_colors(names).values()) == list(
        sns.color_palette("colorblind", n_colors=13)
    )


def test_atomic_torch_save_writes_whole_or_leaves_nothing(tmp_path):
    import pickle

    import torch

    path = tmp_path / "sub" / "x.pt"
    core.atomic_torch_save({"a": torch.arange(3)}, path)
    assert torch.equal(torch.load(path, weights_only=True)["a"], torch.arange(3))
    with pytest.raises((AttributeError, pickle.PicklingError), match="pickle"):  # nothing left
        core.atomic_torch_save({"f": lambda: 0}, tmp_path / "y.pt")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["sub", "x.pt"]
