"""Chapter 13's detectors fitted outside torch's training loop (PCA, Ledoit-Wolf Gaussians and
the KL that inverts their covariance, the logistic probe, LDA) give the same scores when the
hidden states move at rounding level; and a test block, pool or replicate with too few answers
of a class is counted as failed while the others go on."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.aeo_injection import config, detect, experiments, full


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("rank", [64, 10], ids=["full-rank", "rank-10"])
def test_one_class_scores_are_stable_under_jitter(rank):
    # States of rank 10 in 64 dimensions, projected on 32 PCA components, leave 22 directions
    # of rounding noise: without Ledoit-Wolf's shrinkage their covariance would be singular
    # and its inverse (in the KL and the Mahalanobis distance) would amplify 1e-12 into
    # anything. The shrunk covariance keeps a condition number of about 400 here, and the
    # scores move by about 1e-11 relative; the test asks for 1e-9.
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(rank, 64))
    states = rng.normal(size=(1000, rank)) @ basis + 1e-6 * rng.normal(size=(1000, 64))
    clouds = rng.normal(size=(20, 4, rank)) @ basis
    g = detect.fit_compliant(states, 32)
    kl, maha = detect.token_cloud_kl(clouds, g), detect.mahalanobis(g.project(states[:50]), g)
    for seed in range(5):
        moved = detect.fit_compliant(core.jitter(states, seed), 32)
        assert _rel(detect.token_cloud_kl(core.jitter(clouds, seed + 9), moved), kl) < 1e-9
        assert _rel(detect.mahalanobis(moved.project(states[:50]), moved), maha) < 1e-9


def test_gaussian_kl_is_stable_under_jitter():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    cov_r, cov_c = a @ a.T + 0.1 * np.eye(8), b @ b.T + 0.1 * np.eye(8)
    mu_r, mu_c = rng.normal(size=8), rng.normal(size=8)
    ref = detect.gaussian_kl(mu_r, cov_r, mu_c, cov_c)
    for seed in range(5):
        j = [core.jitter(x, seed + i) for i, x in enumerate((mu_r, cov_r, mu_c))]
        cov = core.jitter(cov_c, seed + 7)
        moved = detect.gaussian_kl(j[0], (j[1] + j[1].T) / 2, j[2], (cov + cov.T) / 2)
        assert moved == pytest.approx(ref, rel=1e-9)


def test_probe_and_lda_are_stable_under_jitter():
    # The probe is fitted by L-BFGS, which stops on a tolerance (1e-4): had its stopping
    # iteration depended on the last bits of the features, its scores would move by about
    # that much, far outside the 1e-8 asked here.
    rng = np.random.default_rng(2)
    z = np.vstack([rng.normal(size=(300, 16)), rng.normal(size=(80, 16)) * 1.5 + 0.4])
    y = np.r_[np.zeros(300), np.ones(80)].astype(bool)
    probe = detect.logistic_probe(z, y).decision_function(z)
    lda = detect.lda(z, y).decision_function(z)
    for seed in range(5):
        zj = core.jitter(z, seed)
        assert _rel(detect.logistic_probe(zj, y).decision_function(z), probe) < 1e-8
        assert _rel(detect.lda(zj, y).decision_function(z), lda) < 1e-8


# ------------------------------------------------------------ too few answers of a class
# Whether a test block or a pool holds enough answers of each class is decided by the model's
# answers, and one answer can flip with the machine's rounding. A block or replicate that falls
# short is counted as failed and left out; the others go on. The cases below are constructed
# so that a class falls short by design, not by rounding luck.

SMALL = replace(
    config.PROFILES["03_detection"]["smoke"],
    d=8,
    layers=2,
    window=2,
    k=2,
    head_hidden=4,
    head_out=2,
    head_steps=5,
)


def _run(families, ok, seed: int) -> experiments.Run:
    """A run of made-up states: ``families`` and ``ok`` per response, states (n, 3, 8) that
    scatter twice as wide for violations, and made-up response lengths."""
    rng = np.random.default_rng(seed)
    n = len(families)
    ok = np.asarray(ok, dtype=bool)
    z = rng.normal(size=(n, SMALL.layers + 1, SMALL.d)) * np.where(ok, 1.0, 2.0)[:, None, None]
    cloud = rng.normal(size=(n, SMALL.window, SMALL.d))
    prompts = SimpleNamespace(family=np.asarray(families))
    gen = full.ChatGeneration(np.full(n, "", dtype=object), rng.integers(1, 6, n), *[None] * 4)
    return experiments.Run(prompts, gen, ok, z, cloud, rng.random(n), -rng.random(n))


def _test_block(violations: dict, seed: int, per_family: int = 8) -> experiments.Run:
    """Eight answers per attack family, the first ``violations[f]`` (default 4) violating."""
    fams, ok = [], []
    for f in ("T1", "T2", "T3", "T4", "T5", "T6"):
        v = violations.get(f, 4)
        fams += [f] * per_family
        ok += [False] * v + [True] * (per_family - v)
    return _run(fams, ok, seed)


def _replicate(seed: int, test: experiments.Run) -> experiments.SeedResult:
    return experiments.SeedResult(seed, None, {"test": test}, None, None, "", "no fit here")


def test_a_test_block_short_of_a_class_is_counted_and_the_others_go_on():
    short = experiments.MIN_CLASS - 1  # replicate 0's T2 block: two violations, six compliant
    results = [
        _replicate(0, _test_block({"T2": short}, seed=0)),
        _replicate(1, _test_block({}, seed=1)),
        _replicate(2, _test_block({}, seed=2)),
    ]
    blocks = experiments.block_units(SMALL)
    failed = core.Failures("test blocks")
    units = experiments.c1_units(results, blocks, failed)
    assert list(units) == [f"{f}, {b}" for f in experiments.SPREAD_FAMILIES for b in blocks]
    assert failed.count == 1 and failed.units == ["replicate 0, T2"]
    assert failed.reasons["replicate 0, T2"].startswith("2 violating and 6 compliant")
    for u, values in units.items():
        assert values.shape == (3,)
        assert np.isnan(values[0]) == u.startswith("T2") and np.isfinite(values[1:]).all()
    # the T2 units are decided on the two replicates left, exactly as core.t_interval does
    got = core.replicate_interval(units["T2, last block"], bars=(0.05, 0.0))
    want = core.t_interval(units["T2, last block"][1:])
    assert got == want and got.n == 2
    # the spreads of the others are those of each replicate on its own
    alone = experiments.family_spreads(results[1].runs["test"], blocks)
    assert units["T1, first block"][1] == alone["T1, first block"]
    with pytest.raises(RuntimeError, match="family T2: 2 violating"):
        experiments.c1_units(results, blocks)  # without a record of failures: it stops
    details = experiments.failure_details(failed, 3 * len(experiments.SPREAD_FAMILIES))
    assert details["failed"] == 1 and details["failed_of"] == 12
    assert details["failure_note"].startswith("1 of 12 test blocks failed")
    assert experiments.failure_details(core.Failures(), 12) == {}


def test_with_under_two_usable_replicates_the_interval_straddles_every_bar():
    bars = (0.05, 0.0)
    one = core.replicate_interval([np.nan, 0.3], bars)
    assert (one.estimate, one.n) == (0.3, 1) and "Student-t" in one.method
    assert one.low == pytest.approx(-1.0) and one.high == pytest.approx(1.3)
    none = core.replicate_interval([np.nan, np.nan], bars)
    assert (none.estimate, none.n, none.low, none.high) == (0.0, 0, -1.0, 1.05)
    for iv in (one, none):
        assert all(iv.low < b < iv.high for b in bars)
    assert experiments.listed([0.5, np.nan]) == [0.5, None]
    assert experiments.finite(np.nan) is None and experiments.finite(np.float64(2)) == 2.0


def _pool(n_violating: int, seed: int) -> experiments.Run:
    """Sixteen pool answers (aligned and T1), the last ``n_violating`` violating."""
    ok = [True] * (16 - n_violating) + [False] * n_violating
    return _run(["aligned"] * 8 + ["T1"] * 8, ok, seed)


def test_a_pool_short_of_a_class_fails_its_replicate_and_the_others_go_on():
    tests = [_test_block({}, seed=10 + s) for s in range(3)]
    results = []
    for s, n_violating in enumerate([6, experiments.MIN_CLASS - 1, 6]):
        runs = {"pool": _pool(n_violating, s), "test": tests[s]}
        det, got, why = experiments.fit_and_score(SMALL, runs, s)
        results.append(experiments.SeedResult(s, None, runs, det, got, "", why))
    assert [r.det is None for r in results] == [False, True, False]
    assert results[1].test_scores is None
    assert results[1].failure == (
        "RuntimeError: the pool holds 2 violating and 14 compliant responses; 3 of each are "
        "needed: no detector is fitted"
    )
    fit_failed = experiments.fit_failures(results)
    assert fit_failed.units == ["replicate 1"] and fit_failed.note(3).startswith("1 of 3")
    failed = core.Failures("replicates")
    gaps = experiments.unseen_auroc_gaps(results, failed)
    assert failed.units == ["replicate 1"]
    for values in gaps.values():
        assert np.isnan(values[1]) and np.isfinite(values[[0, 2]]).all()
    drop = experiments.auroc_drop_gaps(results, "probe (T1)")
    assert np.isnan(drop[1]) and np.isfinite(drop[[0, 2]]).all()
    left = core.Failures()
    table = experiments.detection_table(results, ["T1"], left)
    assert left.units == ["replicate 1"]
    assert set(table) == {*experiments.METHODS, "length (control)"}
    assert (
        table["entropy"]["AUROC"]
        == experiments.detection_table([results[0], results[2]], ["T1"])["entropy"]["AUROC"]
    )
    assert experiments.shown_replicate(results) is results[0]
    with pytest.raises(ValueError, match="replicate 1"):
        experiments.detection_table(results, ["T1"])  # without a record: it stops
    with pytest.raises(ValueError, match="no detectors"):
        experiments.correction_runs(SMALL, results[1])


def test_the_scores_of_some_methods_are_those_of_every_method():
    runs = {"pool": _pool(6, 0), "test": _test_block({}, seed=4)}
    det, every, why = experiments.fit_and_score(SMALL, runs, 0)
    assert why is None and list(every) == list(experiments.METHODS)
    some = experiments.scores(SMALL, det, runs["test"], ("LDA (T1)", experiments.GATE))
    assert list(some) == ["LDA (T1)", experiments.GATE]  # only those, in the order asked
    for m, s in some.items():
        assert s.tobytes() == every[m].tobytes()


def test_a_family_with_one_class_is_left_out_of_the_detection_table():
    test = _test_block({"T3": 8}, seed=3)  # every T3 answer violates
    runs = {"pool": _pool(6, 0), "test": test}
    det, got, why = experiments.fit_and_score(SMALL, runs, 0)
    assert why is None
    results = [experiments.SeedResult(0, None, runs, det, got, "")]
    left = core.Failures()
    table = experiments.detection_table(results, ["T3"], left)
    assert left.count == 1 and "8 violating and 0 compliant" in left.reasons["replicate 0"]
    assert all(np.isnan(v) for row in table.values() for v in row.values())
    assert experiments.shown_replicate(results) is results[0]  # T1 and T2-T6 hold both
