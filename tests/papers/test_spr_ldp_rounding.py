"""Chapter 18's optima do not depend on rounding: the staircase LP, the budget LP's vertex
enumeration and the dynamic program give the same answer on inputs moved at rounding level, a
failed LP solve falls back to another HiGHS method (or is counted), and near-ties are broken
the same way on every machine."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.optimize import OptimizeResult

import reprobook.papers.spr_ldp as spr
from reprobook import core
from reprobook.papers.spr_ldp import instances as inst
from reprobook.papers.spr_ldp import mechanisms as M

DIVS = ("tv", "kl", "chi2", "hellinger", "hockey_stick(gamma=2)")


def _moved(p, seed):
    return core.jitter(np.asarray(p, dtype=float), seed)


@pytest.mark.parametrize("k, conc", [(5, 1.0), (7, 0.3)])
def test_staircase_lp_and_dp_are_stable_under_jitter(k, conc):
    # Masses moved by 1e-12 relative move every optimum by about as much. An LP that reported
    # a vertex short of the optimum for some seeds, or a DP whose number of blocks depended on
    # the last bits, would miss the 1e-9 (value) or the exact (blocks) comparison.
    p0, p1 = inst.dirichlet_pair(k, conc, 4)
    for div in DIVS:
        for eps in (0.5, 4.0):
            lp = M.staircase_lp(p0, p1, eps, div).value
            dp = M.optimal_mechanism(p0, p1, eps, div)
            for seed in range(5):
                q0, q1 = _moved(p0, seed), _moved(p1, seed + 50)
                assert M.staircase_lp(q0, q1, eps, div).value == pytest.approx(lp, rel=1e-9)
                moved = M.optimal_mechanism(q0, q1, eps, div)
                assert moved.value == pytest.approx(dp.value, rel=1e-9, abs=1e-15)
                assert moved.blocks == dp.blocks


def test_budget_lp_vertices_are_the_same_for_a_jittered_eps():
    # The vertex enumeration decides rank, consistency and positivity with tolerances; with
    # an exact test (a residual == 0, theta > 0) a 1e-12 move of eps would add or drop
    # degenerate vertices, and the set of supports would differ.
    k, ell = 4, 3
    ref, _ = M._restricted_vertices(k, 2.0, ell)
    ref_set = {tuple(T) for T in ref}
    p0, p1 = inst.dirichlet_pair(k, 1.0, 7)
    value = M.staircase_lp_budget(p0, p1, 2.0, "kl", max_outputs=ell).value
    for seed in range(5):
        eps = float(core.jitter(np.array([2.0]), seed)[0])
        supports, _ = M._restricted_vertices(k, eps, ell)
        assert {tuple(T) for T in supports} == ref_set
        moved = M.staircase_lp_budget(_moved(p0, seed), _moved(p1, seed + 9), eps, "kl", ell)
        assert moved.value == pytest.approx(value, rel=1e-9)


def _fails(methods, real=M.linprog, status=4):
    def fake(*args, method, **kw):
        if method in methods:
            return OptimizeResult(status=status, x=None, message="numerical difficulties")
        return real(*args, method=method, **kw)

    return fake


def test_staircase_lp_falls_back_and_a_failure_is_counted(monkeypatch):
    p0, p1 = inst.dirichlet_pair(6, 1.0, 1)
    ref = M.staircase_lp(p0, p1, 2.0, "kl").value
    monkeypatch.setattr(M, "linprog", _fails({"highs"}))
    assert M.staircase_lp(p0, p1, 2.0, "kl").value == pytest.approx(ref, rel=1e-9)
    monkeypatch.setattr(M, "linprog", _fails({"highs", "highs-ipm"}))
    assert M.staircase_lp(p0, p1, 2.0, "kl").value == pytest.approx(ref, rel=1e-9)
    monkeypatch.setattr(M, "linprog", _fails(set(M.LP_FALLBACKS)))
    failed = M.staircase_lp(p0, p1, 2.0, "kl")
    assert failed.status == 4 and np.isnan(failed.value)
    assert "highs: status 4" in failed.message and "highs-ds: status 4" in failed.message
    with pytest.raises(RuntimeError, match="the staircase LP failed for kl"):
        spr.experiments.dp_against_reference(p0, p1, 2.0, ["kl"])
    failures = core.Failures("pairs")
    rows = spr.experiments.dp_against_reference(p0, p1, 2.0, ["kl", "tv"], failures=failures)
    assert [np.isnan(r["gap"]) for r in rows] == [True, True]
    assert failures.count == 2 and failures.units == ["k = 6, eps = 2, kl", "k = 6, eps = 2, tv"]


def test_literal_budget_lp_retries_and_counts_failed_choices(monkeypatch):
    p0, p1 = inst.dirichlet_pair(3, 1.0, 2)
    ref = M.staircase_lp_budget(p0, p1, 1.0, "kl", 2, method="linprog")
    assert ref.n_failed == 0 and ref.value == pytest.approx(
        M.staircase_lp_budget(p0, p1, 1.0, "kl", 2).value, rel=1e-9
    )
    monkeypatch.setattr(M, "linprog", _fails({"highs"}))  # the interior-point method solves
    again = M.staircase_lp_budget(p0, p1, 1.0, "kl", 2, method="linprog")
    assert again.n_failed == 0 and again.value == pytest.approx(ref.value, rel=1e-9)
    real = M.linprog
    calls = {"n": 0}

    def first_choice_fails(*args, method, **kw):
        calls["n"] += 1 if method == "highs" else 0
        if calls["n"] == 1:  # every method fails on the first choice of columns
            return OptimizeResult(status=4, x=None, message="numerical difficulties")
        return real(*args, method=method, **kw)

    monkeypatch.setattr(M, "linprog", first_choice_fails)
    one_lost = M.staircase_lp_budget(p0, p1, 1.0, "kl", 2, method="linprog")
    assert one_lost.n_failed == 1 and "1 failed" in one_lost.message
    assert one_lost.value <= ref.value + 1e-12  # a lost choice can only lower the best


def test_the_number_of_blocks_is_the_smallest_among_near_ties(monkeypatch):
    p0, p1 = inst.dirichlet_pair(5, 1.0, 3)
    real = M.dp_tables

    def near_tie(*args, **kw):
        t = real(*args, **kw)
        values = t.value_by_blocks.copy()
        values[:] = 0.1
        values[2] = 0.1 * (1 + 1e-14)  # l = 3 ahead by rounding only
        values[3] = 0.1 * (1 + 1e-9)  # l = 4 ahead by more than rounding
        return M.DPTables(t.order, t.G, t.F, t.parent, values, t.eps)

    monkeypatch.setattr(M, "dp_tables", near_tie)
    assert M.optimal_mechanism(p0, p1, 1.0, "kl").n_blocks == 4
    values = np.array([0.1, 0.1 * (1 + 1e-14), 0.05, 0.05, 0.05])

    def only_rounding(*args, **kw):
        t = real(*args, **kw)
        return M.DPTables(t.order, t.G, t.F, t.parent, values, t.eps)

    monkeypatch.setattr(M, "dp_tables", only_rounding)
    assert M.optimal_mechanism(p0, p1, 1.0, "kl").n_blocks == 1  # argmax alone says 2


def test_stein_duplicates_are_found_across_a_rounding_boundary(monkeypatch):
    # Two exponents that differ in the last bit but round to different 12-decimal values: the
    # rule "same rounded exponent, same mechanism" tested the mechanism twice, and this fails.
    p0, p1 = inst.dirichlet_pair(6, 1.0, 3)
    real = spr.testing.stein_exponent
    laws = [spr.testing.output_laws(m.mechanism, p0, p1) for m in
            spr.experiments._candidates(p0, p1, 2.0).values()]  # fmt: skip
    opt_reverse, binary = real(*laws[0]), real(*laws[3])
    crafted = {opt_reverse: 0.12345678901249999, binary: 0.12345678901250001}
    assert round(crafted[opt_reverse], 12) != round(crafted[binary], 12)

    def stein(M0, M1):
        value = real(M0, M1)
        return crafted.get(value, value)

    monkeypatch.setattr(spr.testing, "stein_exponent", stein)
    cfg = dataclasses.replace(
        spr.config.PROFILES["03_privacy_range"]["reduced"],
        c6_eps=(2.0,),
        c6_ns=(10, 30),
        c6_repeats=2,
        c6_alpha=0.05,
        c6_reps=200,
        c6_min_misses=5,
    )
    out = spr.experiments.stein_experiment(cfg, p0, p1, rng=0)
    twins = {r["mechanism"]: r["same_as"] for r in out.rows if "same_as" in r}
    assert twins == {
        "OPT for chi2": "OPT for KL(M1||M0)",
        "binary mechanism": "OPT for KL(M0||M1)",
    }
