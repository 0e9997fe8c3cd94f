"""Theory of chapter 04: Theorem 5.1, Lemma A.1, Theorem 5.2 and Corollary 5.3, numerically.

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language Learning",
arXiv 2607.03143 (Section 5 and Appendix A).

* Theorem 5.1 (worst case over the ambiguity set). A caption constrains only its core c (a unit
  vector); what it leaves unsaid is a residual r in a subspace U orthogonal to c. The ambiguity set
  of radius rho is

      T(c, U, rho) = { t = sqrt(1 - ||r||^2) c + r :  r in U, ||r|| <= rho },

  a set of unit vectors. For an image embedding v with a = v . c >= 0 and b = ||P_U v||,

      inf_{t in T} v . t = a sqrt(1 - rho^2) - rho b,

  attained at r* = -rho P_U v / ||P_U v||. (Proof: for ||r|| = s the inner product is
  a sqrt(1 - s^2) + v . r >= a sqrt(1 - s^2) - s b, with equality along -P_U v; the bound is
  non-increasing in s when a, b >= 0, so the infimum sits on the boundary s = rho.)
  :func:`worst_case_similarity`, :func:`worst_case_residual`, :func:`sample_ambiguity_set` and
  :func:`check_theorem_5_1` compute and check it.
* Lemma A.1 (disagreement vs residual radius). For K unit views t_1..t_K with consensus
  c = norm(sum_k t_k), disagreement u = (1/K) sum_k (1 - (t_k . c)^2) and rho^2 =
  max_k ||t_k - (t_k . c) c||^2: u <= rho^2 <= K u (:func:`lemma_a1`).
* Theorem 5.2 / Corollary 5.3 (views denoise the core). With per-view noise level sigma, n
  instances and confidence 1 - delta, the consensus of K views is within
  eta = sigma / sqrt(K) + sigma sqrt(2 log(2n / delta) / K) of the true core, and the denoising term
  of the PAC bound is 2 L eps_{K,n}(delta) with eps = 2 eta / (1 - eta) (finite only for eta < 1);
  so K = Omega(sigma^2 log(n / delta) / eps^2) views suffice (:func:`pac_denoising_eta`,
  :func:`pac_epsilon`, :func:`views_needed`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reprobook.core import checks

__all__ = [
    "worst_case_similarity",
    "worst_case_residual",
    "sample_ambiguity_set",
    "random_instance",
    "check_theorem_5_1",
    "lemma_a1",
    "lemma_a1_violation",
    "pac_denoising_eta",
    "pac_epsilon",
    "views_needed",
    "corollary_5_3_rate",
]

#: Tolerance of the unit-norm and orthogonality checks of the inputs.
TOL = 1e-6


def _as_vector(name: str, x, dim: int | None = None) -> torch.Tensor:
    """x as a float64 1-D tensor (of length ``dim`` when given)."""
    x = torch.as_tensor(x, dtype=torch.float64)
    if x.ndim != 1 or (dim is not None and x.shape[0] != dim):
        want = f"({dim},)" if dim is not None else "(D,)"
        raise ValueError(f"{name} must be a vector of shape {want}, got shape {tuple(x.shape)}")
    return x


def _check_setting(v, c, basis_U, rho) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """Validate (v, c, U, rho) of Theorem 5.1 and return float64 copies.

    c must be a unit vector; the columns of ``basis_U`` (D, m), m >= 1, orthonormal and orthogonal
    to c (each within ``TOL``); rho in [0, 1].
    """
    c = _as_vector("c", c)
    D = c.shape[0]
    v = _as_vector("v", v, D)
    U = torch.as_tensor(basis_U, dtype=torch.float64)
    if U.ndim != 2 or U.shape[0] != D or U.shape[1] < 1:
        raise ValueError(f"basis_U must have shape ({D}, m) with m >= 1, got {tuple(U.shape)}")
    if abs(float(c.norm()) - 1.0) > TOL:
        raise ValueError(f"c must be a unit vector, got norm {float(c.norm()):.8g}")
    gram_err = float((U.T @ U - torch.eye(U.shape[1], dtype=torch.float64)).abs().max())
    if gram_err > TOL:
        raise ValueError(
            f"the columns of basis_U must be orthonormal (max |U^T U - I| = {gram_err:.3g})"
        )
    ortho_err = float((U.T @ c).abs().max())
    if ortho_err > TOL:
        raise ValueError(
            f"the columns of basis_U must be orthogonal to c (max |U^T c| = {ortho_err:.3g})"
        )
    rho = float(rho)
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    return v, c, U, rho


def worst_case_similarity(v, c, basis_U, rho: float) -> float:
    """Theorem 5.1: inf over the ambiguity set of v . t = a sqrt(1 - rho^2) - rho b.

    a = v . c (must be >= 0: the theorem's hypothesis), b = ||P_U v|| = ||U^T v|| for the
    orthonormal basis U (D, m) of the residual subspace. v (D,), c (D,) unit, rho in [0, 1].
    Implements eq. `tpc-thm51` of notebooks/04_tpc_alignment/index.md.
    """
    v, c, U, rho = _check_setting(v, c, basis_U, rho)
    a = float(v @ c)
    if a < 0:
        raise ValueError(f"Theorem 5.1 needs a = v . c >= 0, got a = {a:.6g}")
    b = float((U.T @ v).norm())
    return a * math.sqrt(1.0 - rho**2) - rho * b


def worst_case_residual(v, c, basis_U, rho: float) -> torch.Tensor:
    """Theorem 5.1's minimiser r* = -rho P_U v / ||P_U v|| (D,), float64.

    When P_U v = 0 every direction of U is a minimiser; the first basis column is returned.
    Implements the minimiser of eq. `tpc-thm51` of notebooks/04_tpc_alignment/index.md.
    """
    v, c, U, rho = _check_setting(v, c, basis_U, rho)
    p = U @ (U.T @ v)  # (D,) = P_U v
    norm = float(p.norm())
    if norm <= 1e-12:
        return -rho * U[:, 0].clone()
    return -rho * p / norm


def sample_ambiguity_set(
    c, basis_U, rho: float, n: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """n members t = sqrt(1 - ||r||^2) c + r of the ambiguity set T(c, U, rho), as (n, D) float64.

    r = U (s w) with w uniform on the unit sphere of R^m; the first ceil(n/2) samples lie on the
    boundary (s = rho), the others uniformly in the ball (s = rho x^(1/m), x ~ U[0, 1]).
    """
    c = _as_vector("c", c)
    _, c, U, rho = _check_setting(torch.zeros_like(c), c, basis_U, rho)
    checks.integer(n, "n", minimum=1)
    m = U.shape[1]
    w = F.normalize(torch.randn(n, m, generator=generator, dtype=torch.float64), dim=1)  # (n, m)
    s = torch.full((n, 1), rho, dtype=torch.float64)
    n_boundary = (n + 1) // 2
    x = torch.rand(n - n_boundary, 1, generator=generator, dtype=torch.float64)
    s[n_boundary:] = rho * x.pow(1.0 / m)
    r = (s * w) @ U.T  # (n, D)
    return torch.sqrt(1.0 - s**2) * c + r


def random_instance(
    d: int, dim_U: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random (v, c, U) for Theorem 5.1: unit c, an orthonormal basis U (d, dim_U) of a random
    subspace orthogonal to c (QR of a Gaussian matrix whose first column is c), and a unit v with
    v . c >= 0 (its sign flipped if needed)."""
    checks.integer(d, "d", minimum=2)
    checks.integer(dim_U, "dim_U", minimum=1, maximum=d - 1)
    c = F.normalize(torch.randn(d, generator=generator, dtype=torch.float64), dim=0)
    g = torch.randn(d, dim_U + 1, generator=generator, dtype=torch.float64)
    g[:, 0] = c
    q, _ = torch.linalg.qr(g)  # q[:, 0] = +-c, the other columns orthogonal to it
    U = q[:, 1:]
    v = F.normalize(torch.randn(d, generator=generator, dtype=torch.float64), dim=0)
    if float(v @ c) < 0:
        v = -v
    return v, c, U


def check_theorem_5_1(
    d: int, dim_U: int, rho: float, n_samples: int, generator: torch.Generator | None = None
) -> dict[str, float]:
    """Check Theorem 5.1 on one random instance (:func:`random_instance`).

    Returns ``closed`` (a sqrt(1 - rho^2) - rho b), ``at_r_star`` (v . t at r*), ``min_samples``
    (min of v . t over ``n_samples`` members of the set), ``violation`` =
    max(|f(r*) - closed|, max(0, closed - min_samples)) (0 up to rounding when the theorem holds)
    and ``gap`` = min_samples - closed (>= 0; small when the sampling is dense), plus ``a``, ``b``.
    """
    v, c, U = random_instance(d, dim_U, generator)
    closed = worst_case_similarity(v, c, U, rho)
    r_star = worst_case_residual(v, c, U, rho)
    t_star = math.sqrt(max(0.0, 1.0 - float(r_star @ r_star))) * c + r_star
    at_r_star = float(v @ t_star)
    samples = sample_ambiguity_set(c, U, rho, n_samples, generator)
    min_samples = float((samples @ v).min())
    return {
        "closed": closed,
        "at_r_star": at_r_star,
        "min_samples": min_samples,
        "violation": max(abs(at_r_star - closed), max(0.0, closed - min_samples)),
        "gap": min_samples - closed,
        "a": float(v @ c),
        "b": float((U.T @ v).norm()),
    }


def lemma_a1(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lemma A.1's three quantities (u, rho^2, K u) for view sets t (K, d) or (N, K, d).

    c = norm(sum_k t_k), u = (1/K) sum_k (1 - (t_k . c)^2), rho^2 = max_k ||t_k - (t_k . c) c||^2.
    The lemma states u <= rho^2 <= K u (eq. `tpc-lemma` of notebooks/04_tpc_alignment/index.md).
    Views must be unit vectors (within 1e-4; they are re-normalised in float64 so that float32
    rounding does not masquerade as a violation). Returns tensors of shape () for one set, (N,)
    for a batch, in float64.
    """
    t = torch.as_tensor(t).to(torch.float64)
    if t.ndim not in (2, 3) or t.shape[-2] < 1 or t.shape[-1] < 1:
        raise ValueError(
            f"t must have shape (K, d) or (N, K, d) with K, d >= 1, got {tuple(t.shape)}"
        )
    norm_err = float((t.norm(dim=-1) - 1.0).abs().max()) if t.numel() else 0.0
    if norm_err > 1e-4:
        raise ValueError(
            f"the views must be unit vectors (largest | ||t_k|| - 1 | = {norm_err:.3g})"
        )
    t = F.normalize(t, dim=-1)  # in float64: float32 rounding would show up as u > rho^2
    K = t.shape[-2]
    c = F.normalize(t.sum(dim=-2), dim=-1)  # (..., d)
    dots = (t * c.unsqueeze(-2)).sum(-1)  # (..., K)
    u = (1.0 - dots**2).mean(-1)
    resid = t - dots.unsqueeze(-1) * c.unsqueeze(-2)  # (..., K, d)
    rho2 = resid.pow(2).sum(-1).amax(-1)
    return u, rho2, K * u


def lemma_a1_violation(t: torch.Tensor) -> float:
    """max over view sets of max(u - rho^2, rho^2 - K u): <= 0 (up to rounding) when Lemma A.1
    (eq. `tpc-lemma` of notebooks/04_tpc_alignment/index.md) holds."""
    u, rho2, Ku = lemma_a1(t)
    return float(torch.maximum(u - rho2, rho2 - Ku).max())


def _check_pac(sigma: float, n: int, delta: float) -> None:
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    checks.integer(n, "n", minimum=1)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def pac_denoising_eta(sigma: float, K: int, n: int, delta: float) -> float:
    """Theorem 5.2: eta = sigma / sqrt(K) + sigma sqrt(2 log(2n / delta) / K)."""
    _check_pac(sigma, n, delta)
    checks.integer(K, "K", minimum=1)
    return sigma / math.sqrt(K) + sigma * math.sqrt(2.0 * math.log(2.0 * n / delta) / K)


def pac_epsilon(eta: float) -> float:
    """Theorem 5.2: eps_{K,n}(delta) = 2 eta / (1 - eta), defined for 0 <= eta < 1."""
    if not (math.isfinite(eta) and 0.0 <= eta < 1.0):
        raise ValueError(
            f"eta must lie in [0, 1) for eps = 2 eta / (1 - eta) to be finite, got {eta!r}"
        )
    return 2.0 * eta / (1.0 - eta)


def views_needed(sigma: float, n: int, delta: float, eps: float, k_max: int = 10**12) -> int:
    """Smallest K with pac_epsilon(pac_denoising_eta(sigma, K, n, delta)) <= eps (Corollary 5.3).

    eta falls like 1/sqrt(K), so the condition is monotone in K: doubling finds an upper bound and
    bisection the smallest K. Raises ValueError if no K <= k_max suffices.
    """
    _check_pac(sigma, n, delta)
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")

    def ok(K: int) -> bool:
        eta = pac_denoising_eta(sigma, K, n, delta)
        return eta < 1.0 and pac_epsilon(eta) <= eps

    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > k_max:
            raise ValueError(
                f"no K <= k_max = {k_max} reaches eps = {eps} (sigma = {sigma}, n = {n})"
            )
    lo = hi // 2  # ok(lo) is False (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def corollary_5_3_rate(sigma: float, n: int, delta: float, eps: float) -> float:
    """Corollary 5.3's rate sigma^2 log(n / delta) / eps^2 (K = Omega of it), without constants."""
    _check_pac(sigma, n, delta)
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    return sigma**2 * math.log(n / delta) / eps**2
