"""Chapter 09 under rounding: the fits, ties and eigenvectors must not depend on the last bits.

Each input is moved with ``core.jitter(x, seed, rel=1e-12)``, about what two BLAS kernels'
sums differ by, and the result must land where the unjittered one does. Each test says what
it would catch.
"""

import numpy as np
import pytest
import torch
from botorch.exceptions.errors import ModelFittingError
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.settings import cholesky_jitter

from reprobook import core
from reprobook.papers.tagbo import bo, experiments, priors, similarity, synthetic

SEEDS = range(5)


@pytest.fixture(scope="module")
def suzuki():
    pool = experiments.load_pool("suzuki", 0)
    return pool, experiments.descriptor_space(pool)


def _fit(method, X, y, space, tiers, maxiter=50):
    model = bo.fit(
        bo.build_model(method, X, torch.as_tensor(y).unsqueeze(-1), space, tiers), maxiter
    )
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with torch.no_grad():
        value = float(mll(model(*model.train_inputs), model.train_targets))
    model.eval()
    return model, value


def _jittered_space(space, seed):
    return bo.Space(space.cat_dims, tuple(core.jitter(G, 100 + seed) for G in space.desc_grams))


@pytest.mark.parametrize("method", ["overlap", "descriptor", "tagbo"])
def test_gp_fit_lands_on_the_same_fit_under_jitter(suzuki, method):
    # Catches a marginal-likelihood fit that fails, or ends in another optimum, when its
    # inputs (the yields, the Tanimoto Grams) move at rounding level: the MLL per point of
    # another optimum differs by far more than 1e-5, its predictions by more than 1e-3.
    pool, space = suzuki
    tiers = experiments.prior_for(pool, space, 0.2, 0, 0)
    X = torch.as_tensor(pool.X, dtype=torch.float64)
    train = np.random.default_rng(11).choice(len(pool.y), 24, replace=False)
    model, value = _fit(method, X[train], pool.y[train], space, tiers)
    assert model.fit_failure is None
    with torch.no_grad():
        pred = model.posterior(X).mean.squeeze(-1).numpy()
    for s in SEEDS:
        y = core.jitter(pool.y[train], s)
        m, v = _fit(method, X[train], y, _jittered_space(space, s), tiers)
        assert m.fit_failure is None
        assert abs(v - value) <= 1e-5
        with torch.no_grad():
            p = m.posterior(X).mean.squeeze(-1).numpy()
        assert np.abs(p - pred).max() <= 1e-3


def _small(method="tagbo"):
    rng = np.random.default_rng(0)
    grams = []
    for n in (4, 5):
        A = rng.normal(size=(n, 3))
        grams.append(np.exp(-((A[:, None] - A[None]) ** 2).sum(-1)))
    space = bo.Space((0, 1), tuple(grams))
    pool = np.array([(i, j) for i in range(4) for j in range(5)], dtype=float)
    y = np.sin(pool[:, 0]) + 0.3 * pool[:, 1]
    tiers = [np.array([1, 2, 3, 3]), np.array([1, 1, 2, 3, 3])]
    return space, pool, y, tiers


def test_fit_retries_with_a_larger_jitter_then_keeps_its_start(monkeypatch):
    space, pool, y, tiers = _small()
    X, Y = torch.as_tensor(pool[:6]), torch.as_tensor(y[:6]).unsqueeze(-1)
    real = bo.fit_gpytorch_mll
    seen = []

    def fails_once(mll, **kw):
        seen.append(cholesky_jitter.value(torch.float64))
        if len(seen) == 1:
            raise ModelFittingError("All attempts to fit the model have failed.")
        return real(mll, **kw)

    monkeypatch.setattr(bo, "fit_gpytorch_mll", fails_once)
    model = bo.fit(bo.build_model("tagbo", X, Y, space, tiers), 20)
    assert model.fit_failure is None
    assert seen[0] == 1e-8 and seen[1] == bo.JITTERS[1]  # the retry had the larger jitter

    def always_fails(mll, **kw):
        with torch.no_grad():  # what a failed optimiser may leave behind
            mll.model.covar_module.raw_outputscale.fill_(float("nan"))
        raise ModelFittingError("All attempts to fit the model have failed.")

    monkeypatch.setattr(bo, "fit_gpytorch_mll", always_fails)
    fresh = bo.build_model("tagbo", X, Y, space, tiers)
    start = {k: v.clone() for k, v in fresh.state_dict().items()}
    model = bo.fit(fresh, 20)
    assert "ModelFittingError" in model.fit_failure
    for k, v in model.state_dict().items():  # the start's hyper-parameters, not the NaN
        torch.testing.assert_close(v, start[k])


def test_a_run_whose_fits_all_fail_finishes_and_counts_them(monkeypatch):
    space, pool, y, tiers = _small()

    def always_fails(mll, **kw):
        raise ModelFittingError("All attempts to fit the model have failed.")

    monkeypatch.setattr(bo, "fit_gpytorch_mll", always_fails)
    failed = core.Failures("steps")
    trace = bo.run_lookup(pool, y, space, "tagbo", tiers, 4, 5, 0, 0, 10, 2, failed)
    assert trace.shape == (9,)
    assert failed.count == 3  # steps 0, 2 and 4 refit; every refit failed
    assert failed.note(3).startswith("3 of 3 steps failed")


def test_best_first_ties_to_rounding_go_by_position():
    np.testing.assert_array_equal(bo.best_first([3.0, 1.0, 2.0]), [0, 2, 1])
    v = np.array([0.5, 1.0, 1.0 + 1e-15, -2.0, 1.0 - 2e-15, np.nan])
    np.testing.assert_array_equal(bo.best_first(v), [1, 2, 4, 0, 3, 5])
    # catches an argmax that follows the last bits: every jitter keeps the same order
    for s in SEEDS:
        np.testing.assert_array_equal(bo.best_first(core.jitter(v[:5], s)), [1, 2, 4, 0, 3])
    assert bo.best_first([1.0, 1.0 + 1e-6])[0] == 1  # a real difference still counts
    assert bo.best_first([-np.inf, -np.inf, 0.0]).tolist() == [2, 0, 1]


def _noisy_qlogei(seed):
    """qLogEI with rounding-level noise on its values, as another machine's kernels give."""
    real, rng = bo.qLogExpectedImprovement, np.random.default_rng(seed)

    def make(model, best_f):
        acq = real(model, best_f=best_f)
        return lambda X: acq(X) * (1 + 1e-13 * torch.as_tensor(rng.uniform(-1, 1, len(X))))

    return make


def test_discrete_proposal_ignores_rounding_noise_in_the_acquisition(monkeypatch):
    # The overlap GP cannot tell apart the levels it has not seen: many rows tie. Catches a
    # proposal that breaks such ties by the last bits instead of the shuffled order (the old
    # plain argmax picks a different row for most noise seeds).
    space, pool, y, tiers = _small()
    train = [0, 7, 13]
    X, Y = torch.as_tensor(pool), torch.as_tensor(y[train]).unsqueeze(-1)
    model = bo.fit(bo.build_model("overlap", X[train], Y, space), 20)
    with torch.no_grad():
        a = bo.qLogExpectedImprovement(model, best_f=float(Y.max()))(X.unsqueeze(1)).numpy()
    assert np.sum(a >= a.max() - 1e-9 * max(1, abs(a.max()))) > 1  # there are ties to break
    ref = bo.propose_discrete(model, float(Y.max()), X, np.random.default_rng(3))
    for s in SEEDS:
        with monkeypatch.context() as m:
            m.setattr(bo, "qLogExpectedImprovement", _noisy_qlogei(s))
            assert bo.propose_discrete(model, float(Y.max()), X, np.random.default_rng(3)) == ref


def test_lookup_run_is_the_same_under_jitter(suzuki):
    # A short TagBO run on the Suzuki pool: the yields it evaluates, in order, must not change
    # when the yields and Grams move at rounding level (fits, argmaxes and tie-breaks alike).
    pool, space = suzuki
    tiers = experiments.prior_for(pool, space, 0.2, 0, 1)
    ref = bo.run_lookup(pool.X, pool.y, space, "tagbo", tiers, 5, 4, 0, 1, 30, 2)
    for s in range(3):
        trace = bo.run_lookup(
            pool.X, core.jitter(pool.y, s), _jittered_space(space, s), "tagbo", tiers,
            5, 4, 0, 1, 30, 2,
        )  # fmt: skip
        np.testing.assert_allclose(trace, ref, rtol=1e-11)


def test_parroting_tiers_do_not_depend_on_rounding(suzuki):
    # The leading eigenvector's entries sum to zero, so the old sign rule (the sign of that
    # sum) flipped the tiers with the last bits; this catches any such rule.
    pool, space = suzuki
    for G in space.desc_grams:
        ref = priors.parroting_tiers(G)
        for s in range(10):
            np.testing.assert_array_equal(priors.parroting_tiers(core.jitter(G, s)), ref)
        # the sign rule: the level with the largest |entry| is made positive (top tier)
        n = len(G)
        H = np.eye(n) - 1.0 / n
        v = np.linalg.eigh(H @ G @ H)[1][:, -1]
        assert ref[np.argmax(np.abs(v))] == priors.N_TIERS


def test_parroting_tiers_refuse_a_repeated_leading_eigenvalue():
    G = np.eye(4)  # centred: eigenvalue 1 three times
    with pytest.raises(core.checks.InputError, match="repeated leading eigenvalue"):
        priors.parroting_tiers(G)


def test_true_tiers_treat_rounding_level_differences_as_ties():
    # The tied pair 0.2 sits on the boundary between tiers 1 and 2, so its order decides a
    # tier: exact comparison (the old rule) puts level 2 in tier 1 when its score is 1e-15
    # lower, and follows the jitter's sign on the jittered copies.
    exact = np.array([0.1, 0.2, 0.2, 0.3, 0.4, 0.5])
    want = [1, 1, 2, 2, 3, 3]
    np.testing.assert_array_equal(priors.true_tiers(exact), want)
    np.testing.assert_array_equal(priors.true_tiers(exact * [1, 1, 1 - 1e-15, 1, 1, 1]), want)
    for seed in SEEDS:
        np.testing.assert_array_equal(priors.true_tiers(core.jitter(exact, seed)), want)


def test_a_dense_run_of_values_does_not_chain_into_one_tie():
    # 100 values 5e-10 apart (each within the 1e-9 tie width of its neighbour, but 5e-8 from
    # end to end): the pick is within the tie width of the largest (the first index among
    # those, 97), not index 0 of a chained run.
    v = 1.0 + 5e-10 * np.arange(100)
    assert bo.best_first(v)[0] == 97  # 97, 98 and 99 lie within 1e-9 of the largest
    groups = core.tie_groups(v[::-1], 1e-9)
    assert groups.max() >= 30  # runs of at most three values, never one long tie
    # scores falling 6e-10 apart: neighbours tie (pairs, ordered by index), but a chained tie
    # would order all nine by index and reverse the tiers
    tiers = priors.true_tiers(1.0 + 6e-10 * np.arange(9)[::-1])
    assert tiers[0] == 3 and tiers[-1] == 1
    assert np.abs(tiers - np.array([3, 3, 3, 2, 2, 2, 1, 1, 1])).max() <= 1


@pytest.mark.parametrize("tiers", [[1, 1, 1, 2, 2, 3], [2, 2, 2, 2, 1]])
def test_diffusion_gram_is_basis_free_under_jitter(tiers):
    # Tier graphs have repeated Laplacian eigenvalues, so eigh's eigenvectors inside an
    # eigenspace are arbitrary; exp(-beta L) must not depend on them. Catches a Gram built
    # from individual eigenvectors (a truncation, a sign convention).
    L = similarity.normalized_laplacian(similarity.tier_graph(tiers))
    lam = np.linalg.eigvalsh(L)
    assert np.min(np.diff(lam)) < 1e-12  # there is a degenerate eigenspace
    K = similarity.diffusion_gram(L, 1.3)
    for s in SEEDS:
        np.testing.assert_allclose(similarity.diffusion_gram(core.jitter(L, s), 1.3), K, atol=1e-10)


def test_slsqp_failure_keeps_the_best_screened_point(monkeypatch):
    # Catches a constrained proposal that passes on an SLSQP result off the simplex (or an
    # SLSQP error) instead of falling back to a feasible point.
    task = synthetic.make_task(3)
    tiers = [priors.true_tiers(e) for e in task.effects]
    X = synthetic.sample_feasible(task, 6, np.random.default_rng(0))
    y = task.f(X)
    Xt, Y = torch.as_tensor(X), torch.as_tensor(y).unsqueeze(-1)
    model = bo.fit(bo.build_model("tagbo", Xt, Y, task.space(), tiers), 20)
    for broken in ("raise", "off"):

        def fake(acq, bounds, q, num_restarts, equality_constraints, fixed_features,
                 batch_initial_conditions, broken=broken):  # fmt: skip
            if broken == "raise":
                raise RuntimeError("f_np_wrapper raised: NaN")
            x = batch_initial_conditions[0].clone()
            x[0, 3] += 0.01  # off the simplex
            with torch.no_grad():
                return x, acq(x.unsqueeze(0))

        monkeypatch.setattr(synthetic, "optimize_acqf", fake)
        failed = core.Failures("SLSQP runs")
        x = synthetic.propose_constrained(
            model, float(y.max()), task, np.random.default_rng(5), top_k=2, failures=failed
        )
        assert failed.count == 2
        assert synthetic.violation(x[None], task.sizes)[0] <= 1e-12


def test_constrained_proposal_is_the_same_under_jitter():
    # The fit on rounding-level moved data, then the screen and SLSQP: the same levels, and
    # a continuous part within 1e-4. Catches a screen whose top combination follows the last
    # bits, or a fit or SLSQP run that lands elsewhere.
    task = synthetic.make_task(3)
    tiers = [priors.true_tiers(e) for e in task.effects]
    X = synthetic.sample_feasible(task, 8, np.random.default_rng(0))
    y = task.f(X)

    def propose(yy):
        m = bo.fit(bo.build_model("tagbo", torch.as_tensor(X), torch.as_tensor(yy).unsqueeze(-1),
                                  task.space(), tiers), 30)  # fmt: skip
        return synthetic.propose_constrained(m, float(yy.max()), task, np.random.default_rng(7))

    ref = propose(y)
    for s in range(3):
        x = propose(core.jitter(y, s))
        np.testing.assert_array_equal(x[:3], ref[:3])
        np.testing.assert_allclose(x[3:], ref[3:], atol=1e-4)
