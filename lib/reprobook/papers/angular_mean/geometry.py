"""Sphere geometry for the chapter on the angular mean (arXiv 2605.12717).

Paper: "The End Justifies the Mean: A Linear Ranking Rule for Proportional Sequential
Decisions" (Baharav, Boehmer, Flanigan, Wittmann), arXiv 2605.12717. Only the abstract was
available, so the objective below is a reconstruction from the abstract: the "angular mean,
the spherical analog of the arithmetic mean" is read as the weighted Frechet (Karcher) mean on
the unit sphere S^{d-1} with the squared geodesic distance (eq. `am-angular-mean` of
notebooks/02_angular_mean/index.md),

    f(v) = sum_i alpha_i * arccos(<v, u_i>)^2,    u_i = theta_i / |theta_i|.

This module holds the input checks shared by the chapter, the geodesic distance, the
exponential and logarithm maps of the sphere, the objective f, its Riemannian gradient and
Hessian, and the whitening map for Gaussian items with a general covariance.

Notation: ``thetas`` (n, d) are the voters' preferred scoring vectors, ``alphas`` (n,) their
population shares, ``u`` the unit directions; ``v`` (d,) or (S, d) is a point (or S points) on
the sphere.
"""

from __future__ import annotations

import numpy as np

from reprobook.core.rng import as_generator

__all__ = [
    "as_generator",
    "check_profile",
    "check_direction",
    "unit",
    "angle",
    "log_map",
    "exp_map",
    "karcher_objective",
    "karcher_field",
    "riemannian_gradient",
    "riemannian_hessian",
    "whiten",
    "unwhiten",
]

SHARE_TOL = 1e-9  # |sum(alphas) - 1| allowed
_ANTIPODAL_SINE = 1e-14  # |u - <v,u> v| below this with <v,u> < 0 counts as the antipode of v


def check_profile(thetas, alphas=None) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate a preference profile; return (u (n, d) unit rows, alphas (n,) or None).

    ``thetas`` must be a finite 2-D array of shape (n, d) with n >= 1 voters, dimension d >= 2
    and no zero row (only a row's direction matters, and the zero vector has none). ``alphas``,
    when given, must be n nonnegative finite shares summing to 1 within 1e-9.
    Raises ValueError naming the problem and what is allowed.
    """
    T = np.asarray(thetas, dtype=float)
    if T.ndim != 2:
        raise ValueError(
            "thetas must be a 2-D array of shape (n, d), one scoring vector per row; "
            f"got an array with shape {T.shape}"
        )
    n, d = T.shape
    if n < 1:
        raise ValueError("thetas has no rows; give at least one voter's scoring vector")
    if d < 2:
        raise ValueError(
            "the item dimension d must be >= 2 (d = 1 has a single ranking direction up to "
            f"sign); got d = {d}"
        )
    if not np.all(np.isfinite(T)):
        bad = int(np.argwhere(~np.isfinite(T))[0, 0])
        raise ValueError(f"thetas[{bad}] contains NaN or inf; every scoring vector must be finite")
    norms = np.linalg.norm(T, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(
            f"thetas[{int(zero[0])}] is the zero vector; every voter needs a nonzero scoring "
            "vector (only its direction matters)"
        )
    U = T / norms[:, None]
    if alphas is None:
        return U, None
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size != n:
        raise ValueError(
            f"alphas must be a 1-D array with one share per voter (length n = {n}); "
            f"got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError("alphas contains NaN or inf; shares must be finite numbers in [0, 1]")
    if np.any(a < 0):
        bad = int(np.flatnonzero(a < 0)[0])
        raise ValueError(f"alphas must be nonnegative; alphas[{bad}] = {float(a[bad])!r}")
    total = float(a.sum())
    if abs(total - 1.0) > SHARE_TOL:
        raise ValueError(f"alphas must sum to 1 (tolerance {SHARE_TOL:g}); they sum to {total!r}")
    return U, a


def check_direction(theta, d: int | None = None, name: str = "theta") -> np.ndarray:
    """Validate one scoring vector of shape (d,) (nonzero, finite); return it as a unit vector."""
    t = np.asarray(theta, dtype=float)
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector of shape (d,); got shape {t.shape}")
    if d is not None and t.size != d:
        raise ValueError(
            f"{name} has dimension {t.size} but the voters' vectors have dimension d = {d}"
        )
    if t.size < 2:
        raise ValueError(f"the item dimension d must be >= 2; {name} has dimension {t.size}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} contains NaN or inf")
    nrm = float(np.linalg.norm(t))
    if nrm == 0:
        raise ValueError(f"{name} is the zero vector; a scoring vector needs a direction")
    return t / nrm


def unit(x: np.ndarray) -> np.ndarray:
    """x / |x| along the last axis (no checks; zero rows give NaN)."""
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def angle(a, b) -> np.ndarray:
    """Angle in [0, pi] between the directions of a and b (broadcast over leading axes).

    Computed as 2 * atan2(|a' - b'|, |a' + b'|) on the unit vectors a', b', which keeps full
    relative accuracy near 0 and near pi (arccos of the inner product does not).
    """
    a = unit(a)
    b = unit(b)
    return 2.0 * np.arctan2(np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1))


def _fallback_tangent(v: np.ndarray) -> np.ndarray:
    """A fixed unit tangent vector at each row of v (S, d): the coordinate axis least aligned with
    v, projected onto the tangent space. Used as the direction of Log at an antipode."""
    k = np.argmin(np.abs(v), axis=-1)
    e = np.zeros_like(v)
    np.put_along_axis(e, k[..., None], 1.0, axis=-1)
    t = e - np.sum(e * v, axis=-1, keepdims=True) * v
    return unit(t)


def log_map(v, u) -> np.ndarray:
    """Riemannian logarithm of the unit sphere: the tangent vector at v pointing to u (the Log
    of eq. `am-karcher` of notebooks/02_angular_mean/index.md).

        Log_v(u) = theta * (u - <v,u> v) / |u - <v,u> v|,   theta = angle(v, u).

    Shapes: v (..., d), u (..., d) broadcast; returns (..., d). At u = v it is 0. At the antipode
    u = -v every direction is a shortest geodesic; we return theta = pi times a fixed tangent
    direction (the coordinate axis least aligned with v, projected), so the result is defined
    and has the right length. Inputs are normalised first.
    """
    v = unit(v)
    u = unit(u)
    v, u = np.broadcast_arrays(v, u)
    c = np.sum(v * u, axis=-1, keepdims=True)
    w = u - c * v
    s = np.linalg.norm(w, axis=-1, keepdims=True)
    th = angle(v, u)[..., None]
    safe = s > 0
    direction = np.where(safe, w / np.where(safe, s, 1.0), 0.0)
    antipodal = (s < _ANTIPODAL_SINE) & (c < 0)
    if np.any(antipodal):
        direction = np.where(antipodal, _fallback_tangent(v), direction)
    return th * direction


def exp_map(v, w) -> np.ndarray:
    """Riemannian exponential of the unit sphere: follow the geodesic from v with velocity w
    (the Exp of eq. `am-karcher` of notebooks/02_angular_mean/index.md).

        Exp_v(w) = cos|w| v + sin|w| w / |w|    (w tangent at v; Exp_v(0) = v).

    Shapes: v (..., d), w (..., d); returns unit vectors (..., d) (renormalised against
    rounding). w is projected onto the tangent space at v first.
    """
    v = unit(v)
    w = np.asarray(w, dtype=float)
    w = w - np.sum(w * v, axis=-1, keepdims=True) * v
    r = np.linalg.norm(w, axis=-1, keepdims=True)
    out = np.cos(r) * v + np.sinc(r / np.pi) * w  # sinc(r/pi) = sin(r)/r, = 1 at r = 0
    return unit(out)


def _distances(V: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Geodesic distances (S, n) between unit rows V (S, d) and U (n, d).

    atan2(|u - c v|, c) with c = <v, u>: both arguments carry absolute errors of order 1e-16,
    so the angle does too, near 0 and near pi alike.
    """
    C = V @ U.T  # (S, n)
    W = U[None, :, :] - C[:, :, None] * V[:, None, :]  # (S, n, d)
    return np.arctan2(np.sqrt(np.einsum("snd,snd->sn", W, W)), C)


def karcher_objective(v, thetas, alphas) -> float | np.ndarray:
    """The angular-mean objective f(v) = sum_i alpha_i * angle(v, theta_i)^2.

    Implements the f of eq. `am-angular-mean` of notebooks/02_angular_mean/index.md.

    v: (d,) -> float, or (S, d) -> (S,). v need not be unit (its direction is used).
    The angle is the geodesic distance on S^{d-1}, arccos(<v, u_i>) computed stably.
    """
    U, a = check_profile(thetas, alphas)
    V = np.asarray(v, dtype=float)
    single = V.ndim == 1
    V2 = unit(np.atleast_2d(V))
    if V2.shape[-1] != U.shape[1]:
        raise ValueError(
            f"v has dimension {V2.shape[-1]} but the voters' vectors have dimension "
            f"d = {U.shape[1]}"
        )
    f = _distances(V2, U) ** 2 @ a  # (S,)
    return float(f[0]) if single else f


def _field(V: np.ndarray, U: np.ndarray, a: np.ndarray) -> np.ndarray:
    """sum_i a_i Log_V(u_i) for unit rows V (S, d) and U (n, d); returns (S, d).

    Same formula as :func:`log_map` (theta = atan2(|w|, c), w = u - c v), without re-normalising.
    """
    C = V @ U.T  # (S, n)
    W = U[None, :, :] - C[:, :, None] * V[:, None, :]  # (S, n, d)
    s = np.sqrt(np.einsum("snd,snd->sn", W, W))
    th = np.arctan2(s, C)
    antipodal = (s < _ANTIPODAL_SINE) & (C < 0)
    use = (s > 0) & ~antipodal
    coef = np.where(use, a * th / np.where(use, s, 1.0), 0.0)  # (S, n): a_i theta_i / |w_i|
    G = np.einsum("sn,snd->sd", coef, W)
    if np.any(antipodal):  # Log at an antipode: length pi along the fixed fallback tangent
        weight = np.sum(np.where(antipodal, a * th, 0.0), axis=1)  # (S,)
        G = G + weight[:, None] * _fallback_tangent(V)
    return G


def karcher_field(v, thetas, alphas) -> np.ndarray:
    """The mean of the logarithms, G(v) = sum_i alpha_i Log_v(u_i)  ((d,) or (S, d)).

    Implements the G of eq. `am-karcher` of notebooks/02_angular_mean/index.md.

    G = -grad f / 2 and the Karcher iteration is v <- Exp_v(eta G). |G(v)| is the stationarity
    residual reported by :func:`reprobook.papers.angular_mean.angular_mean_info`.
    """
    U, a = check_profile(thetas, alphas)
    V = np.asarray(v, dtype=float)
    single = V.ndim == 1
    G = _field(unit(np.atleast_2d(V)), U, a)
    return G[0] if single else G


def riemannian_gradient(v, thetas, alphas) -> np.ndarray:
    """Riemannian gradient of f on the sphere: grad f(v) = -2 sum_i alpha_i Log_v(u_i).

    Implements eq. `am-karcher` of notebooks/02_angular_mean/index.md: grad f = -2 G.

    It is tangent at v ((d,) or (S, d)). f is smooth except at the antipodes -u_i of voters
    with alpha_i > 0, where it has a concave kink (so no minimiser lies there).
    """
    return -2.0 * karcher_field(v, thetas, alphas)


def _hessian(V: np.ndarray, U: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Hessian of f/2 in ambient coordinates restricted to the tangent spaces (S, d, d)."""
    S, d = V.shape
    C = V @ U.T  # (S, n)
    W = U[None, :, :] - C[:, :, None] * V[:, None, :]  # (S, n, d) tangent parts
    s = np.linalg.norm(W, axis=-1)  # sin(theta)
    th = _distances(V, U)  # (S, n)
    E = np.where(s[..., None] > 0, W / np.where(s > 0, s, 1.0)[..., None], 0.0)
    # theta cot theta = theta cos / sin; its series 1 - theta^2/3 near 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tc = np.where(th > 1e-6, th * C / np.where(s > 0, s, np.inf), 1.0 - th**2 / 3.0)
    tc = np.where(np.isfinite(tc), tc, -1e12)  # at an antipode: a concave kink, -inf curvature
    P = np.eye(d)[None] - V[:, :, None] * V[:, None, :]  # (S, d, d)
    B = tc @ a  # (S,)
    A = np.matmul(
        np.swapaxes(E * (a * (1.0 - tc))[:, :, None], 1, 2), E
    )  # sum_i a_i (1 - tc_i) e_i e_i^T
    return A + B[:, None, None] * P


def riemannian_hessian(v, thetas, alphas) -> np.ndarray:
    """Riemannian Hessian of f at v as a (d, d) matrix acting on the tangent space at v.

        Hess f(v) = 2 sum_i alpha_i [ e_i e_i^T + t_i cot t_i (P_v - e_i e_i^T) ],

    with t_i = angle(v, u_i), e_i = Log_v(u_i)/t_i and P_v = I - v v^T (the Hessian of
    d(., u)^2 / 2 on a sphere of curvature 1). Shapes: v (d,) -> (d, d); v (S, d) -> (S, d, d).
    It is singular along v (the normal direction). Near an antipode t cot t -> -inf.
    """
    U, a = check_profile(thetas, alphas)
    V = np.asarray(v, dtype=float)
    single = V.ndim == 1
    H = 2.0 * _hessian(unit(np.atleast_2d(V)), U, a)
    return H[0] if single else H


def _sqrtm_psd(cov) -> tuple[np.ndarray, np.ndarray]:
    """(Sigma^{1/2}, Sigma^{-1/2}) of a symmetric positive-definite matrix (eigendecomposition)."""
    S = np.asarray(cov, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"cov must be a square (d, d) matrix; got shape {S.shape}")
    if not np.allclose(S, S.T, atol=1e-10 * max(1.0, float(np.abs(S).max()))):
        raise ValueError("cov must be symmetric")
    w, Q = np.linalg.eigh(S)
    if w.min() <= 1e-12 * max(1.0, float(w.max())):
        raise ValueError(f"cov must be positive definite; its smallest eigenvalue is {w.min():.3g}")
    return (Q * np.sqrt(w)) @ Q.T, (Q / np.sqrt(w)) @ Q.T


def whiten(thetas, cov) -> np.ndarray:
    """Scoring vectors in whitened coordinates: theta -> Sigma^{1/2} theta (rows of (n, d)).

    For items x = Sigma^{1/2} z with z rotation invariant, <theta, x> = <Sigma^{1/2} theta, z>,
    so the angle identity and every rule apply to the whitened vectors (an assumed
    generalisation of the isotropic case; reconstructed, not from the paper).
    """
    half, _ = _sqrtm_psd(cov)
    T = np.atleast_2d(np.asarray(thetas, dtype=float))
    if T.shape[-1] != half.shape[0]:
        raise ValueError(
            f"thetas have dimension {T.shape[-1]} but cov is {half.shape[0]} x {half.shape[0]}"
        )
    out = T @ half  # half is symmetric
    return out if np.asarray(thetas).ndim == 2 else out[0]


def unwhiten(v, cov) -> np.ndarray:
    """Back from whitened coordinates: v -> Sigma^{-1/2} v, the scoring vector for raw items."""
    _, inv_half = _sqrtm_psd(cov)
    V = np.asarray(v, dtype=float)
    if V.shape[-1] != inv_half.shape[0]:
        raise ValueError(
            f"v has dimension {V.shape[-1]} but cov is {inv_half.shape[0]} x {inv_half.shape[0]}"
        )
    return V @ inv_half
