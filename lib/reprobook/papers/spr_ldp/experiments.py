"""The chapter's comparisons, one instance (or one sweep) per call, for the notebooks.

Paper: "Sort, Partition, Randomize: Optimal Binary Hypothesis Testing under Local Differential
Privacy", arXiv 2606.07443. The notebooks loop over instances and tabulate what these return:

* :func:`dp_against_reference` - the SPR optimum (eq. `spr-dp` of notebooks/18_spr_ldp/index.md)
  against an exact reference that does not assume the structure: the staircase LP
  (eq. `spr-staircase-lp`, claim C1) or the search over every set partition (C2);
* :func:`dp_against_budget_lp` - the same with an output budget ell (C3);
* :func:`time_solvers` - wall times of the DP and of the LP against the alphabet size (C4);
* :func:`privacy_sweep` - the optimum and the two classical mechanisms over a grid of eps (C5);
* :func:`stein_experiment` - repeated Monte Carlo exponents of private Neyman-Pearson tests
  against their Stein limits (eq. `spr-stein`, our extension C6).

Every function returns plain rows (dicts), one per (instance, divergence, ...) case.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from reprobook.core import Failures, checks

from . import instances, testing
from .config import PrivacyRangeConfig
from .mechanisms import (
    SPRResult,
    best_over_all_partitions,
    binary_mechanism,
    optimal_mechanism,
    randomized_response,
    staircase_lp,
    staircase_lp_budget,
)

__all__ = [
    "dp_against_reference",
    "dp_against_budget_lp",
    "best_time",
    "time_solvers",
    "privacy_sweep",
    "SteinExperiment",
    "stein_experiment",
]

_REFERENCES = ("lp", "all_partitions")
SAME_STEIN_TOL = 1e-12  # Stein exponents this close belong to one mechanism


def _relative(reference: float, value: float, floor: float) -> float:
    """(reference - value) / max(|reference|, floor): positive when the reference is better."""
    return (reference - value) / max(abs(reference), floor)


def dp_against_reference(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergences: Sequence[str],
    reference: str = "lp",
    gap_floor: float = 1e-12,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """One instance solved by the SPR dynamic program and by an exact reference, per divergence.

    ``reference="lp"``: the staircase LP over all eps-LDP mechanisms (eq. `spr-staircase-lp` of
    notebooks/18_spr_ldp/index.md); ``"all_partitions"``: randomized response over the best of
    every set partition, contiguous or not. Each row holds k, eps, the divergence, the values
    ``dp`` and ``reference``, the DP's number of blocks, the relative gap
    (reference - dp) / max(|reference|, gap_floor) (> 0 would mean the structure loses
    something) and both wall times in seconds. When the LP fails with every method of
    ``mechanisms.LP_FALLBACKS``: with ``failures`` (a :class:`reprobook.core.Failures`) given,
    the case is added to it and its row has NaN for the reference and the gap, so one instance
    never stops a sweep; without, RuntimeError.
    """
    checks.choice(reference, "reference", _REFERENCES)
    gap_floor = checks.real(gap_floor, "gap_floor", above=0)
    rows = []
    for name in divergences:
        t0 = time.perf_counter()
        dp = optimal_mechanism(p0, p1, eps, name)
        t1 = time.perf_counter()
        if reference == "lp":
            lp = staircase_lp(p0, p1, eps, name)
            if lp.status != 0 and failures is None:
                raise RuntimeError(f"the staircase LP failed for {name}: {lp.message}")
            if lp.status != 0:  # counted; the row's reference and gap are NaN
                failures.add(f"k = {np.size(p0)}, eps = {eps:g}, {name}", lp.message)
            ref = lp.value
        else:
            ref = best_over_all_partitions(p0, p1, eps, name).value
        t2 = time.perf_counter()
        rows.append(
            dict(
                k=int(np.size(p0)),
                eps=float(eps),
                divergence=str(name),
                dp=dp.value,
                reference=ref,
                blocks=dp.n_blocks,
                gap=_relative(ref, dp.value, gap_floor),
                dp_seconds=t1 - t0,
                reference_seconds=t2 - t1,
            )
        )
    return rows


def dp_against_budget_lp(
    p0: ArrayLike,
    p1: ArrayLike,
    eps: float,
    divergences: Sequence[str],
    budgets: Sequence[int],
    literal: bool = False,
) -> list[dict[str, Any]]:
    """One instance with an output budget: the ell-layer DP against the staircase LP restricted
    to at most ell columns, per divergence and budget (claim C3).

    Each row holds k, eps, divergence, ell, the values ``dp`` and ``lp``, the number of restricted
    problems the LP examined (``systems``) and the relative gap |lp - dp| / max(|lp|, 1e-12).
    With ``literal=True`` the LP is also solved the literal way (one ``linprog`` per choice of
    ell columns), ``linprog_gap`` is its distance from the vertex enumeration and
    ``linprog_failed`` the number of those small LPs no method solved (left out of it).
    """
    checks.boolean(literal, "literal")
    rows = []
    for name in divergences:
        for ell in budgets:
            dp = optimal_mechanism(p0, p1, eps, name, max_outputs=ell).value
            lp = staircase_lp_budget(p0, p1, eps, name, max_outputs=ell)
            row = dict(
                k=int(np.size(p0)),
                eps=float(eps),
                divergence=str(name),
                ell=int(ell),
                dp=dp,
                lp=lp.value,
                systems=lp.n_lps,
                gap=abs(lp.value - dp) / max(abs(lp.value), 1e-12),
            )
            if literal:
                slow = staircase_lp_budget(p0, p1, eps, name, max_outputs=ell, method="linprog")
                row["linprog_gap"] = abs(slow.value - lp.value)
                row["linprog_failed"] = slow.n_failed
            rows.append(row)
    return rows


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The smallest wall time of ``repeats`` calls of ``fn`` (seconds)."""
    repeats = checks.integer(repeats, "repeats", minimum=1)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def time_solvers(
    dp_ks: Sequence[int],
    dp_budgets: Sequence[int | None],
    lp_ks: Sequence[int],
    eps: float,
    divergence: str,
    repeats: int,
    rng: np.random.Generator | int | None = None,
    max_work: float = 2e9,
) -> list[dict[str, Any]]:
    """Wall times of the DP at each alphabet size and budget, then of the staircase LP (C4).

    One Dirichlet(1) instance is drawn per size from ``rng`` (the DP sizes first, then the LP
    sizes). A DP run is the best of ``repeats``, or a single run where ell k^2 exceeds
    ``max_work`` (it then takes seconds). Rows: method ("DP, l = k", "DP, l = 2", ...,
    "staircase LP"), k, seconds.
    """
    gen = instances.as_generator(rng)
    rows = []
    for k in dp_ks:
        p0, p1 = instances.dirichlet_pair(k, 1.0, gen)
        for ell in dp_budgets:
            reps = repeats if (ell or k) * k * k < max_work else 1

            def solve(p0=p0, p1=p1, ell=ell):
                return optimal_mechanism(p0, p1, eps, divergence, max_outputs=ell)

            method = "DP, l = k" if ell is None else f"DP, l = {ell}"
            rows.append(dict(method=method, k=int(k), seconds=best_time(solve, reps)))
    for k in lp_ks:
        p0, p1 = instances.dirichlet_pair(k, 1.0, gen)
        seconds = best_time(lambda p0=p0, p1=p1: staircase_lp(p0, p1, eps, divergence), 1)
        rows.append(dict(method="staircase LP", k=int(k), seconds=seconds))
    return rows


def privacy_sweep(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray]],
    divergences: Sequence[str],
    eps_grid: Sequence[float],
) -> list[dict[str, Any]]:
    """The optimum (eq. `spr-dp`, ell = k) against the binary mechanism and randomized response
    for every instance, divergence and eps (claim C5).

    Rows: instance, divergence, eps, ``opt``, ``blocks`` (l* of the optimum), ``binary``, ``rr``.
    """
    rows = []
    for name_of_pair, (p0, p1) in pairs.items():
        for name in divergences:
            for eps in eps_grid:
                opt = optimal_mechanism(p0, p1, eps, name)
                rows.append(
                    dict(
                        instance=name_of_pair,
                        divergence=name,
                        eps=eps,
                        opt=opt.value,
                        blocks=opt.n_blocks,
                        binary=binary_mechanism(p0, p1, eps, name).value,
                        rr=randomized_response(p0, p1, eps, name).value,
                    )
                )
    return rows


@dataclass(frozen=True, eq=False)
class SteinExperiment:
    """What :func:`stein_experiment` measured.

    Attributes:
        rows: one row per (eps, mechanism): its Stein exponent, number of blocks, and either the
            mechanism it duplicates (``same_as``) or the compared n with the mean and standard
            deviation of the repetitions' exponents there.
        curves: one row per (eps, mechanism, n): the mean empirical exponent over the
            repetitions and Strassen's approximation -log(beta_n) / n.
        at_n: per eps, (Stein exponents by mechanism, empirical exponents (R,) by mechanism at
            the compared n, that n); the input of :func:`.testing.stein_gap_shares`.
    """

    rows: list[dict[str, Any]]
    curves: list[dict[str, Any]]
    at_n: dict[float, tuple[dict[str, float], dict[str, np.ndarray], int]]


def _candidates(p0: np.ndarray, p1: np.ndarray, eps: float) -> dict[str, SPRResult]:
    """The mechanisms C6 compares at one eps, in a fixed order."""
    return {
        "OPT for KL(M0||M1)": optimal_mechanism(p0, p1, eps, "reverse_kl"),
        "OPT for KL(M1||M0)": optimal_mechanism(p0, p1, eps, "kl"),
        "OPT for chi2": optimal_mechanism(p0, p1, eps, "chi2"),
        "binary mechanism": binary_mechanism(p0, p1, eps, "reverse_kl"),
        "randomized response": randomized_response(p0, p1, eps, "reverse_kl"),
    }


def stein_experiment(
    cfg: PrivacyRangeConfig,
    p0: ArrayLike,
    p1: ArrayLike,
    rng: np.random.Generator | int | None = None,
) -> SteinExperiment:
    """Private Neyman-Pearson tests with n samples for five mechanisms per eps (claim C6), on
    the instance (p0, p1) with the sizes of notebook 03_privacy_range's configuration ``cfg``.

    For each eps of ``cfg.c6_eps`` the candidates are the optima for KL(M0 || M1), KL(M1 || M0)
    and chi^2, the binary mechanism and randomized response; a mechanism whose Stein exponent
    is within ``SAME_STEIN_TOL`` of an earlier one's is the same mechanism and is tested once (a
    tolerance: rounding to 12 decimals split two exponents that differ in the last bit when
    they straddle a rounding boundary). For each, ``cfg.c6_repeats`` independent runs of
    :func:`.testing.type_two_errors` (importance sampling at level ``cfg.c6_alpha``,
    ``cfg.c6_reps`` draws per hypothesis and n of ``cfg.c6_ns``, beta_n reported from
    ``cfg.c6_min_misses`` misses, all from ``rng`` in turn) give the empirical exponents
    -log(beta_n) / n, to be compared with eq. `spr-stein` of notebooks/18_spr_ldp/index.md.
    The mechanisms are compared at the largest n where every one is estimable in every run.
    """
    eps_list, ns, repeats = cfg.c6_eps, cfg.c6_ns, cfg.c6_repeats
    alpha, reps, min_misses = cfg.c6_alpha, cfg.c6_reps, cfg.c6_min_misses
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    gen = instances.as_generator(rng)
    ns_arr = np.asarray(ns)
    rows, curves, at_n = [], [], {}
    for eps in eps_list:
        seen: dict[str, float] = {}  # a tested mechanism -> its Stein exponent
        results = {}
        for label, mech in _candidates(p0, p1, eps).items():
            M0, M1 = testing.output_laws(mech.mechanism, p0, p1)
            stein = testing.stein_exponent(M0, M1)
            twin = next((k for k, v in seen.items() if abs(v - stein) <= SAME_STEIN_TOL), None)
            if twin is not None:  # the same mechanism under another name: tested once
                same = dict(stein=stein, blocks=mech.n_blocks, same_as=twin)
                rows.append(dict(eps=eps, mechanism=label, **same))
                continue
            seen[label] = stein
            e = testing.repeated_exponents(
                M0, M1, ns, repeats, alpha=alpha, reps=reps, rng=gen, min_misses=min_misses
            )  # (repeats, len(ns))
            results[label] = (mech, stein, e)
            strassen = -testing.strassen_log_beta(M0, M1, ns, alpha) / ns_arr
            for j, n in enumerate(ns):
                col = e[:, j]
                mean = col[np.isfinite(col)].mean() if np.isfinite(col).any() else np.nan
                curves.append(
                    dict(eps=eps, mechanism=label, n=n, exponent=mean, strassen=strassen[j])
                )
        # the largest n at which every mechanism is estimable in every repetition
        common = np.logical_and.reduce([np.isfinite(e).all(axis=0) for _, _, e in results.values()])
        j = int(np.flatnonzero(common)[-1])
        at_n[eps] = (
            {label: stein for label, (_, stein, _) in results.items()},
            {label: e[:, j] for label, (_, _, e) in results.items()},
            int(ns[j]),
        )
        for label, (mech, stein, e) in results.items():
            rows.append(
                dict(
                    eps=eps,
                    mechanism=label,
                    stein=stein,
                    blocks=mech.n_blocks,
                    n=int(ns[j]),
                    empirical=float(e[:, j].mean()),
                    sd=float(e[:, j].std(ddof=1)),
                )
            )
    return SteinExperiment(rows, curves, at_n)
