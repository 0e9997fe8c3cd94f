"""NUTS on the CSOM posterior, to check the Laplace approximation of :mod:`.fit`.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only); model of Rhinehart
et al. (2022). The sampler is the No-U-Turn Sampler (Hoffman & Gelman 2014, "The No-U-Turn
Sampler: adaptively setting path lengths in Hamiltonian Monte Carlo", JMLR 15:1593-1623), as
implemented by NumPyro (``numpyro.infer.NUTS`` with a diagonal mass matrix and step size adapted
during warm-up), run on the potential energy

    U(u) = -log p(u | data) = -(sum_i log L_i(u) + log p(u)),

over the same unconstrained vector u (``PARAM_NAMES``) as the MAP fit: it samples the posterior
that eq. `acorn-laplace` of notebooks/07_acorn_occupancy/index.md approximates.
:func:`log_posterior_jax` evaluates exactly the formulas of :mod:`.likelihood` (``_parts_xp``
and ``_log_prior_xp`` are written once over an array namespace), in ``jax.numpy`` with float64,
so it is jit-able and ``jax.grad`` gives the gradient that NUTS needs.

The plan: one chain of 500 warm-up + 500 draws for the reduced profile, four chains of
1000 + 1000 for the full one (R-hat and ESS per parameter; for one chain R-hat is the split
R-hat of its two halves).

Side effects and threads:

* float64: :func:`run_nuts` and :func:`make_nuts_data` call ``numpyro.enable_x64()``, which sets
  ``jax_enable_x64`` for the whole process (every later jax array defaults to 64 bits).
* jax and numpyro are imported inside the functions, so ``import reprobook.papers.acorn_occupancy``
  stays free of them.
* XLA's CPU runtime starts its own thread pool (one thread per usable core) and ignores torch's
  setting and ``$REPROBOOK_THREADS``. The old recipe
  ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` no longer limits it in jax 0.10 (measured: a
  2000 x 2000 matmul still used both cores of a 2-core machine), and jax 0.10 has no
  thread-count option; the only limit that works is the process's CPU affinity (``taskset`` or
  ``os.sched_setaffinity`` before jax's first computation). Nothing is set here. The arrays of
  this model are small (at most a few thousand units), so NUTS is dominated by its sequential
  leapfrog steps and stays close to one busy core.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from reprobook.core import checks

from .fit import Fit, default_init, fit_map
from .likelihood import (
    N_PARAMS,
    PARAM_NAMES,
    _check_data,
    _check_params,
    _data_xp,
    _log_prior_xp,
    _parts_xp,
    log_posterior,
    mean_occupancy,
)
from .simulate import Survey

__all__ = [
    "CHAIN_METHODS",
    "NutsData",
    "NutsResult",
    "make_nuts_data",
    "log_posterior_jax",
    "run_nuts",
    "random_reviews",
    "laplace_against_nuts",
]

#: The values of numpyro's ``MCMC(chain_method=...)`` accepted here ("parallel" falls back to
#: "sequential", with numpyro's warning, when there are fewer devices than chains).
CHAIN_METHODS = ("sequential", "parallel", "vectorized")
INIT_JITTER_SD = 0.1  # sd of the N(0, sd^2) jitter added to the start of chains 2, 3, ...


def _jax():
    """Import jax (float64 switched on, process-wide) and return (jax, jax.numpy)."""
    import jax
    import jax.numpy as jnp

    with warnings.catch_warnings():  # tqdm.auto warns that ipywidgets is missing in a notebook
        warnings.simplefilter("ignore")
        import numpyro

    numpyro.enable_x64()
    if jnp.zeros(()).dtype != jnp.float64:  # pragma: no cover - only if x64 could not be enabled
        raise RuntimeError("jax float64 could not be enabled (jax_enable_x64)")
    return jax, jnp


class NutsData(NamedTuple):
    """The data of the CSOM as float64 ``jax.numpy`` arrays (a pytree, so it can be passed to jit).

    ``reviewed`` is 1.0 at reviewed units and 0.0 elsewhere; ``labels`` holds y_ik at reviewed
    units and 0.0 elsewhere (as :func:`.likelihood._check_data` returns them).
    """

    x: object  # (N,)
    w: object  # (N, K)
    s: object  # (N, K)
    reviewed: object  # (N, K) 0./1.
    labels: object  # (N, K) 0./1.


def make_nuts_data(survey: Survey, reviewed, labels) -> NutsData:
    """:class:`NutsData` from a survey, a review mask and labels, checked as by the NumPy
    likelihood (same errors). Switches on jax float64 (process-wide)."""
    r, y = _check_data(survey, reviewed, labels)
    _, jnp = _jax()
    f64 = lambda a: jnp.asarray(np.asarray(a, dtype=np.float64))  # noqa: E731
    return NutsData(
        x=f64(survey.x), w=f64(survey.w), s=f64(survey.s), reviewed=f64(r), labels=f64(y)
    )


def log_posterior_jax(u, data: NutsData):
    """log p(u | data) up to a constant, in ``jax.numpy``: the same value as
    :func:`.likelihood.log_posterior` (loglik + log prior with the Jacobian terms), jit-able and
    differentiable in u. ``data`` comes from :func:`make_nuts_data`; u is an (8,) float64 array.
    Returns a 0-d array (no input checks, so that it can be traced)."""
    import jax.numpy as jnp

    u = jnp.asarray(u)
    d = _data_xp(jnp, data.x, data.w, data.s, data.reviewed > 0.5, data.labels)
    p = _parts_xp(jnp, u, d)
    return jnp.sum(jnp.logaddexp(p["A"], p["B"])) + _log_prior_xp(jnp, u)


@dataclass(frozen=True, eq=False)
class NutsResult:
    """NUTS draws of u and the diagnostics of the run."""

    draws: np.ndarray  # (chains, samples, 8) draws of u, layout PARAM_NAMES
    beta1: np.ndarray  # (chains, samples) habitat effect on logit psi
    psi_bar: np.ndarray  # (chains, samples) mean_i expit(beta0 + beta1 x_i)
    r_hat: np.ndarray  # (8,) split R-hat per parameter
    ess: np.ndarray  # (8,) effective sample size per parameter (all chains)
    psi_bar_r_hat: float
    psi_bar_ess: float
    num_divergences: int  # divergent transitions after warm-up, all chains
    accept_prob: float  # mean acceptance probability after warm-up
    mean_num_steps: float  # mean leapfrog steps per draw
    seconds: float  # wall time of run_nuts (tracing and compilation included)
    num_warmup: int
    num_samples: int
    num_chains: int
    chain_method: str
    seed: int

    @property
    def flat(self) -> np.ndarray:
        """All draws of u pooled over chains, shape (chains * samples, 8)."""
        return self.draws.reshape(-1, N_PARAMS)

    def summary(self):
        """A pandas DataFrame with rows PARAM_NAMES + ("psi_bar",) and columns mean, sd (pooled
        over chains, ddof=1), r_hat and ess."""
        import pandas as pd

        flat = self.flat
        rows = {
            n: (flat[:, j].mean(), flat[:, j].std(ddof=1), self.r_hat[j], self.ess[j])
            for j, n in enumerate(PARAM_NAMES)
        }
        pb = self.psi_bar.ravel()
        rows["psi_bar"] = (pb.mean(), pb.std(ddof=1), self.psi_bar_r_hat, self.psi_bar_ess)
        return pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "sd", "r_hat", "ess"])


def _diagnostics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(split R-hat, ESS) over the trailing dims of x (chains, samples, ...); NaN when there are
    fewer than 4 draws per chain (numpyro's minimum for split R-hat)."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    if x.shape[1] < 4:
        nan = np.full(x.shape[2:], np.nan)
        return nan, nan.copy()
    return np.asarray(split_gelman_rubin(x), dtype=float), np.asarray(
        effective_sample_size(x), dtype=float
    )


def run_nuts(
    survey: Survey,
    reviewed,
    labels,
    *,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 1,
    seed: int = 0,
    init=None,
    chain_method: str = "sequential",
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
) -> NutsResult:
    """Sample p(u | data) with NUTS (Hoffman & Gelman 2014) in NumPyro, in float64.

    ``potential_fn`` is ``-log_posterior_jax``. Every chain starts at ``init`` (an (8,) u, e.g.
    ``fit_map(...).params``; default :func:`.fit.default_init`), chains 2, 3, ... with an added
    N(0, 0.1^2) jitter from ``numpy.random.default_rng(seed)``; an explicit (num_chains, 8) array
    gives each chain its own start. Draws are reproducible given ``seed`` (the jax PRNG key).
    The plan: 1 chain x (500 + 500) for the reduced profile, 4 chains x (1000 + 1000) for the
    full one.

    Side effect: ``numpyro.enable_x64()`` switches jax to float64 for the whole process.
    ``seconds`` includes tracing and XLA compilation, which every call repeats (a new sampler
    closes over new data).
    """
    t0 = time.perf_counter()
    r, y = _check_data(survey, reviewed, labels)
    num_warmup = checks.integer(num_warmup, "num_warmup", minimum=0)
    num_samples = checks.integer(num_samples, "num_samples", minimum=1)
    num_chains = checks.integer(num_chains, "num_chains", minimum=1)
    seed = checks.integer(seed, "seed", minimum=0, maximum=2**32 - 1)  # a jax PRNG key
    max_tree_depth = checks.integer(max_tree_depth, "max_tree_depth", minimum=1)
    checks.choice(chain_method, "chain_method", CHAIN_METHODS)
    target_accept_prob = checks.real(target_accept_prob, "target_accept_prob", above=0, below=1)
    if init is None:
        init = default_init(survey)
    init_arr = np.asarray(init, dtype=float)
    if init_arr.shape == (num_chains, N_PARAMS):
        starts = np.stack([_check_params(row) for row in init_arr])
    elif init_arr.shape == (N_PARAMS,):
        u0 = _check_params(init_arr)
        jitter = np.random.default_rng(seed).normal(0.0, INIT_JITTER_SD, (num_chains, N_PARAMS))
        jitter[0] = 0.0
        starts = u0 + jitter
    else:
        raise checks.InputError(
            f"init must have shape ({N_PARAMS},) or (num_chains, {N_PARAMS}) = "
            f"({num_chains}, {N_PARAMS}), got {init_arr.shape}"
        )

    start_lp = np.array([log_posterior(u, survey, r, y) for u in starts])
    if not np.all(np.isfinite(start_lp)):
        raise ValueError(
            "the log posterior is not finite at the start of chain(s) "
            f"{np.flatnonzero(~np.isfinite(start_lp)).tolist()}"
        )

    jax, jnp = _jax()
    from numpyro.infer import MCMC, NUTS

    data = make_nuts_data(survey, r, y)

    def potential(u):
        return -log_posterior_jax(u, data)

    kernel = NUTS(
        potential_fn=potential,
        target_accept_prob=float(target_accept_prob),
        max_tree_depth=max_tree_depth,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=False,
    )
    init_params = jnp.asarray(starts[0] if num_chains == 1 else starts)
    mcmc.run(
        jax.random.PRNGKey(seed), init_params=init_params, extra_fields=("accept_prob", "num_steps")
    )
    draws = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=float).reshape(
        num_chains, num_samples, N_PARAMS
    )
    extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    seconds = time.perf_counter() - t0

    psi_bar = np.stack(
        [mean_occupancy(d[:, 0], d[:, 1], survey.x) for d in draws]
    )  # a chain at a time
    r_hat, ess = _diagnostics(draws)
    pb_r_hat, pb_ess = _diagnostics(psi_bar[..., None])
    return NutsResult(
        draws=draws,
        beta1=draws[..., 1].copy(),
        psi_bar=psi_bar,
        r_hat=r_hat,
        ess=ess,
        psi_bar_r_hat=float(pb_r_hat[0]),
        psi_bar_ess=float(pb_ess[0]),
        num_divergences=int(extra["diverging"].sum()),
        accept_prob=float(extra["accept_prob"].mean()),
        mean_num_steps=float(extra["num_steps"].mean()),
        seconds=seconds,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        seed=seed,
    )


def random_reviews(
    survey: Survey, frac: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A review of round(frac * units) units chosen uniformly at random (without replacement,
    from ``rng``), as (reviewed mask (N, K), labels (N, K)): the true labels where reviewed, 0
    elsewhere."""
    frac = checks.real(frac, "frac", minimum=0, maximum=1)
    rng = checks.generator(rng)
    reviewed = np.zeros(survey.s.shape, dtype=bool)
    n = int(round(frac * survey.s.size))
    reviewed.ravel()[rng.choice(survey.s.size, n, replace=False)] = True
    return reviewed, np.where(reviewed, survey.y, 0)


def laplace_against_nuts(
    survey: Survey,
    reviewed,
    labels,
    *,
    num_warmup: int,
    num_samples: int,
    num_chains: int,
    seed: int,
) -> tuple[Fit, NutsResult, list[dict]]:
    """The Laplace approximation (eq. `acorn-laplace` of notebooks/07_acorn_occupancy/index.md)
    and NUTS, started at its mode, on one survey and review; and, for beta1 and psi_bar, one
    row each: the two means and standard deviations, the gap between the means in NUTS
    standard deviations, the ratio of the standard deviations, and NUTS's R-hat and ESS.
    Returns (the Laplace fit, the NUTS result, the rows)."""
    lap = fit_map(survey, reviewed, labels)
    res = run_nuts(
        survey,
        reviewed,
        labels,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        init=lap.params,
    )
    rows = []
    for target, lap_mean, lap_sd, draws, rhat, ess in [
        ("beta1", lap.beta1, lap.beta1_se, res.beta1, res.r_hat[1], res.ess[1]),
        ("psi_bar", lap.psi_bar, lap.psi_bar_se, res.psi_bar, res.psi_bar_r_hat, res.psi_bar_ess),
    ]:
        mean, sd = float(draws.mean()), float(draws.std())
        rows.append(
            dict(
                target=target,
                laplace_mean=lap_mean,
                nuts_mean=mean,
                laplace_sd=lap_sd,
                nuts_sd=sd,
                mean_gap_in_sd=abs(lap_mean - mean) / sd,
                sd_ratio=lap_sd / sd,
                r_hat=float(rhat),
                ess=float(ess),
            )
        )
    return lap, res, rows
