"""The benchmark loops of chapter 09's notebooks: descriptor spaces of the lookup pools, the
emulated tier priors per replicate, and the runs of every method on shared initial designs.

A *replicate* r of a notebook at seed s is one BO problem: substrate ``substrates[r % k]``, the
initial design drawn from (s, r), the prior corrupted from (s, r, p_flip). Every method sees the
same replicates, so differences between methods are paired.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from reprobook.core import Failures, checks

from . import data, priors
from .bo import METHODS, PRIOR_METHODS, Space, normalized_best, run_lookup
from .similarity import fingerprints, tanimoto_gram

__all__ = [
    "load_pool",
    "descriptor_space",
    "prior_for",
    "true_prior",
    "llm_agreement",
    "lookup_benchmark",
    "paired",
]


def load_pool(name: str, substrate: int) -> data.Pool:
    """The pool ``substrate`` of table ``name`` ("suzuki" or "buchwald")."""
    checks.choice(name, "name", ("suzuki", "buchwald"))
    return data.suzuki_pool(substrate) if name == "suzuki" else data.buchwald_pool(substrate)


def descriptor_space(pool: data.Pool, radius: int = 2, n_bits: int = 2048) -> Space:
    """Tanimoto Grams of the Morgan fingerprints of each variable's levels."""
    grams = tuple(tanimoto_gram(fingerprints(lv, radius, n_bits)) for lv in pool.levels)
    return Space(tuple(range(len(grams))), grams)


def prior_for(pool: data.Pool, space: Space, kind: str | float, seed: int, replicate: int,
              elicitor=None):  # fmt: skip
    """The tiers of each variable: ``kind`` a p_flip in [0, 1] (true tiers, corrupted),
    "parrot" (tiers from the descriptors alone) or "llm" (the tiers the language model of
    ``elicitor``, an :class:`.llm.TierElicitor`, gives; the same for every replicate)."""
    if kind == "llm":
        if elicitor is None:
            raise checks.InputError('the prior "llm" needs the model: pass elicitor=llm.load(...)')
        return elicitor.tiers(pool)
    if kind == "parrot":
        return [priors.parroting_tiers(G) for G in space.desc_grams]
    p = checks.probability(kind, "kind")
    rng = np.random.default_rng([seed, replicate, 7, int(round(1000 * p))])
    out = []
    for j, n in enumerate(pool.sizes):
        truth = priors.true_tiers(priors.marginal_means(pool.X, pool.y, n, j))
        out.append(priors.corrupt_tiers(truth, p, rng))
    return out


def true_prior(pool: data.Pool) -> list[np.ndarray]:
    """The exact tiers of each variable of ``pool``: the tertiles of its levels' mean yields
    (eq. `tagbo-tiers` of notebooks/09_tagbo/index.md), what the emulated prior corrupts."""
    return [priors.true_tiers(priors.marginal_means(pool.X, pool.y, n, j))
            for j, n in enumerate(pool.sizes)]  # fmt: skip


def llm_agreement(name: str, substrates: Sequence[int], elicitor) -> float:
    """The share of levels, over the pools ``substrates`` of table ``name`` and all their
    variables, that ``elicitor`` (an :class:`.llm.TierElicitor`) puts in their exact tier. An
    emulated prior at p_flip agrees on 1 - p_flip of them on average."""
    hits = []
    for sub in dict.fromkeys(int(s) for s in substrates):
        pool = load_pool(name, sub)
        hits.append(np.concatenate(elicitor.tiers(pool)) == np.concatenate(true_prior(pool)))
    return float(np.concatenate(hits).mean())


def lookup_benchmark(
    cfg,
    seed: int,
    name: str,
    priors_: Sequence[str | float],
    *,
    methods: Sequence[str] | None = None,
    elicitor=None,
    radius: int = 2,
    n_bits: int = 2048,
) -> pd.DataFrame:
    """Every method on every replicate of table ``name`` ("suzuki" or "buchwald"), at the sizes
    of ``cfg`` (a notebook's :class:`~.config.LookupConfig` or :class:`~.config.SweepConfig`:
    its ``substrates``, ``n_init``, ``n_iter``, ``n_replicates``, ``maxiter`` and
    ``refit_every``); ``methods`` defaults to ``cfg.methods``. A prior method runs once per
    entry of ``priors_`` (each a ``kind`` of :func:`prior_for`; "llm" asks ``elicitor``). One
    row per run: replicate, substrate, method, prior, auc (mean normalised best over the BO
    steps), final (normalised best after the budget), curve (normalised best after each
    evaluation), failures (how many of the run's steps had a fit or a proposal that failed
    after every retry, see :func:`.bo.run_lookup`; 0 almost always) and failure_notes (each
    failure's reason)."""
    methods = cfg.methods if methods is None else methods
    substrates, n_init = cfg.substrates, cfg.n_init
    for m in methods:
        checks.choice(m, "method", METHODS)
    rows, cache = [], {}
    for r in range(checks.integer(cfg.n_replicates, "n_replicates", minimum=1)):
        sub = int(substrates[r % len(substrates)])
        if sub not in cache:
            pool = load_pool(name, sub)
            cache[sub] = (pool, descriptor_space(pool, radius, n_bits))
        pool, space = cache[sub]
        for m in methods:
            for kind in priors_ if m in PRIOR_METHODS else [None]:
                tiers = None if kind is None else prior_for(pool, space, kind, seed, r, elicitor)
                failed = Failures("steps")
                trace = run_lookup(
                    pool.X, pool.y, space, m, tiers, n_init, cfg.n_iter, seed, r,
                    cfg.maxiter, cfg.refit_every, failed,
                )  # fmt: skip
                curve = normalized_best(trace, pool.y.max())
                rows.append(
                    dict(
                        replicate=r,
                        substrate=sub,
                        method=m,
                        prior=kind,
                        auc=float(curve[n_init:].mean()),
                        final=float(curve[-1]),
                        curve=curve,
                        failures=_steps(failed),
                        failure_notes=failed.reasons,
                    )
                )
    return pd.DataFrame(rows)


def paired(df: pd.DataFrame, a: dict, b: dict, column: str = "auc") -> np.ndarray:
    """Per replicate, ``column`` of the runs selected by ``a`` minus that of ``b`` (each a
    dict of column -> value, say ``{"method": "tagbo", "prior": 0.2}``)."""

    def pick(sel):
        mask = np.ones(len(df), dtype=bool)
        for k, v in sel.items():
            mask &= (df[k] == v).to_numpy() if v is not None else df[k].isna().to_numpy()
        return df[mask].set_index("replicate")[column]

    x, y = pick(a), pick(b)
    if len(x) == 0 or not x.index.equals(y.index):
        raise checks.InputError(f"the runs {a} and {b} do not share their replicates")
    return (x - y).to_numpy()


def heldout_r2(pool: data.Pool, space: Space, method: str, tiers, train, maxiter: int = 50):
    """Fit ``method``'s GP on the rows ``train`` of ``pool`` and return (R^2 of its posterior
    mean on the other rows, the fitted model). A fit that fails after every retry keeps the
    default hyper-parameters, and ``model.fit_failure`` says why (:func:`.bo.fit`)."""
    import torch
    from threadpoolctl import threadpool_limits

    from .bo import build_model, fit

    train = np.asarray(train)
    test = np.setdiff1d(np.arange(len(pool.y)), train)
    X = torch.as_tensor(pool.X, dtype=torch.float64)
    Y = torch.as_tensor(pool.y[train]).unsqueeze(-1)
    with threadpool_limits(1):
        model = fit(build_model(method, X[train], Y, space, tiers), maxiter)
        with torch.no_grad():
            pred = model.posterior(X[test]).mean.squeeze(-1).numpy()
    resid = pool.y[test] - pred
    return 1.0 - float(resid @ resid) / float(
        ((pool.y[test] - pool.y[test].mean()) ** 2).sum()
    ), model


def mll_over_w(model, grid) -> np.ndarray:
    """The exact marginal log-likelihood per point of a fitted TagBO model with every w_j set
    to each value of ``grid`` (the other hyper-parameters kept)."""
    import torch
    from gpytorch.mlls import ExactMarginalLogLikelihood

    kernel = model.covar_module.base_kernel
    if not getattr(kernel, "learn_w", False):
        raise checks.InputError("mll_over_w needs a TagBO model (w learned)")
    saved = kernel.raw_w.detach().clone()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    X, Y = model.train_inputs[0], model.train_targets
    out = []
    model.train()
    with torch.no_grad():
        for w in grid:
            kernel.initialize(
                raw_w=kernel.raw_w_constraint.inverse_transform(torch.full_like(saved, float(w)))
            )
            out.append(float(mll(model(X), Y)))
        kernel.initialize(raw_w=saved)
    model.eval()
    return np.array(out)


def _steps(failed: Failures) -> int:
    """How many distinct steps of a run needed a fallback (a step whose fit and proposal
    both did counts once): the units are "replicate r, method, step s (what)"."""
    return len({unit.rsplit(" (", 1)[0] for unit in failed.units})


def constrained_benchmark(cfg, seed: int) -> pd.DataFrame:
    """Every method of ``cfg.methods`` on every replicate of the synthetic task (replicate r
    draws the task from (seed, r)), at the settings of ``cfg`` (notebook 4's
    :class:`~.config.ConstrainedConfig`: the prior's ``p_flip``, the task's ``rho`` and
    ``noise``, the budget, the fits and the acquisition's ``n_screen``, ``top_k``,
    ``restarts`` and ``mc``). One row per run: replicate, method, auc, final, curve, the
    largest constraint violation of the points the method proposed (the initial rows
    excluded), and failures / failure_notes: how many of the run's steps had a fit, an SLSQP
    run or a proposal that failed after every retry (see :func:`.synthetic.run_constrained`; 0
    almost always), and each failure's reason."""
    from . import synthetic

    p_flip, n_init = cfg.p_flip, cfg.n_init
    acq_kw = dict(n_screen=cfg.n_screen, top_k=cfg.top_k, restarts=cfg.restarts, mc=cfg.mc)
    rows = []
    for r in range(checks.integer(cfg.n_replicates, "n_replicates", minimum=1)):
        task = synthetic.make_task(1000 * seed + r, rho=cfg.rho, noise=cfg.noise)
        rng = np.random.default_rng([seed, r, 7, int(round(1000 * p_flip))])
        tiers = [priors.corrupt_tiers(priors.true_tiers(e), p_flip, rng) for e in task.effects]
        for m in cfg.methods:
            failed = Failures("steps")
            X, f = synthetic.run_constrained(
                task, m, tiers, n_init, cfg.n_iter, seed, r, cfg.maxiter, cfg.refit_every,
                failed, **acq_kw,
            )  # fmt: skip
            curve = np.maximum.accumulate(f) / task.optimum
            viol = synthetic.violation(X[n_init:], task.sizes)
            rows.append(
                dict(
                    replicate=r,
                    method=m,
                    prior=p_flip if m in PRIOR_METHODS else None,
                    auc=float(curve[n_init:].mean()),
                    final=float(curve[-1]),
                    curve=curve,
                    violation=float(viol.max()),
                    X=X[n_init:],
                    failures=_steps(failed),
                    failure_notes=failed.reasons,
                )
            )
    return pd.DataFrame(rows)
