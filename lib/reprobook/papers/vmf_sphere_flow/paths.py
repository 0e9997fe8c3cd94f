"""The three noise paths compared by the chapter: vMF, geodesic (SLERP) and Euclidean.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).
The paper compares its vMF path with geodesic and Euclidean alternatives trained and sampled
through the same posterior network (the paper's code has all three). A path says how a clean
token x with embedding w = w_x is noised at a level, and therefore what the exact posterior of
x given the noisy point is. For each path this module gives

- ``noisy_states``: draws of the noisy state for clean tokens (the training inputs), and
- ``emission_loglik``: log p(h | x = k) per position and token, up to a constant shared by the
  tokens, eq. `vmf-emission` of notebooks/16_vmf_sphere_flow/index.md (the exact likelihood
  behind an oracle posterior: pass it to
  :func:`.data.oracle_posterior_grids` or :meth:`.data.MarkovChain.posterior_marginals`).

The paths (eqs. `vmf-density` and `vmf-baselines`), with w the clean token's unit embedding in
R^d:

- ``"vmf"``, level kappa >= 0: h ~ vMF(w, kappa); log p(h | w) = kappa w.h + const.
- ``"geodesic"``, level t in [0, 1]: h = slerp(z, w, t) with z uniform on S^{d-1}: the point
  at fraction t of the great-circle arc from z to w. Its angle to w is alpha = (1 - t) alpha_0,
  where alpha_0, the angle of z, has density proportional to sin^{d-2}(alpha_0) on [0, pi]. The
  law of h is rotation-invariant about w, so its density on the sphere is the density of alpha
  divided by the area factor sin^{d-2}(alpha):

      log p(h | w) = (d - 2) [log sin(alpha / (1 - t)) - log sin(alpha)] + const,
      alpha = arccos(w.h) <= (1 - t) pi (otherwise p = 0).                            (G)

  A position that no token can explain is given to its nearest token. On the path this happens
  only through rounding (at t = 1, h must equal some w_k exactly), but a sampler's state is off
  the path by its discretisation error, and near t = 1 the support of each token is a small cap.

  (Our derivation: we know the path's velocity from the paper's code, not its likelihood.)
- ``"euclidean"``, level t in [0, 1): x = (1 - t) z + t w with z ~ N(0, I_d) in R^d, so
  x | w ~ N(t w, (1 - t)^2 I) and, since |w| = 1,

      log p(x | w) = t w.x / (1 - t)^2 + const.                                        (E)

Levels: the vMF samplers run kappa from 0 to kappa_max; the baselines run t from 0 to 1. The
training level is drawn uniformly on the same range: kappa ~ U(0, kappa_max), t ~ U(0, 1).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from reprobook.core import checks

from .geometry import _vmf_draws

__all__ = ["PATHS", "check_path", "sample_levels", "noisy_states", "emission_loglik"]

PATHS = ("vmf", "geodesic", "euclidean")
# the Euclidean likelihood (E) is singular at t = 1; same cap as fields.T_CAP
_T_MAX_EUCLIDEAN = 1.0 - 1e-3


def check_path(path: str) -> str:
    """``path`` if it is one of :data:`PATHS`."""
    return checks.choice(path, "path", PATHS)


def sample_levels(
    n: int, path: str, kappa_max: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """n training levels (float64, on the CPU; :func:`noisy_states` moves them to the data's
    device): kappa ~ U(0, kappa_max) for "vmf", t ~ U(0, 1) otherwise."""
    check_path(path)
    n = checks.integer(n, "n", minimum=0)
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    return u * float(kappa_max) if path == "vmf" else u


def _uniform(shape, d: int, generator, device=None) -> torch.Tensor:
    z = torch.randn(*shape, d, generator=generator, dtype=torch.float64, device=device)
    return z / z.norm(dim=-1, keepdim=True)


def noisy_states(
    mean: torch.Tensor, level: torch.Tensor, path: str, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Noisy states for clean embeddings ``mean`` (B, L, d) at per-sequence levels (B,), float64.

    "vmf": vMF(mean, kappa) per position (eq. `vmf-density`); "geodesic": slerp(z, mean, t), z
    uniform on the sphere; "euclidean": (1 - t) z + t mean, z ~ N(0, I) (eq. `vmf-baselines`).
    """
    check_path(path)
    mean = torch.as_tensor(mean, dtype=torch.float64)
    level = torch.as_tensor(level, dtype=torch.float64).to(mean.device)
    if mean.ndim != 3 or level.shape != mean.shape[:1]:
        raise ValueError(
            f"mean must be (B, L, d) and level (B,), "
            f"got {tuple(mean.shape)} and {tuple(level.shape)}"
        )
    _check_means(mean)
    if not torch.isfinite(level).all() or (level < 0).any():
        raise ValueError(f"levels must be finite and >= 0, got {level.tolist()[:8]}")
    if path != "vmf" and (level > 1).any():
        raise ValueError(
            f"the {path} path's levels are t in [0, 1], got up to {level.max().item()}"
        )
    return _noisy_states(mean, level, path, generator)


def _check_means(mean: torch.Tensor) -> None:
    """The check of :func:`noisy_states` on its ``mean`` (float64, (..., d)): finite unit rows."""
    if not torch.isfinite(mean).all() or ((mean.norm(dim=-1) - 1.0).abs() > 1e-6).any():
        raise ValueError("mean must hold finite unit vectors (token embeddings w_k)")


def _noisy_states(
    mean: torch.Tensor, level: torch.Tensor, path: str, generator: torch.Generator | None
) -> torch.Tensor:
    """:func:`noisy_states` after its checks (a training loop checks the embeddings once per
    batch, on the (V, d) table, and draws its levels in range): float64 ``mean`` (B, L, d) of
    unit rows and levels (B,) on its device."""
    if path == "vmf":  # sample_vmf's draws: the means renormalised, then eq. vmf-density
        mu = mean / mean.norm(dim=-1, keepdim=True)
        return _vmf_draws(mu, level[:, None], generator)
    t = level[:, None, None]
    if path == "euclidean":
        z = torch.randn(mean.shape, generator=generator, dtype=torch.float64, device=mean.device)
        return (1.0 - t) * z + t * mean
    z = _uniform(mean.shape[:-1], mean.shape[-1], generator, mean.device)
    cos = (z * mean).sum(-1, keepdim=True).clamp(-1.0, 1.0)
    alpha = torch.arccos(cos)  # angle of z to the mean
    perp = z - cos * mean
    n = perp.norm(dim=-1, keepdim=True)
    # the direction from the mean towards z; any unit tangent when z is (almost) the mean or its
    # antipode
    fallback = _uniform(mean.shape[:-1], mean.shape[-1], generator, mean.device)
    fallback = fallback - (fallback * mean).sum(-1, keepdim=True) * mean
    direction = torch.where(
        n > 1e-12, perp / n.clamp_min(1e-300), fallback / fallback.norm(dim=-1, keepdim=True)
    )
    angle = (1.0 - t) * alpha  # slerp keeps the great circle and scales the angle to the mean
    return torch.cos(angle) * mean + torch.sin(angle) * direction


def _log_sin(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.sin(a))


def emission_loglik(h, W, level, path: str) -> np.ndarray:
    """log p(h^l | x^l = k) up to a constant per position, shape (..., L, V) (equations above).

    Implements eq. `vmf-emission` of notebooks/16_vmf_sphere_flow/index.md for the three paths.

    h: (..., L, d) states (on the sphere for "vmf" and "geodesic"); W: (d, V) unit columns;
    level: kappa for "vmf", t for the baselines, a scalar or one per sequence (batch shape).
    Tokens the path cannot have produced (geodesic, alpha > (1 - t) pi) get -inf.
    """
    check_path(path)
    h = np.asarray(h, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or h.ndim < 2 or h.shape[-1] != W.shape[0]:
        raise ValueError(
            f"h must be (..., L, d) and W (d, V) with the same d, got {h.shape} and {W.shape}"
        )
    if np.max(np.abs(np.linalg.norm(W, axis=0) - 1.0)) > 1e-6:
        raise ValueError("W must have unit-norm columns (token embeddings w_k)")
    if not np.all(np.isfinite(h)):
        raise ValueError("h must be finite")
    level = np.asarray(level, dtype=np.float64)
    if not np.all(np.isfinite(level)) or np.any(level < 0):
        raise ValueError(f"level must be finite and >= 0, got {level!r}")
    if path != "vmf" and np.any(level > 1):
        raise ValueError(f"the {path} path's level is t in [0, 1], got {level!r}")
    if level.ndim > 0:
        try:
            level = np.broadcast_to(level, h.shape[:-2])[..., None, None]
        except ValueError:
            raise ValueError(
                f"level must be a scalar or broadcast to the batch shape {h.shape[:-2]}, "
                f"got shape {level.shape}"
            ) from None
    dots = h @ W
    if path == "vmf":
        return level * dots
    if path == "euclidean":
        t = np.minimum(level, _T_MAX_EUCLIDEAN)
        return t / (1.0 - t) ** 2 * dots
    d = W.shape[0]
    t = level
    alpha = np.arccos(np.clip(dots, -1.0, 1.0))
    shrink = 1.0 - t
    if d == 2:  # the angle's density is flat: only the support matters
        out = np.zeros_like(alpha)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(
                alpha > 1e-8,
                _log_sin(np.minimum(alpha / np.maximum(shrink, 1e-300), math.pi)) - _log_sin(alpha),
                -np.log(np.maximum(shrink, 1e-300)),
            )
        out = (d - 2) * ratio
    inside = alpha <= shrink * math.pi * (1 + 1e-12)
    out = np.where(inside & np.isfinite(out), out, -np.inf)
    # a position no token can explain (rounding on the path; an off-path state, e.g. a sampler's
    # discretisation error, near t = 1): give it to the nearest token
    dead = ~np.isfinite(out).any(axis=-1, keepdims=True)
    return np.where(dead, 1e8 * (dots - dots.max(axis=-1, keepdims=True)), out)
