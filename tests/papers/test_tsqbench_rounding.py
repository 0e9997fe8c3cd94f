"""Chapter 12 under rounding: the decisions the statistics feed must not follow the last bits.

Inputs are moved with ``core.jitter(x, seed, rel=1e-12)``; each test says what it would catch.
"""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.tsqbench import agent, bench, rating, tools

SEEDS = range(6)


def test_trend_sign_of_a_flat_or_symmetric_series_is_zero():
    # The least-squares slope of a constant or a symmetric series is 0, returned as a few ulps
    # of either sign (-6e-17 for this tent): the old sign of it said "falling". Catches a
    # sign read off rounding noise.
    tent = np.r_[np.arange(10.0), np.arange(10.0)[::-1]]
    for x in (np.full(30, 3.3), tent, np.zeros(12)):
        assert tools.trend_sign(x) == 0
        for s in SEEDS:
            assert tools.trend_sign(core.jitter(x, s)) == 0
    ramp = 2 + 0.3 * np.arange(50)
    assert tools.trend_sign(core.jitter(ramp, 1)) == 1 and tools.trend_sign(-ramp) == -1
    assert tools.trend_sign(1e-6 * np.arange(50)) == 1  # a small real slope still counts


def test_adjudicator_ties_do_not_follow_rounding():
    # 0.3 - 0.1 - 0.2 is 5.6e-17 in floating point: the old rule (S == 0) called it a win for
    # B. Catches a vote decided by the order and the rounding of a sum.
    margins = {"noise_level": 0.3, "trend": -0.1, "frequency": -0.2}
    assert sum(margins.values()) != 0.0
    v = agent.adjudicate(margins)
    assert v["winner"] == "tie" and v["confidence"] == 0.0
    for s in SEEDS:
        moved = dict(zip(margins, core.jitter(np.array(list(margins.values())), s)))
        assert agent.adjudicate(moved)["winner"] == "tie"
    assert agent.adjudicate({"a": 0.3, "b": -0.1, "c": -0.2 + 1e-9})["winner"] == "B"


def test_no_tool_judge_fit_is_stable_under_jitter(monkeypatch):
    # The judge is a logistic regression per dimension (lbfgs, iterative) on standardised
    # features. Catches a fit that stops short of its optimum, so that a rounding-level move of
    # its training features moves its probabilities (and the pa > 0.5 decisions built on them).
    pairs = bench.make_pairs(
        500, 0, boundaries=bench.default_boundaries(bench.LIGHT_LOW), p_heavy=1.0
    )
    test = bench.make_pairs(200, 1)
    judge = agent.NoToolJudge().fit(pairs)
    X = np.array([judge.features(p.a, p.b) for p in test])
    ref = {d: judge.predict_features(X, d) for d in bench.DIMENSIONS}
    real = agent.NoToolJudge._x
    for s in range(3):
        rng = np.random.default_rng(s)

        def moved_x(a, b, rng=rng):
            return core.jitter(real(a, b), int(rng.integers(2**31)))

        with monkeypatch.context() as m:
            m.setattr(agent.NoToolJudge, "_x", staticmethod(moved_x))
            moved = agent.NoToolJudge().fit(pairs)
        for d in bench.DIMENSIONS:
            p = moved.predict_features(X, d)
            np.testing.assert_allclose(p, ref[d], atol=1e-8)
            np.testing.assert_array_equal(p > 0.5, ref[d] > 0.5)


def test_ridge_forecaster_is_stable_under_jitter():
    # The forecaster's ridge (alpha = 1) is a well-posed solve: catches a forecaster fitted by
    # an ill-posed least squares (no ridge), whose RMSE would move by far more than 1e-9.
    x = rating.co2_series()
    train, test = x[:1200], x[1200:]
    B = rating.blocks(train, 128, 8)
    ref = rating.forecast_rmse(B, test)
    for s in SEEDS:
        assert rating.forecast_rmse(core.jitter(B, s), test) == pytest.approx(ref, rel=1e-9)
