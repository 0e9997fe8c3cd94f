"""Tests of chapter 12's library (TSQBench-lite, the tools, the agent's roles, the rater)."""

import itertools

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers.tsqbench import agent, bench, config, full, rating, tools


# --------------------------------------------------------------------------- injectors
def _own_statistic(dimension, method, strength, n_pairs=24):
    """Mean over fixed-seed pairs of t_d(corrupted side) - t_d(clean side). Light trend
    flattening moves its statistic by about 1% of the heavy effect, so the mean needs 24 pairs:
    over the first 6 pairs of this seed it is slightly negative."""
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(n_pairs):
        p = bench.make_pair(rng, dimensions=(dimension,), method=method, strength=strength)
        ta, tb = tools.defect_statistics(p.a)[dimension], tools.defect_statistics(p.b)[dimension]
        diffs.append(ta - tb if p.worse[dimension] == "A" else tb - ta)
    return float(np.mean(diffs))


@pytest.mark.parametrize(
    "dimension,method",
    [
        ("missing_value", "scatter"),
        ("noise_level", "gaussian"),
        ("rare_pattern", "point_outlier"),
        ("trend", "flatten"),
        ("frequency", "competing"),
        ("amplitude", "decay"),
        ("pattern_consistency", "flat_spots"),
    ],
)
def test_injectors_raise_their_own_statistic_monotone_in_severity(dimension, method):
    light = _own_statistic(dimension, method, 0.2)
    heavy = _own_statistic(dimension, method, 1.0)
    assert light > 0
    assert heavy > light


def test_an_injector_leaves_other_statistics_nearly_unchanged():
    rng = np.random.default_rng(3)
    base = bench.base_series(rng, 128, trend=True, seasonal=True)
    y = bench.inject(base["x"], base, "missing_value", "burst", 1.0, rng)
    sx, sy = tools.defect_statistics(base["x"]), tools.defect_statistics(y)
    assert sy["missing_value"] > 0.2 and sx["missing_value"] == 0
    assert abs(sy["noise_level"] - sx["noise_level"]) < 0.5 * sx["noise_level"] + 0.02


def test_pair_labels_are_consistent():
    for p in bench.make_pairs(40, 7):
        assert 1 <= len(p.target_dimensions) <= 5
        assert set(p.worse) == set(p.target_dimensions)
        for d in p.target_dimensions:
            assert p.tool_required[d] == (p.severity[d] == "light" and d != "missing_value")
        assert p.load["A"] + p.load["B"] == sum(
            2 if p.severity[d] == "heavy" else 1 for d in p.target_dimensions
        )


def test_pairs_are_deterministic_under_a_seed():
    a, b = bench.make_pairs(5, 11), bench.make_pairs(5, 11)
    for p, q in zip(a, b, strict=True):
        np.testing.assert_array_equal(p.a, q.a)
        assert p.target_dimensions == q.target_dimensions


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="dimension"):
        bench.make_pair(np.random.default_rng(0), dimensions=("colour",))
    with pytest.raises(ValueError, match="strength"):
        base = bench.base_series(np.random.default_rng(0), 64)
        bench.inject(base["x"], base, "trend", "flatten", 1.5, 0)
    with pytest.raises(ValueError, match="n_dims"):
        bench.make_pair(np.random.default_rng(0), n_dims="all")


def test_view_statistics_closed_forms():
    x = 3.0 + 0.5 * np.arange(101.0)
    x[10] = np.nan
    v = dict(zip(bench.STAT_NAMES, bench.view_statistics(x), strict=True))
    assert v["length"] == 101
    assert v["missing"] == pytest.approx(1 / 101)
    assert v["slope"] == pytest.approx(0.5)
    assert bench.no_tool_view(np.zeros(300))["preview"].size == 60
    assert bench.no_tool_view(np.zeros(150))["preview"].size == 150


# --------------------------------------------------------------------------- tools
def test_missing_ratio_is_exact():
    x = np.arange(40.0)
    x[[1, 5, 9, 30]] = np.nan
    assert tools.missing_ratio(x) == 4 / 40


def test_seasonality_finds_a_sinusoid_period():
    t = np.arange(144)
    assert tools.seasonality(np.sin(2 * np.pi * t / 12))["period"] == 12
    assert tools.seasonality(np.sin(2 * np.pi * t / 20) + 0.01 * t)["period"] == 20


def test_mad_outliers_find_planted_spikes():
    rng = np.random.default_rng(0)
    x = np.sin(np.arange(200) / 8) + 0.05 * rng.standard_normal(200)
    spikes = [30, 90, 150]
    x[spikes] += 3.0
    assert set(tools.mad_outliers(x).tolist()) == set(spikes)


def test_trend_sign_of_a_ramp():
    assert tools.trend_sign(2 + 0.3 * np.arange(50)) == 1
    assert tools.trend_sign(-0.3 * np.arange(50)) == -1


def test_change_points_find_a_level_shift():
    x = np.r_[np.zeros(60), np.full(60, 5.0)] + 0.1 * np.random.default_rng(1).standard_normal(120)
    assert tools.change_points(x) == [60]


def test_stationarity_uses_result_objects_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = tools.stationarity(np.random.default_rng(0).standard_normal(128))
    assert 0 <= out["adf_p"] <= 1 and 0.01 <= out["kpss_p"] <= 0.1


def test_tool_cache_computes_each_series_once():
    cache = tools.ToolCache()
    x = np.sin(np.arange(100) / 5.0)
    first = cache(x)
    assert cache(x.copy()) is first
    assert cache.calls == 1 and len(cache) == 1


# --------------------------------------------------------------------------- agent
def test_margins_and_adjudicator_hand_case():
    ta = {"noise_level": 3.0, "trend": 1.0}
    tb = {"noise_level": 1.0, "trend": 1.0}
    m = agent.inspector_margins(ta, tb, ["noise_level", "trend"])
    assert m == {"noise_level": 0.5, "trend": 0.0}
    v = agent.adjudicate({"a": 0.5, "b": -0.25})
    assert v["winner"] == "B" and v["confidence"] == pytest.approx(0.25 / 0.75)
    assert agent.adjudicate({"a": 0.0})["winner"] == "tie"
    v = agent.adjudicate({"a": 0.01, "b": -0.3}, recheck={"a": 0.9}, epsilon=0.02)
    assert v["rechecked"] == ["a"] and v["winner"] == "B"


def test_reward_hand_cases():
    assert agent.reward_precision('{"planned_dimensions": []}', []) == 1.0
    assert agent.reward_f1('{"planned_dimensions": []}', []) == 1.0
    assert agent.reward_precision("{not json", ["trend"]) == -1.0
    assert agent.reward_f1('{"planned_dimensions": "trend"}', ["trend"]) == -1.0
    assert agent.reward_precision('{"planned_dimensions": []}', ["trend"]) == pytest.approx(0.1)
    one = '{"planned_dimensions": ["trend", "colour"]}'  # unknown names are dropped
    assert agent.reward_precision(one, ["trend", "noise_level", "frequency"]) == 1.0
    assert agent.reward_f1(one, ["trend", "noise_level", "frequency"]) == pytest.approx(
        0.1 + 0.9 * 0.5
    )


def test_group_advantages_have_zero_mean():
    r = np.random.default_rng(0).uniform(-1, 1, (5, 8))
    a = agent.group_advantages(r)
    np.testing.assert_allclose(a.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(agent.group_advantages(np.ones((2, 4))), 0)


def test_selection_metrics_by_hand():
    pred = np.array([[1, 1, 0, 0, 0, 0, 0], [0] * 7], bool)
    true = np.array([[1, 0, 1, 0, 0, 0, 0], [0] * 7], bool)
    m = agent.selection_metrics(pred, true)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.75)
    assert m["f1"] == pytest.approx(0.75)
    assert m["exact"] == 0.5 and m["n_selected"] == 1.0


def test_grpo_is_deterministic_and_learns_a_fixed_target():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 36))
    Y = np.zeros((64, 7))
    Y[:, 2] = 1  # always the third dimension
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        pol = agent.train_grpo(agent.Perceiver(), X, Y, reward="f1", updates=60, seed=0)
        runs.append(pol.select(X))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert pol.curve[-10:].mean() > pol.curve[:10].mean()
    with pytest.raises(ValueError, match="reward"):
        agent.train_grpo(agent.Perceiver(), X, Y, reward="recall")


# --------------------------------------------------------------------------- rating
def test_soft_labels_and_filter():
    assert rating.soft_label("A", 1.0) == 0.0
    assert rating.soft_label("B", 0.6) == pytest.approx(0.8)
    assert rating.soft_label("tie", 0.9) == 0.5
    for winner, c in itertools.product(("A", "B", "tie", "a"), np.linspace(0, 1, 21)):
        kept = rating.keep_label(rating.soft_label(winner, c), 0.5)
        assert kept == (winner in ("A", "B") and c >= 0.5 - 1e-12)


def test_bradley_terry_symmetry():
    rng = np.random.default_rng(0)
    sa, sb, p = rng.standard_normal(10), rng.standard_normal(10), rng.uniform(0, 1, 10)
    assert float(rating.bt_loss(sa, sb, p)) == pytest.approx(float(rating.bt_loss(sb, sa, 1 - p)))
    assert np.isfinite(float(rating.bt_loss([0.0], [1e4], [0.0])))


def test_bradley_terry_recovers_a_known_ranking():
    rng = np.random.default_rng(0)
    n = 12
    feats = rng.standard_normal((n, 4))
    truth = feats @ np.array([1.0, -0.5, 0.3, 0.0])
    pairs = list(itertools.combinations(range(n), 2))
    ia = np.array([i for i, _ in pairs])
    ib = np.array([j for _, j in pairs])
    p = (truth[ib] > truth[ia]).astype(float)  # noiseless: B better exactly when it is
    model = rating.train_rater(feats, ia, ib, p, hidden=16, epochs=400, lr=1e-2, seed=0)
    with torch.no_grad():
        s = model(torch.as_tensor(feats, dtype=torch.float32)).numpy()
    np.testing.assert_array_equal(np.argsort(s), np.argsort(truth))


def test_cbf_onsets_in_range():
    X, y, on = rating.cbf(300, 128, np.random.default_rng(0))
    assert X.shape == (300, 128) and set(np.unique(y)) == {0, 1, 2}
    a, b = on[:, 0], on[:, 1]
    assert a.min() >= 16 and a.max() <= 32
    assert (b - a).min() >= 32 and (b - a).max() <= 96


def test_top_k_is_deterministic_under_ties():
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert rating.top_k(s, 2).tolist() == [1, 2]
    assert rating.top_k(s, 4).tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="k"):
        rating.top_k(s, 6)


def test_blocks_and_forecaster():
    x = np.arange(300.0)
    B = rating.blocks(x, 128, 32)
    assert B.shape == (6, 128) and B[1, 0] == 32
    rmse = rating.forecast_rmse(B, np.arange(300.0, 500.0))  # a ramp is extrapolated exactly
    assert rmse < 1e-2


# --------------------------------------------------------------------------- profiles, full
def test_profiles_resolve():
    for name in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, name, "reduced")
        fullcfg = core.resolve_notebook(config.PROFILES, name, "full")
        assert reduced.n_seeds >= 3 and fullcfg.n_seeds >= 3
    with pytest.raises(ValueError):
        core.resolve_notebook(config.PROFILES, "bench", "huge")


def test_full_profile_names_what_to_install():
    try:
        import transformers  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match=r"pip install transformers==\S+ trl==\S+ peft=="):
            full.require("transformers")
    prompt = full.perceiver_prompt(np.arange(10.0), np.arange(10.0))
    assert "planned_dimensions" in prompt
