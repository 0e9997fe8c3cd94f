"""Oracle posteriors, one sampler entry point for the three paths, and the chapter's metrics.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).

- :func:`markov_oracle`, :func:`grid_oracle`: exact posteriors p(x^l = k | h) as sampler
  callables, for any of the three paths (:mod:`.paths` gives each path's likelihood);
- :func:`generate`: one call for every sampler of the chapter ("ode", "pc", "sde" on the vMF
  path, and the geodesic and Euclidean baselines), returning the tokens and the NFE;
- :func:`sequence_entropy`: the entropy of each generated sequence's token frequencies (the
  "entropy" that the paper plots beside generative perplexity, following MDLM's protocol);
- :func:`mean_interval`, :func:`interval_separation`: t-intervals of a mean and the gap between
  two intervals (the chapter's rule: overlapping intervals do not count as a win);
- :func:`grid_uniformity`: validity and a chi-square test of uniformity over the 288 Shidoku
  grids.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats

from reprobook.core.stats import t_interval

from . import data, paths, samplers
from .fields import T_CAP

__all__ = [
    "markov_oracle",
    "grid_oracle",
    "generate",
    "cross_entropy_by_level",
    "sequence_entropy",
    "Interval",
    "mean_interval",
    "network_interval",
    "interval_separation",
    "GridTest",
    "grid_uniformity",
    "solved_fraction",
]

SAMPLERS = ("ode", "pc", "sde", "geodesic", "euclidean")


def _level(level: float, path: str) -> float:
    # the samplers read out the baselines' posterior at t = 1, where the likelihoods are singular
    return float(level) if path == "vmf" else min(float(level), T_CAP)


def markov_oracle(chain: data.MarkovChain, W: torch.Tensor, path: str = "vmf"):
    """The exact posterior of the Markov language as a sampler callable (h, level) -> (B, L, V):
    forward-backward with the path's emission likelihoods (:func:`.paths.emission_loglik`)."""
    paths.check_path(path)
    Wn = np.asarray(W, dtype=np.float64)

    def posterior(h: torch.Tensor, level: float) -> torch.Tensor:
        ll = paths.emission_loglik(h.detach().cpu().numpy(), Wn, _level(level, path), path)
        return torch.as_tensor(chain.posterior_marginals(ll), dtype=h.dtype, device=h.device)

    return posterior


def grid_oracle(W: torch.Tensor, path: str = "vmf", clues=None, grids=None):
    """The exact posterior over Shidoku grids (all 288, or ``grids``), optionally conditioned on
    puzzles ``clues`` (B, 16), as a sampler callable (:func:`.data.oracle_posterior_grids`)."""
    paths.check_path(path)
    Wn = np.asarray(W, dtype=np.float64)
    c = None if clues is None else np.asarray(clues)

    table = data.shidoku_grids() if grids is None else np.asarray(grids)

    def posterior(h: torch.Tensor, level: float) -> torch.Tensor:
        hn = h.detach().cpu().numpy()
        ll = paths.emission_loglik(hn, Wn, _level(level, path), path)
        if path == "geodesic":  # the only path whose likelihood has holes
            ll = _fill_infeasible(ll, hn @ Wn, table, c)
        marg = data.oracle_posterior_grids(ll, clues=c, grids=grids).marginals
        return torch.as_tensor(marg, dtype=h.dtype, device=h.device)

    return posterior


def _fill_infeasible(ll: np.ndarray, dots: np.ndarray, table: np.ndarray, clues) -> np.ndarray:
    """The geodesic likelihood is 0 outside a cap around each token, so a state off the path
    (a sampler's discretisation error) can leave every allowed grid impossible although each
    cell has some possible token. Such rows get the scores 1e3 w_k.h instead (a very
    concentrated vMF): the nearest allowed grid."""
    L = table.shape[1]
    possible = np.isfinite(ll)[..., np.arange(L)[None, :], table].all(axis=-1)  # (B, G)
    if clues is not None:
        cl = np.broadcast_to(np.asarray(clues), ll.shape[:-1])
        possible &= np.all((cl[:, None, :] == data.BLANK) | (cl[:, None, :] == table[None]), axis=-1)
    dead = ~possible.any(axis=1)
    if dead.any():
        ll = ll.copy()
        ll[dead] = 1e3 * dots[dead]
    return ll


def generate(sampler: str, posterior, W: torch.Tensor, L: int, batch: int, steps: int, *, kappa_max: float | None = None,
             psi=None, correctors: int = 0, sigma2: float = 1.0, eps0: float = 0.01, seed: int = 0,
             forbid=None) -> samplers.Samples:
    """Run one of the chapter's samplers with a fresh ``torch.Generator`` seeded by ``seed``.

    sampler: "ode", "pc" (``correctors`` per predictor step), "sde" (``sigma2``) on the vMF path,
    which need ``kappa_max`` and ``psi``; "geodesic" or "euclidean" for the baselines.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    g = torch.Generator(device=W.device).manual_seed(int(seed))
    if sampler in ("geodesic", "euclidean"):
        fn = samplers.sample_geodesic if sampler == "geodesic" else samplers.sample_euclidean
        return fn(posterior, W, L, batch, steps, generator=g, forbid=forbid)
    if kappa_max is None or psi is None:
        raise ValueError(f"the {sampler!r} sampler runs on the vMF path: pass kappa_max and psi")
    if sampler == "ode" or (sampler == "pc" and correctors == 0):
        return samplers.sample_ode(posterior, W, L, batch, kappa_max, steps, psi, generator=g, forbid=forbid)
    if sampler == "pc":
        return samplers.sample_pc(posterior, W, L, batch, kappa_max, steps, psi, correctors=correctors, eps0=eps0,
                                  generator=g, forbid=forbid)
    return samplers.sample_sde(posterior, W, L, batch, kappa_max, steps, psi, sigma2=sigma2, generator=g,
                               forbid=forbid)


def cross_entropy_by_level(posterior, tokens: torch.Tensor, W: torch.Tensor, levels, path: str = "vmf",
                           seed: int = 10_000) -> dict[float, float]:
    """Test cross-entropy -mean log p(x^l | h) of clean ``tokens`` (N, L) at each noise level,
    with h drawn on ``path`` by a generator seeded ``seed + i`` for the i-th level, so that every
    posterior scored with the same arguments sees the same noisy inputs. Returns {level: nats}."""
    tokens = torch.as_tensor(tokens)
    out = {}
    for i, level in enumerate(levels):
        g = torch.Generator().manual_seed(seed + i)
        lv = torch.full((tokens.shape[0],), float(level), dtype=torch.float64)
        h = paths.noisy_states(W.T[tokens].to(torch.float64), lv, path, g)
        p = posterior(h, float(level)).gather(-1, tokens[..., None]).clamp_min(1e-12)
        out[float(level)] = float(-p.log().mean())
    return out


def sequence_entropy(tokens, V: int) -> np.ndarray:
    """Entropy (nats) of each sequence's token frequencies, (N,): -sum_k f_k log f_k with
    f_k = (count of token k in the sequence) / L. A sequence of one repeated token has 0."""
    t = np.asarray(tokens)
    if t.ndim != 2 or t.shape[1] < 1:
        raise ValueError(f"tokens must have shape (N, L), got {t.shape}")
    if t.size and (t.min() < 0 or t.max() >= V):
        raise ValueError(f"tokens must lie in 0..{V - 1}")
    counts = np.zeros((t.shape[0], V))
    np.add.at(counts, (np.arange(t.shape[0])[:, None], t), 1.0)
    f = counts / t.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(f > 0, f * np.log(f), 0.0).sum(axis=1)


class Interval(NamedTuple):
    mean: float
    lo: float
    hi: float
    se: float
    n: int


def mean_interval(x, level: float = 0.95) -> Interval:
    """The mean of ``x`` with its two-sided t-interval at ``level`` (needs at least 2 values;
    :func:`reprobook.core.t_interval`)."""
    iv = t_interval(x, level)
    return Interval(iv.mean, iv.low, iv.high, iv.se, iv.n)


def network_interval(per_network, level: float = 0.95) -> Interval:
    """The interval of a mean over trained networks: ``per_network`` is a list with one array of
    per-sample values (all sampling seeds pooled) for each training seed. With one network it is
    the t-interval over its samples, which covers sampling noise only; with several it is the
    t-interval over the networks' means (n = number of networks), so that the training seeds'
    spread counts and samples of one network are not taken as independent of each other."""
    groups = [np.asarray(g, dtype=float).ravel() for g in per_network]
    if not groups:
        raise ValueError("need the values of at least one network")
    if len(groups) == 1:
        return mean_interval(groups[0], level)
    return mean_interval([g.mean() for g in groups], level)


def interval_separation(better: Interval, worse: Interval) -> float:
    """worse.lo - better.hi: positive when ``better``'s interval lies entirely below ``worse``'s
    (lower is better, as for an NLL), negative when they overlap or are in the other order."""
    return float(worse.lo - better.hi)


class GridTest(NamedTuple):
    valid: float  # fraction of samples that are valid grids
    chi2: float  # chi-square statistic over the 288 grids (valid samples only)
    pvalue: float
    counts: np.ndarray  # (288,) how often each grid was drawn


def grid_uniformity(tokens) -> GridTest:
    """Validity of sampled 4x4 grids (N, 16) and Pearson's chi-square test that the valid ones are
    uniform over the 288 Shidoku grids (287 degrees of freedom)."""
    t = np.asarray(tokens)
    if t.ndim != 2 or t.shape[0] < 1:
        raise ValueError(f"tokens must be (N, 16) with N >= 1 sampled grids, got shape {t.shape}")
    ok = data.valid_grid_mask(t)
    counts = np.zeros(data.N_SHIDOKU_GRIDS)
    if ok.any():
        np.add.at(counts, data.grid_to_index(t[ok]), 1.0)
    res = stats.chisquare(counts) if ok.sum() else None
    return GridTest(float(ok.mean()), float(res.statistic) if res else math.nan,
                    float(res.pvalue) if res else math.nan, counts)


def solved_fraction(tokens, clues) -> float:
    """Fraction of puzzles whose sampled grid is valid and agrees with every clue (0 = blank)."""
    t, c = np.asarray(tokens), np.asarray(clues)
    if t.shape != c.shape:
        raise ValueError(f"tokens and clues must have the same shape, got {t.shape} and {c.shape}")
    return float((data.valid_grid_mask(t) & np.all((c == data.BLANK) | (c == t), axis=1)).mean())
