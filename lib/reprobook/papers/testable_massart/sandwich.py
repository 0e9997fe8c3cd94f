"""Sandwiching polynomials for the biased sign function sign(z - t) by linear programming (C1).

Paper: "Testable Learning of General Halfspaces under Massart Noise" (Diakonikolas, Iakovidis,
Kane, Liu), arXiv 2602.22300. The abstract announces sandwiching polynomials for the sign
function "with multiplicative error". Only the abstract was read, so this module is a
RECONSTRUCTION: we read "multiplicative error" as a sandwich gap that is small relative to the
bias gamma = Phi(-|t|) (the Gaussian mass of the smaller side of the halfspace; eq.
`massart-multiplicative` of notebooks/05_testable_massart/index.md), and we compute the best
sandwich of each degree numerically instead of the paper's construction.

For a threshold t and a degree k, with f(z) = sign(z - t) (sign(0) := +1) and z ~ N(0, 1)
(eq. `massart-sandwich-lp`),

    G(t, k) = min { E[p_up(z) - p_lo(z)] :  deg p_lo, deg p_up <= k,  p_lo <= f <= p_up on R },

and the multiplicative ratio is G(t, k) / gamma. In the orthonormal Hermite basis h_0..h_k,
p = sum_j c_j h_j has E[p] = c_0, so the objective is linear: c_up[0] - c_lo[0]. The constraint
"for every z" is imposed on a grid (an LP); the two polynomials do not interact, so two LPs are
solved. Our addition to the plain grid: constraints on the compactified tail |z| >= R, including
z = +-infinity (the leading coefficient's sign), without which high-degree solutions dive between
or beyond the last grid points. The grid is checked afterwards on a finer one and the violation is
reported, not hidden. Rows of points beyond R are rescaled, and the LPs are solved by HiGHS's
interior-point method (see ``_far_scale`` and ``_solve_side``): the LP is a relaxation of the
exact problem, so its gap may never exceed the closed form ``christoffel_gap`` (eq.
`massart-christoffel`), and with the simplex on unscaled rows it once did, by 1.1%.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.optimize import linprog
from scipy.stats import norm

from reprobook.core import checks, linprog_chain

from .hermite import hermite_1d

__all__ = [
    "bias",
    "sign_mean",
    "SandwichResult",
    "sandwich",
    "sandwich_table",
    "degree_needed",
    "lp_grid",
    "christoffel_gap",
    "degree_needed_closed_form",
    "results_frame",
    "ratios_at_degree",
    "degree_needed_frame",
    "degrees_at",
    "degree_growth",
]

JUMP_OFFSET = 1e-9  # the grid holds t (where f = +1) and t - JUMP_OFFSET (where f = -1)
MAX_DEGREE = 40  # float64 Hermite values lose accuracy beyond this (use mpmath there)


def bias(t: float) -> float:
    """gamma = Phi(-|t|) = P[N(0, 1) on the smaller side of sign(z - t)], via
    ``scipy.stats.norm.sf(|t|)``: the gamma of eq. `massart-multiplicative` of
    notebooks/05_testable_massart/index.md."""
    return float(norm.sf(abs(checks.real(t, "t"))))


def sign_mean(t: float) -> float:
    """E[sign(z - t)] = P[z >= t] - P[z < t] = 1 - 2 Phi(t) for z ~ N(0, 1) (sign(0) := +1)."""
    t = checks.real(t, "t")
    # 1 - 2 Phi(t) = Phi(-t) - Phi(t) = sf(t) - cdf(t), written without cancellation in the tails
    return float(norm.sf(t) - norm.cdf(t))


def _sign(z: np.ndarray, t: float) -> np.ndarray:
    return np.where(z >= t, 1.0, -1.0)


def lp_grid(
    t: float, grid_points: int = 3001, radius: float | None = None
) -> tuple[np.ndarray, float]:
    """The finite LP grid and its radius R.

    ``grid_points`` equally spaced points on [-R, R] (R = radius or max(8, |t| + 6)), plus t and
    t - 1e-9 (the two sides of the jump), plus the pins +-(R + 2) and +-(R + 4). Sorted, unique.
    """
    t = checks.real(t, "t")
    grid_points = checks.integer(grid_points, "grid_points", minimum=3)
    if radius is None:
        R = max(8.0, abs(t) + 6.0)
    else:
        R = checks.real(radius, "radius", above=abs(t))
    pins = [t, t - JUMP_OFFSET, R + 2, -(R + 2), R + 4, -(R + 4)]
    z = np.unique(np.concatenate([np.linspace(-R, R, int(grid_points)), pins]))
    return z, R


def _tail_rows(t: float, degree: int, R: float, tail_points: int):
    """Constraint rows for the tails |z| >= R, in the compactified variable u = R / |z| in [0, 1).

    p(z) - f(z) >= 0 is multiplied by sqrt(k!) / |z|^k > 0, which leaves its sign alone and keeps
    the rows of order 1 (h_k(z) = z^k / sqrt(k!) + lower terms); u = 0 is z = +-infinity, where
    the scaled row tends to the leading coefficient: sqrt(k!) (p(z) - f(z)) / |z|^k -> sign(z)^k c_k
    (minus f when k = 0). Returns (z, rows, f, scale) with the infinite points encoded as +-inf.
    """
    if tail_points <= 0:
        return np.empty(0), np.empty((0, degree + 1)), np.empty(0), np.empty(0)
    T = R
    u = np.linspace(0.0, 1.0, tail_points + 1)[1:-1]  # u = 1 (z = R) is on the grid; u = 0 below
    root_fact = math.sqrt(math.factorial(degree))
    rows, zs, fs, scales = [], [], [], []
    for side in (-1.0, 1.0):
        f_side = 1.0 if side > 0 else -1.0  # f(+inf) = +1, f(-inf) = -1
        z = side * T / u
        scale = root_fact / np.abs(z) ** degree
        rows.append(hermite_1d(z, degree) * scale[:, None])
        zs.append(z)
        fs.append(np.full(z.size, f_side))
        scales.append(scale)
        # z = side * infinity: only h_k has a z^k term, with coefficient 1 / sqrt(k!)
        inf_row = np.zeros((1, degree + 1))
        inf_row[0, degree] = side**degree
        rows.append(inf_row)
        zs.append(np.array([side * np.inf]))
        fs.append(np.array([f_side]))
        scales.append(np.array([1.0 if degree == 0 else 0.0]))
    return np.concatenate(zs), np.vstack(rows), np.concatenate(fs), np.concatenate(scales)


@dataclass(frozen=True, eq=False)
class SandwichResult:
    """The optimal LP sandwich p_lo <= sign(z - t) <= p_up of one degree (coefficients in h_0..h_k).

    gap = E[p_up - p_lo] = coef_up[0] - coef_lo[0]; ratio = gap / gamma with gamma = Phi(-|t|).
    grid_violation: the largest violation of either inequality at the LP's points (the tail
    points in the LP's own scaled units); off_grid_violation and off_grid_where: the largest
    violation on the midpoints of a check grid 40 times finer than the LP's over [-2R, 2R] (points
    no exchange round adds as constraints), and where it occurs; inner_violation: the same on
    |z| <= R. Beyond R the LP holds its constraints only at its own points, and in rescaled units
    (rows divided by about |z|^k / sqrt(k!): the compactified tail, and :func:`_far_scale`), so
    between those points the polynomials can miss by far more than the solver's tolerance: by
    thousands at |z| between 12 and 15 at degrees 14 and 16 without exchange rounds (2.6e3 at
    |z| = 12.0 for t = -2.271, degree 14, on the default grid). Exchange rounds shrink such misses
    but need not remove them (at most 0.05 over the chapter's reduced table: 1001 points, 8 rounds,
    degrees up to 16). The Gaussian mass beyond R >= 8 is below 1.3e-15 and the gap is read off
    the coefficients, so these misses leave the gap alone; the polynomials are just not certified
    sandwiches out there. On [-R, R] the misses are about 1e-4 to 1e-2 without rounds at degrees
    12 to 16, and at most about 2e-3 with the reduced table's rounds.
    seconds: wall time of the LP solves (all refinement rounds).
    """

    t: float
    degree: int
    gamma: float
    gap: float
    ratio: float
    coef_lo: np.ndarray = field(repr=False)
    coef_up: np.ndarray = field(repr=False)
    radius: float
    grid_violation: float
    off_grid_violation: float
    off_grid_where: float
    n_constraints: int
    tail_points: int
    refine_rounds: int
    seconds: float
    inner_violation: float = float("nan")  # the off-grid violation restricted to |z| <= R

    def p_lo(self, z: ArrayLike) -> np.ndarray:
        """p_lo(z) = sum_j coef_lo[j] h_j(z)."""
        return hermite_1d(z, self.degree) @ self.coef_lo

    def p_up(self, z: ArrayLike) -> np.ndarray:
        """p_up(z) = sum_j coef_up[j] h_j(z)."""
        return hermite_1d(z, self.degree) @ self.coef_up


def _far_scale(z: np.ndarray, R: float, degree: int) -> np.ndarray:
    """The positive factor each point's constraint row is divided by before the LP is solved:
    |z|^k / sqrt(k!) beyond the radius (|z| > R), 1 on [-R, R].

    Dividing a row by a positive number leaves the feasible set alone. Beyond R it brings the
    rows to order 1, as the compactified tail rows already are (h_k(z) ~ z^k / sqrt(k!)):
    unscaled, the pins at R + 2 and R + 4 and the exchange points out to 2R have entries up to
    about 1e9 at degree 14, and HiGHS's simplex then stopped at a vertex that it reported
    optimal but was not (t = -2.271, degree 14, 3001 points, 3 exchange rounds: a gap 1.1%
    above the closed form, which this LP, a relaxation, can never exceed). Rows on [-R, R] keep
    their own units, so HiGHS's feasibility tolerance stays absolute where the Gaussian has mass."""
    z = np.asarray(z, dtype=float)
    far = np.abs(z) > R
    scale = np.ones_like(z)
    scale[far] = np.exp(degree * np.log(np.abs(z[far])) - 0.5 * math.lgamma(degree + 1))
    return np.maximum(scale, 1.0)


LP_METHOD = "highs-ipm"  # HiGHS's interior-point method (with crossover); see _solve_side
# what _solve_side tries, in order, until HiGHS reports an optimum: the interior-point method,
# then the dual simplex (on the scaled rows it agreed with the closed form), then the
# interior-point method without presolve. Each solves the same LP.
LP_FALLBACKS: tuple[tuple[str, dict], ...] = (
    (LP_METHOD, {}),
    ("highs-ds", {}),
    (LP_METHOD, {"presolve": False}),
)


def _solve_side(V: np.ndarray, f: np.ndarray, upper: bool, t: float, degree: int) -> np.ndarray:
    """One side of the sandwich LP: min c_0 s.t. V c >= f (upper) or max c_0 s.t. V c <= f (lower).

    Implements one half of eq. `massart-sandwich-lp` of notebooks/05_testable_massart/index.md,
    with HiGHS (rows as given: :func:`sandwich` scales those of far points first, see
    :func:`_far_scale`). V holds h_0..h_k at the points of Z, f the sign function there.
    The interior-point method is used: on these rows, whose entries span 1 to about 1e7 on
    [-R, R] at degree 16, HiGHS's dual simplex returned a non-optimal vertex as optimal (the case
    in :func:`_far_scale`) and, with the far rows scaled, gave up on some refined LPs (status
    "unknown"); the interior-point method solved both, and every LP of the chapter's table, to
    the closed form within 2e-7 relative. Should it not report an optimum (a machine's rounding
    can tip an LP this close to the edge), the same LP goes to the methods after it in
    ``LP_FALLBACKS``; RuntimeError, naming every attempt, when none reports one."""
    k1 = V.shape[1]  # k + 1 Hermite coefficients c_0..c_k
    cost = np.zeros(k1)  # the objective touches c_0 = E[p] only
    cost[0] = 1.0 if upper else -1.0  # eq. massart-sandwich-lp: min c_up[0], or max c_lo[0]
    A, b = (-V, -f) if upper else (V, f)  # p_up(z) >= f(z), or p_lo(z) <= f(z), for z in Z
    res, tried = linprog_chain(  # eq. massart-sandwich-lp, one side, by HiGHS
        cost, LP_FALLBACKS, A_ub=A, b_ub=b, bounds=[(None, None)] * k1, solve=linprog
    )
    if res.status == 0 and res.x is not None:  # an optimum: its coefficients
        return np.asarray(res.x, dtype=np.float64)  # the coefficients of p_up or p_lo
    side = "upper" if upper else "lower"  # no method found an optimum: say where, and what
    raise RuntimeError(
        f"sandwich LP for the {side} polynomial failed at t={t}, degree={degree} "
        f"({'; '.join(f'{label}: status {r.status}' for label, r in tried)}); "
        "try fewer grid_points or a smaller degree"
    )


def _local_minima(slack: np.ndarray, tol: float) -> np.ndarray:
    """Indices of local minima of a 1-d slack curve that are below -tol."""
    inner = (slack[1:-1] <= slack[:-2]) & (slack[1:-1] <= slack[2:])
    idx = np.flatnonzero(inner) + 1
    ends = [i for i in (0, slack.size - 1) if slack[i] < -tol]
    return np.union1d(idx[slack[idx] < -tol], ends).astype(int)


def sandwich(
    t: float,
    degree: int,
    *,
    grid_points: int = 3001,
    radius: float | None = None,
    tail_points: int = 200,
    refine: int = 0,
) -> SandwichResult:
    """Optimal degree-k sandwich of f(z) = sign(z - t) under N(0, 1), by two LPs (reconstructed).

    Implements eq. `massart-sandwich-lp` of notebooks/05_testable_massart/index.md:

        minimise c_up[0] - c_lo[0]
        s.t. sum_j c_lo[j] h_j(z) <= f(z) <= sum_j c_up[j] h_j(z)  for z in Z,

    Z = ``lp_grid(t, grid_points, radius)`` (uniform grid on [-R, R], the jump t and t - 1e-9, the
    pins +-(R + 2), +-(R + 4)). ``tail_points`` > 0 adds, on each side, that many points of the
    compactified tail |z| >= R (u = R/|z| uniform in [0, 1), rows scaled by sqrt(k!)/|z|^k)
    including z = +-infinity, where the constraint says that the leading coefficient has the right
    sign (zero for odd k): this removes the tail "cheat" of polynomials that dive between or
    beyond the pins. ``tail_points=0`` is the plain grid LP. ``refine`` > 0 runs that many
    exchange rounds: the local minima of the slack that violate by more than 1e-9 on the 40x
    finer check grid are added to Z and the LPs are solved again; it stops early when nothing
    violates, and keeps the previous round's polynomials (reporting their off-grid violation) if
    HiGHS fails on a refined LP.
    Raises RuntimeError if HiGHS does not return an optimum for the first LP.

    The LPs are deterministic, so a result is kept (the last 256 argument sets) and a second
    call with the same arguments returns the same, immutable, :class:`SandwichResult` without
    solving again (its ``seconds`` are those of the first call's solves).
    """
    t = checks.real(t, "t")
    degree = checks.integer(degree, "degree", minimum=0, maximum=MAX_DEGREE)
    tail_points = checks.integer(tail_points, "tail_points", minimum=0)
    refine = checks.integer(refine, "refine", minimum=0)
    grid_points = checks.integer(grid_points, "grid_points", minimum=3)
    radius = None if radius is None else checks.real(radius, "radius", above=abs(t))
    # t by its exact bits (float.hex keeps -0.0 apart from 0.0, which == would not)
    return _sandwich(t.hex(), degree, grid_points, radius, tail_points, refine)


@functools.lru_cache(maxsize=256)
def _sandwich(
    t_hex: str, degree: int, grid_points: int, radius: float | None, tail_points: int, refine: int
) -> SandwichResult:
    """:func:`sandwich` on validated arguments, t as ``float.hex`` (cached there)."""
    t = float.fromhex(t_hex)
    z, R = lp_grid(t, grid_points, radius)
    f = _sign(z, t)
    V = hermite_1d(z, degree)  # (|Z|, k + 1)
    zt, Vt, ft, st = _tail_rows(t, degree, R, int(tail_points))
    ft_scaled = ft * st

    # the check grid: 40 times finer than the LP's spacing, over [-2R, 2R]; exchange rounds take
    # their new points from it. The violation is reported on the midpoints of the check grid, which
    # no round can add as constraints, so a reported violation is never measured at a constraint.
    n_check = 80 * (int(grid_points) - 1) + 1
    zc = np.linspace(-2 * R, 2 * R, n_check)
    fc = _sign(zc, t)
    Vc = hermite_1d(zc, degree)
    zv = 0.5 * (zc[1:] + zc[:-1])
    fv = _sign(zv, t)
    Vv = hermite_1d(zv, degree)

    seconds = 0.0
    rounds = 0
    failed_rounds = 0
    n_prev = z.size  # the constraint count before the last refinement
    while True:
        sz = _far_scale(z, R, degree)
        A = np.vstack([V / sz[:, None], Vt])
        b = np.concatenate([f / sz, ft_scaled])
        t0 = time.perf_counter()
        try:
            c_up_new = _solve_side(A, b, True, t, degree)
            c_lo_new = _solve_side(A, b, False, t, degree)
        except RuntimeError:
            if rounds == 0:
                raise
            # HiGHS gave up on the refined LP (it happens at high degree): keep the previous
            # round's polynomials, whose constraints are a subset, and report their violation.
            seconds += time.perf_counter() - t0
            z, f, V = z[:n_prev], f[:n_prev], V[:n_prev]
            failed_rounds += 1
            break
        c_up, c_lo = c_up_new, c_lo_new
        seconds += time.perf_counter() - t0
        slack_up = Vc @ c_up - fc  # >= 0 wanted
        slack_lo = fc - Vc @ c_lo  # >= 0 wanted
        if rounds >= refine:
            break
        new = np.union1d(_local_minima(slack_up, 1e-9), _local_minima(slack_lo, 1e-9))
        new = new[np.abs(zc[new] - t) > 1e-6]  # the jump itself is handled by the pins
        if new.size == 0:
            break
        rounds += 1
        n_prev = z.size
        z_new = zc[new]
        z = np.concatenate([z, z_new])
        f = np.concatenate([f, fc[new]])
        V = np.vstack([V, hermite_1d(z_new, degree)])

    grid_violation = max(
        0.0,
        float(np.max(f - V @ c_up)),
        float(np.max(V @ c_lo - f)),
        float(np.max(ft_scaled - Vt @ c_up, initial=0.0)),
        float(np.max(Vt @ c_lo - ft_scaled, initial=0.0)),
    )
    slack_up_v = Vv @ c_up - fv  # the verification grid (midpoints), never constraints
    slack_lo_v = fv - Vv @ c_lo
    worst_up, worst_lo = int(np.argmin(slack_up_v)), int(np.argmin(slack_lo_v))
    off_up, off_lo = -float(slack_up_v[worst_up]), -float(slack_lo_v[worst_lo])
    off = max(0.0, off_up, off_lo)
    where = float(zv[worst_up] if off_up >= off_lo else zv[worst_lo])
    inner = np.abs(zv) <= R
    inner_violation = max(0.0, -float(slack_up_v[inner].min()), -float(slack_lo_v[inner].min()))
    gamma = bias(t)
    gap = float(c_up[0] - c_lo[0])
    c_up.flags.writeable = False
    c_lo.flags.writeable = False
    return SandwichResult(
        t=t,
        degree=degree,
        gamma=gamma,
        gap=gap,
        ratio=gap / gamma,
        coef_lo=c_lo,
        coef_up=c_up,
        radius=R,
        grid_violation=grid_violation,
        off_grid_violation=off,
        off_grid_where=where if off > 0 else float("nan"),
        n_constraints=int(V.shape[0] + Vt.shape[0]),
        tail_points=int(tail_points),
        refine_rounds=rounds - failed_rounds,
        seconds=seconds,
        inner_violation=inner_violation,
    )


def sandwich_table(ts: Iterable[float], degrees: Iterable[int], **kw) -> list[SandwichResult]:
    """``sandwich(t, k, **kw)`` for every t in ts and k in degrees (t outer, k inner)."""
    degrees = list(degrees)
    return [sandwich(t, k, **kw) for t in ts for k in degrees]


def degree_needed(
    results: Sequence[SandwichResult], ratio_target: float
) -> dict[float, int | None]:
    """For each t in ``results``: the smallest degree with G(t, k) / gamma <= ratio_target (None
    if none), the degree eq. `massart-multiplicative` of notebooks/05_testable_massart/index.md
    asks for with C = ratio_target."""
    target = checks.real(ratio_target, "ratio_target", above=0)
    out: dict[float, int | None] = {}
    for r in results:
        out.setdefault(r.t, None)
        if r.ratio <= target and (out[r.t] is None or r.degree < out[r.t]):
            out[r.t] = r.degree
    return out


# ---------------------------------------------------------------------------------------------
# the closed form of the optimal gap
# ---------------------------------------------------------------------------------------------


CLOSED_FORM_MAX_DEGREE = 10_000  # the Hermite recurrence stays accurate for |t| <= 10 up to here


def christoffel_gap(t: ArrayLike, degree: int) -> np.ndarray:
    """The optimal degree-k sandwich gap of sign(z - t) under N(0, 1), in closed form.

    Implements eq. `massart-christoffel` of notebooks/05_testable_massart/index.md:

        G(t, k) = 2 lambda_m(t),   lambda_m(t) = 1 / sum_{j <= m} h_j(t)^2,   m = floor(k / 2),

    where h_j are the orthonormal Hermite polynomials and lambda_m is the Christoffel function
    of the Gaussian. This is the classical extremal property of Gauss quadrature (the
    Markov-Stieltjes inequalities): the best one-sided polynomial approximations of a jump of
    height 2 at t, in the L1 norm of the weight, touch it at the nodes of the quadrature rule
    with a node at t, and the weight that rule puts on t is lambda_m(t). We did not take it from
    the paper (which we could not read); :func:`sandwich` solves the LP, and the two agree to
    within about 1e-5 relative (tested), so the formula extends C1 to degrees no LP in float64
    could reach. ``t`` may be an array; returns an array of its shape."""
    # the degree k (the recurrence stays accurate up to CLOSED_FORM_MAX_DEGREE)
    degree = checks.integer(degree, "degree", minimum=0, maximum=CLOSED_FORM_MAX_DEGREE)
    # the thresholds t, any shape
    t = checks.array(t, "t")
    # eq. massart-hermite: h_0(t)..h_m(t) with m = floor(k / 2), shape (..., m + 1)
    h = hermite_1d(t, degree // 2)
    # eq. massart-christoffel: G(t, k) = 2 / sum_{j <= m} h_j(t)^2
    return 2.0 / np.sum(h * h, axis=-1)


def degree_needed_closed_form(
    ts: ArrayLike, ratio_target: float, max_degree: int
) -> dict[float, int | None]:
    """For each threshold t, the smallest even degree k <= max_degree with
    christoffel_gap(t, k) / bias(t) <= ratio_target (None when none is), from one Hermite
    recurrence up to max_degree / 2: the degree eq. `massart-multiplicative` asks for, with the
    gap of eq. `massart-christoffel` (notebooks/05_testable_massart/index.md)."""
    ratio_target = checks.real(ratio_target, "ratio_target", above=0)
    max_degree = checks.integer(max_degree, "max_degree", minimum=0, maximum=CLOSED_FORM_MAX_DEGREE)
    ts = np.atleast_1d(checks.array(ts, "ts"))
    h = hermite_1d(ts, max_degree // 2)  # (T, m_max + 1)
    ratios = (2.0 / np.cumsum(h * h, axis=1)) / np.array([bias(t) for t in ts])[:, None]
    out: dict[float, int | None] = {}
    for t, row in zip(ts, ratios):
        hit = np.nonzero(row <= ratio_target)[0]
        out[float(t)] = int(2 * hit[0]) if hit.size else None
    return out


# ---------------------------------------------------------------------------------------------
# tables for the notebooks
# ---------------------------------------------------------------------------------------------


def results_frame(results: Sequence[SandwichResult], valid_tol: float) -> pd.DataFrame:
    """One row per sandwich: t, degree, gamma, gap, ratio, the three violations, the exchange
    rounds, ``valid`` (the violation on [-R, R] is at most ``valid_tol``), the closed-form gap
    of eq. `massart-christoffel` (notebooks/05_testable_massart/index.md) and the LP gap's
    relative difference from it."""
    valid_tol = checks.real(valid_tol, "valid_tol", minimum=0)
    table = pd.DataFrame(
        [
            dict(
                t=r.t,
                degree=r.degree,
                gamma=r.gamma,
                gap=r.gap,
                ratio=r.ratio,
                grid_violation=r.grid_violation,
                off_grid_violation=r.off_grid_violation,
                inner_violation=r.inner_violation,
                rounds=r.refine_rounds,
            )
            for r in results
        ]
    )
    table["valid"] = table.inner_violation <= valid_tol
    table["closed_form"] = [float(christoffel_gap(r.t, r.degree)) for r in results]
    table["rel_diff"] = (table.gap - table.closed_form).abs() / table.closed_form
    return table


def ratios_at_degree(table: pd.DataFrame, degree: int) -> dict[str, float]:
    """{f"{t:g}": G(t, degree) / gamma(t)} from a :func:`results_frame`, in the table's order."""
    rows = table[table.degree == degree]
    return {f"{t:g}": float(r) for t, r in zip(rows["t"], rows["ratio"])}


def degree_needed_frame(
    thresholds: ArrayLike, targets: Iterable[float], max_degree: int
) -> pd.DataFrame:
    """For each target C (in the given order) and threshold t: the smallest even degree with
    G(t, k) <= C gamma(t) by the closed form (eq. `massart-multiplicative` with the gap of eq.
    `massart-christoffel`, notebooks/05_testable_massart/index.md), NaN beyond ``max_degree``.
    Columns target, t, log_inv_gamma = log(1 / gamma(t)), degree."""
    rows = []
    for target in targets:
        needed = degree_needed_closed_form(thresholds, target, max_degree)
        rows += [
            dict(target=target, t=t, log_inv_gamma=float(np.log(1 / bias(t))), degree=k)
            for t, k in needed.items()
        ]
    return pd.DataFrame(rows)


def degrees_at(needed: pd.DataFrame, t: float) -> dict[str, int | None]:
    """{f"{target:g}": degree needed at threshold ``t``} from a :func:`degree_needed_frame`
    (None where no degree up to the sweep's largest reaches the target)."""
    at = needed[needed.t == t].set_index("target")["degree"].to_dict()
    return {f"{k:g}": (None if pd.isna(v) else int(v)) for k, v in at.items()}


def degree_growth(needed: pd.DataFrame, target: float, t_from: float) -> tuple[float, pd.DataFrame]:
    """The log-log slope s of the degree needed for G <= target * gamma against log(1 / gamma),
    over the thresholds t >= ``t_from`` that reach the target at a positive degree (degree about
    log(1 / gamma)^s, a polylogarithm of order s), and those rows of ``needed``. NaN with fewer
    than two rows."""
    rows = needed[(needed.target == target) & (needed.t >= t_from)].dropna()
    rows = rows[rows.degree > 0]
    if len(rows) < 2:
        return float("nan"), rows
    x, y = np.log(rows["log_inv_gamma"]), np.log(rows["degree"].astype(float))
    return float(np.polyfit(x, y, 1)[0]), rows
