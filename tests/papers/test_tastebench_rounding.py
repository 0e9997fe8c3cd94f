"""Chapter 06's bootstrap intervals do not depend on the last bits of the values they are made
from: the BCa interval of a metric that sits on a lattice (R@k, pairwise accuracy over a fixed
set of pairs) is the same when the replicates are moved at rounding level, as another machine's
sums would move them."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.tastebench import data, metrics, molecules, ranking


@pytest.fixture(scope="module")
def released_bootstrap():
    """The NNLS row of the main table, bootstrapped as notebook 02 does (fewer resamples)."""
    groups = metrics.groups_from_frame(data.oof(data.MAIN_ROWS["NNLS"][1]))
    return metrics.bootstrap_metrics(
        [t for t, _ in groups],
        {"NNLS": [s for _, s in groups]},
        2000,
        np.random.default_rng(0),
    )


@pytest.mark.parametrize("metric", ["recall_at_1", "recall_at_2", "pairwise_accuracy"])
def test_bca_interval_of_released_scores_is_stable_under_jitter(released_bootstrap, metric):
    # Hundreds of replicates of R@k equal the estimate up to rounding; counted exactly, a
    # relative move of 1e-12 sends some of them below it, which moves the bias correction z0
    # and with it a bound by a lattice step (1/144 and more). This test fails that way when
    # the BCa compares with the estimate exactly (core.stats.BCA_RTOL = 0).
    est = released_bootstrap.point["NNLS"][metric]
    boot = released_bootstrap.boot["NNLS"][metric]
    jack = released_bootstrap.jack["NNLS"][metric]
    ref = core.bca_from_replicates(est, boot, jack)
    for seed in range(8):
        moved = core.bca_from_replicates(
            float(core.jitter(np.array([est]), seed)[0]),
            core.jitter(boot, seed + 100),
            core.jitter(jack, seed + 200),
        )
        assert moved == pytest.approx(ref, abs=1e-9)


def test_bca_interval_with_replicates_at_the_estimate_and_a_flat_jackknife():
    # A quarter of the replicates sit exactly at the estimate and the jackknife is flat: the
    # interval is the percentile interval at the bias correction those ties give. Compared
    # exactly, jittered ties fall below the estimate half the time (z0 moves from about -0.3
    # to 0) and a jittered flat jackknife gets an acceleration from rounding noise: either
    # moves the bounds by about 0.01 here, and the test fails.
    rng = np.random.default_rng(3)
    boot = np.concatenate([rng.normal(0.5, 0.1, 3000), np.full(1000, 0.5)])
    jack = np.full(60, 0.5)
    ref = core.bca_from_replicates(0.5, boot, jack)
    no_ties = core.bca_from_replicates(0.5, boot[:3000], np.linspace(0.4, 0.6, 60))
    assert abs(ref[0] - no_ties[0]) > 0.01  # the ties matter, so moving them would show
    for seed in range(6):
        assert core.bca_from_replicates(0.5, core.jitter(boot, seed), jack) == pytest.approx(
            ref, abs=1e-9
        )
        assert core.bca_from_replicates(0.5, boot, core.jitter(jack, seed)) == pytest.approx(
            ref, abs=1e-9
        )


@pytest.mark.parametrize("fit", [ranking.fit_bradley_terry, ranking.fit_ranksvm])
def test_pairwise_rankers_fit_the_same_weights_on_jittered_features(fit):
    # L-BFGS (Bradley-Terry) and liblinear (RankSVM) stop on a tolerance; a fit whose stopping
    # iteration depended on the last bits of the features would move the weights by about
    # that tolerance (1e-4), far outside the 1e-8 asked here.
    products = ranking.synthetic_products([9] * 12, 16, 0.5, np.random.default_rng(1))
    pairs = ranking.training_pairs(products.category, products.y, 0)
    w = fit(products.x, products.y, pairs)
    for seed in range(5):
        moved = fit(core.jitter(products.x, seed), products.y, pairs)
        assert np.max(np.abs(moved - w)) <= 1e-8 * np.max(np.abs(w))


def test_fingerprint_model_moves_by_at_most_a_molecule_on_jittered_bits():
    # C6b counts the test molecules whose most probable class is right. L-BFGS stops on its
    # gradient tolerance (1e-4), and the rare bits leave directions the loss barely sees, so
    # the coefficients move by 1e-5 to 1e-3 when the bits move by 1e-12 (a tolerance of 1e-8
    # needs 546 iterations on the full split and still moves them by 1e-5). What this allows
    # is a borderline molecule changing class: 1 of 500 here for one seed, none of 2,254 on the
    # full split for three. A fit stopped at the iteration limit, or one that wandered,
    # changes many more, and fails.
    train, test = data.fart_split("train").iloc[:2000], data.fart_split("test").iloc[:500]
    x = molecules.morgan_fingerprints(train.smiles, 2, 512).astype(np.float64)
    x_test = molecules.morgan_fingerprints(test.smiles, 2, 512).astype(np.float32)
    model = molecules.fit_fingerprint_model(x, train.label, 1.0, 300)
    assert model.n_iter_.max() < 300  # converged, not stopped by the limit
    ref = model.predict_proba(x_test).argmax(1)
    for seed in range(3):
        moved = molecules.fit_fingerprint_model(core.jitter(x, seed), train.label, 1.0, 300)
        assert np.sum(moved.predict_proba(x_test).argmax(1) != ref) <= 2
        assert np.max(np.abs(moved.coef_ - model.coef_)) < 1e-2
