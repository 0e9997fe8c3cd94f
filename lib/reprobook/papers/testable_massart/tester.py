"""The Hermite moment-matching tester, calibrated under the Gaussian null (claims C2, C3, C5).

Paper: "Testable Learning of General Halfspaces under Massart Noise" (Diakonikolas, Iakovidis,
Kane, Liu), arXiv 2602.22300. The abstract says the tester runs orthogonal moment-matching
tests plus a non-negativity test. Only the abstract was read: this module is a
RECONSTRUCTION of the moment-matching part in the standard form of the testable-learning template
(Gollakota, Klivans & Kothari 2023). The paper's non-negativity test is NOT implemented.

Under N(0, I_d) every orthonormal Hermite feature H_a with a != 0 has mean 0 and variance 1, and
distinct features are uncorrelated, so for n i.i.d. Gaussian samples (eq. `massart-moment-stat`
of notebooks/05_testable_massart/index.md)

    S(X) = n * sum_{1 <= |a| <= k} ( (1/n) sum_i H_a(x_i) )^2
         ~approx chi^2 with C(d + k, k) - 1 degrees of freedom.

The tester accepts when S(X) is at most a threshold, the ``quantile`` of S under the Gaussian
null (eq. `massart-accept`). Two calibrations: ``chi2_calibration`` takes the quantile of the
chi-squared limit (no sample sets it, so Gaussian samples can measure the acceptance rate
honestly), and ``calibrate`` estimates it by Monte Carlo
with the same (d, k, n) (better at small n, where the degree-k features' heavy tails make S's
law heavier than chi-squared). The population analogue for a distribution D is
sum_a E_D[H_a]^2, the squared distance of D's degree-<= k moments from the Gaussian's.
The simultaneous interval of the smallest of several rates (claim C3) is
``core.smallest_proportion_interval``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.stats import chi2

from reprobook.core import checks

from .data import sample_marginal
from .hermite import feature_means, n_features

__all__ = [
    "moment_statistic",
    "Calibration",
    "calibrate",
    "chi2_calibration",
    "MomentTester",
    "population_statistic",
    "time_statistic",
    "statistics_on",
    "power_table",
    "cost_table",
]


def moment_statistic(X: ArrayLike, degree: int) -> float:
    """S(X) = n * sum_{1 <= |a| <= degree} mean_i(H_a(x_i))^2 for X of shape (n, d).

    Implements eq. `massart-moment-stat` of notebooks/05_testable_massart/index.md.
    Approximately chi^2 with ``n_features(d, degree, include_constant=False)`` degrees of freedom
    when the rows of X are i.i.d. N(0, I_d). The (n, m) feature matrix is never stored whole.
    """
    # the largest total degree k of the tested moments
    degree = checks.integer(degree, "degree", minimum=1)
    # the sample x_1..x_n as an (n, d) array
    X = checks.array(X, "X", ndim=2, what="(n, d)")
    # eq. massart-moment-stat: (1/n) sum_i H_a(x_i) for every 1 <= |a| <= k, shape (m,)
    means = feature_means(X, degree, include_constant=False)
    # eq. massart-moment-stat: T_n = n * sum_a mean_a^2
    return float(X.shape[0] * np.dot(means, means))


@dataclass(frozen=True, eq=False)
class Calibration:
    """A threshold for ``moment_statistic`` under the Gaussian null N(0, I_d), n samples.

    method "monte_carlo" (``calibrate``): threshold = the ``quantile`` of ``null_statistics``
    (``numpy.quantile``, linear interpolation). method "chi2" (``chi2_calibration``): threshold =
    the ``quantile`` of chi^2(df), and ``null_statistics`` is empty.
    """

    threshold: float
    null_statistics: np.ndarray = field(repr=False)
    d: int
    degree: int
    n: int
    quantile: float
    method: str = "monte_carlo"

    @property
    def df(self) -> int:
        """Degrees of freedom of the chi-squared approximation: C(d + degree, degree) - 1."""
        return n_features(self.d, self.degree, include_constant=False)

    @property
    def chi2_threshold(self) -> float:
        """The same quantile of chi^2(df), the large-n limit of the null distribution (for
        comparison)."""
        return float(chi2.ppf(self.quantile, self.df))


def calibrate(
    d: int,
    degree: int,
    n: int,
    *,
    reps: int,
    quantile: float = 0.99,
    rng: np.random.Generator,
) -> Calibration:
    """Monte Carlo calibration under the Gaussian null ONLY: ``reps`` draws X ~ N(0, I_d)^n,
    S(X) each.

    The threshold tau of eq. `massart-accept` (notebooks/05_testable_massart/index.md) is the
    empirical ``quantile`` of the null statistics. No alternative is ever looked at, so the
    rejection rates measured on other marginals are honest.
    """
    d = checks.integer(d, "d", minimum=1)
    degree = checks.integer(degree, "degree", minimum=1)
    n = checks.integer(n, "n", minimum=1)
    reps = checks.integer(reps, "reps", minimum=2)
    quantile = checks.real(quantile, "quantile", above=0, below=1)
    rng = checks.generator(rng)
    stats = np.empty(reps)
    for r in range(reps):
        stats[r] = moment_statistic(rng.standard_normal((n, d)), degree)
    stats.flags.writeable = False
    return Calibration(
        threshold=float(np.quantile(stats, quantile)),
        null_statistics=stats,
        d=d,
        degree=degree,
        n=n,
        quantile=quantile,
    )


def chi2_calibration(d: int, degree: int, n: int, quantile: float = 0.99) -> Calibration:
    """The analytic threshold tau of eq. `massart-accept` of notebooks/05_testable_massart/index.md.

    tau is the ``quantile`` of chi^2 with C(d + degree, degree) - 1 degrees of freedom, the law
    S(X) tends to as n grows when the rows of X are i.i.d. N(0, I_d). No sample is drawn, so no
    Gaussian sample that is later tested has set it. ``n`` is kept so that the tester still
    refuses samples of another size (the limit is only as good as n is large)."""
    d = checks.integer(d, "d", minimum=1)
    degree = checks.integer(degree, "degree", minimum=1)
    n = checks.integer(n, "n", minimum=1)
    quantile = checks.real(quantile, "quantile", above=0, below=1)
    stats = np.empty(0)
    stats.flags.writeable = False
    df = n_features(d, degree, include_constant=False)
    return Calibration(
        threshold=float(chi2.ppf(quantile, df)),
        null_statistics=stats,
        d=d,
        degree=degree,
        n=n,
        quantile=quantile,
        method="chi2",
    )


class MomentTester:
    """Accepts X when S(X) <= the calibrated threshold (reconstructed moment-matching tester).

    The threshold is only valid for the calibration's dimension d and sample size n, so other
    shapes are refused rather than silently tested against the wrong null.
    """

    def __init__(self, calibration: Calibration):
        if not isinstance(calibration, Calibration):
            raise TypeError(
                "MomentTester needs a Calibration (from calibrate(...) or chi2_calibration(...)), "
                f"got {type(calibration).__name__}"
            )
        self.calibration = calibration

    @property
    def degree(self) -> int:
        return self.calibration.degree

    @property
    def threshold(self) -> float:
        return self.calibration.threshold

    def _check(self, X: ArrayLike) -> np.ndarray:
        """X of exactly the calibration's shape (n, d): the null law of S depends on both."""
        cal = self.calibration
        return checks.array(X, "X", shape=(cal.n, cal.d), what="(n, d) of the calibration")

    def statistic(self, X: ArrayLike) -> float:
        """S(X) = n * sum_{1 <= |a| <= degree} mean_i(H_a(x_i))^2."""
        return moment_statistic(self._check(X), self.calibration.degree)

    def accepts(self, X: ArrayLike) -> bool:
        """True when S(X) <= threshold: eq. `massart-accept` of
        notebooks/05_testable_massart/index.md."""
        return bool(self.statistic(X) <= self.calibration.threshold)

    def p_value(self, X: ArrayLike) -> float:
        """Monte Carlo p-value (1 + #{null >= S(X)}) / (1 + reps); for a chi-squared calibration,
        P[chi^2(df) >= S(X)]."""
        s = self.statistic(X)
        if self.calibration.method == "chi2":
            return float(chi2.sf(s, self.calibration.df))
        null = self.calibration.null_statistics
        return float((1 + np.count_nonzero(null >= s)) / (1 + null.size))

    def __repr__(self) -> str:
        cal = self.calibration
        return (
            f"MomentTester(d={cal.d}, degree={cal.degree}, n={cal.n}, quantile={cal.quantile}, "
            f"threshold={cal.threshold:.4g}, method={cal.method!r})"
        )


def population_statistic(atoms: ArrayLike, weights: ArrayLike, degree: int) -> float:
    """sum_{1 <= |a| <= degree} (E_w[H_a])^2 for the discrete law sum_i w_i delta_{atoms_i}.

    The weights are normalised to sum to 1. This is exactly the squared Euclidean distance of the
    law's degree-<= k Hermite moments from N(0, I_d)'s (0 for a Gauss-Hermite product rule with
    enough nodes); the sample statistic S is about n times it plus a chi^2 term.
    """
    degree = checks.integer(degree, "degree", minimum=1)
    atoms = checks.array(atoms, "atoms", ndim=2, what="(m, d)")
    means = feature_means(atoms, degree, include_constant=False, weights=weights)
    return float(np.dot(means, means))


def time_statistic(
    d: int, degree: int, n: int, rng: np.random.Generator, repeats: int = 3
) -> float:
    """Median wall time (seconds) of ``moment_statistic`` on one Gaussian sample of shape (n, d)."""
    d = checks.integer(d, "d", minimum=1)
    degree = checks.integer(degree, "degree", minimum=1)
    n = checks.integer(n, "n", minimum=1)
    repeats = checks.integer(repeats, "repeats", minimum=1)
    X = checks.generator(rng).standard_normal((n, d))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        moment_statistic(X, degree)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def statistics_on(
    tester: MomentTester, marginal: str, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """S(X) on ``reps`` fresh samples of ``marginal`` (a name of ``data.MARGINALS``), each of the
    tester's calibrated shape (n, d), drawn one after another from ``rng``; shape (reps,)."""
    reps = checks.integer(reps, "reps", minimum=1)
    rng = checks.generator(rng)
    cal = tester.calibration
    return np.array(
        [tester.statistic(sample_marginal(marginal, cal.n, cal.d, rng)) for _ in range(reps)]
    )


def power_table(
    testers: dict[int, MomentTester],
    marginals,
    reps: dict[int, int],
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Rejection rates of every marginal at every sample size: ``testers`` maps n to the tester
    calibrated at n, ``reps`` maps n to the samples drawn per marginal there. Samples come from
    ``rng`` in the order n (as in ``testers``), then marginal. One row per (n, marginal): n,
    marginal, reps, rejected, rejection, median_statistic, threshold."""
    rng = checks.generator(rng)
    rows = []
    for n, tester in testers.items():
        for name in marginals:
            stats = statistics_on(tester, name, reps[n], rng)
            rows.append(
                dict(
                    n=n,
                    marginal=name,
                    reps=reps[n],
                    rejected=int(np.count_nonzero(stats > tester.threshold)),
                    rejection=float(np.mean(stats > tester.threshold)),
                    median_statistic=float(np.median(stats)),
                    threshold=tester.threshold,
                )
            )
    return pd.DataFrame(rows)


def cost_table(
    dims, degrees, n: int, max_features: int, rng: np.random.Generator, repeats: int = 3
) -> pd.DataFrame:
    """The time of :func:`moment_statistic` over a grid of (d, k): one row per pair with at most
    ``max_features`` moments, with d, degree, features = C(d + k, k) - 1 and seconds (the median
    of ``repeats`` timings on one Gaussian sample of n rows, drawn from ``rng`` in grid order)."""
    max_features = checks.integer(max_features, "max_features", minimum=1)
    rows = []
    for d in dims:
        for k in degrees:
            m = n_features(d, k, include_constant=False)
            if m > max_features:
                continue
            seconds = time_statistic(d, k, n, rng, repeats=repeats)
            rows.append(dict(d=d, degree=k, features=m, seconds=seconds))
    return pd.DataFrame(rows)
