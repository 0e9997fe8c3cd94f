"""Marginal velocity and score fields on the product of spheres, and the two baselines' fields.

Paper: "Spherical Flows for Sampling Categorical Data" (Chemseddine, Kornhardt, Steidl;
arXiv 2605.05629). The full text was not read. The fields below are our reconstruction, stated
in the section "The method, as we rebuilt it" of notebooks/16_vmf_sphere_flow/index.md and
checked numerically by the tests.

Notation. Token embeddings are the unit columns w_k of W (d, V). A sequence state is
h = (h^1..h^L), each h^l on S^{d-1}; P_h = I - h h^T is the tangent projector at h. The only
learned object is the per-position posterior p(x^l = k | h) (``post``, shape (..., L, V)).

- vMF path, eq. `vmf-marginal`, with kappa the concentration and kappa_dot = d kappa / dt:

      u^l(h) = kappa_dot * sum_k p(x^l=k|h) psi(w_k . h^l, kappa) P_{h^l} w_k     (velocity)
      s^l(h) = kappa     * sum_k p(x^l=k|h)                        P_{h^l} w_k     (score)

  psi(s, kappa) is the scalar velocity per unit kappa of eq. `vmf-psi`; it is passed in as a
  callable so that any tabulation of it can be used.
- SDE variant (eq. `vmf-step`; the paper's appendix D, as summarised from its code): drift
  u + sigma^2 s, diffusion sqrt(2 sigma^2); the two fields fuse into one per-token weight
  kappa_dot psi + sigma^2 kappa.
- Geodesic baseline (Riemannian flow matching on the SLERP path, eq. `vmf-baselines`):

      u^l(h, t) = sum_k p(x^l=k|h) (alpha_k / sin alpha_k) P_{h^l} w_k / (1 - t),
      alpha_k = arccos(w_k . h^l),

  i.e. the posterior mean of the log map log_{h^l}(w_k), divided by the remaining time.
- Euclidean baseline (linear-interpolation flow matching in R^d, x_t = (1 - t) x_0 + t w,
  eq. `vmf-baselines`):

      u^l(x, t) = (sum_k p(x^l=k|x) w_k - x^l) / (1 - t),   t capped at 1 - 1e-3.

Every field is computed in the posterior-matmul form: the per-token weights c_k (..., L, V)
are contracted with W^T first, m = c W^T (..., L, d), and the sum of projections is then one
projection, sum_k c_k P_h w_k = P_h m. Memory therefore stays at (..., L, V) + (..., L, d) and
never reaches (..., L, V, d).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from reprobook.core import checks

from .geometry import tangent

__all__ = [
    "PsiFn",
    "marginal_velocity",
    "marginal_score",
    "sde_drift",
    "geodesic_velocity",
    "euclidean_velocity",
    "T_CAP",
    "geodesic_score",
    "euclidean_score",
]

PsiFn = Callable[[torch.Tensor, float], torch.Tensor]  # psi(s (..., L, V), kappa) -> (..., L, V)

# the baselines' time cap t <= 1 - 1e-3: the paper's code caps the Euclidean path's time there;
# the geodesic path borrows the cap (our assumption)
T_CAP = 1.0 - 1e-3
_UNIT_TOL = 1e-3  # allowed | |w_k| - 1 | for the columns of W


# --- small private helpers ------------------------------------------------------------------------


def _scalar(name: str, value, *, nonneg: bool = False) -> float:
    """A finite Python float from a number or a one-element tensor (:func:`checks.real`)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise checks.InputError(
                f"{name} must be a scalar (a number or a one-element tensor), "
                f"got shape {tuple(value.shape)}"
            )
        value = value.item()
    return checks.real(value, name, minimum=0 if nonneg else None)


def _check_embeddings(W: torch.Tensor) -> None:
    if not isinstance(W, torch.Tensor) or W.dim() != 2:
        raise ValueError(
            f"W must be a (d, V) tensor of unit columns, got {type(W).__name__} "
            f"with shape {tuple(getattr(W, 'shape', ()))}"
        )
    d, V = W.shape
    if d < 2 or V < 1:
        raise ValueError(f"W must have d >= 2 rows and V >= 1 columns, got shape {(d, V)}")
    if not W.is_floating_point():
        raise TypeError(f"W must be a floating-point tensor, got dtype {W.dtype}")
    norms = W.norm(dim=0)
    if not torch.isfinite(norms).all() or (norms - 1).abs().max().item() > _UNIT_TOL:
        raise ValueError(
            f"the columns of W must be unit vectors (tolerance {_UNIT_TOL}); "
            f"column norms range over [{norms.min().item():.4g}, {norms.max().item():.4g}]"
        )


def _check_state(
    h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, name: str = "h"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shape checks shared by the fields; returns (post, W) cast to h's dtype and device."""
    _check_embeddings(W)
    d, V = W.shape
    if not isinstance(h, torch.Tensor) or h.dim() < 2 or h.shape[-1] != d:
        raise ValueError(
            f"{name} must be a (..., L, d) tensor with d = {d} (the rows of W), "
            f"got shape {tuple(getattr(h, 'shape', ()))}"
        )
    if not h.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {h.dtype}")
    if not isinstance(post, torch.Tensor) or post.shape != h.shape[:-1] + (V,):
        raise ValueError(
            f"post must have shape {tuple(h.shape[:-1]) + (V,)} ({name}'s leading shape, "
            f"then V = {V}), got {tuple(getattr(post, 'shape', ()))}"
        )
    return post.to(dtype=h.dtype, device=h.device), W.to(dtype=h.dtype, device=h.device)


def _weighted_tangent_sum(h: torch.Tensor, c: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """sum_k c_k P_h w_k = P_h (c W^T): (..., L, V) weights -> (..., L, d) tangent vectors."""
    return tangent(h, c @ W.T)


def _psi_values(psi: PsiFn, s: torch.Tensor, kappa: float) -> torch.Tensor:
    if not callable(psi):
        raise TypeError(f"psi must be a callable psi(s, kappa) -> tensor, got {type(psi).__name__}")
    out = psi(s, kappa)
    if not isinstance(out, torch.Tensor):
        out = torch.as_tensor(out)
    out = out.to(dtype=s.dtype, device=s.device)
    try:
        out = torch.broadcast_to(out, s.shape)
    except RuntimeError as exc:
        raise ValueError(
            f"psi(s, kappa) must return a tensor broadcastable to s's shape {tuple(s.shape)}, "
            f"got {tuple(out.shape)}"
        ) from exc
    return out


# --- the vMF path's fields ------------------------------------------------------------------------


def marginal_velocity(
    h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, kappa, kappa_dot, psi: PsiFn
) -> torch.Tensor:
    """Marginal vMF velocity u^l(h) = kappa_dot sum_k p(x^l=k|h) psi(w_k.h^l, kappa) P_{h^l} w_k.

    Implements the velocity of eq. `vmf-marginal` of notebooks/16_vmf_sphere_flow/index.md.
    h: (..., L, d) unit vectors; post: (..., L, V) posterior probabilities; W: (d, V) unit
    columns; kappa >= 0 and kappa_dot scalars (kappa_dot = kappa_max for kappa(t) = kappa_max t,
    or 1 for the velocity per unit kappa); psi(s, kappa) is evaluated on the cosines s = h W
    (..., L, V). Returns (..., L, d) vectors tangent at each h^l.
    """
    post, W = _check_state(h, post, W)  # shapes; post and W in h's dtype and device
    kappa = _scalar("kappa", kappa, nonneg=True)  # the concentration, a number >= 0
    kappa_dot = _scalar("kappa_dot", kappa_dot)  # d kappa / dt
    s = h @ W  # (..., L, V) the cosines w_k . h^l of every position to every token
    c = post * _psi_values(psi, s, kappa)  # eq. vmf-marginal: weights p(x^l=k|h) psi(s_lk, kappa)
    return kappa_dot * _weighted_tangent_sum(h, c, W)  # eq. vmf-marginal: kappa_dot P_h (c W^T)


def marginal_score(h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, kappa) -> torch.Tensor:
    """Marginal Riemannian score s^l(h) = kappa sum_k p(x^l=k|h) P_{h^l} w_k = kappa P_{h^l} E[w|h].

    Implements the score of eq. `vmf-marginal` of notebooks/16_vmf_sphere_flow/index.md. It is
    the gradient, on the sphere of position l, of
    log sum_x pi(x) prod_l vMF(h^l; w_{x^l}, kappa) (each conditional score is kappa P_h w,
    eq. `vmf-psi-ode`). Shapes as in marginal_velocity.
    """
    post, W = _check_state(h, post, W)
    kappa = _scalar("kappa", kappa, nonneg=True)
    return kappa * _weighted_tangent_sum(h, post, W)


def sde_drift(
    h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, kappa, kappa_dot, psi: PsiFn, sigma2
) -> torch.Tensor:
    """Drift of the marginal-preserving SDE, u + sigma^2 s, fused into one weight per token:

        sum_k p(x^l=k|h) (kappa_dot psi(w_k . h^l, kappa) + sigma^2 kappa) P_{h^l} w_k.

    The matching diffusion coefficient is sqrt(2 sigma^2): the SDE step of eq. `vmf-step` of
    notebooks/16_vmf_sphere_flow/index.md (the paper's appendix D, as summarised from its code).
    sigma2 is in the same time units as kappa_dot. Shapes as in marginal_velocity.
    """
    post, W = _check_state(h, post, W)
    kappa = _scalar("kappa", kappa, nonneg=True)
    kappa_dot = _scalar("kappa_dot", kappa_dot)
    sigma2 = _scalar("sigma2", sigma2, nonneg=True)
    s = h @ W
    c = post * (kappa_dot * _psi_values(psi, s, kappa) + sigma2 * kappa)
    return _weighted_tangent_sum(h, c, W)


# --- baselines ------------------------------------------------------------------------------------


def _time(t, t_cap: float) -> float:
    t = _scalar("t", t)
    t_cap = _scalar("t_cap", t_cap)
    if not 0.0 < t_cap < 1.0:
        raise ValueError(f"t_cap must lie in (0, 1), got {t_cap}")
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"t must lie in [0, 1], got {t}")
    return min(t, t_cap)


def geodesic_velocity(
    h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, t, *, t_cap: float = T_CAP
) -> torch.Tensor:
    """Riemannian flow-matching velocity on the SLERP path, the geodesic half of
    eq. `vmf-baselines` of notebooks/16_vmf_sphere_flow/index.md:

        u^l(h, t) = sum_k p(x^l=k|h) (alpha_k / sin alpha_k) P_{h^l} w_k / (1 - t),

    alpha_k = arccos(w_k . h^l); (alpha / sin alpha) P_h w is the log map log_h(w). t in [0, 1],
    capped at t_cap (1 - 1e-3, as for the Euclidean baseline; our assumption for this path,
    for which we know of no cap). Near the antipode (alpha -> pi) the log map is undefined;
    cosines are clamped to >= -1 + 1e-6, which bounds the factor alpha / sin alpha by about
    2.2e3.
    """
    post, W = _check_state(h, post, W)
    t = _time(t, t_cap)
    eps = 1e-6
    s = (h @ W).clamp(-1.0 + eps, 1.0)
    sin = torch.sqrt((1.0 - s * s).clamp_min(0.0))
    alpha = torch.atan2(sin, s)  # accurate for s near 1, unlike arccos
    ratio = torch.where(sin > 1e-4, alpha / sin.clamp_min(1e-4), 1.0 + alpha * alpha / 6.0)
    return _weighted_tangent_sum(h, post * ratio, W) / (1.0 - t)


def euclidean_velocity(
    x: torch.Tensor, post: torch.Tensor, W: torch.Tensor, t, *, t_cap: float = T_CAP
) -> torch.Tensor:
    """Linear-interpolation flow matching in R^d: u^l(x, t) = (sum_k p(x^l=k|x) w_k - x^l)/(1 - t).

    Implements the Euclidean half of eq. `vmf-baselines` of
    notebooks/16_vmf_sphere_flow/index.md.
    x: (..., L, d) points of R^d (not unit); t in [0, 1] is capped at t_cap = 1 - 1e-3 (the
    paper's code), so t = 1 is allowed and the field stays finite.
    """
    post, W = _check_state(x, post, W, name="x")
    t = _time(t, t_cap)
    return (post @ W.T - x) / (1.0 - t)


def geodesic_score(
    h: torch.Tensor, post: torch.Tensor, W: torch.Tensor, t, *, t_cap: float = T_CAP
) -> torch.Tensor:
    """Marginal score of the SLERP path, from the geodesic line of eq. `vmf-emission` (our
    derivation, eq. `vmf-baseline-scores` of notebooks/16_vmf_sphere_flow/index.md):

        grad log p(h | k) = -(d - 2) [cot(alpha_k / (1 - t)) / (1 - t) - cot alpha_k]
                            P_h w_k / sin alpha_k,

    summed over k with the posterior weights. alpha_k / (1 - t) is clamped below pi - 1e-3 (a
    token out of reach has posterior 0 under the exact posterior; a learned one may not) and
    the bracket over sin alpha_k uses its series (1 - (1 - t)^-2) / 3 near alpha_k = 0.
    """
    post, W = _check_state(h, post, W)
    t = _time(t, t_cap)
    d = W.shape[0]
    s = (h @ W).clamp(-1.0, 1.0)
    sin = torch.sqrt((1.0 - s * s).clamp_min(0.0))
    alpha = torch.atan2(sin, s)
    a = 1.0 - t
    x = (alpha / a).clamp(max=math.pi - 1e-3)
    small = alpha < 1e-3
    safe = torch.where(small, torch.ones_like(alpha), alpha)
    xs = torch.where(small, torch.ones_like(x), x)
    bracket = 1.0 / torch.tan(xs) / a - 1.0 / torch.tan(safe)
    series = torch.full_like(alpha, (1.0 - a**-2) / 3.0)
    ratio = torch.where(small, series, bracket / torch.sin(safe))
    return _weighted_tangent_sum(h, -(d - 2) * post * ratio, W)


def euclidean_score(
    x: torch.Tensor, post: torch.Tensor, W: torch.Tensor, t, *, t_cap: float = T_CAP
) -> torch.Tensor:
    """Marginal score of the linear-interpolation path, x = (1 - t) z + t w, z ~ N(0, I):
    s^l(x, t) = (t sum_k p(x^l=k|x) w_k - x^l) / (1 - t)^2 (eq. `vmf-baseline-scores` of
    notebooks/16_vmf_sphere_flow/index.md); t capped at t_cap as for the velocity."""
    post, W = _check_state(x, post, W, name="x")
    t = _time(t, t_cap)
    return (t * (post @ W.T) - x) / (1.0 - t) ** 2
