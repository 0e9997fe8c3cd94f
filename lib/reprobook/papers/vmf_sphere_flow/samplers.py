"""Samplers on the product of spheres (vMF ODE, predictor-corrector, SDE) and the two baselines.

Paper: "Spherical Flows for Sampling Categorical Data" (Chemseddine, Kornhardt, Steidl;
arXiv 2605.05629). The full text was not read; the schemes follow the sampler names and
defaults of the paper's code as far as we could read them, with the fields of :mod:`.fields`.
Their steps are eq. `vmf-step` of notebooks/16_vmf_sphere_flow/index.md.

The posterior interface. Every sampler is driven by a callable

    posterior(h, level) -> (B, L, V) probabilities p(x^l = k | h),

where h is the (B, L, d) state and level a Python float: the concentration kappa for the vMF
samplers, the time t in [0, 1] for the geodesic and Euclidean ones. A learned network (softmax
of its logits) and an exact oracle plug in the same way. **Every call counts as one network
evaluation (NFE)**, including the final read-out; see :func:`count_nfe` for the totals.

Schemes (Euler steps of size dt = 1/S in t, kappa(t) = kappa_max t, so dkappa = kappa_max dt):

- ``sample_ode``: h <- Retr(h + dt u(h)), u the marginal velocity with kappa_dot = kappa_max,
  evaluated at the left end kappa_i = kappa_max i / S; S NFE, then one read-out at kappa_max.
- ``sample_pc``: after every ``corrector_every``-th predictor step, ``correctors`` Langevin steps
  at the new kappa, h <- Retr(h + eps s(h) + sqrt(2 eps) P_h xi), xi ~ N(0, I), with
  eps = eps0 (1 - u)^2 and u = i / S the progress at which predictor step i began (our
  assumption: the code scales eps by "sampling progress", and this choice keeps eps > 0 at the
  last step). Each corrector step costs one NFE.
- ``sample_sde``: h <- Retr(h + dt (u + sigma^2 s) + sqrt(2 sigma^2 dt) P_h xi), the
  marginal-preserving SDE of the paper's appendix D as summarised from its code (sigma^2 in
  units of t).
- ``sample_geodesic``: the SLERP path's flow (Riemannian flow matching), uniform start, t from
  0 to 1; ``sample_euclidean``: linear-interpolation flow matching in R^d from N(0, I); their
  velocities are eq. `vmf-baselines`.

Read-out: argmax_k of the posterior at the end (kappa_max, or t = 1), optionally with some
tokens forbidden (Sudoku's blank 0). Retractions: "normalise" (h + v) / |h + v| (the code's
default) or "exp" (the exact exponential map along the tangent part of v, renormalised to
remove rounding drift).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple, Protocol

import torch

from reprobook.core import checks, unfilled_allocations

from .fields import (
    T_CAP,
    PsiFn,
    _check_embeddings,
    _scalar,
    euclidean_score,
    euclidean_velocity,
    geodesic_score,
    geodesic_velocity,
    marginal_score,
    marginal_velocity,
    sde_drift,
)
from .geometry import tangent

__all__ = [
    "Posterior",
    "Samples",
    "RETRACTIONS",
    "count_nfe",
    "sample_ode",
    "sample_pc",
    "sample_sde",
    "sample_geodesic",
    "sample_euclidean",
]

RETRACTIONS = ("normalise", "exp")
_PROB_TOL = 1e-3  # allowed |sum_k p_k - 1| and most negative p_k in a posterior's output


class Posterior(Protocol):
    """posterior(h (B, L, d), level) -> (B, L, V) probabilities; level is kappa or t."""

    def __call__(self, h: torch.Tensor, level: float) -> torch.Tensor: ...


class Samples(NamedTuple):
    """What a sampler returns."""

    tokens: torch.Tensor  # (B, L) int64, the read-out argmax_k p(x^l = k | h) at the end
    nfe: int  # posterior calls made, read-out included
    state: torch.Tensor  # (B, L, d) the final continuous state (on the sphere, or in R^d)


# --- helpers --------------------------------------------------------------------------------------


def count_nfe(steps: int, correctors: int = 0, corrector_every: int = 1) -> int:
    """Posterior calls of a run of eq. `vmf-step`: S predictor steps, c correctors after every
    n-th predictor step, and the read-out, i.e. S + c floor(S / n) + 1. (A label such as
    "8 + 3 correctors = 32 NFE" leaves out the read-out, which every sampler here shares.)"""
    steps = checks.integer(steps, "steps", minimum=1)
    correctors = checks.integer(correctors, "correctors", minimum=0)
    corrector_every = checks.integer(corrector_every, "corrector_every", minimum=1)
    return steps + correctors * (steps // corrector_every) + 1


def _retract(h: torch.Tensor, v: torch.Tensor, kind: str = "normalise") -> torch.Tensor:
    """Map the step h + v back to the sphere, row-wise over the last axis (Retr of eq. `vmf-step`).

    "normalise": (h + v) / |h + v|. "exp": exp_h(P_h v) = cos|v_T| h + sin|v_T| v_T / |v_T|
    with v_T = P_h v, then renormalised (a no-op up to rounding).
    """
    if kind == "normalise":
        y = h + v
    elif kind == "exp":
        vt = tangent(h, v)
        n = vt.norm(dim=-1, keepdim=True)
        y = torch.cos(n) * h + torch.sinc(n / math.pi) * vt  # sinc(n/pi) = sin(n) / n, 1 at n = 0
    else:
        checks.choice(kind, "retraction", RETRACTIONS)
    return y / y.norm(dim=-1, keepdim=True)


def _uniform_sphere(
    shape: tuple[int, ...],
    d: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> torch.Tensor:
    """Uniform points on S^{d-1} (normalised standard normals), shape (*shape, d): the kappa = 0
    law of eq. `vmf-density`."""
    z = torch.randn(*shape, d, generator=generator, dtype=dtype, device=device)
    return z / z.norm(dim=-1, keepdim=True)


class _Counted:
    """Wraps a posterior: counts calls (NFE) and checks each output is (B, L, V) probabilities."""

    def __init__(
        self, posterior: Posterior, shape: tuple[int, int, int], dtype: torch.dtype, device
    ):
        if not callable(posterior):
            raise TypeError(
                f"posterior must be a callable posterior(h, level) -> (B, L, V) probabilities, "
                f"got {type(posterior).__name__}"
            )
        self.posterior, self.shape, self.dtype, self.device = posterior, shape, dtype, device
        self.nfe = 0

    def __call__(self, h: torch.Tensor, level: float) -> torch.Tensor:
        self.nfe += 1
        p = self.posterior(h, float(level))
        if not isinstance(p, torch.Tensor) or tuple(p.shape) != self.shape:
            raise ValueError(
                f"posterior(h, level) must return a tensor of shape (B, L, V) = {self.shape}, "
                f"got {tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__}"
            )
        p = p.to(dtype=self.dtype, device=self.device)
        if (
            not torch.isfinite(p).all()
            or p.min().item() < -_PROB_TOL
            or (p.sum(-1) - 1).abs().max().item() > _PROB_TOL
        ):
            raise ValueError(
                f"posterior(h, {level:g}) must return finite probabilities >= 0 that sum to 1 "
                f"over V (tolerance {_PROB_TOL}); apply a softmax to logits"
            )
        return p


def _check_common(W, L, batch, steps, generator, forbid) -> tuple[int, int, int, tuple[int, ...]]:
    _check_embeddings(W)
    L = checks.integer(L, "L", minimum=1)
    batch = checks.integer(batch, "batch", minimum=1)
    steps = checks.integer(steps, "steps", minimum=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    V = W.shape[1]
    if forbid is None:
        banned: tuple[int, ...] = ()
    else:
        try:
            items = list(forbid) if isinstance(forbid, Iterable) else [forbid]
            items = [checks.integer(k, "forbid", minimum=0, maximum=V - 1) for k in items]
        except (checks.InputError, TypeError):
            raise checks.InputError(
                f"forbid must be a token id or an iterable of token ids in [0, {V}), got {forbid!r}"
            ) from None
        banned = tuple(sorted(set(items)))
        if len(banned) >= V:
            raise ValueError(f"forbid {forbid!r} leaves no token of the V = {V} to read out")
    return L, batch, steps, banned


def _readout(p: torch.Tensor, banned: tuple[int, ...]) -> torch.Tensor:
    if banned:
        p = p.clone()
        p[..., list(banned)] = -math.inf
    return p.argmax(-1)


def _noise(h: torch.Tensor, generator) -> torch.Tensor:
    """P_h xi, xi ~ N(0, I_d) per position."""
    xi = torch.randn(h.shape, generator=generator, dtype=h.dtype, device=h.device)
    return tangent(h, xi)


def _check_vmf(kappa_max, psi, retraction, correctors, corrector_every, eps0, sigma2):
    """The checks of the vMF samplers' settings; returns them in the types the loop uses."""
    kappa_max = _scalar("kappa_max", kappa_max)
    if not kappa_max > 0:
        raise checks.InputError(f"kappa_max must be > 0, got {kappa_max}")
    if not callable(psi):
        raise TypeError(f"psi must be a callable psi(s, kappa) -> tensor, got {type(psi).__name__}")
    checks.choice(retraction, "retraction", RETRACTIONS)
    correctors = checks.integer(correctors, "correctors", minimum=0)
    corrector_every = checks.integer(corrector_every, "corrector_every", minimum=1)
    eps0 = _scalar("eps0", eps0, nonneg=True)
    sigma2 = _scalar("sigma2", sigma2, nonneg=True)
    return kappa_max, correctors, corrector_every, eps0, sigma2


# --- vMF samplers ---------------------------------------------------------------------------------


def _sample_vmf(
    posterior,
    W,
    L,
    batch,
    kappa_max,
    steps,
    psi,
    *,
    generator,
    retraction,
    forbid,
    correctors=0,
    corrector_every=1,
    eps0=0.01,
    sigma2=0.0,
) -> Samples:
    L, batch, steps, banned = _check_common(W, L, batch, steps, generator, forbid)  # sizes, ids
    kappa_max, correctors, corrector_every, eps0, sigma2 = _check_vmf(
        kappa_max, psi, retraction, correctors, corrector_every, eps0, sigma2
    )  # the path's and the scheme's settings
    d, V = W.shape  # embedding dimension, vocabulary
    net = _Counted(posterior, (batch, L, V), W.dtype, W.device)  # the posterior, counting NFE
    # kappa = 0: the state starts uniform on each of the L spheres
    h = _uniform_sphere((batch, L), d, generator=generator, dtype=W.dtype, device=W.device)
    dt = 1.0 / steps  # Euler steps of dt in t, kappa = kappa_max t
    for i in range(steps):  # predictor step i of S
        kappa = kappa_max * i / steps  # the left end kappa_i of predictor step i
        post = net(h, kappa)  # p(x^l = k | h), one NFE
        if sigma2 > 0:  # eq. vmf-step, the SDE step
            drift = sde_drift(h, post, W, kappa, kappa_max, psi, sigma2)  # u + sigma^2 s, fused
            noise = math.sqrt(2.0 * sigma2 * dt) * _noise(h, generator)  # sqrt(2 sigma^2 dt) P_h xi
            h = _retract(h, dt * drift + noise, retraction)  # Retr(h + dt drift + noise)
        else:  # eq. vmf-step, ODE: h <- Retr(h + dt u(h)), u of eq. vmf-marginal
            h = _retract(h, dt * marginal_velocity(h, post, W, kappa, kappa_max, psi), retraction)
        if correctors and (i + 1) % corrector_every == 0:  # after every n-th predictor step
            kappa_new = kappa_max * (i + 1) / steps  # the correctors work at the new kappa
            eps = eps0 * (1.0 - i / steps) ** 2  # eq. vmf-step: eps = eps0 (1 - i/S)^2
            for _ in range(correctors):  # c Langevin steps
                post = net(h, kappa_new)  # one NFE per corrector step
                score = marginal_score(h, post, W, kappa_new)  # s(h) of eq. vmf-marginal
                noise = math.sqrt(2.0 * eps) * _noise(h, generator)  # sqrt(2 eps) P_h xi
                step = eps * score + noise  # the Langevin step on the tangent space
                h = _retract(h, step, retraction)  # eq. vmf-step, corrector: Retr(h + step)
    tokens = _readout(net(h, kappa_max), banned)  # argmax_k p(x^l = k | h) at kappa_max, one NFE
    return Samples(tokens, net.nfe, h)  # the tokens, the NFE count and the final state


@unfilled_allocations()
def sample_ode(
    posterior: Posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    kappa_max: float,
    steps: int,
    psi: PsiFn,
    *,
    generator: torch.Generator | None = None,
    retraction: str = "normalise",
    forbid: int | Iterable[int] | None = None,
) -> Samples:
    """Probability-flow ODE of the vMF path: uniform start (kappa = 0), ``steps`` Euler steps in
    kappa up to kappa_max, a retraction after each, argmax read-out at kappa_max. Implements the
    ODE step of eq. `vmf-step` of notebooks/16_vmf_sphere_flow/index.md.

    posterior(h, kappa) -> (batch, L, V); W (d, V) unit columns; psi(s, kappa) the scalar
    velocity per unit kappa. NFE = steps + 1.
    """
    return _sample_vmf(
        posterior,
        W,
        L,
        batch,
        kappa_max,
        steps,
        psi,
        generator=generator,
        retraction=retraction,
        forbid=forbid,
    )


@unfilled_allocations()
def sample_pc(
    posterior: Posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    kappa_max: float,
    steps: int,
    psi: PsiFn,
    *,
    correctors: int = 1,
    corrector_every: int = 1,
    eps0: float = 0.01,
    sigma2: float = 0.0,
    generator: torch.Generator | None = None,
    retraction: str = "normalise",
    forbid: int | Iterable[int] | None = None,
) -> Samples:
    """Predictor-corrector: the ODE predictor (or, with sigma2 > 0, the SDE predictor: the code's
    ``pc_sde`` variant), and after every ``corrector_every``-th predictor step ``correctors``
    Langevin steps at the new kappa with the marginal score,

        h <- Retr(h + eps s(h) + sqrt(2 eps) P_h xi),  eps = eps0 (1 - i/S)^2,

    the corrector step of eq. `vmf-step` of notebooks/16_vmf_sphere_flow/index.md.
    NFE = count_nfe(steps, correctors, corrector_every).
    """
    return _sample_vmf(
        posterior,
        W,
        L,
        batch,
        kappa_max,
        steps,
        psi,
        generator=generator,
        retraction=retraction,
        forbid=forbid,
        correctors=correctors,
        corrector_every=corrector_every,
        eps0=eps0,
        sigma2=sigma2,
    )


@unfilled_allocations()
def sample_sde(
    posterior: Posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    kappa_max: float,
    steps: int,
    psi: PsiFn,
    *,
    sigma2: float = 1.0,
    generator: torch.Generator | None = None,
    retraction: str = "normalise",
    forbid: int | Iterable[int] | None = None,
) -> Samples:
    """Euler-Maruyama for the marginal-preserving SDE in t (kappa = kappa_max t):

        dh = (u(h) + sigma^2 s(h)) dt + sqrt(2 sigma^2) P_h dB_t,

    one posterior call per step for the fused drift (the SDE step of eq. `vmf-step`).
    sigma2 = 0 is the ODE. NFE = steps + 1.
    """
    return _sample_vmf(
        posterior,
        W,
        L,
        batch,
        kappa_max,
        steps,
        psi,
        generator=generator,
        retraction=retraction,
        forbid=forbid,
        sigma2=sigma2,
    )


# --- baselines ------------------------------------------------------------------------------------


def _baseline_eps(i: int, steps: int, eps0: float, kappa_ref: float, var: float) -> float:
    """The baselines' corrector step after predictor step i: the same step, relative to the
    conditional noise variance ``var`` of the path at the new level, as the vMF corrector takes
    (eps0 (1 - i/S)^2 against a variance of about 1/kappa at kappa = kappa_ref (i + 1)/S), i.e.
    eps = eps0 (1 - i/S)^2 kappa_ref (i + 1)/S var (eq. `vmf-baseline-scores`; our choice)."""
    return eps0 * (1.0 - i / steps) ** 2 * kappa_ref * (i + 1) / steps * var


def _check_baseline_pc(correctors, eps0, kappa_ref) -> tuple[int, float, float]:
    correctors = checks.integer(correctors, "correctors", minimum=0)
    eps0 = _scalar("eps0", eps0, nonneg=True)
    if correctors and kappa_ref is None:
        raise checks.InputError(
            "a baseline with correctors needs kappa_ref (the vMF path's kappa_max), which sets "
            "its corrector step relative to the vMF one"
        )
    kappa_ref = 0.0 if kappa_ref is None else _scalar("kappa_ref", kappa_ref, nonneg=True)
    return correctors, eps0, kappa_ref


@unfilled_allocations()
def sample_geodesic(
    posterior: Posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    steps: int,
    *,
    correctors: int = 0,
    eps0: float = 0.01,
    kappa_ref: float | None = None,
    generator: torch.Generator | None = None,
    retraction: str = "exp",
    forbid: int | Iterable[int] | None = None,
) -> Samples:
    """Riemannian flow matching on the SLERP path: uniform start, Euler steps in t from 0 to 1
    with the geodesic velocity of eq. `vmf-baselines` at the left end t_i = i / S, a retraction
    after each ("exp" by default, the path's own geometry), argmax read-out of posterior(h, 1.0).
    With ``correctors`` > 0, after each predictor step that many Langevin steps at the new t
    with the path's marginal score (eq. `vmf-baseline-scores`), h <- Retr(h + eps s + sqrt(2 eps)
    P_h xi), eps from :func:`_baseline_eps` with the variance (1 - t)^2 / (d - 2).
    NFE = count_nfe(steps, correctors)."""
    L, batch, steps, banned = _check_common(W, L, batch, steps, generator, forbid)
    checks.choice(retraction, "retraction", RETRACTIONS)
    correctors, eps0, kappa_ref = _check_baseline_pc(correctors, eps0, kappa_ref)
    d, V = W.shape
    net = _Counted(posterior, (batch, L, V), W.dtype, W.device)
    h = _uniform_sphere((batch, L), d, generator=generator, dtype=W.dtype, device=W.device)
    dt = 1.0 / steps
    for i in range(steps):
        t = i / steps
        h = _retract(h, dt * geodesic_velocity(h, net(h, t), W, t), retraction)
        t_new = min((i + 1) / steps, T_CAP)
        var = (1.0 - t_new) ** 2 / max(d - 2, 1)
        eps = _baseline_eps(i, steps, eps0, kappa_ref, var)
        for _ in range(correctors):
            score = geodesic_score(h, net(h, t_new), W, t_new)
            h = _retract(h, eps * score + math.sqrt(2.0 * eps) * _noise(h, generator), retraction)
    tokens = _readout(net(h, 1.0), banned)
    return Samples(tokens, net.nfe, h)


@unfilled_allocations()
def sample_euclidean(
    posterior: Posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    steps: int,
    *,
    correctors: int = 0,
    eps0: float = 0.01,
    kappa_ref: float | None = None,
    generator: torch.Generator | None = None,
    forbid: int | Iterable[int] | None = None,
) -> Samples:
    """Linear-interpolation flow matching in R^d: x_0 ~ N(0, I_d) per position, Euler steps in t
    from 0 to 1 with (E[w | x] - x) / (1 - t) (eq. `vmf-baselines`; t capped at 1 - 1e-3),
    argmax read-out of posterior(x, 1.0). With steps <= 1000 the last Euler step lands exactly
    on E[w | x]. With ``correctors`` > 0, after each predictor step that many Langevin steps at
    the new t with the closed-form score (eq. `vmf-baseline-scores`), x <- x + eps s +
    sqrt(2 eps) xi, eps from :func:`_baseline_eps` with the variance (1 - t)^2.
    NFE = count_nfe(steps, correctors)."""
    L, batch, steps, banned = _check_common(W, L, batch, steps, generator, forbid)
    correctors, eps0, kappa_ref = _check_baseline_pc(correctors, eps0, kappa_ref)
    d, V = W.shape
    net = _Counted(posterior, (batch, L, V), W.dtype, W.device)
    x = torch.randn(batch, L, d, generator=generator, dtype=W.dtype, device=W.device)
    dt = 1.0 / steps
    for i in range(steps):
        t = i / steps
        x = x + dt * euclidean_velocity(x, net(x, t), W, t)
        t_new = min((i + 1) / steps, T_CAP)
        eps = _baseline_eps(i, steps, eps0, kappa_ref, (1.0 - t_new) ** 2)
        for _ in range(correctors):
            score = euclidean_score(x, net(x, t_new), W, t_new)
            xi = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
            x = x + eps * score + math.sqrt(2.0 * eps) * xi
    tokens = _readout(net(x, 1.0), banned)
    return Samples(tokens, net.nfe, x)
