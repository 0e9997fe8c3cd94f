"""Tests of reprobook.papers.acorn_occupancy.nuts: the jax log posterior and NUTS.

The jax log posterior and its autodiff gradient against the NumPy likelihood and its closed-form
gradient; a short NUTS run that is reproducible under a seed and agrees with the Laplace
approximation of fit_map on a small survey; multi-chain shapes and diagnostics; errors on bad input;
and no jax import at package import.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import expit

from reprobook.papers.acorn_occupancy import (
    CAMERA,
    Preset,
    fit_map,
    grad_log_posterior,
    log_posterior,
    pack_params,
    simulate,
)
from reprobook.papers.acorn_occupancy.likelihood import PARAM_NAMES, _log_sigmoids, _logaddexp
from reprobook.papers.acorn_occupancy.nuts import (
    NutsResult,
    laplace_against_nuts,
    log_posterior_jax,
    make_nuts_data,
    random_reviews,
    run_nuts,
)

jax = pytest.importorskip("jax")


def mixed_case(seed: int, n: int = 12, k: int = 5):
    """A small survey with overlapping scores and reviewed positives, reviewed negatives and
    unreviewed units (and one site with every unit reviewed)."""
    rng = np.random.default_rng(seed)
    preset = Preset(
        n_sites=n,
        n_units=k,
        beta=(0.2, 0.9),
        alpha=(-0.3, 0.5),
        mu0=-1.0,
        sigma0=0.8,
        mu1=0.5,
        sigma1=1.3,
    )
    sv = simulate(preset, rng)
    reviewed = rng.random((n, k)) < 0.4
    labels = rng.integers(0, 2, (n, k))  # arbitrary labels, also at unreviewed units (ignored)
    reviewed[0, :2], labels[0, :2] = True, [1, 0]
    reviewed[1, :], labels[1, :] = True, 0
    reviewed[2, :] = False
    assert (
        (reviewed & (labels == 1)).any() and (reviewed & (labels == 0)).any() and (~reviewed).any()
    )
    return sv, reviewed, labels, rng


def random_params(rng) -> np.ndarray:
    return pack_params(
        rng.normal(0, 1, 2),
        rng.normal(0, 1, 2),
        rng.normal(-1, 0.5),
        float(np.exp(rng.normal(0, 0.3))),
        rng.normal(1, 0.5) + 2.5,
        float(np.exp(rng.normal(0, 0.3))),
    )


def test_log_posterior_jax_equals_numpy():
    sv, reviewed, labels, rng = mixed_case(0)
    data = make_nuts_data(sv, reviewed, labels)
    assert data.s.dtype == np.float64 and data.reviewed.dtype == np.float64
    jitted = jax.jit(log_posterior_jax)
    for _ in range(6):
        u = random_params(rng)
        want = log_posterior(u, sv, reviewed, labels)
        np.testing.assert_allclose(float(log_posterior_jax(u, data)), want, rtol=1e-9)
        np.testing.assert_allclose(float(jitted(u, data)), want, rtol=1e-9)


def test_elementwise_helpers_agree_in_jax_and_numpy():
    """The log-sigmoids and logaddexp that _parts_xp calls in both namespaces: jax.numpy gives
    NumPy's values (and jax.nn's), also at the extremes, and autodiff gives their derivatives,
    also at the kinks (v = 0, a = b)."""
    from reprobook.papers.acorn_occupancy.nuts import _jax

    _jax()  # float64
    jnp = jax.numpy
    ends = [-800.0, -0.0, 0.0, 800.0, -np.inf, np.inf, np.nan]
    v = np.concatenate([np.linspace(-40, 40, 801), ends])
    for got, want in zip(_log_sigmoids(jnp, jnp.asarray(v)), _log_sigmoids(np, v)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        np.asarray(_log_sigmoids(jnp, jnp.asarray(v))[0]),
        np.asarray(jax.nn.log_sigmoid(jnp.asarray(v))),
        rtol=1e-14,
        atol=0,
    )
    a, b = (g.ravel() for g in np.meshgrid(v[::40], v[::40]))
    np.testing.assert_allclose(
        np.asarray(_logaddexp(jnp, jnp.asarray(a), jnp.asarray(b))),
        _logaddexp(np, a, b),
        rtol=1e-14,
        atol=1e-14,
    )
    w = jnp.asarray(v[:-3])  # finite
    d_lo = jax.vmap(jax.grad(lambda t: _log_sigmoids(jnp, t)[0]))(w)
    d_hi = jax.vmap(jax.grad(lambda t: _log_sigmoids(jnp, t)[1]))(w)
    np.testing.assert_allclose(np.asarray(d_lo), expit(-v[:-3]), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.asarray(d_hi), -expit(v[:-3]), rtol=1e-12, atol=1e-300)
    for x, y in [(1.5, 1.5), (2.0, -1.0), (-3.0, 0.5)]:
        da, db = jax.grad(lambda p, q: _logaddexp(jnp, p, q), argnums=(0, 1))(x, y)
        np.testing.assert_allclose([float(da), float(db)], [expit(x - y), expit(y - x)])


def test_jax_gradient_equals_closed_form():
    sv, reviewed, labels, rng = mixed_case(1, n=15, k=6)
    data = make_nuts_data(sv, reviewed, labels)
    grad = jax.jit(jax.grad(log_posterior_jax))
    for _ in range(6):
        u = random_params(rng)
        g = np.asarray(grad(u, data))
        assert np.all(np.isfinite(g))  # also at sites with a reviewed positive (B_i = -inf)
        np.testing.assert_allclose(
            g, grad_log_posterior(u, sv, reviewed, labels)[1], rtol=1e-8, atol=1e-8
        )


@pytest.fixture(scope="module")
def small_survey():
    sv = simulate(replace(CAMERA, n_sites=40, n_units=8), np.random.default_rng(0))
    reviewed = np.random.default_rng(100).random(sv.s.shape) < 0.15
    return sv, reviewed, sv.y


def test_nuts_is_reproducible_and_agrees_with_laplace(small_survey):
    sv, reviewed, labels = small_survey
    fit = fit_map(sv, reviewed, labels)
    kw = dict(num_warmup=200, num_samples=200, seed=3, init=fit.params)
    a = run_nuts(sv, reviewed, labels, **kw)
    b = run_nuts(sv, reviewed, labels, **kw)
    np.testing.assert_array_equal(a.draws, b.draws)
    assert isinstance(a, NutsResult) and a.draws.shape == (1, 200, 8) and a.seconds > 0
    assert a.num_divergences == 0 and np.all(a.r_hat < 1.05) and np.all(a.ess > 50)
    # beta1 and psi_bar: NUTS posterior mean within 0.5 posterior sd of the MAP, sd within 1.5x
    # of the Laplace se
    np.testing.assert_array_equal(a.beta1, a.draws[..., 1])
    b1_sd = a.beta1.std(ddof=1)
    assert abs(a.beta1.mean() - fit.beta1) < 0.5 * b1_sd
    assert 1 / 1.5 < b1_sd / fit.beta1_se < 1.5
    np.testing.assert_allclose(
        a.psi_bar[0, 7], np.mean(1 / (1 + np.exp(-(a.draws[0, 7, 0] + a.draws[0, 7, 1] * sv.x))))
    )
    pb_sd = a.psi_bar.std(ddof=1)
    assert abs(a.psi_bar.mean() - fit.psi_bar) < 0.5 * pb_sd
    assert 1 / 1.5 < pb_sd / fit.psi_bar_se < 1.5
    table = a.summary()
    assert list(table.index) == [*PARAM_NAMES, "psi_bar"] and list(table.columns) == [
        "mean",
        "sd",
        "r_hat",
        "ess",
    ]
    assert table.loc["beta1", "mean"] == pytest.approx(a.beta1.mean())
    assert table.loc["psi_bar", "sd"] == pytest.approx(pb_sd)


def test_multiple_chains_differ_by_their_keys_and_are_diagnosed(small_survey):
    sv, reviewed, labels = small_survey
    start = fit_map(sv, reviewed, labels).params
    res = run_nuts(
        sv,
        reviewed,
        labels,
        num_warmup=100,
        num_samples=100,
        num_chains=2,
        seed=1,
        init=np.stack([start, start]),
    )  # same start: the chains differ only by their PRNG keys
    assert res.draws.shape == (2, 100, 8) and res.psi_bar.shape == (2, 100)
    assert res.r_hat.shape == (8,) and res.ess.shape == (8,)
    assert not np.array_equal(res.draws[0], res.draws[1])
    assert np.all(res.r_hat < 1.1), dict(zip(PARAM_NAMES, res.r_hat.round(3)))
    assert np.isfinite(res.psi_bar_r_hat) and res.psi_bar_ess > 20


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_bad_inputs_raise_clear_errors(small_survey):
    sv, reviewed, labels = small_survey
    with pytest.raises(ValueError, match="num_samples must be an integer >= 1"):
        run_nuts(sv, reviewed, labels, num_samples=0)
    with pytest.raises(ValueError, match="num_warmup must be an integer >= 0"):
        run_nuts(sv, reviewed, labels, num_warmup=-1)
    with pytest.raises(ValueError, match="num_chains must be an integer >= 1"):
        run_nuts(sv, reviewed, labels, num_chains=True)
    with pytest.raises(ValueError, match="seed must be an integer"):
        run_nuts(sv, reviewed, labels, seed=2**32)
    with pytest.raises(ValueError, match="chain_method must be one of"):
        run_nuts(sv, reviewed, labels, chain_method="threads")
    with pytest.raises(
        ValueError, match="target_accept_prob must be a finite real number > 0 and < 1"
    ):
        run_nuts(sv, reviewed, labels, target_accept_prob=1.0)
    with pytest.raises(ValueError, match=r"init must have shape \(8,\) or \(num_chains, 8\)"):
        run_nuts(sv, reviewed, labels, init=np.zeros(7))
    with pytest.raises(ValueError, match="non-finite"):
        run_nuts(sv, reviewed, labels, init=np.full(8, np.nan))
    u = np.zeros(8)
    u[6] = 1000.0  # mu1 = inf
    with pytest.raises(ValueError, match="not finite at the start of chain"):
        run_nuts(sv, reviewed, labels, init=u)
    with pytest.raises(TypeError, match="reviewed must be a boolean mask"):
        run_nuts(sv, reviewed.astype(int), labels)
    bad = labels.copy()
    bad[np.argwhere(reviewed)[0][0], np.argwhere(reviewed)[0][1]] = 2
    with pytest.raises(ValueError, match="labels of reviewed units must be 0 or 1"):
        make_nuts_data(sv, reviewed, bad)
    with pytest.raises(TypeError, match="survey must be a Survey"):
        make_nuts_data({"s": sv.s}, reviewed, labels)


def test_package_import_does_not_import_jax():
    code = (
        "import sys, reprobook.papers.acorn_occupancy, reprobook.papers.acorn_occupancy.nuts; "
        "assert 'jax' not in sys.modules and 'numpyro' not in sys.modules, 'jax imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_random_reviews_reveal_the_truth_at_a_seeded_random_subset():
    sv = simulate(replace(CAMERA, n_sites=10, n_units=6), np.random.default_rng(4))
    reviewed, labels = random_reviews(sv, 0.2, np.random.default_rng(9))
    assert reviewed.dtype == bool and reviewed.sum() == 12  # round(0.2 * 60)
    want = np.zeros(60, dtype=bool)
    want[np.random.default_rng(9).choice(60, 12, replace=False)] = True
    np.testing.assert_array_equal(reviewed.ravel(), want)
    np.testing.assert_array_equal(labels, np.where(reviewed, sv.y, 0))
    with pytest.raises(ValueError, match="frac"):
        random_reviews(sv, 1.5, np.random.default_rng(0))


def test_laplace_against_nuts_rows(small_survey):
    sv, reviewed, labels = small_survey
    kw = dict(num_warmup=50, num_samples=50, num_chains=1, seed=1)
    lap, res, rows = laplace_against_nuts(sv, reviewed, labels, **kw)
    assert np.array_equal(lap.params, fit_map(sv, reviewed, labels).params)
    assert [r["target"] for r in rows] == ["beta1", "psi_bar"]
    beta1, psi = rows
    assert beta1["laplace_mean"] == lap.beta1 and beta1["nuts_mean"] == float(res.beta1.mean())
    assert psi["laplace_sd"] == lap.psi_bar_se and psi["nuts_sd"] == float(res.psi_bar.std())
    assert beta1["mean_gap_in_sd"] == pytest.approx(
        abs(lap.beta1 - res.beta1.mean()) / res.beta1.std(), rel=1e-12
    )
    assert psi["sd_ratio"] == pytest.approx(lap.psi_bar_se / res.psi_bar.std(), rel=1e-12)
    assert beta1["r_hat"] == float(res.r_hat[1]) and psi["ess"] == float(res.psi_bar_ess)
