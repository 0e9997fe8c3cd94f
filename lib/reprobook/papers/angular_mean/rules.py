"""Collective scoring rules for the chapter on the angular mean (arXiv 2605.12717).

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. The abstract names two
rules; their exact definitions are reconstructed from the abstract:

* the arithmetic mean (the default rule, "severely majoritarian" per prior work; eq.
  `am-arithmetic` of notebooks/02_angular_mean/index.md):
  theta_AM = direction of sum_i alpha_i theta_i (or of sum_i alpha_i u_i with normalised rows);
* the angular mean ("the spherical analog of the arithmetic mean"), read here as the weighted
  Frechet/Karcher mean on the unit sphere with the squared geodesic distance (eq.
  `am-angular-mean`),

      theta_ANG = argmin_{v in S^{d-1}} f(v),   f(v) = sum_i alpha_i arccos(<v, u_i>)^2.

f is not convex on the sphere: when the u_i spread beyond a hemisphere it can have several
local minima, and a local minimum can violate long-run proportionality. The functions below
therefore return the *global* minimiser: exactly in d = 2 (the objective is piecewise quadratic
in the angle, eq. `am-circle`) and by multi-start Riemannian descent in d >= 3 (eq.
`am-karcher`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .geometry import (
    _distances,
    _field,
    _hessian,
    as_generator,
    check_profile,
    exp_map,
    unit,
)

__all__ = [
    "arithmetic_mean",
    "AngularMeanInfo",
    "angular_mean_info",
    "angular_mean",
    "grid_angular_mean",
    "fibonacci_sphere",
]

_LOCAL_MIN_RESIDUAL = 1e-8  # an endpoint with |G| above this is not reported as a local minimum
_DISTINCT_ANGLE = 1e-6  # endpoints closer than this (radians) are the same local minimum


def arithmetic_mean(thetas, alphas, normalise: bool = False) -> np.ndarray:
    """The arithmetic-mean rule as a unit vector (d,): eq. `am-arithmetic` of
    notebooks/02_angular_mean/index.md.

        theta_AM = m / |m|,   m = sum_i alpha_i theta_i          (normalise=False)
                              m = sum_i alpha_i theta_i/|theta_i| (normalise=True)

    Whether the paper's arithmetic mean normalises the theta_i is not stated in the abstract;
    both variants are offered. Raises ValueError when m is (numerically) the zero vector, e.g.
    two opposite voters with equal shares: the rule then has no direction.
    """
    U, a = check_profile(thetas, alphas)
    T = U if normalise else np.asarray(thetas, dtype=float)
    m = a @ T  # (d,)
    scale = float(a @ np.linalg.norm(T, axis=1))
    if float(np.linalg.norm(m)) <= 1e-12 * scale:
        raise ValueError(
            "the arithmetic mean of the scoring vectors is the zero vector (for example two "
            "opposite voters with equal shares), so it defines no ranking direction"
        )
    return m / np.linalg.norm(m)


@dataclass(frozen=True, eq=False)
class AngularMeanInfo:
    """The angular mean with diagnostics.

    direction: (d,) unit vector, the global minimiser found; objective: f(direction);
    residual: |sum_i alpha_i Log_v(u_i)| at the direction (= |grad f| / 2, the stationarity
    residual); n_starts: starting points used (arcs of the circle for the exact d = 2 method);
    converged: residual <= tol (<= max(tol, 1e-9) for the closed form in d = 2);
    local_minima: objective values of the distinct local minima found, ascending (the first is
    the global value); minimisers: (k, d) those points, in the same order (stationary endpoints
    with a positive semidefinite Hessian, merged within 1e-6 rad; a continuum of minimisers
    shows up as several points with one value); method: "circle" (exact, d = 2) or "descent";
    n_iter: the most iterations any start used (0 for "circle").
    """

    direction: np.ndarray
    objective: float
    residual: float
    n_starts: int
    converged: bool
    local_minima: tuple[float, ...]
    minimisers: np.ndarray
    method: str
    n_iter: int


def _wrap(x: np.ndarray) -> np.ndarray:
    """Angles to [-pi, pi)."""
    return (x + np.pi) % (2.0 * np.pi) - np.pi


def _circle_exact(U: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact minimisation of f on the circle (d = 2).

    Implements eq. `am-circle` of notebooks/02_angular_mean/index.md. With v = (cos t, sin t)
    and u_i = (cos p_i, sin p_i), the distance is |wrap(t - p_i)|. The antipodes p_i + pi of
    the voters with alpha_i > 0 cut the circle into arcs; on one arc every wrap(t - p_i) equals
    t - c_i for a fixed representative c_i of p_i, so f(t) = sum_i alpha_i (t - c_i)^2 is one
    quadratic with minimiser t* = sum_i alpha_i c_i.
    Each arc whose t* lies inside it holds one local minimum (the kinks at the cuts are concave,
    so no minimum sits on a cut). Returns (angles t* (k,), values f(t*) (k,), number of arcs).
    """
    keep = a > 0  # voters with no share change nothing
    p = np.arctan2(U[keep, 1], U[keep, 0])  # (n',) each voter's angle p_i on the circle
    w = a[keep]  # (n',) their shares alpha_i
    cuts = np.unique(np.mod(p + np.pi, 2.0 * np.pi))  # the antipodes p_i + pi, sorted in [0, 2pi)
    lo = cuts  # (k,) each arc starts at an antipode ...
    hi = np.append(cuts[1:], cuts[0] + 2.0 * np.pi)  # (k,) ... and ends at the next: [lo, hi]
    mid = 0.5 * (lo + hi)  # (k,) a point inside each arc
    C = mid[:, None] - _wrap(mid[:, None] - p[None, :])  # (k, n') eq. am-circle: the c_i per arc
    t = C @ w  # (k,) eq. am-circle: the arc's quadratic is smallest at t* = sum_i alpha_i c_i
    inside = (t >= lo - 1e-12) & (t <= hi + 1e-12)  # a local minimum only if t* is on its arc
    vals = ((t[:, None] - C) ** 2) @ w  # (k,) eq. am-angular-mean: f(t*) on each arc
    return t[inside], vals[inside], int(lo.size)


def _starts(
    U: np.ndarray, a: np.ndarray, n_random: int, max_voter_starts: int | None, rng
) -> np.ndarray:
    """Starting points (S, d): the normalised arithmetic mean (when nonzero), the directions of
    the voters with the largest shares, and ``n_random`` uniform points on the sphere."""
    d = U.shape[1]
    rows = []
    m = a @ U
    if np.linalg.norm(m) > 1e-12:
        rows.append(m / np.linalg.norm(m))
    order = np.argsort(-a, kind="stable")
    order = order[a[order] > 0]
    if max_voter_starts is not None:
        order = order[:max_voter_starts]
    rows.extend(U[order])
    if n_random > 0:
        gen = as_generator(rng)
        rows.extend(unit(gen.standard_normal((n_random, d))))
    return np.array(rows, dtype=float)


def _descend(
    U: np.ndarray, a: np.ndarray, V0: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Riemannian descent from each row of V0 (S, d); returns (endpoints (S, d), iterations (S,)).

    Implements the step of eq. `am-karcher` of notebooks/02_angular_mean/index.md. Each step
    moves along a geodesic, v <- Exp_v(t D), with D the Karcher field
    G = sum_i alpha_i Log_v(u_i) preconditioned by the Riemannian Hessian H of f/2 (eigenvalues
    replaced by max(|lambda|, 1e-3), so D is a descent direction even where H is indefinite;
    with H = I this is the plain Karcher iteration v <- Exp_v(G)). The step t starts at 1 and
    is halved until the Armijo condition f(new) <= f(v) - 2e-4 t <D, G> holds (up to a rounding
    allowance of 1e-13 (1 + f)); |t D| is capped at pi/2. A start stops when |G| <= tol, when
    no step is accepted, or after max_iter steps.
    """
    V = V0.copy()  # (S, d) one point per start
    S, d = V.shape
    f = _distances(V, U) ** 2 @ a  # (S,) eq. am-angular-mean: f at each start
    active = np.ones(S, dtype=bool)  # starts still descending
    iters = np.zeros(S, dtype=int)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:  # every start has stopped
            break
        Va = V[idx]  # (k, d) the active points
        G = _field(Va, U, a)  # (k, d) eq. am-karcher: G(v) = sum_i alpha_i Log_v(u_i)
        r = np.linalg.norm(G, axis=1)  # (k,) the stationarity residual |G(v)|
        done = r <= tol  # eq. am-karcher: G(v) = 0 at a critical point of f
        active[idx[done]] = False
        idx, Va, G = idx[~done], Va[~done], G[~done]
        if idx.size == 0:
            break
        # the Hessian of f/2 on the tangent space; the normal direction gets eigenvalue 1
        H = _hessian(Va, U, a) + Va[:, :, None] * Va[:, None, :]
        lam, Q = np.linalg.eigh(H)  # (k, d), (k, d, d)
        lam = np.maximum(np.abs(lam), 1e-3)  # |eigenvalues|: a descent direction where H < 0
        D = np.einsum("kij,kj->ki", Q, np.einsum("kji,kj->ki", Q, G) / lam)  # D = H^-1 G
        D -= np.sum(D * Va, axis=1, keepdims=True) * Va  # keep D tangent at v
        nd = np.linalg.norm(D, axis=1, keepdims=True)
        D *= np.minimum(1.0, (np.pi / 2) / np.maximum(nd, 1e-300))  # cap a step at pi/2
        slope = np.sum(D * G, axis=1)  # > 0: -<grad f, D> / 2
        fa = f[idx]  # (k,) f before the step
        t = np.ones(idx.size)  # step lengths, halved until Armijo holds
        pending = np.ones(idx.size, dtype=bool)  # starts still searching for a step
        newV = Va.copy()
        newf = fa.copy()
        for _ls in range(60):  # backtracking line search
            j = np.flatnonzero(pending)
            if j.size == 0:
                break
            Vt = exp_map(Va[j], t[j, None] * D[j])  # eq. am-karcher: Exp_v(eta D), eta = t
            ft = _distances(Vt, U) ** 2 @ a  # f at the trial points
            # Armijo: f drops by a fraction of the predicted decrease (plus a rounding margin)
            ok = ft <= fa[j] - 2e-4 * t[j] * slope[j] + 1e-13 * (1.0 + fa[j])
            newV[j[ok]] = Vt[ok]  # accept these steps
            newf[j[ok]] = ft[ok]
            pending[j[ok]] = False
            t[j[~ok]] *= 0.5  # halve the others
        stalled = pending  # no step accepted: the start stops where it is
        V[idx] = newV
        f[idx] = newf
        iters[idx[~stalled]] += 1
        active[idx[stalled]] = False
    return V, iters


def angular_mean_info(
    thetas,
    alphas,
    *,
    method: str = "auto",
    n_random_starts: int = 8,
    max_voter_starts: int | None = 32,
    max_iter: int = 300,
    tol: float = 1e-12,
    rng: np.random.Generator | int | None = 0,
) -> AngularMeanInfo:
    """The angular mean theta_ANG = argmin_{|v| = 1} sum_i alpha_i arccos(<v, u_i>)^2, with
    diagnostics.

    Implements eq. `am-angular-mean` of notebooks/02_angular_mean/index.md (reconstructed from
    the abstract: the weighted Frechet/Karcher mean with squared geodesic distance). ``method``:

    * "circle" (d = 2 only): exact. The objective is a quadratic in the angle on each arc
      between consecutive antipodes of the u_i; each arc's minimiser is computed in closed form
      and the best is kept (see ``_circle_exact``). No grid, no tolerance.
    * "descent": Riemannian descent v <- Exp_v(t D) (D the Karcher field sum_i alpha_i
      Log_v(u_i), Hessian-preconditioned, Armijo steps) from several starts: the normalised
      arithmetic mean, the directions of up to ``max_voter_starts`` voters (largest shares
      first; None: all), and ``n_random_starts`` uniform points drawn from ``rng``. The start
      with the lowest objective wins.
    * "auto": "circle" when d = 2, else "descent".

    The result is deterministic for a fixed ``rng`` seed. When the minimiser is not unique (two
    opposite voters with equal shares, say) one of the minimisers is returned.
    """
    U, a = check_profile(thetas, alphas)
    d = U.shape[1]
    checks.choice(method, "method", ("auto", "circle", "descent"))
    if method == "auto":
        method = "circle" if d == 2 else "descent"
    if method == "circle" and d != 2:
        raise ValueError(
            f"method 'circle' is exact only in dimension d = 2; got d = {d} (use 'descent')"
        )
    max_iter = checks.integer(max_iter, "max_iter", minimum=1)
    n_random_starts = checks.integer(n_random_starts, "n_random_starts", minimum=0)
    tol = checks.real(tol, "tol", above=0)

    if method == "circle":
        t, vals, n_arcs = _circle_exact(U, a)
        P = np.stack([np.cos(t), np.sin(t)], axis=1)  # (k, 2)
        order = np.argsort(vals, kind="stable")
        P, vals = P[order], vals[order]
        iters_used = 0
        n_starts = n_arcs
    else:
        V0 = _starts(U, a, int(n_random_starts), max_voter_starts, rng)
        P, iters = _descend(U, a, V0, int(max_iter), float(tol))
        vals = _distances(P, U) ** 2 @ a
        order = np.argsort(vals, kind="stable")
        P, vals = P[order], vals[order]
        iters_used = int(iters.max())
        n_starts = int(V0.shape[0])

    best = P[0]
    objective = float(_distances(best[None], U)[0] ** 2 @ a)
    residual = float(np.linalg.norm(_field(best[None], U, a)[0]))

    # distinct local minima: stationary endpoints with a positive semidefinite tangent Hessian
    G = _field(P, U, a)
    res = np.linalg.norm(G, axis=1)
    Hn = _hessian(P, U, a) + 10.0 * P[:, :, None] * P[:, None, :]
    min_curv = np.linalg.eigvalsh(Hn)[:, 0]
    is_min = (res <= max(_LOCAL_MIN_RESIDUAL, tol)) & (min_curv >= -1e-8)
    minima: list[int] = []
    for k in np.flatnonzero(is_min):
        if all(_distances(P[k][None], P[j][None])[0, 0] > _DISTINCT_ANGLE for j in minima):
            minima.append(int(k))
    return AngularMeanInfo(
        direction=best.copy(),
        objective=objective,
        residual=residual,
        n_starts=n_starts,
        converged=residual <= (max(tol, 1e-9) if method == "circle" else tol),
        local_minima=tuple(float(vals[k]) for k in minima),
        minimisers=P[minima].copy() if minima else np.empty((0, d)),
        method=method,
        n_iter=iters_used,
    )


def angular_mean(thetas, alphas, **kwargs) -> np.ndarray:
    """The angular mean as a unit vector (d,): ``angular_mean_info(thetas, alphas,
    **kwargs).direction``.

        theta_ANG = argmin_{v in S^{d-1}} sum_i alpha_i arccos(<v, theta_i / |theta_i|>)^2

    Implements eq. `am-angular-mean` of notebooks/02_angular_mean/index.md (reconstructed
    definition; see :func:`angular_mean_info` for the options).
    """
    return angular_mean_info(thetas, alphas, **kwargs).direction


def fibonacci_sphere(n_points: int) -> np.ndarray:
    """n_points nearly uniform points (n_points, 3) on S^2 (the Fibonacci lattice)."""
    n_points = checks.integer(n_points, "n_points", minimum=1)
    k = np.arange(n_points) + 0.5
    z = 1.0 - 2.0 * k / n_points
    phi = np.pi * (1.0 + 5.0**0.5) * k
    r = np.sqrt(1.0 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def grid_angular_mean(
    thetas, alphas, n_grid: int = 20_001, chunk: int = 4096
) -> tuple[np.ndarray, float]:
    """Brute-force minimum of f (eq. `am-angular-mean`) over a grid: n_grid equally spaced
    angles on the circle (d = 2) or a Fibonacci lattice of n_grid points on S^2 (d = 3). Returns
    (direction (d,), f(direction)).

    A cross-check of :func:`angular_mean_info`: the grid value is within O(spacing^2) of the true
    minimum (spacing 2 pi / n_grid on the circle, about sqrt(4 pi / n_grid) on S^2).
    """
    U, a = check_profile(thetas, alphas)
    d = U.shape[1]
    if d == 2:
        t = np.linspace(0.0, 2.0 * np.pi, int(n_grid), endpoint=False)
        grid = np.stack([np.cos(t), np.sin(t)], axis=1)
    elif d == 3:
        grid = fibonacci_sphere(int(n_grid))
    else:
        raise ValueError(f"grid_angular_mean supports d = 2 and d = 3 only; got d = {d}")
    best_val, best = np.inf, grid[0]
    for s in range(0, grid.shape[0], chunk):
        g = grid[s : s + chunk]
        vals = _distances(g, U) ** 2 @ a
        k = int(np.argmin(vals))
        if vals[k] < best_val:
            best_val, best = float(vals[k]), g[k]
    return best.copy(), best_val
