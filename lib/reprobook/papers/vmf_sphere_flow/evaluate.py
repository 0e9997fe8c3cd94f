"""Oracle posteriors, one sampler entry point for the three paths, and the chapter's metrics.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).

- :func:`markov_oracle`, :func:`grid_oracle`: exact posteriors p(x^l = k | h) as sampler
  callables, for any of the three paths (eq. `vmf-emission` of
  notebooks/16_vmf_sphere_flow/index.md; :mod:`.paths` gives each path's likelihood);
- :func:`generate`: one call for every sampler of the chapter ("ode", "pc", "sde" on the vMF
  path, and the geodesic and Euclidean baselines), returning the tokens and the NFE;
- :func:`language_scores`: sequences from :func:`generate` over several sampling seeds, scored
  by their exact NLL under the Markov language and their entropy;
- :func:`puzzle_solve_rates`: each puzzle's solve rate over several sampling seeds;
- :func:`sequence_entropy`: the entropy of each generated sequence's token frequencies (the
  "entropy" that the paper plots beside generative perplexity, following MDLM's protocol);
- :func:`smallest_difference`: the interval that decides the chapter's comparisons (claims
  C3-C8), a simultaneous (Bonferroni) interval for the smallest of several differences of means,
  each a Welch or paired t-interval (:func:`reprobook.core.welch_interval`,
  :func:`reprobook.core.paired_interval`); the t-interval of one mean is
  :func:`reprobook.core.t_interval`;
- :func:`grid_uniformity`: validity and a chi-square test of uniformity over the 288 Shidoku
  grids.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats

from reprobook import core
from reprobook.core import checks

from . import data, paths, samplers
from .fields import T_CAP

__all__ = [
    "markov_oracle",
    "grid_oracle",
    "generate",
    "SampleScores",
    "language_scores",
    "cross_entropy_by_level",
    "sequence_entropy",
    "smallest_difference",
    "GridTest",
    "grid_uniformity",
    "solved",
    "solved_fraction",
    "puzzle_solve_rates",
]

SAMPLERS = ("ode", "pc", "sde", "geodesic", "euclidean")


def _level(level: float, path: str) -> float:
    # the samplers read out the baselines' posterior at t = 1, where the likelihoods are singular
    return float(level) if path == "vmf" else min(float(level), T_CAP)


def markov_oracle(chain: data.MarkovChain, W: torch.Tensor, path: str = "vmf"):
    """The exact posterior of the Markov language as a sampler callable (h, level) -> (B, L, V):
    forward-backward with the path's emission likelihoods (:func:`.paths.emission_loglik`),
    eq. `vmf-emission` of notebooks/16_vmf_sphere_flow/index.md."""
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
        possible &= np.all(
            (cl[:, None, :] == data.BLANK) | (cl[:, None, :] == table[None]), axis=-1
        )
    dead = ~possible.any(axis=1)
    if dead.any():
        ll = ll.copy()
        ll[dead] = 1e3 * dots[dead]
    return ll


def generate(
    sampler: str,
    posterior,
    W: torch.Tensor,
    L: int,
    batch: int,
    steps: int,
    *,
    kappa_max: float | None = None,
    psi=None,
    correctors: int = 0,
    sigma2: float = 1.0,
    eps0: float = 0.01,
    seed: int = 0,
    forbid=None,
) -> samplers.Samples:
    """Run one of the chapter's samplers with a fresh ``torch.Generator`` seeded by ``seed``.

    sampler: "ode", "pc" (``correctors`` per predictor step), "sde" (``sigma2``) on the vMF path,
    which need ``kappa_max`` and ``psi``; "geodesic" or "euclidean" for the baselines, with
    ``correctors`` per predictor step when given (then ``kappa_max`` is the vMF path's, which
    sets the baselines' corrector step relative to the vMF one).
    """
    checks.choice(sampler, "sampler", SAMPLERS)
    g = torch.Generator(device=W.device).manual_seed(int(seed))
    if sampler in ("geodesic", "euclidean"):
        fn = samplers.sample_geodesic if sampler == "geodesic" else samplers.sample_euclidean
        pc = {"correctors": correctors, "eps0": eps0, "kappa_ref": kappa_max} if correctors else {}
        return fn(posterior, W, L, batch, steps, generator=g, forbid=forbid, **pc)
    if kappa_max is None or psi is None:
        raise ValueError(f"the {sampler!r} sampler runs on the vMF path: pass kappa_max and psi")
    if sampler == "ode" or (sampler == "pc" and correctors == 0):
        return samplers.sample_ode(
            posterior, W, L, batch, kappa_max, steps, psi, generator=g, forbid=forbid
        )
    if sampler == "pc":
        return samplers.sample_pc(
            posterior,
            W,
            L,
            batch,
            kappa_max,
            steps,
            psi,
            correctors=correctors,
            eps0=eps0,
            generator=g,
            forbid=forbid,
        )
    return samplers.sample_sde(
        posterior, W, L, batch, kappa_max, steps, psi, sigma2=sigma2, generator=g, forbid=forbid
    )


class SampleScores(NamedTuple):
    """What :func:`language_scores` returns: one entry per generated sequence, seeds in order."""

    nll: np.ndarray  # (n * seeds,) exact NLL per token under the true chain, nats
    entropy: np.ndarray  # (n * seeds,) entropy of each sequence's token frequencies, nats
    nfe: int  # network evaluations of one run (the read-out included)


def language_scores(
    chain: data.MarkovChain,
    sampler: str,
    posterior,
    W,
    L: int,
    n: int,
    steps: int,
    *,
    seeds=(0,),
    **kw,
) -> SampleScores:
    """``n`` sequences of length ``L`` per sampling seed from :func:`generate` (``sampler``,
    ``steps`` and ``kw`` as there), each scored by its exact NLL per token under ``chain`` and
    by :func:`sequence_entropy`. The generated NLL stands in for the paper's generative
    perplexity."""
    nll, ent = [], []
    for s in seeds:
        out = generate(sampler, posterior, W, L, n, steps, seed=s, **kw)
        tokens = out.tokens.cpu().numpy()
        nll.append(chain.nll(tokens))
        ent.append(sequence_entropy(tokens, chain.V))
    if not nll:
        raise ValueError("seeds must name at least one sampling seed")
    return SampleScores(np.concatenate(nll), np.concatenate(ent), out.nfe)


def cross_entropy_by_level(
    posterior, tokens: torch.Tensor, W: torch.Tensor, levels, path: str = "vmf", seed: int = 10_000
) -> dict[float, float]:
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


def smallest_difference(
    pairs, level: float = 0.95, *, paired: bool = False
) -> tuple[str, core.Interval]:
    """The smallest of k differences mean(a_j) - mean(b_j), with a simultaneous interval.

    ``pairs`` maps a name to (a_j, b_j). Each difference gets its interval at the Bonferroni
    level 1 - (1 - level)/k (:func:`reprobook.core.bonferroni_level`): paired
    (:func:`reprobook.core.paired_interval`, a_i and b_i measured on the same unit, e.g. one
    puzzle solved by two methods) or Welch's (:func:`reprobook.core.welch_interval`, independent
    samples). With probability at least ``level`` every true difference lies in its interval,
    and then the smallest true difference lies in [min_j low_j, min_j high_j]. The estimate is
    min_j of the estimated differences. A claim "X beats every baseline" is scored on this: its
    lower end above 0 means each difference is. Returns (the name with the smallest estimate,
    the interval)."""
    pairs = dict(pairs)
    if not pairs:
        raise ValueError("pairs must name at least one comparison: {name: (a, b)}")
    each = core.bonferroni_level(level, len(pairs))
    difference = core.paired_interval if paired else core.welch_interval
    ivs = {name: difference(a, b, each) for name, (a, b) in pairs.items()}
    worst = min(ivs, key=lambda name: ivs[name].estimate)
    method = (
        (
            f"smallest of {len(ivs)} differences, each {ivs[worst].method.split(' over ')[0]} "
            f"(Bonferroni for {level:.0%} together)"
        )
        if len(ivs) > 1
        else ivs[worst].method
    )
    return worst, core.Interval(
        ivs[worst].estimate,
        min(iv.low for iv in ivs.values()),
        min(iv.high for iv in ivs.values()),
        method,
        ivs[worst].n,
        level=float(level),
    )


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
    return GridTest(
        float(ok.mean()),
        float(res.statistic) if res else math.nan,
        float(res.pvalue) if res else math.nan,
        counts,
    )


def solved(tokens, clues) -> np.ndarray:
    """Per puzzle (N,): whether the sampled grid is valid and agrees with every clue (0 = blank)."""
    t, c = np.asarray(tokens), np.asarray(clues)
    if t.shape != c.shape:
        raise ValueError(f"tokens and clues must have the same shape, got {t.shape} and {c.shape}")
    return data.valid_grid_mask(t) & np.all((c == data.BLANK) | (c == t), axis=1)


def solved_fraction(tokens, clues) -> float:
    """Fraction of puzzles whose sampled grid is valid and agrees with every clue (0 = blank)."""
    return float(solved(tokens, clues).mean())


def puzzle_solve_rates(
    sampler: str, posterior, W: torch.Tensor, clues, steps: int, *, seeds, forbid=data.BLANK, **kw
) -> tuple[np.ndarray, int]:
    """Each puzzle's solve rate over sampling seeds: ``clues`` (N, L) puzzles (0 = blank) are
    solved once per seed by :func:`generate` (``sampler``, ``steps`` and ``kw`` as there, the
    blank forbidden at read-out) and each is scored by :func:`solved`. Returns (the (N,) mean
    over the seeds, the NFE of one run)."""
    c = np.asarray(clues.cpu() if isinstance(clues, torch.Tensor) else clues)
    if c.ndim != 2:
        raise ValueError(f"clues must have shape (N, L), got {c.shape}")
    runs = []
    for s in seeds:
        out = generate(
            sampler, posterior, W, c.shape[1], c.shape[0], steps, seed=s, forbid=forbid, **kw
        )
        runs.append(solved(out.tokens.cpu().numpy(), c))
    if not runs:
        raise ValueError("seeds must name at least one sampling seed")
    return np.mean(runs, axis=0), out.nfe
