"""Tests of chapter 12's library (TSQBench-lite, the tools, the agent's roles, the rater)."""

import dataclasses
import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers.tsqbench import agent, bench, config, experiments, full, rating, tools


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
        ("noise_level", "impulsive"),
        ("trend", "reversal"),
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


# --------------------------------------------------------------------------- the released semantics
# Each test below pins a behaviour of the authors' released code (github.com/clsr1008/
# TSQualityAgent) or of trl, read there and re-implemented in our own code; each failed on the
# chapter's earlier version.
def test_parser_strips_think_blocks_and_fences_like_the_release():
    # training/rl/reward.py, parse_perceiver_output: <think> blocks and ``` marks removed, then
    # the JSON from the first "{" to the last "}". The earlier json.loads of the whole text
    # scored these answers -1 (unparsable).
    fenced = (
        '<think>maybe {"planned_dimensions": ["noise_level"]}</think>\n'
        '```json\n{"planned_dimensions": ["trend"]}\n```'
    )
    assert agent.parse_dimensions(fenced) == ["trend"]
    assert agent.reward_precision(fenced, ["trend", "frequency"]) == 1.0
    assert agent.parse_dimensions('Sure! {"planned_dimensions": ["trend"]} done') == ["trend"]
    assert agent.parse_dimensions("no JSON here") is None
    assert agent.parse_dimensions('{"planned_dimensions": [1, "trend", "colour"]}') == ["trend"]
    assert agent.parse_dimensions('{"planned_dimensions": "trend"}') is None


def test_training_reward_matches_the_released_grpo_functions():
    # training/rl/reward.py: train_grpo.py hands trl grpo_reward_format (0.1 x format score,
    # -1 unparsable, 0 schema error, 1 well-formed) and grpo_reward_dim (0.9 x precision, 0
    # without a parsed answer), which trl sums; compute_reward, the scalar entry point, gives
    # -1 to both failures. The earlier code had only the latter.
    target = ["trend", "frequency"]
    for reward in (agent.reward_precision, agent.reward_f1):
        assert reward("not json", target, training=True) == pytest.approx(-0.1)
        assert reward('{"planned_dimensions": "trend"}', target, training=True) == 0.0
        assert reward('{"planned": []}', target, training=True) == 0.0
        assert reward("not json", target) == -1.0
        assert reward('{"planned_dimensions": "trend"}', target) == -1.0
        ok = '{"planned_dimensions": ["trend"]}'
        assert reward(ok, target, training=True) == reward(ok, target)
    ok = '{"planned_dimensions": ["trend", "noise_level"]}'
    assert agent.reward_precision(ok, target, training=True) == pytest.approx(0.1 + 0.9 * 0.5)
    with pytest.raises(ValueError, match="training"):
        agent.reward_precision(ok, target, training="yes")


def test_view_statistics_with_one_valid_value_follow_the_release():
    # agents/perceiver.py, _basic_stats: missing ratio 1 - k / n over the k valid values, and
    # the valid values' statistics (slope None, here 0). One valid value of two is a missing
    # share of 1/2, not an off-by-one: the earlier code called it 1.0 with zeros.
    v = dict(zip(bench.STAT_NAMES, bench.view_statistics([np.nan, 2.5]), strict=True))
    assert v["length"] == 2 and v["missing"] == 0.5
    assert v["mean"] == v["min"] == v["max"] == v["p25"] == v["p75"] == 2.5
    assert v["std"] == 0.0 and v["slope"] == 0.0
    v = dict(zip(bench.STAT_NAMES, bench.view_statistics([np.nan, 4.0, np.nan, np.nan])))
    assert v["missing"] == 0.75 and v["mean"] == 4.0
    assert bench.view_statistics([np.nan] * 3)[1] == 1.0
    with pytest.raises(ValueError, match="non-empty"):
        bench.view_statistics([])


def test_trailing_noise_profile_scores_full_windows_of_valid_values():
    # tools/bad_quality.py, noise_profile: NaNs dropped, residuals only where a full trailing
    # window exists, over the std of the valid values; NaN when fewer valid values than the
    # window. The earlier code averaged partial windows over the first w - 1 points and
    # interpolated the NaNs. Brute force over the windows:
    x = np.array([0.0, 3.0, np.nan, 1.0, 5.0, 2.0, np.nan, 4.0, 0.5, 6.0, 1.5, 3.5])
    v = x[np.isfinite(x)]
    w = 5
    resid = [v[t] - v[t - w + 1 : t + 1].mean() for t in range(w - 1, v.size)]
    want = np.std(resid) / np.std(v)
    assert tools.noise_profile(x, 5, "trailing") == pytest.approx(want, rel=1e-12)
    assert np.isnan(tools.noise_profile([1.0, np.nan, 2.0, 3.0, 4.0], 5, "trailing"))
    assert np.isnan(tools.noise_profile(np.full(20, 2.0), 5, "trailing"))
    y = np.sin(np.arange(600) / 7.0)  # window None: max(5, min(600 // 50, 50)) = 12
    assert tools.noise_profile(y, None, "trailing") == tools.noise_profile(y, 12, "trailing")


def test_preview_takes_every_step_th_middle_point_like_the_release():
    # agents/perceiver.py, _series_preview: head 20, x[20:-20:step][:20] with
    # step = max(1, (n - 40) // 20), tail 20. The earlier code spread 20 points by linspace.
    x = np.arange(250.0)
    want = np.concatenate([np.arange(20.0), np.arange(20.0, 220.0, 10.0), np.arange(230.0, 250)])
    np.testing.assert_array_equal(bench.preview(x), want)
    np.testing.assert_array_equal(bench.no_tool_view(x)["preview"], want)
    np.testing.assert_array_equal(bench.preview(x[:200]), x[:200])


def _clean_base(seed=5, n=128):
    base = bench.base_series(np.random.default_rng(seed), n, trend=True, seasonal=True)
    return base, base["x"].copy()


def test_impulsive_noise_hits_bursts_not_every_point():
    # training/synthesis/defect_injector.py, _inject_noise_impulsive: max(1, int(n r / 5))
    # bursts of 3-7 points; only they get noise. The earlier injector noised every point.
    base, x = _clean_base()
    n = x.size
    for s in (0.1, 0.5, 1.0):
        y = bench.inject(x, base, "noise_level", "impulsive", s, np.random.default_rng(1))
        hit = y != x
        runs = np.diff(np.flatnonzero(np.diff(np.r_[0, hit.astype(int), 0])))[::2]
        n_bursts = max(1, int(n * (0.05 + 0.35 * s) / 5))
        assert 0 < hit.sum() <= 7 * n_bursts < n
        assert runs.min() >= 3 and len(runs) <= n_bursts


def test_reversal_plays_a_middle_segment_backwards():
    # training/synthesis/defect_injector.py, _degrade_trend_reversal: a segment of
    # max(10, int(n r)) points, start in [0.1 n, 0.9 n - length), reversed and shifted to start
    # at its first value; the rest untouched. The earlier injector bent the trend from a cut
    # to the end.
    base, x = _clean_base()
    n = x.size
    for s, seed in itertools.product((0.1, 0.6, 1.0), range(4)):
        y = bench.inject(x, base, "trend", "reversal", s, np.random.default_rng(seed))
        length = max(10, int(n * (0.15 + 0.25 * s)))
        lo, hi = int(0.1 * n), max(int(0.1 * n) + 1, int(0.9 * n) - length)
        starts = []  # the segment's first point is unchanged (level-aligned): search for it
        for start in range(lo, hi):
            seg = np.arange(start, start + length)
            flipped = x[seg][::-1] + x[start] - x[seg[-1]]
            if np.allclose(y[seg], flipped) and np.array_equal(
                np.delete(y, seg), np.delete(x, seg)
            ):
                starts.append(start)
        assert starts, (s, seed)


def test_decay_either_fades_or_grows_the_swing():
    # training/synthesis/defect_injector.py, _degrade_amp_decay: a coin picks an envelope from
    # 1 to f (decay) or from f to 1 (growth), linear. The earlier injector only decayed.
    base, x = _clean_base()
    seen = set()
    for seed in range(12):
        y = bench.inject(x, base, "amplitude", "decay", 0.5, np.random.default_rng(seed))
        season = base["_ctx"]["season"]
        ok = np.abs(season) > 1e-6 * np.abs(season).max()
        env = 1 + (y - x)[ok] / season[ok]
        t = np.linspace(0, 1, x.size)[ok]
        f = 1 - 0.8 * 0.5
        if env[0] > env[-1]:
            np.testing.assert_allclose(env, 1 + (f - 1) * t, atol=1e-8)
            seen.add("decay")
        else:
            np.testing.assert_allclose(env, f + (1 - f) * t, atol=1e-8)
            seen.add("grow")
    assert seen == {"decay", "grow"}


def test_group_advantages_use_trl_sample_std():
    # trl/trainer/grpo_trainer.py (trl 1.16.0), scale_rewards="group" (the default):
    # (r - group mean) / (nanstd + 1e-4), nanstd with Bessel's correction
    # (trl/trainer/utils.py). The earlier code divided by the population std.
    a = agent.group_advantages(np.array([[0.0, 1.0]]))
    np.testing.assert_allclose(a, [[-0.5, 0.5]] / (np.sqrt(0.5) + 1e-4))
    r = np.random.default_rng(0).uniform(-1, 1, (3, 8))
    t = torch.as_tensor(r)
    want = (t - t.mean(1, keepdim=True)) / (t.std(1, keepdim=True) + 1e-4)  # torch: unbiased
    np.testing.assert_allclose(agent.group_advantages(r), want.numpy(), rtol=1e-12)
    batch = (t - t.mean(1, keepdim=True)) / (t.std() + 1e-4)
    np.testing.assert_allclose(agent.group_advantages(r, "batch"), batch.numpy(), rtol=1e-12)
    np.testing.assert_allclose(agent.group_advantages(r, "none"), r - r.mean(1, keepdims=True))
    np.testing.assert_array_equal(agent.group_advantages(np.ones((2, 1))), 0.0)
    with pytest.raises(ValueError, match="scale"):
        agent.group_advantages(r, "global")


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


def test_where_ours_departs_from_the_release_on_purpose():
    """The released winner_to_comparisons_avg (annotation/pairwise_annotator.py) maps a
    confidence of 1.5 for A to p = -0.25, which is no probability: ours refuses it. The
    released BradleyTerryLoss (meta_learning_rater/model.py) takes log(sigmoid(.)) in float32,
    which is -inf at a margin of 200; ours is the exact cross-entropy, 200 to float32."""
    import torch

    with pytest.raises(ValueError, match="confidence"):
        rating.soft_label("A", 1.5)
    with pytest.raises(ValueError, match="confidence"):
        rating.soft_label("B", -0.1)
    released = -torch.log(torch.sigmoid(torch.tensor([-200.0])))  # the release's form, p = 1
    assert torch.isinf(released).all()
    assert float(rating.bt_loss([200.0], [0.0], [1.0])) == pytest.approx(200.0, rel=1e-6)
    assert float(rating.bt_loss([0.0], [200.0], [0.0])) == pytest.approx(200.0, rel=1e-6)


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
        core.resolve_notebook(config.PROFILES, "01_tsqbench_lite", "huge")


# --------------------------------------------------------------------------- full path, smoke
def test_smoke_is_the_full_profile_cut_to_sizes_and_llm_is_a_choice():
    for name, profiles in config.PROFILES.items():
        full_cfg, smoke = profiles["full"], profiles["smoke"]
        for f in dataclasses.fields(full_cfg):
            a, b = getattr(full_cfg, f.name), getattr(smoke, f.name)
            if isinstance(a, (str, bool)) or a is None:
                assert a == b, (name, f.name)
            else:
                assert isinstance(b, type(a)), (name, f.name)
    for name in ("01_tsqbench_lite", "02_perceiver_grpo"):
        assert [config.PROFILES[name][p].llm for p in core.PROFILE_NAMES] == [
            "emulated",
            "real",
            "real",
        ]
    inputs = config.RESOURCES["full"].inputs
    assert {i.find for i in inputs} == {
        "module:transformers",
        "module:trl",
        "module:peft",
        full.MODEL_INPUT,
    }
    assert all(i.unless == "llm=emulated" for i in inputs)
    assert all(i.notebooks == ("01_tsqbench_lite", "02_perceiver_grpo") for i in inputs)


def test_the_stand_in_is_recorded_and_a_missing_model_stops_the_real_path(monkeypatch):
    from reprobook.core import resources
    from reprobook.papers import tsqbench as tsq

    run, reduced = core.start(tsq, "02_perceiver_grpo", "reduced")
    assert run._data["stand_ins"] == {"llm": "emulated"}
    monkeypatch.setattr(resources, "input_present", lambda item, *where: False)
    with pytest.raises(core.MissingInputs, match=r"Qwen3-4B.*-p llm=emulated"):
        core.start(tsq, "02_perceiver_grpo", "full")
    run, emulated = core.start(tsq, "01_tsqbench_lite", "full", llm="emulated")
    assert run._data["stand_ins"] == {"llm": "emulated"}
    # the reduced profile has no inputs: asking it for the real model is refused, not replaced
    with pytest.raises(ValueError, match="uses no inputs"):
        experiments.llm_judge(replace(reduced, llm="real"), "reduced")
    with pytest.raises(ValueError, match="llm"):
        experiments.llm_judge(replace(reduced, llm="fake"), "full")
    assert experiments.llm_judge(emulated, "full") is None


def test_the_records_say_which_judge_and_which_policy_decided():
    cfgs = {
        p: core.resolve_notebook(config.PROFILES, "02_perceiver_grpo", p)
        for p in core.PROFILE_NAMES
    }
    assert experiments.policy_record(cfgs["reduced"], "reduced") == {
        "llm": "emulated",
        "policy": "GRPO (precision)",
        "model": "MLP Perceiver, 2 hidden layers of 64, on 36 no-tool features",
    }
    assert experiments.policy_record(cfgs["full"], "full") == {
        "llm": "real",
        "policy": "LLM GRPO (precision)",
        "model": "Qwen/Qwen3-4B with a LoRA (rank 16)",
    }
    smoke = experiments.policy_record(replace(cfgs["smoke"], reward="f1"), "smoke")
    assert smoke["policy"] == "LLM GRPO (f1)"
    assert smoke["model"] == "smoke fixture: tiny random Qwen3 with a LoRA (rank 16)"
    bench_cfg = core.resolve_notebook(config.PROFILES, "01_tsqbench_lite", "full")
    assert experiments.judge_record(bench_cfg, "full") == {"llm": "real", "judge": "Qwen/Qwen3-4B"}
    assert experiments.judge_record(replace(bench_cfg, llm="emulated"), "full")["llm"] == "emulated"
    with pytest.raises(ValueError, match="runs no LLM"):
        full.model_label("reduced")


def test_prompts_carry_both_views_the_dimensions_and_the_schema():
    a, b = np.arange(10.0), np.r_[np.arange(9.0), np.nan]
    prompt = full.perceiver_prompt(a, b)
    assert all(f"'{d}'" in prompt for d in bench.DIMENSIONS)
    assert '{"planned_dimensions": [...]}' in prompt
    assert prompt.count("statistics: ") == 2 and prompt.count("preview: [") == 2
    assert "Series A\n" in prompt and "Series B\n" in prompt and "nan" in prompt
    judge = full.judge_prompt(a, b, "trend")
    assert "dimension 'trend'" in judge and "A or B" in judge
    with pytest.raises(ValueError):
        full.judge_prompt(a, b, "colour")


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory):
    """The smoke fixture of Qwen3-4B, built once, and its loaded tokenizer and model."""
    import transformers

    from reprobook.papers.tsqbench import fixtures

    where = tmp_path_factory.mktemp("qwen3")
    fixtures.tiny_qwen3(where)
    tok = transformers.AutoTokenizer.from_pretrained(where)
    return where, tok, transformers.AutoModelForCausalLM.from_pretrained(where).eval()


def test_the_fixture_is_a_qwen3_with_the_chat_format(tiny_llm):
    where, tok, llm = tiny_llm
    assert llm.config.model_type == "qwen3" and llm.config.num_hidden_layers == 2
    assert llm.config.vocab_size == len(tok) and llm.config.eos_token_id == tok.eos_token_id
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    ida, idb = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    assert ida != idb and tok.unk_token_id not in (ida, idb)
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "<think>why</think>\n\nsaid"},
    ]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text == (
        "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
        "<|im_start|>assistant\nsaid<|im_end|>\n"
    )
    prompt = tok.apply_chat_template(
        msgs[1:2], tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # what the model answers after that block is read by the parser, <think> stripped
    answer = '<think>\n\n</think>\n\n{"planned_dimensions": ["trend"]}'
    assert tok.decode(tok(answer)["input_ids"]) == answer
    assert agent.parse_dimensions(answer) == ["trend"]


def test_the_llm_judge_is_a_probability_of_a_over_b(tiny_llm):
    _, tok, llm = tiny_llm
    p = bench.make_pairs(1, 3)[0]
    pa = full.llm_judge_probability(tok, llm, p.a, p.b, "trend")
    ids = full._chat_ids(tok, full.judge_prompt(p.a, p.b, "trend"), "cpu")
    with torch.no_grad():
        logits = llm(input_ids=ids).logits[0, -1]
    la, lb = logits[tok.convert_tokens_to_ids("A")], logits[tok.convert_tokens_to_ids("B")]
    assert 0 < pa < 1 and pa == pytest.approx(float(torch.sigmoid(la - lb)), abs=1e-6)
    answers = full.llm_select(tok, llm, bench.make_pairs(2, 4), max_new_tokens=3)
    assert len(answers) == 2  # noise from a random model: None (unparsable) or a list
    assert all(a is None or set(a) <= set(bench.DIMENSIONS) for a in answers)


def test_one_grpo_step_changes_only_the_lora_weights(tiny_llm):
    import transformers

    where, tok, _ = tiny_llm
    llm = transformers.AutoModelForCausalLM.from_pretrained(where)
    before = {n: p.detach().clone() for n, p in llm.named_parameters()}
    pairs = bench.make_pairs(1, 5)
    calls = []

    def reward(text, target, training):
        calls.append((text, target, training))
        return float(sum(map(ord, text)) % 97)  # spread over the group, so advantages move

    torch.manual_seed(0)
    trained, curve = full.grpo_lora(
        llm,
        tok,
        [full.perceiver_prompt(p.a, p.b) for p in pairs],
        [list(p.target_dimensions) for p in pairs],
        reward,
        group=4,
        batch=4,
        accumulation=1,
        lr=1e-2,
        answer_tokens=4,
    )
    assert len(curve) == 1 and len(calls) == 4  # one step: one prompt, four answers
    assert all(isinstance(t, str) and g == list(pairs[0].target_dimensions) for t, g, _ in calls)
    assert all(training is True for *_, training in calls)
    lora, base = {}, {}
    for name, p in trained.named_parameters():
        key = name.removeprefix("base_model.model.").replace(".base_layer", "")
        (lora if "lora_" in name else base)[key] = p
        assert p.requires_grad == ("lora_" in name)
    assert base.keys() == before.keys()
    assert all(torch.equal(base[k].detach(), before[k]) for k in before)
    lora_b = [p for k, p in lora.items() if "lora_B" in k]
    assert len(lora_b) == 7 * 2  # every linear layer of the two blocks (lm_head is tied)
    assert any(p.abs().sum() > 0 for p in lora_b)  # B starts at zero: the step moved it
    with pytest.raises(ValueError, match="multiple of group"):
        full.grpo_lora(llm, tok, ["x"], [[]], reward, group=4, batch=6)


def test_the_real_perceiver_runs_on_the_smoke_fixture(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_FIXTURES", str(tmp_path))
    cfg = replace(core.resolve_notebook(config.PROFILES, "02_perceiver_grpo", "smoke"), n_test=2)
    metrics, facts = full.perceiver_llm_metrics(cfg, 0, "smoke")
    assert list(metrics) == ["LLM (base)", "LLM GRPO (precision)"]
    assert all(
        set(m) == {"precision", "recall", "f1", "exact", "n_selected"} for m in metrics.values()
    )
    assert facts["steps"] == 1 and len(facts["curve"]) == 1
    assert 0 <= facts["unparsable_base"] <= 1 and 0 <= facts["unparsable_trained"] <= 1
    assert any(tmp_path.rglob("model.safetensors"))  # loaded through core.locate's fixture
    with pytest.raises(ValueError):
        full.perceiver_llm_metrics(replace(cfg, llm="emulated"), 0, "smoke")
