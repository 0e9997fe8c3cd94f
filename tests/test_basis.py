"""What a verdict rests on, and the designs that cannot fail: each claim's ``basis``, the
headline that counts only evidence that could have gone against the paper, and the loader and
``run.record`` refusing the patterns that let a claim pass on something other than the paper's
effect (a bar the no-effect value meets, a zero-width interval, test items standing in for
training seeds, a min or max over noisy comparisons, a pooled mean over units of opposite
sign, a baseline the metric does not name)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from reprobook import core, ledger, site
from reprobook.core import chapters
from reprobook.core.chapters import ClaimsFileError, load_claims_file

BASE = dict(
    id="C1",
    claim="Method A beats baseline B.",
    metric="accuracy of A minus accuracy of B",
    paper_value="+2 points",
    source="abstract",
    basis="method",
    evidence="statistical",
    notebook="01_draw",
    check={"reproduced": {"min": 0.01}},
    no_effect=0,
    replicates="runs",
    baseline="B",
)


def _load(tmp_path: Path, **changes):
    entry = {**BASE, **changes}
    entry = {k: v for k, v in entry.items() if v is not None}
    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump({"paper": {"title": "t"}, "claims": [entry]}))
    return load_claims_file(path)[1][0]


def test_a_well_formed_statistical_claim_loads(tmp_path: Path) -> None:
    c = _load(tmp_path)
    assert (c.basis, c.replicates, c.aggregate, c.baseline) == ("method", "runs", "single", "B")
    assert c.group == "papers_terms" and c.is_papers


@pytest.mark.parametrize(
    "changes, message",
    [
        # what the evidence rests on
        ({"basis": None}, "missing key.*basis"),
        ({"basis": "vibes"}, "basis 'vibes' is not one of release, method, reconstruction"),
        ({"basis": "simulation", "note": "ours"}, "sets the direction of the result"),
        ({"basis": "own code"}, "make it evidence: illustration"),
        ({"basis": "reconstruction"}, "says in its note which part is ours"),
        # no bar that the no-effect value passes, reproduced bars as partial ones
        ({"no_effect": None}, "declares no_effect"),
        ({"no_effect": float("inf")}, "no_effect must be a finite number"),
        ({"no_effect": float("nan")}, "no_effect must be a finite number"),
        ({"check": {"reproduced": {"min": 0.0}}}, "met by the no-effect value 0"),
        ({"check": {"reproduced": {"max": 1.0}}, "no_effect": 1}, "met by the no-effect value 1"),
        ({"check": {"reproduced": {"min": -0.1, "max": 0.1}}}, "equivalence claim"),
        (
            {"check": {"reproduced": {"max": 0.1}}, "equivalence": True},
            "two-sided bar",
        ),
        (
            {"check": {"reproduced": {"min": 0.1, "max": 0.3}}, "equivalence": True},
            "two-sided bar.*around 0",
        ),
        # trained models are decided over training seeds
        ({"replicates": None}, "says what its interval is over"),
        ({"replicates": "prompts"}, "replicates 'prompts' is not one of"),
        ({"trained": True, "replicates": "items"}, "decided over training seeds"),
        # a min or max over several noisy comparisons
        ({"metric": "largest gain of A over B across 18 settings"}, "takes a largest"),
        ({"metric": "minimum Kendall tau of B over 9 pairs"}, "takes a minimum"),
        ({"aggregate": "each"}, "lists them under units"),
        ({"aggregate": "each", "units": ["cora"]}, "at least two distinct names"),
        ({"units": ["cora", "citeseer"]}, "units go with aggregate: each only"),
        # a comparison names its baseline, and the metric names it
        ({"baseline": None}, "names what it is compared with"),
        ({"baseline": "C"}, "baseline 'C' is not named in the metric"),  # not a substring match
        ({"baseline": "top-24 control"}, "not named in the metric"),
    ],
)
def test_the_loader_refuses_designs_that_cannot_fail(tmp_path, changes, message) -> None:
    with pytest.raises(ClaimsFileError, match=message):
        _load(tmp_path, **changes)


def test_what_the_loader_accepts_in_place_of_the_refused(tmp_path: Path) -> None:
    assert _load(tmp_path, basis="simulation", evidence="illustration", note="Ours.").group == (
        "illustration"
    )
    assert _load(tmp_path, basis="own code", source="extension").group == "extension"
    assert _load(tmp_path, basis="reconstruction", note="Our data.").group == "reconstruction"
    assert _load(tmp_path, basis="release").group == "papers_terms"
    eq = _load(tmp_path, check={"reproduced": {"min": -0.1, "max": 0.1}}, equivalence=True)
    assert eq.equivalence
    assert _load(tmp_path, trained=True, replicates="training seeds").trained
    assert _load(tmp_path, metric="largest gain of A over B", aggregate="max").aggregate == "max"
    assert _load(tmp_path, metric="the best model's accuracy minus B", aggregate="single")
    each = _load(tmp_path, aggregate="each", units=["cora", "csbm-a"])
    assert each.units == ("cora", "csbm-a")
    # a claim needs_full at every profile is not decided here: it declares no design yet
    assert _load(
        tmp_path, check={"needs_full": True}, no_effect=None, replicates=None, baseline=None
    )


# ----------------------------------------------------------------------------- recording


def _toy(toy_book: Path, monkeypatch, **changes) -> core.Run:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    path = toy_book / "notebooks" / "01_toy" / "claims.yml"
    data = yaml.safe_load(path.read_text())
    data["claims"][0] = {**BASE, "id": "T1", **changes}
    path.write_text(yaml.safe_dump(data))
    return core.begin("toy", "01_draw", profile="reduced", seed=0, threads=1)


def test_trained_models_are_decided_over_training_seeds(toy_book: Path, monkeypatch) -> None:
    run = _toy(toy_book, monkeypatch, trained=True, replicates="training seeds")
    items = np.linspace(0.02, 0.06, 50)
    with pytest.raises(ValueError, match="decided over training seeds"):
        run.record("T1", core.bootstrap_interval(items, seed=0))  # test items of one model
    with pytest.raises(ValueError, match="decided over training seeds"):
        run.record("T1", core.proportion_interval(40, 50))
    assert run.record("T1", core.t_interval([0.03, 0.05, 0.04])) == "reproduced"


def test_a_min_over_comparisons_needs_a_simultaneous_interval(toy_book, monkeypatch) -> None:
    run = _toy(toy_book, monkeypatch, metric="smallest gain of A over B", aggregate="min")
    gains = {"x": [0.03, 0.05, 0.04], "y": [0.02, 0.03, 0.025]}
    with pytest.raises(ValueError, match="simultaneous interval"):
        run.record("T1", core.t_interval(gains["y"]))  # the worst one, as if it were the only one
    worst = core.worst_group_interval(gains, worst="min")
    assert "Bonferroni" in worst.interval.method
    assert run.record("T1", worst.interval) in ("reproduced", "inconclusive")


def test_a_claim_about_each_unit_is_decided_by_the_worst(toy_book, monkeypatch) -> None:
    run = _toy(toy_book, monkeypatch, aggregate="each", units=["cora", "csbm-a", "csbm-b"])
    good, bad = [0.05, 0.06, 0.07], [-0.12, -0.10, -0.08]
    with pytest.raises(ValueError, match="not one pooled value"):
        run.record("T1", core.t_interval(good + bad + bad))
    with pytest.raises(ValueError, match="record each of them, and only them"):
        run.record("T1", {"cora": core.t_interval(good), "csbm-a": core.t_interval(bad)})
    # the pooled mean of one strong gain and two losses would be the wrong verdict either way;
    # per unit, the claim takes its worst unit's verdict
    verdict = run.record(
        "T1",
        {
            "cora": core.t_interval(good),
            "csbm-a": core.t_interval(bad),
            "csbm-b": core.t_interval([0.02, 0.03, 0.025]),
        },
    )
    assert verdict == "not_reproduced" == run.verdict("T1")
    data = run._data["claims"]["T1"]
    assert data["details"]["deciding_unit"] == "csbm-a"
    assert data["value"] == pytest.approx(-0.10)
    row = ledger.collect("reduced", toy_book)[0]
    assert row["verdict"] == "not_reproduced"
    assert {u: v["verdict"] for u, v in row["units"].items()} == {
        "cora": "reproduced",
        "csbm-a": "not_reproduced",
        "csbm-b": "reproduced",
    }
    assert "csbm-a" in site.caveats([row])
    # among units with the same worst verdict, the one farthest on the wrong side decides
    run.record(
        "T1",
        {
            "cora": core.t_interval([-0.01, 0.0, 0.05]),
            "csbm-a": core.t_interval([-0.05, 0.0, 0.03]),
            "csbm-b": core.t_interval([-0.03, 0.0, 0.06]),
        },
    )
    assert run.verdict("T1") == "inconclusive"
    assert run._data["claims"]["T1"]["details"]["deciding_unit"] == "csbm-a"
    # every unit reproduced: the claim is reproduced
    ok = run.record("T1", {u: core.t_interval(good) for u in ("cora", "csbm-a", "csbm-b")})
    assert ok == "reproduced"


def test_a_zero_width_interval_never_decides(toy_book: Path, monkeypatch) -> None:
    run = _toy(toy_book, monkeypatch, trained=True, replicates="training seeds")
    # three seeds on one lattice point: the t interval has width 0
    assert run.record("T1", core.t_interval([0.18, 0.18, 0.18])) == "inconclusive"
    run = _toy(toy_book, monkeypatch, check={"reproduced": {"max": -0.01}})
    assert run.record("T1", core.bootstrap_interval([0.0] * 20, seed=0)) == "inconclusive"


# ----------------------------------------------------------------------------- the headline


def _row(claim: str, basis: str, verdict: str, evidence: str = "statistical", **kw) -> dict:
    c = chapters.Claim(
        id=claim,
        claim="c",
        metric="m",
        paper_value="p",
        source=kw.pop("source", "abstract"),
        notebook="01_x",
        check={"reproduced": {"min": 1}},
        evidence=evidence,
        basis=basis,
    )
    return {
        "chapter": "toy",
        "number": "01",
        "claim": claim,
        "source": c.source,
        "basis": basis,
        "group": c.group,
        "evidence": evidence,
        "papers": c.is_papers,
        "verdict": verdict,
        "verdict_label": core.claims.verdict_label(verdict, c),
        "revisions": [],
        "stale": [],
        **kw,
    }


def test_the_headline_counts_only_evidence_that_could_go_against_the_paper() -> None:
    rows = [
        _row("C1", "release", "reproduced"),
        _row("C2", "method", "not_reproduced"),
        _row("C3", "reconstruction", "reproduced"),
        _row("C4", "reconstruction", "inconclusive"),
        _row("C5", "simulation", "illustrated", "illustration"),
        _row("C6", "own code", "illustrated", "illustration"),
        _row("C7", "method", "needs_full"),
        _row("C8", "method", "reproduced", source="extension"),
    ]
    text = ledger.headline(rows)
    assert text.startswith(
        "Of the paper's 7 claims, 4 were tested: 2 on the paper's terms (1 reproduced, "
        "1 not reproduced) and 2 only on our reconstruction (1 reproduced, 1 inconclusive); "
        "2 are illustrated, not tested; 1 needs the full profile."
    )
    assert "1 extension of ours (1 reproduced)" in text
    # a result on our reconstruction says so beside the verdict
    assert rows[2]["verdict_label"] == "reproduced (our reconstruction)"
    assert rows[0]["verdict_label"] == "reproduced"
    assert ledger.group_counts(rows) == {
        "papers_terms": {"reproduced": 1, "not_reproduced": 1},
        "reconstruction": {"reproduced": 1, "inconclusive": 1},
    }


def test_notes_sit_beside_the_verdicts(toy_book: Path, monkeypatch) -> None:
    run = _toy(
        toy_book,
        monkeypatch,
        basis="reconstruction",
        note="Our reconstruction: the data are ours, e.g. a toy. The rest of the note.",
    )
    run.record("T1", core.t_interval([0.03, 0.05, 0.04]))
    rows = ledger.collect("reduced", toy_book)
    assert rows[0]["note_first"] == "Our reconstruction: the data are ours, e.g. a toy."
    box = site.status_box([r for r in rows if r["claim"] == "T1"], "reduced")
    table = box.split("\n```{admonition}")[0]
    assert "reproduced (our reconstruction)" in table
    assert "Our reconstruction: the data are ours, e.g. a toy." in table
    assert "The rest of the note." not in table  # in the fold-out only
    assert "The rest of the note." in box
    page = site.ledger_page(toy_book, "reduced", rows)
    assert "Our reconstruction: the data are ours, e.g. a toy." in page
    assert "reconstruction" in ledger.render(rows, "table")
    assert '"basis": "reconstruction"' in ledger.render(rows, "json")


# ----------------------------------------------------------------------------- comparing runs


def test_a_claim_run_on_one_side_only_is_no_flip() -> None:
    a = [_row("C1", "method", "reproduced"), _row("C2", "method", "reproduced")]
    b = [_row("C1", "method", "not_run"), _row("C2", "method", "not_reproduced")]
    pairs = ledger.compare(a, b)
    assert [(p["flip"], p["one_side"]) for p in pairs] == [(False, True), (True, False)]
    for p in pairs:
        p["value_a"] = p["value_b"] = ""
    text = ledger.render_compare(pairs, "default", "seed1")
    assert "1 run on both sides" in text and "1 flipped" in text
    assert "1 run on one side only" in text
