"""ACORN chapter: the acquisition (EVR), the review policies, the loop and the study summaries."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import roots_jacobi

from reprobook.papers.acorn_occupancy import acquisition as acq
from reprobook.papers.acorn_occupancy import loop
from reprobook.papers.acorn_occupancy.fit import fit_map
from reprobook.papers.acorn_occupancy.likelihood import (
    site_loglik,
    true_params,
    unit_presence_probability,
)
from reprobook.papers.acorn_occupancy.simulate import BIOACOUSTIC, CAMERA, simulate

SMALL = replace(CAMERA, n_sites=30, n_units=8)


def _state(preset=SMALL, seed=0, n_reviewed=20):
    survey = simulate(preset, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 100)
    reviewed = np.zeros(survey.s.shape, dtype=bool)
    reviewed.ravel()[rng.choice(survey.s.size, n_reviewed, replace=False)] = True
    labels = np.where(reviewed, survey.y, 0)
    fit = fit_map(survey, reviewed, labels)
    return acq.ReviewState(survey, reviewed, labels, fit)


# --- the predictive probability (P) ---------------------------------------------------------------


def test_unit_presence_probability_is_a_ratio_of_site_likelihoods():
    """P(y_ik = 1 | D, u) = L_i(D with unit k reviewed positive) / L_i(D): an exact identity."""
    st = _state()
    u = true_params(SMALL) + 0.1
    p = unit_presence_probability(u[None, :], st.survey, st.reviewed, st.labels)[0]
    base = site_loglik(u, st.survey, st.reviewed, st.labels)
    for i, k in [(0, 0), (3, 5), (17, 2), (29, 7)]:
        if st.reviewed[i, k]:
            assert p[i, k] == st.labels[i, k]
            continue
        r, y = st.reviewed.copy(), st.labels.copy()
        r[i, k], y[i, k] = True, 1
        ratio = np.exp(site_loglik(u, st.survey, r, y)[i] - base[i])
        assert p[i, k] == pytest.approx(ratio, rel=1e-10, abs=1e-300)


def test_unit_presence_probability_batches_over_draws():
    st = _state()
    u = true_params(SMALL)[None, :] + np.random.default_rng(1).normal(0, 0.1, (5, 8))
    batch = unit_presence_probability(u, st.survey, st.reviewed, st.labels)
    assert batch.shape == (5,) + st.survey.s.shape
    for m in range(5):
        one = unit_presence_probability(u[m : m + 1], st.survey, st.reviewed, st.labels)[0]
        np.testing.assert_allclose(batch[m], one, rtol=1e-13, atol=0)


# --- (EVR-w) --------------------------------------------------------------------------------------


def test_evr_is_variance_minus_expected_conditional_variance():
    rng = np.random.default_rng(2)
    M, U = 400, 7
    tau = rng.normal(size=M)
    p = rng.random((M, U))
    w = rng.random(M)
    evr = acq.expected_variance_reduction(tau, p, w)
    wn = w / w.sum()
    for j in range(U):
        P1 = wn @ p[:, j]
        direct = (
            acq.weighted_variance(tau, w)
            - P1 * acq.weighted_variance(tau, w * p[:, j])
            - (1 - P1) * acq.weighted_variance(tau, w * (1 - p[:, j]))
        )
        assert evr[j] == pytest.approx(direct, rel=1e-9, abs=1e-15)
    assert np.all(evr >= 0)
    joint = acq.expected_variance_reduction(np.stack([tau, 2 * tau], 1), p, w)
    np.testing.assert_allclose(joint[:, 1], 4 * evr, rtol=1e-12)


def test_evr_is_zero_for_a_certain_label():
    rng = np.random.default_rng(3)
    tau = rng.normal(size=100)
    p = np.stack([np.zeros(100), np.ones(100), rng.random(100)], axis=1)
    evr = acq.expected_variance_reduction(tau, p, np.ones(100))
    assert evr[0] == 0.0 and evr[1] == 0.0 and evr[2] > 0


def test_evr_is_zero_for_reviewed_units_and_units_that_cannot_be_present():
    st = _state()
    u = acq.laplace_draws(st.fit, 200, np.random.default_rng(4))
    u[:, 2], u[:, 3] = -2000.0, 0.0  # theta = e^-2000: exactly 0 in float64, y = 0 for sure
    p = unit_presence_probability(u, st.survey, st.reviewed, st.labels)
    evr = acq.expected_variance_reduction(
        acq.target_draws(u, st.survey, "beta1"), p.reshape(200, -1), np.ones(200)
    )
    assert np.all(evr == 0.0)
    u2 = acq.laplace_draws(st.fit, 200, np.random.default_rng(4))
    p2 = unit_presence_probability(u2, st.survey, st.reviewed, st.labels).reshape(200, -1)
    evr2 = acq.expected_variance_reduction(
        acq.target_draws(u2, st.survey, "psi_bar"), p2, np.ones(200)
    )
    assert np.all(evr2[st.reviewed.ravel()] == 0.0)
    assert evr2[~st.reviewed.ravel()].max() > 0


@pytest.mark.parametrize("a, b", [(2.0, 5.0), (0.7, 1.3), (12.0, 3.0)])
def test_importance_weighting_equals_the_exact_conjugate_refit(a, b):
    """Beta-Bernoulli: theta ~ Beta(a, b), y ~ Bernoulli(theta). Draws = Gauss-Jacobi nodes with
    their weights (exact for polynomials up to degree 79); re-weighting by theta or 1 - theta
    must give Beta(a + 1, b) and Beta(a, b + 1) exactly, and EVR the exact expected reduction."""
    x, wq = roots_jacobi(40, b - 1.0, a - 1.0)  # weight (1 - x)^(b-1) (1 + x)^(a-1) on [-1, 1]
    theta = (x + 1.0) / 2.0
    var = lambda al, be: stats.beta(al, be).var()
    assert acq.weighted_variance(theta, wq) == pytest.approx(var(a, b), rel=1e-12)
    assert acq.weighted_variance(theta, wq * theta) == pytest.approx(var(a + 1, b), rel=1e-12)
    assert acq.weighted_variance(theta, wq * (1 - theta)) == pytest.approx(var(a, b + 1), rel=1e-12)
    p1 = a / (a + b)
    exact = var(a, b) - p1 * var(a + 1, b) - (1 - p1) * var(a, b + 1)
    evr = acq.expected_variance_reduction(theta, theta[:, None], wq)[0]
    assert evr == pytest.approx(exact, rel=1e-10)
    # and with plain Monte Carlo draws, to sampling accuracy
    draws = stats.beta(a, b).rvs(size=400_000, random_state=np.random.default_rng(5))
    mc = acq.expected_variance_reduction(draws, draws[:, None], np.ones(draws.size))[0]
    assert mc == pytest.approx(exact, rel=0.03)


# --- the policies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(acq.POLICIES))
def test_batches_have_no_duplicates_and_no_reviewed_units(name):
    st = _state(n_reviewed=60)
    picks = acq.policy(name)(st, 25, np.random.default_rng(6))
    assert len(picks) == 25 == len(set(picks))
    assert not any(st.reviewed[i, k] for i, k in picks)
    # a batch larger than what is left takes everything left, once
    few = st.reviewed.copy()
    few.ravel()[: few.size - 5] = True
    st2 = acq.ReviewState(st.survey, few, np.where(few, st.survey.y, 0), st.fit)
    picks2 = acq.policy(name)(st2, 25, np.random.default_rng(6))
    assert sorted(picks2) == sorted(map(tuple, np.argwhere(~few).tolist()))


def test_evr_first_pick_is_the_argmax_and_policies_are_seeded():
    st = _state()
    rng = np.random.default_rng(7)
    picks = acq.select_evr(st, 5, rng, target="beta1", n_draws=300)
    u = acq.laplace_draws(st.fit, 300, np.random.default_rng(7))
    p = unit_presence_probability(u, st.survey, st.reviewed, st.labels).reshape(300, -1)
    evr = acq.expected_variance_reduction(u[:, 1], p, np.ones(300))
    evr[st.reviewed.ravel()] = -1
    assert np.unravel_index(int(np.argmax(evr)), st.reviewed.shape) == picks[0]
    assert picks == acq.select_evr(st, 5, np.random.default_rng(7), target="beta1", n_draws=300)
    assert acq.select_random(st, 9, np.random.default_rng(8)) == acq.select_random(
        st, 9, np.random.default_rng(8)
    )


def test_top_score_and_site_top_orders():
    st = _state(n_reviewed=0)
    s = st.survey.s
    top = acq.select_top_score(st, 4, np.random.default_rng(0))
    assert [s[i, k] for i, k in top] == sorted(s.ravel())[::-1][:4]
    # site_top: one unit per site per pass, each site's best, best sites first; confirmed sites
    # skipped
    reviewed = np.zeros_like(st.reviewed)
    labels = np.zeros_like(st.labels)
    reviewed[0, 0], labels[0, 0] = True, 1  # site 0 confirmed occupied
    st2 = acq.ReviewState(st.survey, reviewed, labels, st.fit)
    picks = acq.select_site_top(st2, s.shape[0] - 1, np.random.default_rng(0))
    sites = [i for i, _ in picks]
    assert sorted(sites) == list(range(1, s.shape[0]))
    assert all(k == int(np.argmax(s[i])) for i, k in picks)
    best = [s[i].max() for i in sites]
    assert best == sorted(best, reverse=True)


def test_uncertainty_picks_predictive_probabilities_nearest_one_half():
    st = _state()
    picks = acq.select_uncertainty(st, 6, np.random.default_rng(0))
    p = unit_presence_probability(st.fit.params[None], st.survey, st.reviewed, st.labels)[0]
    d = np.abs(p - 0.5)
    chosen = max(d[i, k] for i, k in picks)
    others = d[~st.reviewed].copy()
    assert np.sum(others < chosen - 1e-15) <= 5


def test_bad_policy_input_raises():
    st = _state()
    with pytest.raises(ValueError, match="policy must be one of"):
        acq.policy("oracle")
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        acq.select_random(st, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="target must be one of"):
        acq.select_evr(st, 2, np.random.default_rng(0), target="psi")
    with pytest.raises(ValueError, match=r"draws \(M, 8\) must have shape \(any, 8\)"):
        acq.target_draws(np.zeros((3, 7)), st.survey, "beta1")


# --- the loop and the study summaries -------------------------------------------------------------


def test_review_loop_reveals_true_labels_and_is_reproducible():
    survey = simulate(SMALL, np.random.default_rng(11))
    a = loop.review_loop(
        survey, "acorn", budget=30, batch=8, rng=np.random.default_rng(1), n_draws=128
    )
    b = loop.review_loop(
        survey, "acorn", budget=30, batch=8, rng=np.random.default_rng(1), n_draws=128
    )
    assert a["n_reviewed"].tolist() == [0, 8, 16, 24, 30]
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
    assert a["fit_ok"].all()
    with pytest.raises(ValueError, match="budget must be an integer"):
        loop.review_loop(
            survey, "random", budget=survey.s.size + 1, batch=8, rng=np.random.default_rng(0)
        )


def test_full_review_reaches_the_full_label_fit():
    survey = simulate(replace(SMALL, n_sites=12, n_units=5), np.random.default_rng(12))
    study = loop.run_study(
        survey.preset, ["random"], reps=1, budget_frac=1.0, batch_frac=0.34, seed=12
    )
    last = study.iloc[-1]
    assert last["frac_reviewed"] == 1.0
    assert last["err"] < 1e-3


def _fake_study(errors: dict[str, list[float]], reps=1):
    rows = []
    for rep in range(reps):
        for pol, errs in errors.items():
            for j, e in enumerate(errs):
                rows.append(
                    dict(
                        rep=rep,
                        policy=pol,
                        n_reviewed=10 * j,
                        frac_reviewed=0.01 * j,
                        err=e,
                        err_beta1=e,
                    )
                )
    return pd.DataFrame(rows)


def test_study_summaries_on_hand_made_curves():
    st = _fake_study(
        {
            "acorn": [3, 0.5, 0.8, 0.2, 0.1],
            "random": [3, 2, 1.5, 0.9, 0.12],
            "top_score": [3, 1.2, 0.7, 0.6, 0.5],
        }
    )
    # acorn is not below top_score at budget 0.02 (0.8 > 0.7)
    assert not loop.beats_at_every_budget(st, "acorn", ["random", "top_score"], max_frac=0.03).iloc[
        0
    ]
    assert loop.beats_at_every_budget(st, "acorn", ["random"], max_frac=0.04).iloc[0]
    assert loop.beats_at_every_budget(st, "acorn", ["random", "top_score"], max_frac=0.01).iloc[0]
    tol = loop.reviews_to_tolerance(st).set_index("policy")["reviews"]
    assert tol["acorn"] == 10 and tol["random"] == 30 and tol["top_score"] == 20
    g = loop.gain_shrinks(st, "acorn", "random", small_frac=0.02).iloc[0]
    assert (
        g["peak_small"] == pytest.approx(1.5)
        and g["at_max_budget"] == pytest.approx(0.02)
        and g["shrinks"]
    )
    area = loop.error_area(st, max_frac=0.02)
    assert area.loc[0, "acorn"] == pytest.approx(0.65) and area.loc[0, "random"] == pytest.approx(
        1.75
    )
    assert loop.needs_no_more_reviews(st, "acorn", ["random", "top_score"]).iloc[0]
    assert not loop.needs_no_more_reviews(st, "random", ["acorn"]).iloc[0]
    never = _fake_study({"acorn": [3, 2, 2], "random": [3, 1, 0.5]})
    assert not loop.needs_no_more_reviews(never, "acorn", ["random"]).iloc[0]
    assert np.isnan(loop.reviews_to_tolerance(never).set_index("policy")["reviews"]["acorn"])
    assert not loop.gain_shrinks(never, "acorn", "random", small_frac=0.02).iloc[0]["shrinks"]


@pytest.mark.parametrize("target", ["joint", "psi_bar"])
def test_greedy_batch_matches_a_from_scratch_believer_loop(target):
    """The whole batch against a plain re-implementation: after every pick, believe its more
    probable label, re-weight the draws by that label's probability, recompute every unit's
    predictive probability from scratch, and take the next EVR argmax (scores normalised by the
    variances before the batch)."""
    pre = replace(BIOACOUSTIC, n_sites=20, n_units=15)
    st = _state(pre, seed=3, n_reviewed=15)
    b, m = 8, 200
    picks = acq.select_evr(st, b, np.random.default_rng(13), target=target, n_draws=m)
    u = acq.laplace_draws(st.fit, m, np.random.default_rng(13))
    tau = acq.target_draws(u, st.survey, target)
    var0 = acq.weighted_variance(tau, np.ones(m))
    w = np.ones(m)
    r, y = st.reviewed.copy(), st.labels.copy()
    expected, labels = [], []
    for _ in range(b):
        p = unit_presence_probability(u, st.survey, r, y).reshape(m, -1)
        evr = acq.expected_variance_reduction(tau, p, w)
        score = (evr / var0).sum(axis=1) if evr.ndim == 2 else evr
        score[r.ravel()] = -np.inf
        j = int(np.argmax(score))
        i, k = np.unravel_index(j, r.shape)
        label = int(w @ p[:, j] >= 0.5 * w.sum())
        w = w * (p[:, j] if label else 1 - p[:, j])
        r[i, k], y[i, k] = True, label
        expected.append((int(i), int(k)))
        labels.append(label)
    assert picks == expected
    # the conditioning matters here: a plain top-b of the first scores differs, and some beliefs
    # are positive
    p0 = unit_presence_probability(u, st.survey, st.reviewed, st.labels).reshape(m, -1)
    evr0 = acq.expected_variance_reduction(tau, p0, np.ones(m))
    s0 = (evr0 / var0).sum(axis=1) if evr0.ndim == 2 else evr0
    s0[st.reviewed.ravel()] = -np.inf
    plain = [tuple(int(v) for v in np.unravel_index(j, r.shape)) for j in np.argsort(-s0)[:b]]
    assert plain != expected
    assert any(labels)


def test_summaries_need_the_error_to_stay_within_tolerance_and_strictly_beat():
    dip = _fake_study({"acorn": [3, 0.5, 1.5, 0.5, 0.4], "random": [3, 0.5, 0.9, 0.8, 0.7]})
    tol = loop.reviews_to_tolerance(dip).set_index("policy")["reviews"]
    assert tol["acorn"] == 30 and tol["random"] == 10
    # a tie is not a win
    assert not loop.beats_at_every_budget(dip, "acorn", ["random"], max_frac=0.01).iloc[0]
    # the peak of the gain is taken over small budgets only
    late = _fake_study({"acorn": [3, 2, 2, 0.1, 0.1], "random": [3, 2.5, 2.1, 2, 0.2]})
    g = loop.gain_shrinks(late, "acorn", "random", small_frac=0.02).iloc[0]
    assert g["peak_small"] == pytest.approx(0.5) and g["shrinks"]
    with pytest.raises(ValueError, match="not in this study"):
        loop.beats_at_every_budget(dip, "acorn", ["oracle"], max_frac=0.02)
    with pytest.raises(ValueError, match="no round of the study"):
        loop.error_area(dip, max_frac=0.001)


def test_c2_cells_compare_rmse_on_both_targets():
    rows = []
    for rep, (ep_c, eb_c, ep_t, eb_t) in enumerate(
        [(0.01, 0.1, 0.05, 0.2), (-0.01, -0.1, -0.05, 0.05)]
    ):
        base = dict(rep=rep, preset="camera", psi_bar_true=0.4, beta1_true=1.0, ok=True)
        rows.append(
            dict(
                base,
                model="CSOM",
                threshold=np.nan,
                psi_bar=0.4 + ep_c,
                beta1=1 + eb_c,
                detections=np.nan,
            )
        )
        rows.append(
            dict(
                base,
                model="standard",
                threshold=0.5,
                psi_bar=0.4 + ep_t,
                beta1=1 + eb_t,
                detections=0.1,
            )
        )
        rows.append(
            dict(
                base,
                model="standard",
                threshold=0.8,
                psi_bar=0.4 + ep_t,
                beta1=1 + eb_t * 3,
                detections=0.1,
            )
        )
    summary = loop.threshold_summary(pd.DataFrame(rows))
    csom = summary[summary.model == "CSOM"].iloc[0]
    assert csom["bias_psi"] == pytest.approx(0.0) and csom["rmse_psi"] == pytest.approx(0.01)
    cells = loop.csom_wins(summary).set_index("threshold")["csom_wins"]
    # threshold 0.5: beta1 RMSE sqrt((0.04 + 0.0025) / 2) = 0.146 > 0.1, psi 0.05 > 0.01: CSOM wins
    # threshold 0.8: beta1 RMSE sqrt((0.36 + 0.0225) / 2) = 0.437: CSOM wins too; make psi tie
    # instead
    assert cells[0.5] and cells[0.8]
    tie = summary.copy()
    tie.loc[(tie.model == "standard") & (tie.threshold == 0.8), "rmse_psi"] = csom["rmse_psi"]
    assert not loop.csom_wins(tie).set_index("threshold")["csom_wins"][0.8]


def test_study_inputs_are_checked():
    survey = simulate(SMALL, np.random.default_rng(0))
    with pytest.raises(ValueError, match="reps"):
        loop.run_study(SMALL, ["random"], reps=0, budget_frac=0.1, batch_frac=0.05, seed=0)
    with pytest.raises(ValueError, match="reps"):
        loop.threshold_study(SMALL, reps=1.5, thresholds=(0.5,), seed=0)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        loop.review_loop(survey, "random", budget=5, batch=5, rng=0)
    with pytest.raises(ValueError, match="n_sites must be an integer >= 1"):
        from reprobook.papers.acorn_occupancy.config import preset

        preset("camera", n_sites=0)
    with pytest.raises(ValueError, match="weights must be non-negative"):
        acq.expected_variance_reduction(
            np.ones(3), np.full((3, 2), 0.5), np.array([1.0, -1.0, 1.0])
        )
    with pytest.raises(ValueError, match="probabilities"):
        acq.expected_variance_reduction(np.ones(3), np.full((3, 2), 1.5), np.ones(3))


def test_against_truth_reads_each_policy_at_its_largest_budget():
    rows = []
    for rep, (b_full, p_full) in enumerate([(0.9, 0.40), (1.2, 0.50)]):
        for pol, last in (("acorn", 0.1), ("random", 0.05)):
            for frac in (0.0, 0.05, 0.1):
                if frac > last:
                    continue
                rows.append(
                    dict(
                        rep=rep,
                        policy=pol,
                        frac_reviewed=frac,
                        beta1=1.0 + frac + rep,
                        psi_bar=0.45,
                        beta1_true=1.0,
                        psi_bar_true=0.45 + 0.01 * rep,
                        beta1_full=b_full,
                        psi_bar_full=p_full,
                    )
                )
    table = loop.against_truth(pd.DataFrame(rows))
    assert list(table.index) == ["acorn", "random", "(full labels)"]
    # acorn at 10%: |1.1 - 1| and |2.1 - 1|; random at 5%: |1.05 - 1| and |2.05 - 1|
    assert table.loc["acorn"].tolist() == pytest.approx([0.1, 0.6, 0.005])
    assert table.loc["random"].tolist() == pytest.approx([0.05, 0.55, 0.005])
    assert table.loc["(full labels)"].tolist() == pytest.approx([1.0, 0.15, 0.045])


def test_the_smoke_profile_runs_every_full_policy_on_a_small_survey():
    """Smoke runs the full profile's policies (site_top included) and its four-chain NUTS
    check cut to two chains; the bootstrap needs at least 100 resamples, intervals two
    surveys."""
    from reprobook.papers.acorn_occupancy import config

    for table in config.PROFILES.values():
        smoke, full = table["smoke"], table["full"]
        assert smoke.reps >= 2 and smoke.n_sites * smoke.n_units < full.n_sites * full.n_units
        if hasattr(full, "policies"):
            assert smoke.policies == full.policies
    assert config.PROFILES["01_scores_or_thresholds"]["smoke"].n_boot >= 100
    assert config.PROFILES["03_does_it_hold_up"]["smoke"].nuts_chains >= 2


def test_the_package_reaches_every_module_by_name():
    from reprobook.papers import acorn_occupancy as acorn
    from reprobook.papers.acorn_occupancy import config, loop

    assert acorn.config is config and acorn.loop.smallest_proportion is loop.smallest_proportion
    assert sorted(config.PROFILES) == [
        "01_scores_or_thresholds",
        "02_which_to_review",
        "03_does_it_hold_up",
    ]
    assert not hasattr(acorn, "nothing_here")
