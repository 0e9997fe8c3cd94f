"""Tests of reprobook.papers.spr_ldp: the SPR dynamic program (arXiv 2606.07443) and its checks.

Exact properties only: the DP against the Kairouz-Oh-Viswanath LP and against exhaustive
search, closed forms, invariances, limits, and clear errors on bad input.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reprobook.papers.spr_ldp as spr
from reprobook import core
from reprobook.core import checks
from reprobook.papers.spr_ldp import (
    DIVERGENCES,
    all_divergences,
    best_over_all_partitions,
    best_over_contiguous_partitions,
    binary_mechanism,
    conjugate,
    f_divergence,
    get_divergence,
    hockey_stick,
    is_ldp,
    likelihood_order,
    mechanism_value,
    optimal_mechanism,
    randomized_response,
    spr_mechanism_matrix,
    staircase_lp,
    staircase_lp_budget,
)
from reprobook.papers.spr_ldp import instances as inst
from reprobook.papers.spr_ldp import testing as nptest

REGISTRY = [*all_divergences(gammas=(2.0,)), hockey_stick(1.5), conjugate("chi2")]
REG_IDS = [d.name for d in REGISTRY]
EPS_GRID = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)
HYP = settings(max_examples=40, deadline=None, derandomize=True)


def close(a: float, b: float, rel: float = 1e-9, floor: float = 1e-12) -> bool:
    """|a - b| <= rel * max(|a|, |b|) + floor."""
    return abs(a - b) <= rel * max(abs(a), abs(b)) + floor


def random_case(seed: int, k_max: int = 8, k_min: int = 2):
    """A reproducible (p0, p1, eps), k in [k_min, k_max], a random Dirichlet concentration."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(k_min, k_max + 1))
    conc = float(rng.choice([0.3, 1.0, 3.0]))
    p0, p1 = inst.dirichlet_pair(k, conc, rng)
    eps = float(rng.choice(EPS_GRID))
    return p0, p1, eps


# --- (1) DP == staircase LP ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(50))
def test_dp_equals_staircase_lp(seed):
    p0, p1, eps = random_case(seed)
    for div in REGISTRY:
        dp = optimal_mechanism(p0, p1, eps, div)
        lp = staircase_lp(p0, p1, eps, div)
        assert lp.status == 0
        assert close(dp.value, lp.value), (div.name, dp.value, lp.value)
        # the LP's own mechanism is LDP and worth its value
        assert is_ldp(lp.mechanism, eps, rtol=1e-9, row_atol=1e-8)
        assert close(mechanism_value(lp.mechanism, p0, p1, div), lp.value, rel=1e-7)


def test_lp_beats_a_suboptimal_mechanism():
    # the LP is a real maximisation: strictly above randomized response on the raw alphabet here
    p0, p1 = inst.dirichlet_pair(6, 1.0, 3)
    lp = staircase_lp(p0, p1, 0.5, "kl")
    assert lp.value > randomized_response(p0, p1, 0.5, "kl").value * 1.5


# --- (2) DP == best over all set partitions; DP == brute force over contiguous cuts --------------


@HYP
@given(
    seed=st.integers(0, 2**31 - 1),
    div=st.sampled_from(REGISTRY),
    ell=st.sampled_from([None, 2, 3]),
)
def test_dp_equals_all_partitions(seed, div, ell):
    p0, p1, eps = random_case(seed, k_max=6)
    dp = optimal_mechanism(p0, p1, eps, div, max_outputs=ell)
    brute = best_over_all_partitions(p0, p1, eps, div, max_outputs=ell)
    contiguous = best_over_contiguous_partitions(p0, p1, eps, div, max_outputs=ell)
    assert close(dp.value, brute.value)
    assert close(dp.value, contiguous.value)
    assert close(mechanism_value(brute.mechanism, p0, p1, div), brute.value)


def test_set_partitions_count_bell_numbers():
    from reprobook.papers.spr_ldp import set_partitions

    assert [sum(1 for _ in set_partitions(k)) for k in range(1, 8)] == [1, 2, 5, 15, 52, 203, 877]
    assert len({tuple(r) for r in set_partitions(5)}) == 52


# --- (3), (4) the returned mechanism ----------------------------------------------------------


@HYP
@given(
    seed=st.integers(0, 2**31 - 1),
    div=st.sampled_from(REGISTRY),
    ell=st.sampled_from([None, 1, 2, 4]),
)
def test_mechanism_matrix_value_and_ldp(seed, div, ell):
    p0, p1, eps = random_case(seed, k_max=12)
    res = optimal_mechanism(p0, p1, eps, div, max_outputs=ell)
    Q = res.mechanism
    k = p0.size
    assert Q.shape == (k, res.n_blocks) == (k, len(res.blocks))
    assert ell is None or res.n_blocks <= ell
    assert np.allclose(Q.sum(axis=1), 1.0, atol=1e-12)
    assert is_ldp(Q, eps)
    assert np.max(Q.max(axis=0) / Q.min(axis=0)) <= math.exp(eps) * (1 + 1e-12)
    assert sorted(x for b in res.blocks for x in b) == list(range(k))
    assert close(mechanism_value(Q, p0, p1, div), res.value)
    if k <= 12:  # the value is the best over contiguous partitions, found without the DP
        brute = best_over_contiguous_partitions(p0, p1, eps, div, max_outputs=ell).value
        assert close(res.value, brute)


def test_is_ldp_rejects():
    Q = spr_mechanism_matrix([[0], [1, 2]], 2.0, 3)
    assert is_ldp(Q, 2.0)
    assert not is_ldp(Q, 1.0)  # ratio e^2 > e^1
    assert not is_ldp(Q * 1.01, 2.0)  # rows do not sum to 1
    bad = Q.copy()
    bad[0, 0] = 0.0
    bad[0, 1] = 1.0
    assert not is_ldp(bad, 2.0)  # a zero next to a positive entry in one column


def test_spr_mechanism_matrix_formula():
    eps = 1.3
    Q = spr_mechanism_matrix([[2, 0], [1], [3]], eps, 4)
    z = math.exp(eps) + 2
    expected = np.full((4, 3), 1 / z)
    expected[[2, 0], 0] = expected[1, 1] = expected[3, 2] = math.exp(eps) / z
    np.testing.assert_allclose(Q, expected, rtol=1e-15)


# --- (5) relabelling ----------------------------------------------------------------------------


@HYP
@given(
    seed=st.integers(0, 2**31 - 1), div=st.sampled_from(REGISTRY), ell=st.sampled_from([None, 2, 3])
)
def test_relabelling_invariance(seed, div, ell):
    p0, p1, eps = random_case(seed, k_max=15)
    perm = np.random.default_rng(seed + 1).permutation(p0.size)
    a = optimal_mechanism(p0, p1, eps, div, max_outputs=ell)
    b = optimal_mechanism(p0[perm], p1[perm], eps, div, max_outputs=ell)
    assert close(a.value, b.value, rel=1e-12)
    # the permuted solution's blocks, mapped back, are worth the same on the original labels
    blocks_back = [[int(perm[x]) for x in block] for block in b.blocks]
    Q_back = spr_mechanism_matrix(blocks_back, eps, p0.size)
    assert close(mechanism_value(Q_back, p0, p1, div), a.value)


# --- (6) monotonicity ----------------------------------------------------------------------------


@pytest.mark.parametrize("div", REGISTRY, ids=REG_IDS)
def test_monotone_in_eps_and_budget(div):
    p0, p1 = inst.dirichlet_pair(10, 0.5, 7)
    eps = np.geomspace(0.01, 20, 40)
    values = np.array([optimal_mechanism(p0, p1, e, div).value for e in eps])
    assert np.all(np.diff(values) >= -1e-12 * np.abs(values[1:]))
    assert values[-1] > values[0]
    by_budget = [optimal_mechanism(p0, p1, 6.0, div, max_outputs=ell).value for ell in range(1, 11)]
    assert by_budget[0] == 0.0
    assert np.all(np.diff(by_budget) >= 0)
    # a budget of k is no budget, and both equal the brute-force best over contiguous partitions
    full = optimal_mechanism(p0, p1, 6.0, div)
    assert full.value == by_budget[-1]
    assert close(full.value, best_over_contiguous_partitions(p0, p1, 6.0, div).value)


def test_budget_strictly_helps_somewhere():
    p0, p1 = inst.dirichlet_pair(10, 0.5, 7)
    two = optimal_mechanism(p0, p1, 12.0, "kl", max_outputs=2).value
    free = optimal_mechanism(p0, p1, 12.0, "kl")
    assert free.n_blocks > 2 and free.value > two * 1.01


# --- (7) data processing and the eps -> infinity limit --------------------------------------------


@pytest.mark.parametrize("div", REGISTRY, ids=REG_IDS)
@pytest.mark.parametrize("seed", range(6))
def test_below_raw_divergence(div, seed):
    p0, p1, eps = random_case(seed, k_max=10)
    raw = f_divergence(p1, p0, div)
    assert optimal_mechanism(p0, p1, eps, div).value <= raw * (1 + 1e-12) + 1e-15


@pytest.mark.parametrize("name", ["tv", "kl", "hellinger", "chi2", "reverse_kl"])
@pytest.mark.parametrize("seed", range(5))
def test_large_eps_limit(name, seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 12))
    p0, p1 = (0.02 / k + 0.98 * p for p in inst.dirichlet_pair(k, 1.0, rng))  # strictly positive
    raw = f_divergence(p1, p0, name)
    assert close(optimal_mechanism(p0, p1, 40.0, name).value, raw, rel=1e-6)
    assert optimal_mechanism(p0, p1, 2.0, name).value < raw * 0.999


def test_raw_divergence_infinite_with_zero_mass():
    p0 = np.array([0.0, 0.5, 0.5])
    p1 = np.array([0.2, 0.0, 0.8])
    assert f_divergence(p1, p0, "kl") == math.inf
    assert f_divergence(p1, p0, "reverse_kl") == math.inf
    assert f_divergence(p1, p0, "chi2") == math.inf
    assert math.isfinite(f_divergence(p1, p0, "hellinger"))
    # under LDP every output has positive mass, so the optimum is finite
    for name in ("kl", "reverse_kl", "chi2"):
        assert math.isfinite(optimal_mechanism(p0, p1, 3.0, name).value)


# --- (8), (9) zeros of the utility --------------------------------------------------------------


@pytest.mark.parametrize("div", REGISTRY, ids=REG_IDS)
def test_equal_hypotheses_give_zero(div):
    p = inst.dirichlet_pair(7, 1.0, 11)[0]
    res = optimal_mechanism(p, p, 3.0, div)
    assert res.value == 0.0
    assert res.n_blocks == 1
    assert abs(staircase_lp(p, p, 3.0, div).value) <= 1e-12


@pytest.mark.parametrize("gamma", [1.5, 2.0, 5.0])
def test_hockey_stick_zero_region(gamma):
    p0 = np.array([0.9, 0.05, 0.05])
    p1 = np.array([0.05, 0.05, 0.9])
    div = hockey_stick(gamma)
    below = math.log(gamma) * (1 - 1e-3)
    assert optimal_mechanism(p0, p1, below, div).value == 0.0
    assert abs(staircase_lp(p0, p1, below, div).value) <= 1e-12
    assert optimal_mechanism(p0, p1, math.log(gamma), div).value <= 1e-12
    above = optimal_mechanism(p0, p1, math.log(gamma) + 1.0, div)
    assert above.value > 0.1
    assert above.n_blocks == 2


# --- (10) ell = 2 is a threshold on L -----------------------------------------------------------


@HYP
@given(seed=st.integers(0, 2**31 - 1), div=st.sampled_from(REGISTRY))
def test_two_outputs_is_a_likelihood_threshold(seed, div):
    p0, p1, eps = random_case(seed, k_max=12)
    res = optimal_mechanism(p0, p1, eps, div, max_outputs=2)
    with np.errstate(divide="ignore"):
        L = np.where(p0 > 0, p1 / np.where(p0 > 0, p0, 1.0), np.inf)
    if res.n_blocks == 2:
        high, low = res.blocks
        assert np.min(L[high]) >= np.max(L[low])
    cuts = best_over_contiguous_partitions(p0, p1, eps, div, max_outputs=2)
    assert close(res.value, cuts.value)
    assert res.value >= binary_mechanism(p0, p1, eps, div).value - 1e-12


def test_threshold_can_beat_the_binary_mechanism():
    # the cut at L = 1 is not always the best cut: chi2 at large eps favours isolating rare symbols
    rng = np.random.default_rng(0)
    gains = []
    for _ in range(20):
        p0, p1 = inst.dirichlet_pair(10, 0.3, rng)
        gains.append(
            optimal_mechanism(p0, p1, 8.0, "chi2", max_outputs=2).value
            / binary_mechanism(p0, p1, 8.0, "chi2").value
        )
    assert min(gains) >= 1 - 1e-12 and max(gains) > 1.05


# --- (11) k = 2 closed form -----------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.05, 0.7, 3.0, 12.0])
@pytest.mark.parametrize("a,b", [(0.3, 0.8), (0.9, 0.1), (0.0, 0.4), (0.5, 1.0)])
def test_two_symbols_closed_form(eps, a, b):
    p0, p1 = np.array([a, 1 - a]), np.array([b, 1 - b])
    e = math.exp(eps)
    M0 = np.array([e * a + (1 - a), a + e * (1 - a)]) / (e + 1)  # binary RR by hand
    M1 = np.array([e * b + (1 - b), b + e * (1 - b)]) / (e + 1)
    expected = {
        "tv": (e - 1) / (e + 1) * abs(b - a),
        "kl": float(np.sum(M1 * np.log(M1 / M0))),
        "reverse_kl": float(np.sum(M0 * np.log(M0 / M1))),
        "chi2": float(np.sum((M1 - M0) ** 2 / M0)),
        "hellinger": float(np.sum((np.sqrt(M1) - np.sqrt(M0)) ** 2)),
        "hockey_stick(gamma=2)": float(np.sum(np.maximum(M1 - 2 * M0, 0))),
    }
    for name, value in expected.items():
        res = optimal_mechanism(p0, p1, eps, name)
        assert close(res.value, value, rel=1e-10), name
        assert close(randomized_response(p0, p1, eps, name).value, value, rel=1e-10), name


# --- (12) ties and zero masses --------------------------------------------------------------------


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("seed", range(8))
def test_ties_and_zeros(seed):
    p0, p1 = inst.dirichlet_pair(6, 1.0, seed)
    q0, q1 = inst.with_ties_and_zeros(p0, p1, seed)
    assert np.sum(q0 == 0) >= 2 and np.sum(q1 == 0) >= 2
    eps = EPS_GRID[seed % len(EPS_GRID)]
    for div in REGISTRY:
        dp = optimal_mechanism(q0, q1, eps, div)
        assert close(dp.value, staircase_lp(q0, q1, eps, div).value), div.name
        assert close(dp.value, best_over_all_partitions(q0, q1, eps, div).value), div.name
        assert close(mechanism_value(dp.mechanism, q0, q1, div), dp.value)
        assert is_ldp(dp.mechanism, eps)
    for e in (1e-3, 40.0, 300.0):  # extreme eps with zero masses: finite, no warnings
        for div in REGISTRY:
            assert math.isfinite(optimal_mechanism(q0, q1, e, div).value)


@pytest.mark.parametrize("seed", range(6))
def test_splitting_a_symbol_into_a_tie_changes_nothing(seed):
    p0, p1, eps = random_case(seed, k_max=9)
    x = seed % p0.size
    q0, q1 = inst.split_symbol(p0, p1, x, fraction=0.3)
    for div in REGISTRY:
        for ell in (None, 2, 3):
            assert close(
                optimal_mechanism(p0, p1, eps, div, ell).value,
                optimal_mechanism(q0, q1, eps, div, ell).value,
                rel=1e-12,
            ), (div.name, ell)


@pytest.mark.filterwarnings("error")
def test_many_ties_sparse_alternative():
    p0, p1 = inst.sparse_alternative(9, n_moved=2, mass=0.4, rng=5)
    for div in REGISTRY:
        for eps in (0.5, 4.0):
            assert close(
                optimal_mechanism(p0, p1, eps, div).value, staircase_lp(p0, p1, eps, div).value
            )


def test_likelihood_order_places_infinite_ratio_first_and_empty_last():
    p0 = np.array([0.0, 0.5, 0.0, 0.3, 0.2])
    p1 = np.array([0.0, 0.1, 0.4, 0.3, 0.2])
    order = likelihood_order(p0, p1)
    assert order[0] == 2 and order[-1] == 0
    assert list(order[1:4]) == [3, 4, 1]  # L = 1, 1 (stable), 0.2


# --- (13) the output-budget LP ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_budget_lp_equals_budget_dp(seed):
    p0, p1, eps = random_case(seed, k_max=4)
    for name in ("tv", "kl", "chi2", "hellinger", "hockey_stick(gamma=2)"):
        for ell in (2, 3):
            lp = staircase_lp_budget(p0, p1, eps, name, max_outputs=ell)
            assert close(lp.value, optimal_mechanism(p0, p1, eps, name, max_outputs=ell).value), (
                name,
                ell,
            )
            assert lp.mechanism.shape[1] <= ell


def test_budget_lp_methods_agree():
    p0, p1 = inst.dirichlet_pair(3, 1.0, 4)
    for ell in (2, 3):
        a = staircase_lp_budget(p0, p1, 2.0, "kl", ell, method="vertices")
        b = staircase_lp_budget(p0, p1, 2.0, "kl", ell, method="linprog")
        assert b.n_lps == math.comb(7, ell)
        assert close(a.value, b.value)


# --- (14) validation -----------------------------------------------------------------------------

GOOD0 = np.array([0.5, 0.5])
GOOD1 = np.array([0.2, 0.8])


@pytest.mark.parametrize(
    "p0,p1,eps,kwargs,match",
    [
        (np.ones((2, 2)) / 4, GOOD1, 1.0, {}, "1-D"),
        (np.array([1.2, -0.2]), GOOD1, 1.0, {}, "negative"),
        (np.array([0.5, 0.6]), GOOD1, 1.0, {}, "sums to"),
        (GOOD0, np.array([0.2, 0.3, 0.5]), 1.0, {}, "different lengths"),
        (np.array([1.0]), np.array([1.0]), 1.0, {}, "at least k = 2"),
        (np.array([np.nan, 1.0]), GOOD1, 1.0, {}, "non-finite"),
        (GOOD0, GOOD1, 0.0, {}, "eps must be a finite real number > 0 and <= 700"),
        (GOOD0, GOOD1, -1.0, {}, "eps must be a finite real number > 0"),
        (GOOD0, GOOD1, math.inf, {}, "eps must be a finite real number"),
        (GOOD0, GOOD1, 800.0, {}, r"eps must be .* <= 700\.0, got 800\.0"),
        (GOOD0, GOOD1, "1.0", {}, "eps must be a finite real number"),
        (GOOD0, GOOD1, 1.0, {"max_outputs": 0}, "max_outputs must be an integer >= 1"),
        (GOOD0, GOOD1, 1.0, {"max_outputs": 2.5}, "max_outputs must be an integer >= 1"),
        (GOOD0, GOOD1, 1.0, {"max_outputs": True}, "max_outputs must be an integer >= 1"),
        (
            GOOD0,
            GOOD1,
            1.0,
            {"divergence": "renyi"},
            "unknown divergence 'renyi'; valid names: tv, kl",
        ),
        (GOOD0, GOOD1, 1.0, {"divergence": "hockey_stick(gamma=0.5)"}, "gamma must be .* >= 1"),
    ],
)
def test_bad_inputs_raise(p0, p1, eps, kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimal_mechanism(p0, p1, eps, **kwargs)


def test_bad_inputs_other_functions():
    big = np.full(21, 1 / 21)
    with pytest.raises(ValueError, match="k <= 20"):
        staircase_lp(big, big, 1.0)
    nine = np.full(9, 1 / 9)
    with pytest.raises(ValueError, match="k <= 8"):
        best_over_all_partitions(nine, nine, 1.0)
    seven = np.full(7, 1 / 7)
    with pytest.raises(ValueError, match="k <= 6"):
        staircase_lp_budget(seven, seven, 1.0, "kl", 2)
    six = np.full(6, 1 / 6)
    with pytest.raises(ValueError, match="column choices"):
        staircase_lp_budget(six, six, 1.0, "kl", 4)
    with pytest.raises(ValueError, match="method must be one of 'vertices', 'linprog'"):
        staircase_lp_budget(GOOD0, GOOD1, 1.0, "kl", 2, method="simplex")
    with pytest.raises(ValueError, match="partition the labels"):
        spr_mechanism_matrix([[0], [0, 1]], 1.0, 2)
    with pytest.raises(ValueError, match="non-empty"):
        spr_mechanism_matrix([[0, 1], []], 1.0, 2)
    with pytest.raises(ValueError, match="k x m"):
        mechanism_value(np.ones((3, 2)) / 2, GOOD0, GOOD1)
    with pytest.raises(ValueError, match="p1 and p0 must have the same shape"):
        f_divergence(GOOD0, np.array([1.0]), "kl")


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: inst.dirichlet_pair(True), "k must be an integer >= 2, got True"),
        (lambda: inst.dirichlet_pair(1), "k must be an integer >= 2, got 1"),
        (lambda: inst.dirichlet_pair(4, 0.0), "concentration must be a finite real number > 0"),
        (lambda: inst.sparse_alternative(4, n_moved=4), "n_moved must be an integer >= 1 and <= 3"),
        (lambda: inst.sparse_alternative(4, mass=1.5), r"mass must be .* <= 1, got 1\.5"),
        (lambda: inst.split_symbol(GOOD0, GOOD1, 0, fraction=1.0), "fraction must be"),
        (lambda: nptest.type_two_errors(GOOD0, GOOD1, [10], alpha=1.0), "alpha must be"),
        (
            lambda: nptest.type_two_errors(GOOD0, GOOD1, [10], method="exact"),
            "method must be one of 'direct', 'importance'",
        ),
        (
            lambda: nptest.type_two_errors(GOOD0, GOOD1, [10], reps=5),
            "reps must be an integer >= 10",
        ),
    ],
)
def test_bad_inputs_of_instances_and_testing(call, match):
    with pytest.raises(checks.InputError, match=match):
        call()


# --- divergences ----------------------------------------------------------------------------------


@pytest.mark.parametrize("div", REGISTRY, ids=REG_IDS)
def test_perspective_matches_generator(div):
    rng = np.random.default_rng(0)
    p, q = rng.random(50) + 0.01, rng.random(50) + 0.01
    np.testing.assert_allclose(div.perspective(p, q), q * div.f(p / q), rtol=1e-12)
    assert div.f(np.array([1.0]))[0] == 0.0
    # convexity of f along a few random chords
    t, s = rng.random(20) * 5, rng.random(20) * 5
    assert np.all(div.f((t + s) / 2) <= (div.f(t) + div.f(s)) / 2 + 1e-12)


@pytest.mark.filterwarnings("error")
def test_perspective_zero_conventions():
    zero, one = np.zeros(1), np.ones(1)
    for div in REGISTRY:
        assert div.perspective(zero, zero)[0] == 0.0
        assert div.perspective(one, zero)[0] == div.f_prime_inf
    assert DIVERGENCES["kl"].perspective(zero, one)[0] == 0.0
    assert DIVERGENCES["reverse_kl"].perspective(zero, one)[0] == math.inf
    assert DIVERGENCES["chi2"].perspective(one, zero)[0] == math.inf
    assert DIVERGENCES["tv"].perspective(one, zero)[0] == 0.5


def test_conjugate_swaps_direction():
    p, q = inst.dirichlet_pair(8, 1.0, 2)
    for div in REGISTRY:
        star = conjugate(div)
        assert close(f_divergence(p, q, star), f_divergence(q, p, div), rel=1e-12)
        assert conjugate(star) == div
    assert conjugate("kl") is DIVERGENCES["reverse_kl"]
    assert get_divergence("hockey_stick(3)") == hockey_stick(3.0)
    assert get_divergence(" KL ") is DIVERGENCES["kl"]


# --- baselines ------------------------------------------------------------------------------------


def test_baselines_structure():
    p0 = np.array([0.1, 0.4, 0.2, 0.3])
    p1 = np.array([0.3, 0.1, 0.2, 0.4])
    b = binary_mechanism(p0, p1, 1.0, "kl")
    assert b.blocks == [[0, 2, 3], [1]]
    rr = randomized_response(p0, p1, 1.0, "kl")
    assert rr.blocks == [[0], [1], [2], [3]]
    opt = optimal_mechanism(p0, p1, 1.0, "kl")
    assert opt.value >= max(b.value, rr.value) * (1 - 1e-12)
    same = binary_mechanism(p0, p0, 1.0, "kl")
    assert same.n_blocks == 1 and same.value == 0.0


# --- instances ------------------------------------------------------------------------------------


def test_instances_are_distributions():
    pairs = [
        inst.dirichlet_pair(12, 0.3, 0),
        inst.shifted_gaussians(20, 1.0),
        inst.zipf_vs_uniform(15, 1.2),
        inst.sparse_alternative(20, 3, 0.3, 1),
        inst.with_ties_and_zeros(*inst.dirichlet_pair(6, 1.0, 2), rng=3),
        *inst.named_instances(10, 0).values(),
    ]
    for p0, p1 in pairs:
        assert p0.shape == p1.shape
        assert np.all(p0 >= 0) and np.all(p1 >= 0)
        assert abs(p0.sum() - 1) < 1e-12 and abs(p1.sum() - 1) < 1e-12
    p0, p1 = inst.shifted_gaussians(20, 1.0)
    assert np.all(np.diff(p1 / p0) > 0)  # monotone likelihood ratio
    np.testing.assert_array_equal(
        inst.dirichlet_pair(5, 1.0, 9)[0], inst.dirichlet_pair(5, 1.0, 9)[0]
    )
    z0, z1 = inst.zipf_vs_uniform(6, 0.0)
    np.testing.assert_allclose(z0, z1)


# --- (15) C6: n-sample private testing ------------------------------------------------------------


def test_equal_laws_power_is_alpha():
    M = np.array([0.1, 0.2, 0.3, 0.4])
    res = nptest.type_two_errors(M, M, [10, 1000], alpha=0.05, reps=2000, rng=0)
    np.testing.assert_allclose(1 - res.beta, 0.05, atol=1e-12)
    assert res.stein == 0.0


def test_level_is_calibrated():
    p0, p1 = inst.dirichlet_pair(8, 1.0, 1)
    M0, M1 = nptest.output_laws(optimal_mechanism(p0, p1, 1.0, "reverse_kl").mechanism, p0, p1)
    res = nptest.type_two_errors(M0, M1, [20, 200], alpha=0.1, reps=4000, rng=2)
    se = math.sqrt(0.1 * 0.9 / 4000)
    assert np.all(np.abs(res.alpha_hat - 0.1) < 5 * se * math.sqrt(2))


def test_exponents_rank_mechanisms_as_theory_predicts():
    p0, p1 = inst.dirichlet_pair(12, 1.0, 0)
    eps = 1.0
    mechs = {
        "opt": optimal_mechanism(p0, p1, eps, "reverse_kl").mechanism,
        "rr": randomized_response(p0, p1, eps, "reverse_kl").mechanism,
    }
    stein, beta = {}, {}
    for name, Q in mechs.items():
        M0, M1 = nptest.output_laws(Q, p0, p1)
        stein[name] = nptest.stein_exponent(M0, M1)
        beta[name] = nptest.type_two_errors(M0, M1, [30, 100], reps=2000, rng=1).beta
        assert close(stein[name], mechanism_value(Q, p0, p1, "reverse_kl"), rel=1e-12)
    assert stein["opt"] > 2 * stein["rr"]
    assert np.all(beta["opt"] < beta["rr"])


def test_importance_sampling_agrees_with_direct_and_goes_further():
    M0 = np.array([0.4, 0.3, 0.2, 0.1])
    M1 = np.array([0.2, 0.2, 0.3, 0.3])
    ns = [20, 60, 2000]
    d = nptest.type_two_errors(M0, M1, ns, reps=4000, rng=3, method="direct")
    i = nptest.type_two_errors(M0, M1, ns, reps=4000, rng=3, method="importance")
    assert d.estimable[0] and i.estimable[0]
    assert abs(math.log(d.beta[0] / i.beta[0])) < 0.2
    assert not d.estimable[-1] and np.isnan(d.exponent[-1])  # beta ~ e^-170: never observed
    assert i.estimable[-1]
    D = nptest.stein_exponent(M0, M1)
    assert 0.8 * D < i.exponent[-1] < 1.05 * D  # approaches D from below
    assert abs(i.log_beta[-1] - nptest.strassen_log_beta(M0, M1, 2000)) < 0.1 * abs(i.log_beta[-1])


def test_testing_is_deterministic_under_a_seed():
    M0 = np.array([0.5, 0.3, 0.2])
    M1 = np.array([0.3, 0.3, 0.4])
    a = nptest.type_two_errors(M0, M1, [10, 50], reps=500, rng=7)
    b = nptest.type_two_errors(M0, M1, [10, 50], reps=500, rng=7)
    c = nptest.type_two_errors(M0, M1, [10, 50], reps=500, rng=8)
    np.testing.assert_array_equal(a.beta, b.beta)
    np.testing.assert_array_equal(a.threshold, b.threshold)
    assert not np.array_equal(a.beta, c.beta)


def test_privatize_matches_output_law():
    p0, p1 = inst.dirichlet_pair(5, 1.0, 0)
    Q = optimal_mechanism(p0, p1, 2.0, "kl").mechanism
    rng = np.random.default_rng(0)
    x = rng.choice(5, size=200_000, p=p0)
    y = nptest.privatize(x, Q, rng)
    freq = np.bincount(y, minlength=Q.shape[1]) / y.size
    M0, _ = nptest.output_laws(Q, p0, p1)
    assert np.max(np.abs(freq - M0)) < 5 * math.sqrt(0.25 / y.size)


def test_fit_exponent_needs_two_points():
    M0 = np.array([0.5, 0.5])
    M1 = np.array([0.1, 0.9])
    res = nptest.type_two_errors(M0, M1, [5000], reps=200, rng=0)
    assert math.isnan(nptest.fit_exponent(res))


def test_repeated_exponents_are_independent_runs_of_one_stream():
    M0 = np.array([0.5, 0.3, 0.2])
    M1 = np.array([0.3, 0.3, 0.4])
    e = nptest.repeated_exponents(M0, M1, [10, 50], 3, reps=500, rng=7)
    gen = np.random.default_rng(7)
    by_hand = [
        nptest.type_two_errors(M0, M1, [10, 50], reps=500, rng=gen, method="importance").exponent
        for _ in range(3)
    ]
    np.testing.assert_array_equal(e, np.stack(by_hand))
    assert e.shape == (3, 2) and not np.array_equal(e[0], e[1])
    with pytest.raises(ValueError, match="repeats must be an integer >= 2"):
        nptest.repeated_exponents(M0, M1, [10], 1)
    with pytest.raises(checks.InputError, match="repeats must be an integer >= 2"):
        nptest.repeated_exponents(M0, M1, [10], 2.0)


def test_stein_gap_shares_by_hand():
    """D = (1.0, 0.5, 0.49): the pair (b, c) is 2% apart, below a 5% rule; shares are the
    empirical gap over the Stein gap, per repetition, with the larger exponent first."""
    stein = {"a": 1.0, "c": 0.49, "b": 0.5}
    e = {"a": [0.9, 0.8], "b": [0.45, 0.4], "c": [0.46, 0.38]}
    scored, close = nptest.stein_gap_shares(stein, e, 0.05)
    assert [p.label for p in scored] == ["a > c", "a > b"]
    np.testing.assert_allclose(scored[0].shares, [(0.9 - 0.46) / 0.51, (0.8 - 0.38) / 0.51])
    np.testing.assert_allclose(scored[1].shares, [0.9, 0.8])
    assert [p.label for p in close] == ["b > c"]
    assert close[0].relative_gap == pytest.approx(0.02) and close[0].stein_gap == pytest.approx(
        0.01
    )
    np.testing.assert_allclose(close[0].shares, [-1.0, 2.0])  # a swapped, then a kept order
    everything, none = nptest.stein_gap_shares(stein, e, 0.0)
    assert len(everything) == 3 and none == []
    tie, tied = nptest.stein_gap_shares({"x": 1.0, "y": 1.0}, {"x": [1, 2], "y": [1, 2]}, 0.0)
    assert tie == [] and len(tied) == 1  # equal exponents are never scored
    with pytest.raises(ValueError, match="same mechanisms"):
        nptest.stein_gap_shares({"a": 1.0}, {"b": [1.0, 2.0]}, 0.02)
    with pytest.raises(ValueError, match="same number"):
        nptest.stein_gap_shares({"a": 1.0, "b": 0.5}, {"a": [1.0, 2.0], "b": [1.0]}, 0.02)
    with pytest.raises(ValueError, match="min_relative_gap must be .* >= 0 and < 1"):
        nptest.stein_gap_shares(stein, e, 1.0)


def test_the_stein_optimal_mechanism_keeps_its_lead_over_repetitions():
    """C6 on an instance where the mechanisms are far apart: every share's interval lies above 0."""
    p0, p1 = inst.dirichlet_pair(12, 1.0, 0)
    mechs = {
        "opt": optimal_mechanism(p0, p1, 1.0, "reverse_kl").mechanism,
        "rr": randomized_response(p0, p1, 1.0, "reverse_kl").mechanism,
    }
    stein, e = {}, {}
    for name, Q in mechs.items():
        M0, M1 = nptest.output_laws(Q, p0, p1)
        stein[name] = nptest.stein_exponent(M0, M1)
        e[name] = nptest.repeated_exponents(
            M0, M1, [100], 4, reps=1000, rng=1 if name == "opt" else 2
        )[:, 0]
    scored, _ = nptest.stein_gap_shares(stein, e, 0.02)
    c6 = core.worst_group_interval({p.label: p.shares for p in scored}, worst="min")
    assert c6.group == "opt > rr" and c6.interval.low > 0


def test_c6_is_decided_by_the_pair_with_the_smallest_mean_share():
    """C6's value: the smallest mean share over the scored pairs, with an interval that holds for
    every pair at once (Bonferroni over the pairs), so one wrongly ranked pair decides it."""
    stein = {"a": 1.0, "b": 0.6, "c": 0.2}
    e = {"a": [0.9, 0.95, 0.85, 0.9], "b": [0.3, 0.35, 0.25, 0.3], "c": [0.2, 0.1, 0.15, 0.1]}
    scored, close = nptest.stein_gap_shares(stein, e, 0.02)
    assert close == [] and len(scored) == 3
    c6 = core.worst_group_interval({p.label: p.shares for p in scored}, worst="min")
    by_hand = {p.label: float(np.mean(p.shares)) for p in scored}
    assert c6.group == min(by_hand, key=by_hand.get) == "b > c"
    assert c6.interval.estimate == pytest.approx(by_hand["b > c"])
    assert c6.interval.low == min(t.low for t in c6.by_group.values())
    assert c6.interval.n == 12  # four repetitions of three pairs


# --- config ---------------------------------------------------------------------------------------


def test_config_profiles_resolve():
    from reprobook.papers.spr_ldp import config

    def resolve(notebook, profile, **overrides):
        return core.resolve_notebook(config.PROFILES, notebook, profile, **overrides)

    for notebook in ("01_lp_check", "02_structure", "03_privacy_range"):
        reduced = resolve(notebook, "reduced")
        full = resolve(notebook, "full")
        assert type(reduced) is type(full)
        assert reduced != full
    assert resolve("01_lp_check", "reduced", n_instances=10).n_instances == 10
    budgets = resolve("02_structure", "reduced", c4_dp_budgets=[2, None]).c4_dp_budgets
    assert budgets == (2, None)
    with pytest.raises(ValueError, match="valid notebooks"):
        resolve("nope", "reduced")
    with pytest.raises(ValueError, match="valid profiles"):
        resolve("01_lp_check", "huge")
    with pytest.raises(ValueError, match="valid keys"):
        resolve("01_lp_check", "reduced", n_instance=3)
    pr = resolve("03_privacy_range", "full")
    assert pr.c6_eps == (2.0, 4.0, 6.0)  # C6's metric names these privacy levels
    assert pr.c6_repeats >= 2 and 0 < pr.c6_min_relative_gap < 1
    named = inst.named_instances(4, 0)
    assert set(resolve("03_privacy_range", "reduced").instances) <= set(named)


def test_profiles_are_keyed_by_notebook_and_every_module_is_reachable_from_the_package():
    folder = core.book_root() / "notebooks" / "18_spr_ldp"
    assert set(spr.config.PROFILES) == {p.stem for p in folder.glob("*.ipynb")}
    assert spr.mechanisms.__name__ == "reprobook.papers.spr_ldp.mechanisms"
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        _ = spr.no_such_module


# --- the DP's tables ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["kl", "chi2", "tv", "hockey_stick(gamma=2)"])
def test_dp_tables_equal_brute_force_over_cuts(name):
    """F[l, k] is the best total block gain over the contiguous partitions into exactly l blocks."""
    import itertools

    rng = np.random.default_rng(5)
    p0, p1 = spr.instances.dirichlet_pair(6, 1.0, rng)
    eps = 1.5
    t = spr.dp_tables(p0, p1, eps, name)
    k = p0.size
    for l in range(1, k + 1):
        best = -np.inf
        for inner in itertools.combinations(range(1, k), l - 1):
            cuts = (0, *inner, k)
            best = max(best, sum(t.G[cuts[j], cuts[j + 1]] for j in range(l)))
        assert t.F[l, k] == pytest.approx(best, rel=1e-12, abs=1e-15)
        assert t.value_by_blocks[l - 1] == pytest.approx(
            best / (np.exp(eps) + l - 1), rel=1e-12, abs=1e-15
        )
    assert t.F[1, k] == 0.0  # one block carries no information


# --- the notebooks' comparisons -----------------------------------------------------------------


def test_dp_against_reference_rows_and_gaps():
    p0, p1 = inst.dirichlet_pair(5, 1.0, 3)
    divs = ["tv", "kl", "chi2"]
    for reference in ("lp", "all_partitions"):
        rows = spr.experiments.dp_against_reference(p0, p1, 2.0, divs, reference)
        assert [r["divergence"] for r in rows] == divs
        for r in rows:
            assert r["k"] == 5 and r["eps"] == 2.0 and r["blocks"] >= 1
            assert abs(r["gap"]) < 1e-7 and r["dp"] == pytest.approx(r["reference"], abs=1e-9)
            assert r["dp_seconds"] >= 0 and r["reference_seconds"] >= 0
    with pytest.raises(checks.InputError, match="reference must be one of 'lp', 'all_partitions'"):
        spr.experiments.dp_against_reference(p0, p1, 2.0, divs, "brute")


def test_dp_against_budget_lp_and_its_literal_solution():
    p0, p1 = inst.dirichlet_pair(3, 1.0, 4)
    rows = spr.experiments.dp_against_budget_lp(p0, p1, 1.0, ["kl", "tv"], [2, 3], literal=True)
    assert [(r["divergence"], r["ell"]) for r in rows] == [
        ("kl", 2),
        ("kl", 3),
        ("tv", 2),
        ("tv", 3),
    ]
    assert max(r["gap"] for r in rows) < 1e-9 and max(r["linprog_gap"] for r in rows) < 1e-7
    fast = spr.experiments.dp_against_budget_lp(p0, p1, 1.0, ["kl"], [2])
    assert "linprog_gap" not in fast[0] and fast[0]["systems"] > 0


def test_time_solvers_draws_one_instance_per_size_in_order():
    rows = spr.experiments.time_solvers([6, 8], [2, None], [4], 1.0, "kl", repeats=2, rng=5)
    assert [(r["method"], r["k"]) for r in rows] == [
        ("DP, l = 2", 6),
        ("DP, l = k", 6),
        ("DP, l = 2", 8),
        ("DP, l = k", 8),
        ("staircase LP", 4),
    ]
    assert all(r["seconds"] > 0 for r in rows)
    calls = []
    assert spr.experiments.best_time(lambda: calls.append(1), 3) >= 0 and len(calls) == 3


def test_privacy_sweep_never_loses_to_the_baselines():
    pairs = {"a": inst.dirichlet_pair(6, 1.0, 0), "b": inst.zipf_vs_uniform(6, 1.0)}
    rows = spr.experiments.privacy_sweep(pairs, ["kl", "hellinger"], [0.1, 1.0, 5.0])
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        assert r["opt"] >= max(r["binary"], r["rr"]) - 1e-12
        assert 1 <= r["blocks"] <= 6


def test_stein_experiment_tests_each_mechanism_once_and_is_seeded():
    p0, p1 = inst.dirichlet_pair(8, 1.0, 2)
    cfg = dataclasses.replace(
        spr.config.PROFILES["03_privacy_range"]["reduced"],
        c6_eps=(1.0, 6.0),
        c6_ns=(10, 30, 100),
        c6_repeats=2,
        c6_alpha=0.05,
        c6_reps=300,
        c6_min_misses=10,
    )
    a = spr.experiments.stein_experiment(cfg, p0, p1, rng=11)
    b = spr.experiments.stein_experiment(cfg, p0, p1, rng=11)
    assert a.rows == b.rows
    assert set(a.at_n) == {1.0, 6.0}
    for eps, (stein, e_at_n, n) in a.at_n.items():
        assert set(stein) == set(e_at_n) and n in cfg.c6_ns
        tested = [r for r in a.rows if r["eps"] == eps and "same_as" not in r]
        assert {r["mechanism"] for r in tested} == set(stein)
        assert len({round(v, 12) for v in stein.values()}) == len(stein)  # no duplicate tested
        for r in a.rows:
            if r["eps"] == eps and "same_as" in r:
                assert r["same_as"] in stein
    assert len(a.curves) == sum(len(s) for s, _, _ in a.at_n.values()) * len(cfg.c6_ns)


def test_smoke_profile_cuts_the_full_grids_and_keeps_what_the_notebooks_fit():
    """Smoke keeps two DP sizes at or above the slope fit's smallest k (C4), at least two
    Monte Carlo repetitions (C6's units) and C6's privacy levels."""
    from reprobook.papers.spr_ldp import config

    structure = core.resolve_notebook(config.PROFILES, "02_structure", "smoke")
    fitted = [k for k in structure.c4_dp_ks if k >= structure.c4_fit_min_k]
    assert len(fitted) >= 2 and structure.c4_dp_budgets == (2, 4, 8, 16, None)
    assert structure.c3_n_linprog >= 1 and structure.c3_divergences == config.DIVERGENCE_NAMES
    pr = core.resolve_notebook(config.PROFILES, "03_privacy_range", "smoke")
    assert pr.c6_repeats >= 2 and pr.c6_eps == (2.0, 4.0, 6.0)
    lp = core.resolve_notebook(config.PROFILES, "01_lp_check", "smoke")
    assert lp.n_instances + lp.n_large < 20 and lp.divergences == config.DIVERGENCE_NAMES
