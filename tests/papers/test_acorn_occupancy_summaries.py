"""ACORN chapter: the summaries that turn studies into the claims' values and intervals (C2's
bootstrap over surveys, C4's two halves of the budget range, C5's error areas and the smallest of
two proportions), the per-policy budgets of a study, and the faster form of (P)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reprobook.core.stats import Interval, proportion_interval, smallest_proportion_interval
from reprobook.papers.acorn_occupancy import loop
from reprobook.papers.acorn_occupancy.likelihood import (
    _parts,
    _presence_parts,
    true_params,
    unit_presence_probability,
)
from reprobook.papers.acorn_occupancy.simulate import BIOACOUSTIC, CAMERA, simulate

# --- (P) in its cheaper form --------------------------------------------------------------------


def test_presence_equals_the_site_likelihood_pieces_with_reviewed_positives_and_negatives():
    """unit_presence_probability (log odds form) against exp(A_i - log L_i) exp(a1 - log mix)
    computed from the terms of (L_i), on draws, with reviewed units of both labels."""
    pre = replace(BIOACOUSTIC, n_sites=25, n_units=12)
    sv = simulate(pre, np.random.default_rng(21))
    rng = np.random.default_rng(22)
    r = np.zeros(sv.s.shape, dtype=bool)
    r.ravel()[rng.choice(sv.s.size, 60, replace=False)] = True
    r[np.argwhere(sv.y == 1)[0][0]] = True  # at least one reviewed positive
    y = np.where(r, sv.y, 0)
    u = true_params(pre)[None, :] + rng.normal(0, 0.3, (7, 8))
    got = unit_presence_probability(u, sv, r, y)
    parts = _parts(u, sv, r, y)
    rz = np.exp(parts["A"] - np.logaddexp(parts["A"], parts["B"]))
    expected = np.where(r, y, rz[..., None] * np.exp(parts["a1"] - parts["unrev"]))
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-300)
    positive_sites = np.any(r & (y == 1), axis=1)
    assert positive_sites.any() and np.all(
        got[:, positive_sites][~r[positive_sites][None].repeat(7, 0)] > 0
    )


def test_a_negative_review_removes_its_softplus_from_the_log_odds():
    """The update of the greedy batch: reviewing an unreviewed unit as empty lowers A_i - B_i by
    log(1 + e^g_ik) and leaves every other site's log odds alone."""
    pre = replace(CAMERA, n_sites=10, n_units=6)
    sv = simulate(pre, np.random.default_rng(23))
    u = true_params(pre)[None, :] + np.random.default_rng(24).normal(0, 0.2, (4, 8))
    r = np.zeros(sv.s.shape, dtype=bool)
    y = np.zeros(sv.s.shape, dtype=np.int64)
    _, sp, odds, _ = _presence_parts(u, sv.x, sv.w, sv.s, r, y)
    r2 = r.copy()
    r2[3, 2] = True
    _, _, odds2, _ = _presence_parts(u, sv.x, sv.w, sv.s, r2, y)
    np.testing.assert_allclose(odds2[:, 3], odds[:, 3] - sp[:, 3, 2], rtol=1e-12)
    np.testing.assert_array_equal(np.delete(odds2, 3, axis=1), np.delete(odds, 3, axis=1))


# --- C2: the bootstrap over surveys --------------------------------------------------------------


def _fits(
    csom_err: dict[str, float],
    cell_err: dict[tuple[str, str, float], float],
    reps: int = 30,
    seed: int = 0,
    noise: float = 0.01,
) -> pd.DataFrame:
    """A threshold_study-like table: per preset and rep, the CSOM and each thresholded cell with
    errors of about the given size (the same on psi_bar and beta1), plus small noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for preset, ec in csom_err.items():
        for rep in range(reps):
            base = dict(
                preset=preset,
                rep=rep,
                psi_bar_true=0.4,
                beta1_true=1.0,
                ok=True,
                label_switched=False,
            )
            e = ec + noise * rng.standard_normal()
            rows.append(
                dict(
                    base,
                    model="CSOM",
                    threshold=np.nan,
                    psi_bar=0.4 + e,
                    beta1=1.0 + e,
                    detections=np.nan,
                )
            )
            for (p, model, thr), et in cell_err.items():
                if p != preset:
                    continue
                e = et + noise * rng.standard_normal()
                rows.append(
                    dict(
                        base,
                        model=model,
                        threshold=thr,
                        psi_bar=0.4 + e,
                        beta1=1.0 + e,
                        detections=0.1,
                    )
                )
    return pd.DataFrame(rows)


CELLS = [("standard", 0.5), ("standard", 0.8), ("Royle-Link", 0.5)]


def test_csom_win_fraction_is_one_or_zero_when_every_cell_is_clear():
    good = _fits({"a": 0.01, "b": 0.01}, {(p, m, t): 0.2 for p in "ab" for m, t in CELLS})
    iv, per = loop.csom_win_fraction(good, n_boot=300, seed=1)
    assert isinstance(iv, Interval)
    assert (iv.estimate, iv.low, iv.high) == (1.0, 1.0, 1.0) and per == {"a": 1.0, "b": 1.0}
    assert iv.n == 60 and "bootstrap" in iv.method
    bad = _fits({"a": 0.2, "b": 0.2}, {(p, m, t): 0.01 for p in "ab" for m, t in CELLS})
    iv, per = loop.csom_win_fraction(bad, n_boot=300, seed=1)
    assert (iv.estimate, iv.low, iv.high) == (0.0, 0.0, 0.0) and per == {"a": 0.0, "b": 0.0}


def test_csom_win_fraction_matches_csom_wins_and_a_tie_widens_the_interval():
    errs = {
        ("a", "standard", 0.5): 0.2,
        ("a", "standard", 0.8): 0.0,
        ("a", "Royle-Link", 0.5): 0.2,
        ("b", "standard", 0.5): 0.2,
        ("b", "standard", 0.8): 0.2,
        ("b", "Royle-Link", 0.5): 0.001,
    }
    fits = _fits({"a": 0.0, "b": 0.0}, errs, noise=0.02)  # two cells are ties up to noise
    iv, per = loop.csom_win_fraction(fits, n_boot=1000, seed=2)
    cells = loop.csom_wins(loop.threshold_summary(fits))
    assert iv.estimate == pytest.approx(cells["csom_wins"].mean())
    assert per == pytest.approx(cells.groupby("preset")["csom_wins"].mean().to_dict())
    assert iv.low <= iv.estimate <= iv.high
    assert 4 / 6 - 1e-12 <= iv.low and iv.high <= 1.0  # the four clear cells are always won
    assert (
        iv.high - iv.low >= 1 / 6 - 1e-12
    )  # the ties are won in some resamples and lost in others
    again, _ = loop.csom_win_fraction(fits, n_boot=1000, seed=2)
    assert again == iv


def test_csom_win_fraction_counts_a_failed_fit_only_through_the_rmse_of_the_rest():
    fits = _fits({"a": 0.01}, {("a", "standard", 0.5): 0.2})
    fits.loc[(fits.model == "standard") & (fits.rep == 0), ["psi_bar", "beta1", "ok"]] = [
        np.nan,
        np.nan,
        False,
    ]
    iv, _ = loop.csom_win_fraction(fits, n_boot=200)
    assert (iv.estimate, iv.low, iv.high) == (1.0, 1.0, 1.0)


def test_csom_win_fraction_checks_its_inputs():
    fits = _fits({"a": 0.01}, {("a", "standard", 0.5): 0.2})
    with pytest.raises(ValueError, match="n_boot"):
        loop.csom_win_fraction(fits, n_boot=10)
    with pytest.raises(ValueError, match="preset"):
        loop.csom_win_fraction(fits.drop(columns="preset"))
    with pytest.raises(ValueError, match="level"):
        loop.csom_win_fraction(fits, level=1.5)


# --- C4 and C5 on hand-made curves ----------------------------------------------------------------


def _curves(errors: dict[str, list[float]], reps: int = 1) -> pd.DataFrame:
    rows = []
    for rep in range(reps):
        for pol, errs in errors.items():
            for j, e in enumerate(errs):
                rows.append(
                    dict(rep=rep, policy=pol, n_reviewed=10 * j, frac_reviewed=0.01 * j, err=e)
                )
    return pd.DataFrame(rows)


def test_gain_by_half_compares_the_mean_advantage_of_the_two_halves():
    st = _curves({"acorn": [3, 1.0, 0.5, 0.4, 0.3], "random": [3, 2.0, 1.5, 0.6, 0.4]})
    g = loop.gain_by_half(st, "acorn", "random", split_frac=0.02, max_frac=0.04).iloc[0]
    assert (
        g["early"] == pytest.approx(1.0) and g["late"] == pytest.approx(0.15) and g["early_larger"]
    )
    growing = _curves({"acorn": [3, 2.0, 1.5, 0.2, 0.1], "random": [3, 2.2, 1.6, 1.5, 1.4]})
    g = loop.gain_by_half(growing, "acorn", "random", split_frac=0.02, max_frac=0.04).iloc[0]
    assert (
        g["early"] == pytest.approx(0.15)
        and g["late"] == pytest.approx(1.3)
        and not g["early_larger"]
    )
    # budget 0 (the shared start) is in neither half; a budget past max_frac is ignored
    longer = _curves(
        {"acorn": [3, 1.0, 0.5, 0.4, 0.3, 0.0], "random": [3, 2.0, 1.5, 0.6, 0.4, 9.0]}
    )
    g2 = loop.gain_by_half(longer, "acorn", "random", split_frac=0.02, max_frac=0.04).iloc[0]
    assert g2["late"] == pytest.approx(0.15)
    failed = _curves({"acorn": [3, np.nan, 0.5, 0.4, 0.3], "random": [3, 2.0, 1.5, 0.6, 0.4]})
    assert not loop.gain_by_half(failed, "acorn", "random", split_frac=0.02, max_frac=0.04).iloc[0][
        "early_larger"
    ]
    with pytest.raises(ValueError, match="split_frac"):
        loop.gain_by_half(st, "acorn", "random", split_frac=0.05, max_frac=0.04)
    with pytest.raises(ValueError, match="both sides"):
        loop.gain_by_half(st, "acorn", "random", split_frac=0.035, max_frac=0.036)


def test_beats_on_area_needs_a_strictly_smaller_mean_error_than_every_rival():
    st = _curves(
        {"acorn": [5, 1.0, 0.8, 0.2], "random": [5, 2.0, 0.1, 0.1], "top_score": [5, 0.9, 0.9, 0.9]}
    )
    # areas over (0, 0.03]: acorn 2/3, random 2.2/3, top_score 2.7/3
    assert loop.beats_on_area(st, "acorn", ["random", "top_score"], max_frac=0.03).iloc[0]
    # over (0, 0.02]: acorn 0.9, random 1.05, top_score 0.9: a tie is a loss
    assert not loop.beats_on_area(st, "acorn", ["random", "top_score"], max_frac=0.02).iloc[0]
    failed = (
        st.copy()
    )  # random's area would be 1.05 with the failed round left out: a failed fit is a loss instead
    failed.loc[(failed.policy == "random") & (failed.n_reviewed == 20), "err"] = np.nan
    assert not loop.beats_on_area(failed, "acorn", ["random", "top_score"], max_frac=0.03).iloc[0]
    with pytest.raises(ValueError, match="not in this study"):
        loop.beats_on_area(st, "acorn", ["oracle"], max_frac=0.03)


# --- C5's interval: the smallest of two proportions -----------------------------------------------


def test_smallest_proportion_is_the_minimum_of_bonferroni_clopper_pearson_intervals():
    iv = loop.smallest_proportion({"camera": (19, 20), "heavy": (11, 20)})
    a, b = proportion_interval(19, 20, level=0.975), proportion_interval(11, 20, level=0.975)
    assert iv.estimate == pytest.approx(11 / 20)
    assert iv.low == pytest.approx(min(a.low, b.low)) and iv.high == pytest.approx(
        min(a.high, b.high)
    )
    assert iv.n == 40
    one = loop.smallest_proportion({"only": (7, 10)})
    assert (one.low, one.high) == pytest.approx(
        (proportion_interval(7, 10).low, proportion_interval(7, 10).high)
    )
    with pytest.raises(ValueError, match="empty"):
        loop.smallest_proportion({})


def test_smallest_proportion_is_the_core_interval_labelled_with_the_regimes():
    counts = {"camera": (19, 20), "bioacoustic_t": (11, 18)}
    iv = loop.smallest_proportion(counts)
    shared = smallest_proportion_interval(counts)
    assert (iv.estimate, iv.low, iv.high) == (shared.estimate, shared.low, shared.high)
    assert iv.n == 38
    assert iv.method == (
        "smallest of 2 (camera, bioacoustic_t); Clopper-Pearson 97.5% each (Bonferroni)"
    )


@pytest.mark.parametrize("p1, p2", [(0.9, 0.6), (0.7, 0.72), (0.5, 0.95), (0.97, 0.97)])
def test_smallest_proportion_covers_the_smaller_true_value_at_95_percent(p1, p2):
    """Exact coverage over every pair of outcomes (k1, k2) of two binomials with n = 20."""
    n = 20
    cover = 0.0
    for k1 in range(n + 1):
        for k2 in range(n + 1):
            iv = loop.smallest_proportion({"a": (k1, n), "b": (k2, n)})
            if iv.low <= min(p1, p2) <= iv.high:
                cover += stats.binom.pmf(k1, n, p1) * stats.binom.pmf(k2, n, p2)
    assert cover >= 0.95


# --- a study with per-policy budgets ------------------------------------------------------------


def test_run_study_stops_a_short_policy_at_its_own_budget():
    pre = replace(CAMERA, n_sites=12, n_units=5)
    st = loop.run_study(
        pre,
        ["random", "top_score"],
        reps=1,
        budget_frac=0.5,
        batch_frac=0.1,
        seed=3,
        budget_fracs={"top_score": 0.2},
    )
    last = st.groupby("policy")["frac_reviewed"].max()
    assert last["random"] == pytest.approx(0.5) and last["top_score"] == pytest.approx(0.2)
    full = loop.run_study(
        pre, ["random", "top_score"], reps=1, budget_frac=0.5, batch_frac=0.1, seed=3
    )
    short = full[(full.policy == "random") | (full.frac_reviewed <= 0.2 + 1e-12)].reset_index(
        drop=True
    )
    pd.testing.assert_frame_equal(
        st.drop(columns="seconds").reset_index(drop=True), short.drop(columns="seconds")
    )
    with pytest.raises(ValueError, match="not among the policies"):
        loop.run_study(
            pre,
            ["random"],
            reps=1,
            budget_frac=0.5,
            batch_frac=0.1,
            seed=3,
            budget_fracs={"acorn": 0.1},
        )
    with pytest.raises(ValueError, match="budget_fracs"):
        loop.run_study(
            pre,
            ["random"],
            reps=1,
            budget_frac=0.5,
            batch_frac=0.1,
            seed=3,
            budget_fracs={"random": 0.6},
        )
