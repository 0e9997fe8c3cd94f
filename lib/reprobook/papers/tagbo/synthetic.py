"""The synthetic constrained formulation task of chapter 09 and BO on it.

Our design (the paper's tasks are not public): three categorical variables (6, 5 and 4 levels),
three composition fractions on the simplex (u_1 + u_2 + u_3 = 1, u >= 0) and a temperature
t in [0, 1]. Each level has a latent "task property" z; the objective (eq. `tagbo-synthetic`)

    f(c, u, t) = a1[c1] + a2[c2] + b3[c3] g(u, t),   g = exp(-|u - m|^2 / (2 s_u^2)
                                                          - (t - t0)^2 / (2 s_t^2))

has a_j = z_j - min z_j and b3 = exp(z_3 / 2); each level's descriptor is a 4-vector whose first
coordinate correlates ``rho`` (0.3) with z, so descriptors are only partly informative.

The acquisition is maximised under the equality constraint with botorch's
``optimize_acqf``: a screen of every categorical combination on random feasible points
picks the ``top_k`` combinations, and SLSQP (botorch's choice under constraints) refines the
continuous part of each (eq. `tagbo-constrained`). Should SLSQP fail (an error, or a
result off the constraints), the combination keeps its best screened point, which is feasible
by construction; screened values tied to rounding rank by position (:func:`.bo.best_first`).
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.exceptions.errors import BotorchError
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from threadpoolctl import threadpool_limits

from reprobook.core import Failures, checks

from .bo import (
    METHODS,
    NUMERICAL_ERRORS,
    TIE_TOL,
    Space,
    best_first,
    build_model,
    carry_over,
    fit,
    replay,
    with_jitter,
)
from .similarity import rbf_gram

__all__ = [
    "FormulationTask",
    "make_task",
    "sample_feasible",
    "propose_constrained",
    "run_constrained",
    "violation",
]

CAT_DIMS = (0, 1, 2)
FRACTION_DIMS = (3, 4, 5)
CONT_DIMS = (3, 4, 5, 6)  # fractions, then temperature
FEASIBLE = 1e-9  # the largest violation an SLSQP result may have before it is replaced


@dataclass(frozen=True)
class FormulationTask:
    """One draw of the synthetic task (see the module's docstring)."""

    effects: tuple[np.ndarray, ...] = field(repr=False)  # a1, a2, b3
    descriptors: tuple[np.ndarray, ...] = field(repr=False)  # (L_j, 4) each
    m: tuple[float, float, float] = (0.5, 0.3, 0.2)  # the best composition
    t0: float = 0.65  # the best temperature
    s_u: float = 0.15  # width of the composition bump
    s_t: float = 0.25  # width of the temperature bump
    noise: float = 0.05  # observation noise (sd)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(e) for e in self.effects)

    @property
    def optimum(self) -> float:
        """max f: the best level of each variable with u = m, t = t0 (g = 1)."""
        return float(sum(e.max() for e in self.effects))

    def space(self) -> Space:
        grams = tuple(rbf_gram(d) for d in self.descriptors)
        return Space(CAT_DIMS, grams, CONT_DIMS)

    def f(self, X) -> np.ndarray:
        """The noiseless objective of rows X (n, 7), eq. `tagbo-synthetic`."""
        X = checks.array(X, "X", ndim=2, shape=(None, 7))
        c = np.rint(X[:, :3]).astype(int)
        u, t = X[:, 3:6], X[:, 6]
        g = np.exp(
            -((u - np.array(self.m)) ** 2).sum(1) / (2 * self.s_u**2)
            - (t - self.t0) ** 2 / (2 * self.s_t**2)
        )
        a1, a2, b3 = self.effects
        return a1[c[:, 0]] + a2[c[:, 1]] + b3[c[:, 2]] * g  # eq. tagbo-synthetic


def make_task(seed: int, rho: float = 0.3, sizes=(6, 5, 4), noise: float = 0.05) -> FormulationTask:
    """A draw of the task: latent z ~ N(0, 1) per level; descriptor d = (rho z + sqrt(1 -
    rho^2) e_1, e_2, e_3, e_4) with e ~ N(0, I)."""
    rho = checks.real(rho, "rho", minimum=-1, maximum=1)
    rng = np.random.default_rng([seed, 9])
    z = [rng.normal(size=checks.integer(n, "level count", minimum=2)) for n in sizes]
    if len(z) != 3:
        raise checks.InputError(f"sizes must give 3 level counts, got {sizes!r}")
    effects = (z[0] - z[0].min(), z[1] - z[1].min(), np.exp(z[2] / 2))
    desc = []
    for zj in z:
        e = rng.normal(size=(len(zj), 4))
        e[:, 0] = rho * zj + np.sqrt(1 - rho**2) * e[:, 0]
        desc.append(e)
    return FormulationTask(effects, tuple(desc), noise=checks.real(noise, "noise", minimum=0))


def sample_feasible(task: FormulationTask, n: int, rng) -> np.ndarray:
    """n random feasible rows: uniform levels, u ~ Dirichlet(1, 1, 1), t ~ U[0, 1]."""
    rng = checks.generator(rng)
    c = np.stack([rng.integers(0, L, size=n) for L in task.sizes], 1)
    return np.hstack([c, rng.dirichlet(np.ones(3), size=n), rng.random((n, 1))]).astype(float)


def violation(X, sizes) -> np.ndarray:
    """Per row, the largest breach of the constraints: |sum u - 1|, u or t outside [0, 1], a
    level index that is not an integer in range."""
    X = checks.array(X, "X", ndim=2, shape=(None, 7))
    c = X[:, :3]
    hi = np.array(sizes, dtype=float) - 1
    cat = np.maximum(np.abs(c - np.rint(c)), np.maximum(-c, c - hi).clip(min=0)).max(1)
    simplex = np.abs(X[:, 3:6].sum(1) - 1.0)
    box = np.maximum(-X[:, 3:], X[:, 3:] - 1.0).clip(min=0).max(1)
    return np.maximum(np.maximum(cat, simplex), box)


def _slsqp(acq, bounds, eq, fixed, ic, sizes):
    """botorch's SLSQP from the initial conditions ``ic`` with the levels ``fixed``: the best
    candidate and its value. Raises BotorchError when the result is more than ``FEASIBLE`` off
    the constraints or its value is not finite (RuntimeError comes from botorch itself on a
    NaN or a failed Cholesky)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cand, val = optimize_acqf(
            acq, bounds, q=1, num_restarts=len(ic), equality_constraints=eq,
            fixed_features=fixed, batch_initial_conditions=ic,
        )  # fmt: skip
    x, v = cand.detach().numpy()[0], float(val)
    off = float(violation(x[None], sizes)[0])
    if not (np.isfinite(v) and off <= FEASIBLE):
        raise BotorchError(f"SLSQP ended {off:.1e} off the constraints (value {v})")
    return x, v


def propose_constrained(
    model, best_f, task, rng, n_screen=16, top_k=1, restarts=1, mc=64, failures=None
):
    """The next row: qLogEI maximised over the levels and the constrained continuous part,
    eq. `tagbo-constrained`. A screen of every combination of levels on ``n_screen`` random
    feasible (u, t) keeps the ``top_k`` combinations; for each, SLSQP (botorch's
    ``optimize_acqf`` with the equality constraint and the levels fixed) starts from its
    ``restarts`` best screened points; the best candidate wins (ties to rounding: the first).
    qLogEI uses ``mc`` quasi-Monte Carlo samples. An SLSQP run that raises, or returns a
    point more than ``FEASIBLE`` off the constraints, is replaced by the combination's best
    screened point (feasible by construction) and added to ``failures`` when given."""
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([mc]), seed=int(rng.integers(2**31)))
    acq = qLogExpectedImprovement(model, best_f=best_f, sampler=sampler)
    combos = np.array(list(itertools.product(*[range(L) for L in task.sizes])), dtype=float)
    S = sample_feasible(task, n_screen, rng)[:, 3:]  # (n_screen, 4) feasible u, t
    grid = np.hstack([np.repeat(combos, n_screen, 0), np.tile(S, (len(combos), 1))])
    with torch.no_grad():
        a = acq(torch.as_tensor(grid).unsqueeze(1)).reshape(len(combos), n_screen)
    keep = best_first(a.amax(1).numpy())[: min(top_k, len(combos))]
    bounds = torch.tensor(
        [[0.0] * 7, [L - 1.0 for L in task.sizes] + [1.0] * 4], dtype=torch.float64
    )
    eq = [(torch.tensor(FRACTION_DIMS), torch.ones(3, dtype=torch.float64), 1.0)]  # sum u = 1
    best, best_val = None, -np.inf
    for k in keep.tolist():
        starts = best_first(a[k].numpy())[: min(restarts, n_screen)]
        ic = torch.as_tensor(grid[k * n_screen + starts]).unsqueeze(1)  # (restarts, 1, 7)
        fixed = {d: float(combos[k, i]) for i, d in enumerate(CAT_DIMS)}
        try:
            x, v = _slsqp(acq, bounds, eq, fixed, ic, task.sizes)  # eq. tagbo-constrained
        except (BotorchError, RuntimeError) as err:  # SLSQP failed: keep the screened point
            x, v = grid[k * n_screen + starts[0]].copy(), float(a[k, starts[0]])
            if failures is not None:
                failures.add(f"combination {k}", f"{type(err).__name__}: {err}")
        margin = TIE_TOL * max(1.0, abs(best_val)) if np.isfinite(best_val) else 0.0
        if best is None or v > best_val + margin:  # a rounding-level gain does not count
            best, best_val = x, v
    return best


def _propose_logged(tries: list, model, best_f, task, rng, **acq_kw):
    """:func:`propose_constrained` with a fresh record of its SLSQP failures appended to
    ``tries`` (the last try's record is the one that counts)."""
    tries.append(Failures("SLSQP runs"))
    return propose_constrained(model, best_f, task, rng, failures=tries[-1], **acq_kw)


def run_constrained(task, method, tiers=None, n_init=5, n_iter=10, seed=0, replicate=0,
                    maxiter=50, refit_every=1, failures=None, **acq_kw):  # fmt: skip
    """One BO run on the task: the evaluated rows (n_init + n_iter, 7) and their noiseless
    values. The initial rows are shared by every method in (seed, replicate). A fit that fails
    after every retry keeps the previous hyper-parameters, an SLSQP failure its combination's
    best screened point, and a proposal that fails even with the largest Cholesky jitter
    falls back to a random feasible row; each is added to ``failures`` (a
    :class:`reprobook.core.Failures`) when one is given."""
    checks.choice(method, "method", METHODS)
    X = sample_feasible(task, n_init, np.random.default_rng([seed, replicate, 0]))
    rng = np.random.default_rng([seed, replicate, 1 + METHODS.index(method)])
    noise_rng = np.random.default_rng([seed, replicate, 50])
    y = task.f(X) + task.noise * noise_rng.normal(size=len(X))
    space, model = task.space(), None
    with threadpool_limits(1):
        for step in range(checks.integer(n_iter, "n_iter", minimum=0)):
            if method == "random":
                x = sample_feasible(task, 1, rng)[0]
            else:
                Xt, Y = torch.as_tensor(X), torch.as_tensor(y).unsqueeze(-1)
                new = build_model(method, Xt, Y, space, tiers)
                new = carry_over(model, new) if model is not None else new
                model = fit(new, maxiter) if step % refit_every == 0 else new.eval()
                unit = f"replicate {replicate}, {method}, step {step}"
                if getattr(model, "fit_failure", None) and failures is not None:
                    failures.add(unit + " (fit)", model.fit_failure)
                tries: list[Failures] = []  # one per try; an abandoned try's runs do not count
                try:  # a retry replays the step's draws (replay), so it changes only the jitter
                    x = with_jitter(
                        replay(rng, _propose_logged, tries, model, float(y.max()), task, **acq_kw)
                    )
                    slsqp = tries[-1]
                except NUMERICAL_ERRORS as err:
                    x = sample_feasible(task, 1, rng)[0]
                    slsqp = Failures("SLSQP runs")
                    slsqp.add("proposal", f"{type(err).__name__}: {err}")
                if failures is not None:
                    for what, reason in slsqp.reasons.items():
                        failures.add(f"{unit} ({what})", reason)
            X = np.vstack([X, x])
            y = np.append(y, task.f(x[None])[0] + task.noise * noise_rng.normal())
    return X, task.f(X)
