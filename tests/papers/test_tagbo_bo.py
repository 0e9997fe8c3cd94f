"""Chapter 09's BO machinery: the discrete argmax, the constrained proposals, the harness."""

import numpy as np
import pytest
import torch
from botorch.acquisition.logei import qLogExpectedImprovement

from reprobook.papers.tagbo import bo, data, experiments, priors, synthetic


def _small_space():
    rng = np.random.default_rng(0)
    grams = []
    for n in (4, 5):
        A = rng.normal(size=(n, 3))
        grams.append(np.exp(-((A[:, None] - A[None]) ** 2).sum(-1)))
    return bo.Space((0, 1), tuple(grams))


def test_discrete_argmax_equals_brute_force():
    space = _small_space()
    pool = np.array([(i, j) for i in range(4) for j in range(5)], dtype=float)  # 20 points
    y = np.sin(pool[:, 0]) + 0.3 * pool[:, 1]
    train = [0, 7, 13, 19]
    X = torch.as_tensor(pool)
    Y = torch.as_tensor(y[train]).unsqueeze(-1)
    tiers = [np.array([1, 2, 3, 3]), np.array([1, 1, 2, 3, 3])]
    model = bo.fit(bo.build_model("tagbo", X[train], Y, space, tiers), 20)
    idx = bo.propose_discrete(model, float(Y.max()), X, np.random.default_rng(3))
    with torch.no_grad():
        a = qLogExpectedImprovement(model, best_f=float(Y.max()))(X.unsqueeze(1)).numpy()
    assert a[idx] == pytest.approx(a.max(), abs=1e-9)


def test_constrained_proposals_are_feasible():
    task = synthetic.make_task(3)
    tiers = [priors.true_tiers(e) for e in task.effects]
    X = synthetic.sample_feasible(task, 6, np.random.default_rng(0))
    y = task.f(X)
    model = bo.fit(
        bo.build_model(
            "tagbo", torch.as_tensor(X), torch.as_tensor(y).unsqueeze(-1), task.space(), tiers
        ),
        20,
    )
    for s in range(2):
        x = synthetic.propose_constrained(model, float(y.max()), task, np.random.default_rng(s))
        assert abs(x[3:6].sum() - 1) <= 1e-6
        assert np.all(x[3:] >= -1e-9) and np.all(x[3:] <= 1 + 1e-9)
        assert np.allclose(x[:3], np.rint(x[:3]))
        assert synthetic.violation(x[None], task.sizes)[0] <= 1e-6


def test_violation_and_optimum():
    task = synthetic.make_task(0)
    X = np.array(
        [
            [0, 0, 0, 0.5, 0.3, 0.2, 0.65],
            [0, 0, 0, 0.5, 0.5, 0.2, 0.65],
            [0.5, 0, 0, 0.5, 0.3, 0.2, 1.2],
        ]
    )
    np.testing.assert_allclose(synthetic.violation(X, task.sizes), [0.0, 0.2, 0.5], atol=1e-12)
    best = [int(np.argmax(e)) for e in task.effects]
    assert task.f(np.array([best + [0.5, 0.3, 0.2, 0.65]]))[0] == pytest.approx(task.optimum)


def test_feasible_samples_lie_on_the_simplex():
    X = synthetic.sample_feasible(synthetic.make_task(1), 50, np.random.default_rng(0))
    np.testing.assert_allclose(X[:, 3:6].sum(1), 1.0, atol=1e-12)
    assert synthetic.violation(X, (6, 5, 4)).max() <= 1e-12


def test_pools_have_the_published_shapes():
    s = data.suzuki_pool(0)
    assert s.sizes == (12, 8, 4) and len(s.y) == 384 and s.y.max() <= 1.0
    b = data.buchwald_pool(1)
    assert b.sizes == (4, 22, 3) and len(b.y) == 264
    assert len({tuple(r) for r in s.X}) == 384  # no duplicate condition


def test_runs_are_deterministic_and_share_the_initial_design():
    pool = data.buchwald_pool(1)
    space = experiments.descriptor_space(pool)
    tiers = experiments.prior_for(pool, space, 0.2, 0, 0)
    a = bo.run_lookup(
        pool.X, pool.y, space, "descriptor", None, 4, 2, seed=0, replicate=0, maxiter=10
    )
    b = bo.run_lookup(
        pool.X, pool.y, space, "descriptor", None, 4, 2, seed=0, replicate=0, maxiter=10
    )
    c = bo.run_lookup(pool.X, pool.y, space, "tagbo", tiers, 4, 2, seed=0, replicate=0, maxiter=10)
    r = bo.run_lookup(pool.X, pool.y, space, "random", None, 4, 5, seed=0, replicate=0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[:4], c[:4])
    np.testing.assert_array_equal(a[:4], r[:4])
    assert len(r) == 9


def test_prior_methods_need_tiers_and_methods_are_checked():
    space = _small_space()
    X, Y = torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="reads a tier prior"):
        bo.build_model("tagbo", X, Y, space)
    with pytest.raises(ValueError, match="method"):
        bo.build_model("unknown", X, Y, space)


def test_the_lookup_benchmark_reads_its_sizes_from_the_notebooks_config():
    from reprobook.papers.tagbo import config

    cfg = config.LookupConfig(
        substrates=(1,),
        methods=("random", "descriptor"),
        n_init=4,
        n_iter=2,
        n_replicates=2,
        refit_every=1,
        maxiter=10,
    )
    df = experiments.lookup_benchmark(cfg, 0, "buchwald", [0.2])
    assert df.method.tolist() == ["random", "descriptor"] * 2
    assert df.replicate.tolist() == [0, 0, 1, 1] and set(df.substrate) == {1}
    pool = data.buchwald_pool(1)
    space = experiments.descriptor_space(pool)
    trace = bo.run_lookup(pool.X, pool.y, space, "descriptor", None, 4, 2, 0, 1, 10, 1)
    np.testing.assert_array_equal(df.curve[3], bo.normalized_best(trace, pool.y.max()))
    only = experiments.lookup_benchmark(cfg, 0, "buchwald", [0.2], methods=("random",))
    assert only.method.tolist() == ["random", "random"]


def test_the_constrained_benchmark_reads_its_settings_from_the_notebooks_config():
    from reprobook.papers.tagbo import config

    cfg = config.ConstrainedConfig(methods=("random",), n_init=3, n_iter=2, n_replicates=2)
    df = experiments.constrained_benchmark(cfg, 0)
    assert df.method.tolist() == ["random", "random"] and df.prior.isna().all()
    task = synthetic.make_task(1, rho=cfg.rho, noise=cfg.noise)
    X, f = synthetic.run_constrained(task, "random", None, 3, 2, 0, 1)
    np.testing.assert_array_equal(df.X[1], X[3:])
    np.testing.assert_array_equal(df.curve[1], np.maximum.accumulate(f) / task.optimum)
