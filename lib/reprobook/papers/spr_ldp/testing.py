"""Private Neyman-Pearson testing with n samples: the chapter's extension C6 (ours, not the
paper's).

Paper: "Sort, Partition, Randomize: Optimal Binary Hypothesis Testing under Local Differential
Privacy", arXiv 2606.07443. The paper optimises a single-sample f-divergence; this module asks
what that buys for the error of a test on n privatised samples.

Each of n users holds X_i ~ P_b and reports Y_i ~ Q(. | X_i); the analyst sees Y_1..Y_n, i.i.d.
from M_b = Q^T p_b. The counts N = (N_1..N_m) of the outputs are a sufficient statistic,
N ~ Multinomial(n, M_b), and the log-likelihood ratio is linear in them:

    S = sum_y N_y log(M1(y) / M0(y)).

The Neyman-Pearson test rejects H0 when S > tau (and with probability gamma when S = tau) with
P0(reject) = alpha. By Stein's lemma its type-II error beta_n = P1(accept) decays as
exp(-n KL(M0 || M1) + o(n)) (eq. `spr-stein` of notebooks/18_spr_ldp/index.md), so the mechanism
maximising KL(M0 || M1) - the SPR optimum for the ``reverse_kl`` divergence, or for
``conjugate("kl")`` - has the best exponent. At finite n the second-order (Strassen) expansion

    -log beta_n ~= n D - sqrt(n V) z_{1-alpha} + (1/2) log n,    D = KL(M0 || M1),
    V = Var_{M0}[log(M0 / M1)],

shows that -log(beta_n) / n approaches D from below, slowly (O(1/sqrt n)).

Sampling the counts directly from M_b is exactly equivalent to drawing X_i and then Y_i | X_i
(:func:`privatize` does the latter for single samples).

The ranking check of C6 compares mechanisms pair by pair. For mechanisms A and B with Stein
exponents D_A > D_B and empirical exponents e = -log(beta_n)/n, the share of the Stein gap that
the finite-n test keeps is

    s_AB = (e_A - e_B) / (D_A - D_B),                                  (eq. `spr-gap-share`)

positive when the tester ranks the pair as Stein's lemma does. :func:`repeated_exponents` runs
independent Monte Carlo repetitions and :func:`stein_gap_shares` forms s_AB per repetition for
the pairs far enough apart to be ordered. The notebook takes the smallest mean share over the
pairs, with an interval that holds for all pairs together, from
:func:`reprobook.core.worst_group_interval`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, ndtri, rel_entr

from reprobook.core import checks

from .instances import as_generator

__all__ = [
    "output_laws",
    "privatize",
    "sample_counts",
    "stein_exponent",
    "stein_dispersion",
    "strassen_log_beta",
    "TypeIIResult",
    "type_two_errors",
    "fit_exponent",
    "repeated_exponents",
    "PairShare",
    "stein_gap_shares",
]


def output_laws(Q: ArrayLike, p0: ArrayLike, p1: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """M0 = Q^T p0 and M1 = Q^T p1 for a k x m mechanism Q."""
    Q = np.asarray(Q, dtype=float)
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    if Q.ndim != 2 or Q.shape[0] != p0.size or p0.shape != p1.shape:
        raise ValueError(
            "Q must be k x m with k = len(p0) = len(p1); "
            f"got Q {Q.shape}, p0 {p0.shape}, p1 {p1.shape}"
        )
    return Q.T @ p0, Q.T @ p1


def privatize(
    x: ArrayLike, Q: ArrayLike, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Y_i ~ Q(. | x_i) for each input x_i (inverse-CDF sampling of each row), shape of x."""
    gen = as_generator(rng)
    x = np.asarray(x, dtype=np.int64)
    cdf = np.cumsum(np.asarray(Q, dtype=float), axis=1)  # (k, m)
    u = gen.random(x.shape) * cdf[x, -1]
    y = (u[..., None] >= cdf[x]).sum(axis=-1)
    return np.minimum(y, cdf.shape[1] - 1)


def sample_counts(
    M: ArrayLike, n: int, reps: int, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Output counts of ``reps`` independent samples of size n from M, shape (reps, m)."""
    gen = as_generator(rng)
    M = np.asarray(M, dtype=float)
    return gen.multinomial(int(n), M / M.sum(), size=int(reps))


def _check_laws(M0: ArrayLike, M1: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    M0 = np.asarray(M0, dtype=float)
    M1 = np.asarray(M1, dtype=float)
    if M0.ndim != 1 or M0.shape != M1.shape:
        raise ValueError(f"M0 and M1 must be 1-D of one length, got {M0.shape} and {M1.shape}")
    if np.any(M0 <= 0) or np.any(M1 <= 0):
        raise ValueError("M0 and M1 must be strictly positive (true for every eps-LDP mechanism)")
    return M0, M1


def stein_exponent(M0: ArrayLike, M1: ArrayLike) -> float:
    """D = KL(M0 || M1) = sum_y M0(y) log(M0(y) / M1(y)), the Stein exponent of beta_n.

    Implements the limit of eq. `spr-stein` of notebooks/18_spr_ldp/index.md.
    """
    M0, M1 = _check_laws(M0, M1)
    return float(rel_entr(M0, M1).sum())


def stein_dispersion(M0: ArrayLike, M1: ArrayLike) -> float:
    """V = Var_{M0}[log(M0(Y) / M1(Y))], the second-order term of Stein's lemma (the V of
    eq. `spr-stein` of notebooks/18_spr_ldp/index.md)."""
    M0, M1 = _check_laws(M0, M1)
    llr = np.log(M0 / M1)
    mean = float(M0 @ llr)
    return float(M0 @ (llr - mean) ** 2)


def strassen_log_beta(
    M0: ArrayLike, M1: ArrayLike, n: ArrayLike, alpha: float = 0.05
) -> np.ndarray:
    """Second-order approximation of log beta_n: -(n D - sqrt(n V) z_{1-alpha} + (1/2) log n).

    Implements the expansion of eq. `spr-stein` of notebooks/18_spr_ldp/index.md.

    Drops the O(1) term, so it is a guide to the shape of beta_n, not a bound.
    """
    n = np.asarray(n, dtype=float)
    D, V = stein_exponent(M0, M1), stein_dispersion(M0, M1)
    return -(n * D - np.sqrt(n * V) * ndtri(1.0 - alpha) + 0.5 * np.log(n))


@dataclass(frozen=True, eq=False)
class TypeIIResult:
    """Monte-Carlo type-II errors of the level-alpha likelihood-ratio test, one entry per n.

    Attributes:
        ns: sample sizes, shape (J,).
        beta: estimated beta_n (expected over the test's randomisation at S = tau), (J,);
            may underflow to 0 with ``method="importance"`` at very large n, see ``log_beta``.
        log_beta: log of the estimate, computed in log space (-inf where beta is 0), (J,).
        misses: "direct": number of H1 repetitions in which the test did not reject outright
            (S <= tau); "importance": the effective number of repetitions
            (sum w)^2 / sum w^2 of the importance weights. beta is only estimable where this
            is large enough. (J,)
        estimable: misses >= min_misses, (J,).
        exponent: -log(beta_n) / n where estimable, nan elsewhere, (J,).
        threshold: calibrated tau per n, (J,).
        gamma: rejection probability at S = tau per n, (J,).
        alpha_hat: type-I error of the calibrated test on fresh H0 samples, (J,).
        reps: Monte-Carlo repetitions per hypothesis and n.
        alpha: nominal type-I error.
        stein: KL(M0 || M1).
        method: "direct" or "importance".
    """

    ns: np.ndarray
    beta: np.ndarray
    log_beta: np.ndarray
    misses: np.ndarray
    estimable: np.ndarray
    exponent: np.ndarray
    threshold: np.ndarray
    gamma: np.ndarray
    alpha_hat: np.ndarray
    reps: int
    alpha: float
    stein: float
    method: str


def _calibrate(s0: np.ndarray, alpha: float, tol: float) -> tuple[float, float]:
    """tau and gamma with P0(S > tau) + gamma P0(S = tau) = alpha on the sample s0."""
    R = s0.size
    s_sorted = np.sort(s0)
    tau = float(s_sorted[min(R - 1, int(math.ceil((1.0 - alpha) * R)) - 1)])
    above = np.mean(s0 > tau + tol)
    at = np.mean(np.abs(s0 - tau) <= tol)
    gamma = (alpha - above) / at if at > 0 else 0.0
    return tau, float(min(max(gamma, 0.0), 1.0))


def type_two_errors(
    M0: ArrayLike,
    M1: ArrayLike,
    ns: Sequence[int] | ArrayLike,
    alpha: float = 0.05,
    reps: int = 2000,
    rng: np.random.Generator | int | None = None,
    min_misses: int = 10,
    method: str = "direct",
) -> TypeIIResult:
    """Type-II error beta_n of the Neyman-Pearson test at level alpha, by Monte Carlo, for each n:
    the beta_n whose exponent eq. `spr-stein` of notebooks/18_spr_ldp/index.md describes.

    For each n: draw ``reps`` count vectors under M0 and set tau as the (1 - alpha) empirical
    quantile of S (randomising with probability gamma at S = tau so that the level is exactly
    alpha on that sample); then estimate

    * ``method="direct"``: beta_n = mean over ``reps`` H1 draws of
      1{S < tau} + (1 - gamma) 1{S = tau};
    * ``method="importance"``: beta_n = E0[e^S (1{S < tau} + (1 - gamma) 1{S = tau})] over a fresh
      set of H0 draws (change of measure: e^S is the likelihood ratio of the counts). It stays
      informative when beta_n is far below 1 / reps.

    For large n the direct estimate is 0 in every repetition; ``misses`` counts the repetitions
    with S <= tau (for "importance", the effective sample size of the weights) and the exponent
    -log(beta_n) / n is reported only where misses >= ``min_misses`` (``estimable``), nan
    elsewhere. ``alpha_hat`` is the level measured on independent H0 draws.

    Cost: O(len(ns) * reps * m) with m outputs (numpy's multinomial sampler is O(m) per draw
    whatever n is), so n = 1e4 and reps = 2000 take milliseconds.
    """
    M0, M1 = _check_laws(M0, M1)
    alpha = checks.probability(alpha, "alpha", open_low=True, open_high=True)
    checks.choice(method, "method", ("direct", "importance"))
    ns = np.atleast_1d(np.asarray(ns, dtype=np.int64))
    if np.any(ns < 1):
        raise ValueError(f"sample sizes must be >= 1, got {ns.tolist()}")
    reps = checks.integer(reps, "reps", minimum=10)
    gen = as_generator(rng)
    M0, M1 = M0 / M0.sum(), M1 / M1.sum()
    llr = np.log(M1) - np.log(M0)  # (m,) per-output log-likelihood ratio

    J = ns.size
    log_beta, misses = np.zeros(J), np.zeros(J, dtype=np.int64)
    tau_all, gamma_all, alpha_hat = np.zeros(J), np.zeros(J), np.zeros(J)
    for j, n in enumerate(ns):
        tol = 1e-9 * (1.0 + n * float(np.max(np.abs(llr))))  # equal statistics up to rounding
        s0 = sample_counts(M0, n, reps, gen) @ llr  # (reps,) calibration sample
        tau, gamma = _calibrate(s0, alpha, tol)
        s0_fresh = sample_counts(M0, n, reps, gen) @ llr  # (reps,) independent H0 sample
        below, at = s0_fresh < tau - tol, np.abs(s0_fresh - tau) <= tol
        alpha_hat[j] = np.mean(s0_fresh > tau + tol) + gamma * np.mean(at)
        if method == "direct":
            s1 = sample_counts(M1, n, reps, gen) @ llr  # (reps,)
            miss1, at1 = s1 < tau - tol, np.abs(s1 - tau) <= tol
            b = np.mean(miss1) + (1.0 - gamma) * np.mean(at1)
            log_beta[j] = math.log(b) if b > 0 else -math.inf
            misses[j] = int(np.sum(miss1 | at1))
        else:
            # log of w * accept, w = e^S = dP1/dP0 of the counts; accept in {0, 1 - gamma, 1}
            accept = below + (1.0 - gamma) * at  # (reps,)
            keep = accept > 0
            if not np.any(keep):
                log_beta[j], misses[j] = -math.inf, 0
            else:
                lw = s0_fresh[keep] + np.log(accept[keep])
                log_beta[j] = float(logsumexp(lw) - math.log(reps))
                misses[j] = int(math.exp(2.0 * logsumexp(lw) - logsumexp(2.0 * lw)))
        tau_all[j], gamma_all[j] = tau, gamma
    estimable = (misses >= min_misses) & np.isfinite(log_beta)
    exponent = np.where(estimable, -log_beta / ns, np.nan)
    return TypeIIResult(
        ns=ns,
        beta=np.exp(log_beta),
        log_beta=log_beta,
        misses=misses,
        estimable=estimable,
        exponent=exponent,
        threshold=tau_all,
        gamma=gamma_all,
        alpha_hat=alpha_hat,
        reps=int(reps),
        alpha=float(alpha),
        stein=stein_exponent(M0, M1),
        method=method,
    )


def fit_exponent(result: TypeIIResult) -> float:
    """Least-squares slope of -log(beta_n) against n over the estimable n (nan if fewer than 2).

    The slope removes a constant offset but not the sqrt(n) term of the Strassen expansion, so it
    is also biased below KL(M0 || M1) at moderate n.
    """
    ok = result.estimable
    if int(np.sum(ok)) < 2:
        return math.nan
    n = result.ns[ok].astype(float)
    y = -result.log_beta[ok]
    slope, _ = np.polyfit(n, y, 1)
    return float(slope)


def repeated_exponents(
    M0: ArrayLike,
    M1: ArrayLike,
    ns: Sequence[int] | ArrayLike,
    repeats: int,
    alpha: float = 0.05,
    reps: int = 2000,
    rng: np.random.Generator | int | None = None,
    min_misses: int = 10,
    method: str = "importance",
) -> np.ndarray:
    """Empirical exponents -log(beta_n)/n from ``repeats`` independent runs of
    :func:`type_two_errors` (each with its own ``reps`` draws per hypothesis and n), shape
    (repeats, len(ns)); nan where a run could not estimate beta_n. The runs share ``rng``'s
    stream one after the other, so they are independent and the whole is reproducible."""
    repeats = checks.integer(repeats, "repeats", minimum=2)  # an interval needs two
    gen = as_generator(rng)
    return np.stack(
        [
            type_two_errors(
                M0, M1, ns, alpha=alpha, reps=reps, rng=gen, min_misses=min_misses, method=method
            ).exponent
            for _ in range(int(repeats))
        ]
    )


@dataclass(frozen=True, eq=False)
class PairShare:
    """One pair of mechanisms in the ranking check: ``better`` has the larger Stein exponent;
    ``shares`` (R,) holds s = (e_better - e_worse) / (D_better - D_worse) per repetition."""

    better: str
    worse: str
    stein_gap: float  # D_better - D_worse > 0
    relative_gap: float  # (D_better - D_worse) / D_better
    shares: np.ndarray

    @property
    def label(self) -> str:
        return f"{self.better} > {self.worse}"


def stein_gap_shares(
    stein: Mapping[str, float], exponents: Mapping[str, ArrayLike], min_relative_gap: float
) -> tuple[list[PairShare], list[PairShare]]:
    """s_AB = (e_A - e_B) / (D_A - D_B) for every pair of mechanisms with D_A > D_B.

    Implements eq. `spr-gap-share` of notebooks/18_spr_ldp/index.md.

    ``stein`` maps a mechanism to D = KL(M0 || M1); ``exponents`` maps it to its empirical
    exponents (R,), one per Monte Carlo repetition, at one n (repetition r of A is paired with
    repetition r of B: they are independent, so the differences are i.i.d.). Returns (scored,
    too_close): the pairs with D_A - D_B >= min_relative_gap * D_A, and the others (ties
    included), both in order of the mechanisms in ``stein``.
    """
    min_relative_gap = checks.real(min_relative_gap, "min_relative_gap", minimum=0, below=1)
    if set(stein) != set(exponents):
        raise ValueError(
            "stein and exponents must name the same mechanisms; "
            f"got {sorted(stein)} and {sorted(exponents)}"
        )
    e = {k: np.asarray(v, dtype=float).reshape(-1) for k, v in exponents.items()}
    sizes = {v.size for v in e.values()}
    if len(sizes) != 1 or sizes.pop() < 2 or not all(np.all(np.isfinite(v)) for v in e.values()):
        raise ValueError(
            "every mechanism needs the same number (>= 2) of finite exponents, one per repetition"
        )
    names = list(stein)
    scored, close = [], []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            hi, lo = (a, b) if stein[a] >= stein[b] else (b, a)
            gap = float(stein[hi] - stein[lo])
            rel = gap / float(stein[hi]) if stein[hi] > 0 else 0.0
            shares = (e[hi] - e[lo]) / gap if gap > 0 else np.full(e[hi].size, np.nan)
            pair = PairShare(hi, lo, gap, rel, shares)
            (scored if gap > 0 and rel >= min_relative_gap else close).append(pair)
    return scored, close
