"""Exact properties of chapter 06's library (TasteBench): the ranking metrics and their
bootstrap, the panel statistics, LOOCV, and the molecular scores."""

import itertools

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reprobook import core
from reprobook.papers.tastebench import config, data, metrics, molecules, panel, ranking

# --- ranking metrics -------------------------------------------------------------------------


def test_pairwise_accuracy_counts_ties_in_truth_and_prediction_as_half():
    truth = np.array([1.0, 2.0, 2.0, 3.0])
    score = np.array([0.0, 1.0, 5.0, 1.0])
    # pairs: (0,1) right, (0,2) right, (0,3) right, (1,2) truth tie -> 1/2,
    # (1,3) score tie -> 1/2, (2,3) wrong
    assert metrics.pair_scores(truth, score).tolist() == [1, 1, 1, 0.5, 0.5, 0]
    groups = [(truth, score), (np.array([1.0, 2.0]), np.array([2.0, 1.0]))]
    assert metrics.pairwise_accuracy(groups) == pytest.approx(4 / 7)


def test_pairwise_accuracy_treats_float_noise_as_a_tie_but_rank_correlations_do_not():
    groups = [(np.array([1.0, 2.0, 3.0]), np.array([0.3, 0.3 + 6e-17, 0.9]))]
    assert metrics.pairwise_accuracy(groups) == pytest.approx(2.5 / 3)
    assert metrics.weighted_spearman(groups) == pytest.approx(1.0)  # raw values: no tie
    assert metrics.weighted_kendall(groups) == pytest.approx(1.0)
    snapped = [(t, metrics.snap_ties(s, 1e-16)) for t, s in groups]
    assert metrics.weighted_spearman(snapped) == pytest.approx(
        stats.spearmanr([1, 2, 3], [0, 0, 1])[0]
    )


def _brute_recall(truth, score, k):
    """R@k averaged over every order of the ties in the truth and in the score."""
    n = len(truth)
    hits, orders = 0.0, 0
    for pt in itertools.permutations(range(n)):
        if any(truth[pt[i]] < truth[pt[i + 1]] for i in range(n - 1)):
            continue  # not a tie-breaking of the truth's order (descending)
        for ps in itertools.permutations(range(n)):
            if any(score[ps[i]] < score[ps[i + 1]] for i in range(n - 1)):
                continue
            hits += pt[0] in ps[:k]
            orders += 1
    return hits / orders


@pytest.mark.parametrize("seed", range(12))
def test_recall_at_k_equals_the_average_over_tie_orders(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    truth = rng.integers(0, 3, n).astype(float)
    score = rng.integers(0, 3, n).astype(float)
    for k in (1, 2, 3):
        got = metrics.recall_at_k([(truth, score)], k)
        assert got == pytest.approx(_brute_recall(truth, score, k), abs=1e-12)


def test_random_ranker_recall_is_the_mean_of_min_k_n_over_n():
    sizes = [5, 10, 18, 2]
    row = metrics.random_ranker(sizes)
    for k in (1, 2, 3):
        assert row[f"recall_at_{k}"] == pytest.approx(np.mean([min(k, n) / n for n in sizes]))
    # and it is what a ranker that ties everything scores
    groups = [(np.arange(n, dtype=float), np.zeros(n)) for n in sizes]
    for k in (1, 2, 3):
        assert metrics.recall_at_k(groups, k) == pytest.approx(row[f"recall_at_{k}"])
    assert metrics.pairwise_accuracy(groups) == 0.5
    with pytest.raises(ValueError, match="sizes"):
        metrics.random_ranker([1, 4])


def test_weighted_correlations_match_scipy_per_group():
    rng = np.random.default_rng(3)
    groups = [(rng.normal(size=n), rng.integers(0, 4, n).astype(float)) for n in (5, 9, 14)]
    rho = [stats.spearmanr(t, s).statistic for t, s in groups]
    tau = [stats.kendalltau(t, s).statistic for t, s in groups]
    w = [5, 9, 14]
    assert metrics.weighted_spearman(groups) == pytest.approx(np.average(rho, weights=w))
    assert metrics.weighted_kendall(groups) == pytest.approx(np.average(tau, weights=w))


def test_bca_is_the_percentile_interval_without_bias_or_acceleration():
    boot = np.linspace(-1, 1, 1001)  # symmetric: half the replicates lie below 0
    boot = boot[boot != 0]
    jack = np.array([1.0, -1.0, 1.0, -1.0])  # no skew: acceleration 0

    def result(estimate):
        return metrics.BootstrapResult(
            {"m": {"x": estimate}}, {"m": {"x": boot}}, {"m": {"x": jack}}
        )

    low, high = result(0.0).interval("m", "x")
    assert (low, high) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))
    assert (low, high) == core.bca_from_replicates(0.0, boot, jack)  # the core's BCa
    # a bias moves it: the estimate sits at the 30th percentile
    low2, _ = result(float(np.quantile(boot, 0.3))).interval("m", "x")
    assert low2 < low


def test_bootstrap_keeps_category_sizes_and_pairs_models():
    rng = np.random.default_rng(0)
    truth = [rng.normal(size=n) for n in (5, 7)]
    scores = {"a": [t + rng.normal(size=t.size) for t in truth]}
    scores["b"] = scores["a"]  # the same model twice: every paired difference is 0
    res = metrics.bootstrap_metrics(truth, scores, 200, np.random.default_rng(1))
    assert res.boot["a"]["pairwise_accuracy"].shape == (200,)
    assert res.jack["a"]["pairwise_accuracy"].shape == (12,)
    assert res.point["a"] == pytest.approx(metrics.ranking_metrics(list(zip(truth, scores["a"]))))
    est, low, high = res.difference("a", "b", "spearman")
    assert est == low == high == 0
    # a jackknife value is the metric without one product
    loo = metrics.pairwise_accuracy(
        [(truth[0][1:], scores["a"][0][1:]), (truth[1], scores["a"][1])]
    )
    assert res.jack["a"]["pairwise_accuracy"][0] == pytest.approx(loo)


# --- panel statistics ------------------------------------------------------------------------


def test_alpha_is_one_for_identical_raters_and_matches_the_krippendorff_package():
    same = np.tile([1.0, 4.0, 2.0, 7.0, 5.0], (6, 1))
    assert panel.ordinal_alpha(same) == 1.0
    rng = np.random.default_rng(0)
    for _ in range(40):
        x = rng.integers(1, 8, size=(int(rng.integers(2, 9)), int(rng.integers(2, 6))))
        x = x.astype(float)
        x[rng.random(x.shape) < 0.15] = np.nan
        if np.isfinite(x).sum(0).max() < 2 or np.unique(x[np.isfinite(x)]).size < 2:
            continue
        ref = krippendorff.alpha(reliability_data=x, level_of_measurement="ordinal")
        assert panel.ordinal_alpha(x) == pytest.approx(ref, abs=1e-12)


def test_kendall_w_and_split_half_are_one_for_identical_raters():
    same = np.tile([1.0, 4.0, 2.0, 7.0, 5.0], (8, 1))
    assert panel.kendall_w(same) == pytest.approx(1.0)
    ties = np.tile([1.0, 1.0, 3.0, 6.0], (5, 1))  # tied ratings: the correction keeps W = 1
    assert panel.kendall_w(ties) == pytest.approx(1.0)
    halves = panel.split_half([same, same[:5, :3]], 20, np.random.default_rng(0))
    assert np.all(halves == 1.0)
    assert np.all(panel.loo_accuracy(same) == 1.0)


def test_kendall_w_is_zero_for_opposed_raters():
    assert panel.kendall_w(np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])) == pytest.approx(0.0)


def test_k_star_interpolates_a_piecewise_linear_curve():
    ks = np.array([1, 2, 3, 4])
    curve = np.array([0.60, 0.64, 0.70, 0.74])
    assert panel.k_star(ks, curve, 0.67) == pytest.approx(2.5)
    assert panel.k_star(ks, curve, 0.64) == pytest.approx(2.0)
    assert panel.k_star(ks, curve, 0.5) == 1.0
    assert panel.k_star(ks, curve, 0.9) == np.inf
    with pytest.raises(ValueError, match="increasing"):
        panel.k_star([2, 1, 3, 4], curve, 0.6)


def test_calibration_reaches_the_target_alpha():
    latent = panel.draw_latent([(60, 5)] * 6, np.random.default_rng(0))
    se, alpha = panel.calibrate_noise(latent, 0.1, 0.5, 0.8, n_steps=14)
    assert alpha == pytest.approx(0.1, abs=0.01)
    blocks = panel.ratings(latent, 0.5, 0.8, se)
    assert all(b.min() >= 1 and b.max() <= 7 and np.all(b == np.round(b)) for b in blocks)


# --- LOOCV -----------------------------------------------------------------------------------


def test_loocv_never_trains_on_a_pair_holding_the_held_out_product():
    cat = np.array([0, 0, 0, 1, 1, 1, 1])
    y = np.array([1.0, 2.0, 2.0, 3.0, 1.0, 0.0, 5.0])
    for held in range(cat.size):
        pairs = ranking.training_pairs(cat, y, held)
        assert not np.any(pairs == held)
        assert np.all(cat[pairs[:, 0]] == cat[pairs[:, 1]])
        assert np.all(y[pairs[:, 0]] != y[pairs[:, 1]])  # tied pairs carry no winner
    # products 1 and 2 tie; leaving out 0 leaves no usable pair in category 0
    assert not np.any(np.isin(ranking.training_pairs(cat, y, 0), [0, 1, 2]))


def test_loocv_scores_each_product_with_a_model_that_never_saw_it(monkeypatch):
    p = ranking.synthetic_products([5, 6], 3, 0.5, np.random.default_rng(1))
    seen = []
    real = ranking.fit_bradley_terry

    def spy(x, y, pairs, c=1.0):
        seen.append(np.asarray(pairs))
        return real(x, y, pairs, c)

    monkeypatch.setattr(ranking, "fit_bradley_terry", spy)
    ranking.loocv_scores(p, "Bradley-Terry")
    assert len(seen) == 11
    for held, pairs in enumerate(seen):
        assert pairs.size and not np.any(pairs == held)


def test_bradley_terry_is_unchanged_by_a_constant_feature_shift():
    p = ranking.synthetic_products([6, 8], 4, 0.5, np.random.default_rng(2))
    pairs = ranking.training_pairs(p.category, p.y, 0)
    w = ranking.fit_bradley_terry(p.x, p.y, pairs)
    w_shift = ranking.fit_bradley_terry(p.x + np.array([3.0, -1.0, 0.5, 7.0]), p.y, pairs)
    assert w_shift == pytest.approx(w, abs=1e-8)


def test_loocv_scores_recover_a_noiseless_ranking():
    p = ranking.synthetic_products([8, 8, 8], 3, 1.0, np.random.default_rng(4))
    for model in ranking.MODELS:
        s = ranking.loocv_scores(p, model, c=100.0, alpha=1e-3)
        groups = [(p.y[p.category == c], s[p.category == c]) for c in range(3)]
        assert metrics.pairwise_accuracy(groups) > 0.9, model


# --- molecules -------------------------------------------------------------------------------


def test_mcnemar_matches_the_continuity_corrected_formula():
    y = np.zeros(40, dtype=int)
    a = np.where(np.arange(40) < 30, 0, 1)  # right on 30
    b = np.where((np.arange(40) < 20) | (np.arange(40) >= 36), 0, 1)  # right on 24
    res = molecules.mcnemar(y, a, b)
    only_a, only_b = 10, 4
    assert (res["only_a"], res["only_b"]) == (only_a, only_b)
    chi2 = (abs(only_a - only_b) - 1) ** 2 / (only_a + only_b)
    assert res["chi2"] == pytest.approx(chi2)
    assert res["p"] == pytest.approx(stats.chi2.sf(chi2, 1))


def test_classification_scores_agree_with_torchmetrics():
    import torch
    from torchmetrics.classification import MulticlassAUROC, MulticlassF1Score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, 300)
    proba = rng.dirichlet(np.ones(5), 300)
    proba[np.arange(300), y] += 0.5
    proba /= proba.sum(1, keepdims=True)
    s = molecules.classification_scores(y, proba.argmax(1), proba)
    f1 = MulticlassF1Score(5, average="macro")(torch.tensor(proba), torch.tensor(y))
    auroc = MulticlassAUROC(5, average="macro")(torch.tensor(proba), torch.tensor(y))
    assert s["f1"] == pytest.approx(float(f1), abs=1e-6)
    assert s["auroc"] == pytest.approx(float(auroc), abs=1e-6)


def test_morgan_fingerprints_are_bits_and_bad_smiles_are_named():
    fp = molecules.morgan_fingerprints(["CCO", "c1ccccc1O"], n_bits=64)
    assert fp.shape == (2, 64) and set(np.unique(fp)) <= {0, 1} and fp.sum() > 0
    with pytest.raises(ValueError, match="not-a-molecule"):
        molecules.morgan_fingerprints(["not-a-molecule"])


def test_dmpnn_is_invariant_to_the_order_of_atoms_and_molecules():
    import torch

    from reprobook.papers.tastebench import dmpnn

    torch.manual_seed(0)
    model = dmpnn.DMPNN(hidden=16, depth=3).eval()
    graphs = [dmpnn.featurize(s) for s in ("CC(=O)O", "c1ccccc1N", "[Na+].[Cl-]")]
    same = [dmpnn.featurize(s) for s in ("OC(C)=O", "Nc1ccccc1", "[Cl-].[Na+]")]
    p = dmpnn.predict_proba(model, graphs)
    assert p.shape == (3, 5) and np.allclose(p.sum(1), 1)
    assert np.allclose(dmpnn.predict_proba(model, same), p, atol=1e-6)
    assert np.allclose(dmpnn.predict_proba(model, graphs[::-1]), p[::-1], atol=1e-6)


def test_class_weights_have_mean_one_over_the_training_molecules():
    from reprobook.papers.tastebench import dmpnn

    y = np.array([0] * 8 + [1] * 2 + [2] * 1)
    for weighting in dmpnn.WEIGHTINGS:
        w = dmpnn.class_weights(y, 3, weighting)
        assert w[y].mean() == pytest.approx(1.0)
    inv = dmpnn.class_weights(y, 3, "inverse")
    assert inv[2] / inv[0] == pytest.approx(8.0)
    missing = dmpnn.class_weights(np.array([0, 0, 0, 1]), 3, "inverse")  # no class 2
    assert missing[2] == missing[1] > missing[0]
    with pytest.raises(ValueError, match="class indices"):
        dmpnn.class_weights(np.array([0, 3]), 3, "none")


# --- data and profiles -----------------------------------------------------------------------


def test_dmpnn_training_is_deterministic_and_stops_at_its_epochs():
    pytest.importorskip("rdkit")
    from reprobook.papers.tastebench import dmpnn

    smiles = ["CC(=O)O", "c1ccccc1N", "CCO", "CCCC", "OCC(O)CO", "c1ccccc1O", "CC(C)O", "CCN"]
    graphs = [dmpnn.featurize(x) for x in smiles * 3]
    labels = np.arange(len(graphs)) % 3
    train, val = (graphs[:16], labels[:16]), (graphs[16:], labels[16:])
    s = dmpnn.TrainSettings(hidden=8, dropout=0.2, batch_size=5, max_epochs=3, seed=4)
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, hist_a = dmpnn.train_dmpnn(train, val, s, n_classes=3)
        b, hist_b = dmpnn.train_dmpnn(train, val, s, n_classes=3)
    finally:
        torch.set_num_threads(threads)
    assert hist_a["epochs"] == 3 and hist_a == hist_b
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


def test_the_data_are_found_from_the_book_root_and_the_tables_parse():
    assert data.data_dir() == core.book_root() / "data" / "tastebench"
    table = data.main_table()
    assert set(table.row) == set(data.MAIN_ROWS) | {"Random"}
    assert len(table) == 13 * 6
    assert len(data.feature_ablation()) == 105 and len(data.llm_ablation()) == 14
    assert len(data.molecular_per_class()) == 40
    for name in [f for _, f in data.MAIN_ROWS.values()]:
        assert name in data.oof_names()
    for model in data.FEATURE_MODELS:
        for subset in data.SUBSETS:
            assert data.feature_ablation_file(model, subset) in data.oof_names()
    frame = data.oof("nested_bt_gemini_nnls")
    assert isinstance(frame, pd.DataFrame) and len(frame) == 215


def test_profiles_resolve():
    assert list(config.PROFILES) == ["01_noisy_taste", "02_ranking", "03_molecules"]
    for name in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, name, "reduced")
        full = core.resolve_notebook(config.PROFILES, name, "full")
        assert type(reduced) is type(full)
    full = core.resolve_notebook(config.PROFILES, "03_molecules", "full")
    assert len(full.depths) * len(full.dropouts) * len(full.weightings) == 12
    smoke = core.resolve_notebook(config.PROFILES, "03_molecules", "smoke")
    assert smoke.gnn_decides and smoke.gnn_seeds >= 2  # the D-MPNN over seeds decides C6b
    assert smoke.n_train is smoke.n_val is None  # every molecule, as at full
    assert (
        core.resolve_notebook(config.PROFILES, "02_ranking", "reduced", n_resamples=50).n_resamples
        == 50
    )
