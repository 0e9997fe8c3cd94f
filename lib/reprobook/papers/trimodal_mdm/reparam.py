"""Logical and physical batch: the SDE reparameterisation of AdamW with the drift-horizon
parameter gamma, the critical batch size, a noisy-quadratic toy and a toy scaling-law fit, after
"The Design Space of Tri-Modal Masked Diffusion Models" (arXiv 2602.21472).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.optimize import minimize_scalar, nnls

from reprobook.core import checks


@dataclass(frozen=True)
class AdamW:
    """AdamW's hyperparameters: learning rate, betas, epsilon and (decoupled) weight decay."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float


def kappa(batch: float, budget: float, *, base_batch: float, base_budget: float, gamma: float):
    """kappa = (D_base / D)^gamma * (B / B_base). Implements eq. `trimodal-mdm-kappa` of
    notebooks/03_trimodal_mdm/index.md."""
    for name, v in (("batch", batch), ("budget", budget)):
        checks.real(v, name, above=0)
    checks.real(base_batch, "base_batch", above=0)
    checks.real(base_budget, "base_budget", above=0)
    gamma = checks.real(gamma, "gamma", minimum=0.0, maximum=1.0)
    return (base_budget / budget) ** gamma * (batch / base_batch)  # eq. trimodal-mdm-kappa


def scale(base: AdamW, k: float) -> AdamW:
    """AdamW's hyperparameters for a run whose step stands for ``k`` base steps:
    eta sqrt(k), beta^k, eps / sqrt(k), lambda sqrt(k) (the last rule is our reconstruction).
    Implements eq. `trimodal-mdm-sde`."""
    k = checks.real(k, "k", above=0)
    r = math.sqrt(k)
    return AdamW(
        lr=base.lr * r,  # eq. trimodal-mdm-sde: eta = eta_base sqrt(kappa)
        beta1=base.beta1**k,  # beta_1 = beta_1,base^kappa
        beta2=base.beta2**k,  # beta_2 = beta_2,base^kappa
        eps=base.eps / r,  # eps = eps_base / sqrt(kappa)
        weight_decay=base.weight_decay * r,  # lambda = lambda_base sqrt(kappa) (reconstruction)
    )


RECIPES = ("sde", "naive", "linear")


def recipe(
    name: str, base: AdamW, batch: float, budget: float, *, base_batch, base_budget, gamma=0.0
) -> AdamW:
    """The hyperparameters of a run at physical batch ``batch`` and token budget ``budget``:
    ``sde`` (eq. `trimodal-mdm-sde` with eq. `trimodal-mdm-kappa`), ``naive`` (the base values
    kept) or ``linear`` (eta proportional to B, the rest kept)."""
    checks.choice(name, "recipe", RECIPES)
    k = kappa(batch, budget, base_batch=base_batch, base_budget=base_budget, gamma=gamma)
    if name == "sde":
        return scale(base, k)
    if name == "naive":
        return base
    return replace(base, lr=base.lr * batch / base_batch)


def n_steps(budget: int, batch: int, length: int) -> int:
    """S = D / (B L): the optimiser steps that spend a budget of D tokens in batches of B
    sequences of L tokens. D must be a whole number of batches."""
    budget = checks.integer(budget, "budget", minimum=1)
    batch = checks.integer(batch, "batch", minimum=1)
    length = checks.integer(length, "length", minimum=1)
    if budget % (batch * length):
        raise checks.InputError(
            f"budget must be a multiple of batch * length = {batch * length}, got {budget}"
        )
    return budget // (batch * length)


def adamw_timescale(h: AdamW, batch: float, budget: float) -> float:
    """B / (eta lambda D): AdamW's weight-decay timescale as a fraction of the run."""
    return batch / (h.lr * h.weight_decay * budget)


def critical_batch(batches, losses, delta: float = 0.02) -> float:
    """B_crit: the largest batch whose loss is within a factor (1 + delta) of the best loss.
    Implements eq. `trimodal-mdm-bcrit`."""
    b = checks.array(batches, "batches", ndim=1)
    v = checks.array(losses, "losses", ndim=1)
    checks.same_shape("batches", b, "losses", v)
    delta = checks.real(delta, "delta", minimum=0.0)
    ok = v <= (1.0 + delta) * v.min()  # eq. trimodal-mdm-bcrit: within delta of the best
    return float(b[ok].max())


def flat_range(batches, losses, centre: float, delta: float = 0.02) -> float:
    """log2 of the widest contiguous range of batches, containing ``centre``, over which every
    loss is within (1 + delta) of the best loss of the curve (0 when only ``centre`` is)."""
    b = checks.array(batches, "batches", ndim=1)
    v = checks.array(losses, "losses", ndim=1)
    order = np.argsort(b)
    b, v = b[order], v[order]
    ok = v <= (1.0 + delta) * v.min()
    (where,) = np.nonzero(b == centre)
    if where.size == 0:
        raise checks.InputError(f"centre must be one of the batches {b.tolist()}, got {centre}")
    i = j = int(where[0])
    if not ok[i]:
        return 0.0
    while i > 0 and ok[i - 1]:
        i -= 1
    while j < b.size - 1 and ok[j + 1]:
        j += 1
    return float(math.log2(b[j] / b[i]))


def noisy_quadratic(
    h: AdamW,
    batch: int,
    budget: int,
    *,
    curvatures: np.ndarray,
    noise: float,
    w0: float,
    replicates: int,
    seed: int,
) -> float:
    """Final mean loss of torch's AdamW on f(w) = sum_i h_i w_i^2 / 2 when each step's gradient
    carries Gaussian noise of standard deviation ``noise / sqrt(batch)``, after
    ``budget / batch`` steps (``replicates`` independent runs in parallel: Adam is elementwise,
    so the rows never interact)."""
    steps = n_steps(budget, batch, 1)
    c = torch.as_tensor(np.asarray(curvatures, dtype=np.float64))
    g = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter(torch.full((replicates, c.numel()), float(w0), dtype=torch.float64))
    opt = torch.optim.AdamW(
        [w], lr=h.lr, betas=(h.beta1, h.beta2), eps=h.eps, weight_decay=h.weight_decay
    )
    for _ in range(steps):
        xi = torch.randn(w.shape, generator=g, dtype=torch.float64)
        w.grad = c * w.detach() + noise / math.sqrt(batch) * xi
        opt.step()
    return float((0.5 * c * w.detach() ** 2).sum(dim=1).mean())


def power_law(n, e, a, alpha):
    """L(N) = E + A N^(-alpha). Implements eq. `trimodal-mdm-scaling`."""
    return e + a * np.power(n, -alpha)


ALPHA_GRID = np.linspace(0.005, 3.0, 600)  # the exponents tried before the 1-d refinement


def _linear_part(alpha: float, n: np.ndarray, v: np.ndarray) -> tuple[float, float, float]:
    """For a fixed exponent: the least-squares E >= 0, A >= 0 of v ~ E + A n^(-alpha), as
    (E, A, sum of squared errors), by non-negative least squares on the columns 1 and
    (n / min n)^(-alpha) (scaled so that both are of order 1)."""
    x = np.power(n / n.min(), -alpha)  # (m,) in (0, 1]
    (e, b), norm = nnls(np.column_stack([np.ones_like(x), x]), v)  # E and A (min n)^(-alpha)
    return float(e), float(b * n.min() ** alpha), float(norm * norm)


def fit_scaling_law(sizes, losses) -> dict[str, float]:
    """Least-squares fit of eq. `trimodal-mdm-scaling` to (model size, loss) pairs, with
    E >= 0, A >= 0 and alpha in [0.005, 3]; returns E, A and alpha.

    By variable projection: for a fixed alpha the model is linear in (E, A), solved exactly
    (non-negative least squares); the squared error of that solution is minimised over alpha
    on ``ALPHA_GRID`` and then by bounded Brent between the best grid point's neighbours.
    Nothing iterates in three dimensions, so nothing can fail to converge, and the answer
    moves with the data only as much as the problem's conditioning says: SciPy's
    ``curve_fit`` on the three parameters, which this replaces, stopped on its tolerances at
    points that moved by 1e-5 to 7% when the losses moved by 1e-12, and may raise "Optimal
    parameters not found". When the best
    fit has A = 0 (losses that do not fall with size) alpha is not identified and is the
    smallest value tried."""
    n = checks.array(sizes, "sizes", ndim=1)
    v = checks.array(losses, "losses", ndim=1)
    checks.same_shape("sizes", n, "losses", v)
    if n.size < 3:
        raise checks.InputError(f"sizes must hold at least 3 points, got {n.size}")
    if np.any(n <= 0):
        raise checks.InputError("sizes must be positive")
    sse = np.array([_linear_part(a, n, v)[2] for a in ALPHA_GRID])  # (grid,)
    i = int(np.argmin(sse))  # the best grid point: the minimum lies within a step of it
    lo, hi = ALPHA_GRID[max(i - 1, 0)], ALPHA_GRID[min(i + 1, ALPHA_GRID.size - 1)]
    res = minimize_scalar(
        lambda a: _linear_part(a, n, v)[2],
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-12},
    )
    alpha = float(res.x) if res.fun <= sse[i] else float(ALPHA_GRID[i])
    e, a, _ = _linear_part(alpha, n, v)
    if a == 0.0:  # a constant fits best: alpha is not identified
        alpha = float(ALPHA_GRID[0])
    return {"E": e, "A": a, "alpha": alpha}
