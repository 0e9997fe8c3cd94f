"""Tests of reprobook.papers.vmf_sphere_flow.evaluate, the training schedule of .model, the cached
networks of .experiments and the profiles of .config (arXiv 2605.05629).

What is checked:

- the metrics against closed forms and SciPy: sequence entropy (0, log L, a hand-computed mix),
  core's Welch and paired intervals of a difference, which the chapter's comparisons use
  (SciPy's ``ttest_ind``/``ttest_rel``), the simultaneous interval of the smallest difference
  (Bonferroni), the Shidoku uniformity
  test (all 288 grids once: chi2 0, p 1; a hand-computed chi2; a skewed sample) and the solved
  fraction on hand-built puzzles;
- the oracle callables: the vMF Markov oracle is ``chain.posterior_marginals`` exactly, the
  Euclidean one is the vMF one at kappa = t / (1 - t)^2 and the geodesic one at t = 0 is the
  prior, the baselines' level is capped below 1, and the grid oracle puts no mass on what the
  clues rule out;
- ``generate``: every sampler name, its NFE (``samplers.count_nfe``), seeding, keyword plumbing and
  errors;
- the whole chain of oracle, sampler and read-out: ODE samples with the exact posterior of a tiny
  Markov language pass a chi-square goodness-of-fit test against the exact sequence law, while
  one step, or a wrong (uniform) posterior, fail it;
- the warm-up/cosine learning-rate schedule and ``train_posterior`` (determinism, eval mode,
  learning); the checkpoint cache of ``language_network``; the five notebook profiles.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from reprobook import core
from reprobook.papers.vmf_sphere_flow import (
    config,
    data,
    evaluate,
    experiments,
    geometry,
    paths,
    samplers,
)
from reprobook.papers.vmf_sphere_flow.config import Language, Net
from reprobook.papers.vmf_sphere_flow.fields import T_CAP
from reprobook.papers.vmf_sphere_flow.model import PosteriorTransformer, train_posterior

DT = torch.float64


def _unit(shape, seed: int, dtype=DT) -> torch.Tensor:
    z = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return z / z.norm(dim=-1, keepdim=True)


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread per test: two xdist workers on two cores with two OpenMP threads each run
    the sampler and training tests 10-50 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache
def _psi(d: int, kappa_max: float, n_kappa: int = 121, n_s: int = 201) -> geometry.PsiTable:
    return geometry.PsiTable(d, kappa_max, n_kappa=n_kappa, n_s=n_s)


# =============================================================================================
# sequence_entropy
# =============================================================================================


def test_sequence_entropy_closed_forms():
    V = 6
    constant = np.full((1, 7), 3)
    distinct = np.array([[5, 0, 3, 1, 2]])  # L = 5 distinct tokens, each once
    mixed = np.array([[0, 0, 1, 2]])  # frequencies 1/2, 1/4, 1/4
    out = evaluate.sequence_entropy(np.concatenate([constant[:, :4], mixed, distinct[:, :4]]), V)
    assert out.shape == (3,)
    assert out[0] == 0.0
    assert out[1] == pytest.approx(1.5 * math.log(2), abs=1e-14)
    assert out[2] == pytest.approx(math.log(4), abs=1e-14)
    assert evaluate.sequence_entropy(constant, V)[0] == 0.0
    assert evaluate.sequence_entropy(distinct, V)[0] == pytest.approx(math.log(5), abs=1e-14)
    # random sequences against scipy's entropy of the token counts
    rng = np.random.default_rng(0)
    t = rng.integers(0, V, size=(50, 9))
    ref = [stats.entropy(np.bincount(row, minlength=V)) for row in t]
    np.testing.assert_allclose(evaluate.sequence_entropy(t, V), ref, rtol=0, atol=1e-12)
    # order within a sequence does not matter; the largest value is log V (L a multiple of V)
    np.testing.assert_allclose(evaluate.sequence_entropy(t[:, ::-1], V), ref, atol=1e-12)
    assert evaluate.sequence_entropy(np.tile(np.arange(V), 2)[None], V)[0] == pytest.approx(
        math.log(V)
    )


def test_sequence_entropy_errors():
    with pytest.raises(ValueError, match="shape"):
        evaluate.sequence_entropy(np.array([0, 1, 2]), 4)  # (L,) not (N, L)
    with pytest.raises(ValueError, match="shape"):
        evaluate.sequence_entropy(np.zeros((3, 0), dtype=int), 4)
    with pytest.raises(ValueError, match="0..3"):
        evaluate.sequence_entropy(np.array([[0, 4]]), 4)
    with pytest.raises(ValueError, match="0..3"):
        evaluate.sequence_entropy(np.array([[-1, 2]]), 4)


# =============================================================================================
# intervals
# =============================================================================================


# The chapter's comparisons use core's intervals: core.t_interval for one mean, and
# core.welch_interval / core.paired_interval for a difference (checked here against SciPy, with
# the cases the chapter meets: a shared per-unit effect, constant samples), at the Bonferroni
# level core.bonferroni_level inside evaluate.smallest_difference.


def test_the_chapter_defines_no_interval_of_its_own():
    for name in ("Interval", "mean_interval", "difference_interval", "bonferroni_level"):
        assert not hasattr(evaluate, name)


@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_welch_interval_matches_scipy(level):
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 1.0, 40), rng.normal(0.5, 3.0, 25)
    iv = core.welch_interval(a, b, level)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)
    assert iv.estimate == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert iv.low == pytest.approx(ci.low, abs=1e-10) and iv.high == pytest.approx(
        ci.high, abs=1e-10
    )
    assert iv.n == 65 and iv.method.startswith("Welch")
    # swapping the samples mirrors the interval
    rev = core.welch_interval(b, a, level)
    assert rev.low == pytest.approx(-iv.high, abs=1e-12) and rev.high == pytest.approx(
        -iv.low, abs=1e-12
    )


def test_paired_interval_matches_scipy_and_differs_from_welch():
    rng = np.random.default_rng(4)
    unit = rng.normal(0.0, 5.0, 30)  # a large shared effect per unit, which pairing removes
    a, b = unit + rng.normal(0.3, 0.2, 30), unit + rng.normal(0.0, 0.2, 30)
    iv = core.paired_interval(a, b)
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert iv.low == pytest.approx(ci.low, abs=1e-10) and iv.high == pytest.approx(
        ci.high, abs=1e-10
    )
    assert iv.n == 30 and iv.method.startswith("paired")
    assert iv.low > 0  # the paired interval finds the 0.3 shift
    welch = core.welch_interval(a, b)
    assert welch.low < 0 < welch.high  # the unpaired one drowns it in the units' spread
    assert welch.estimate == pytest.approx(iv.estimate, abs=1e-12)


def test_difference_of_constant_samples_is_a_point():
    iv = core.welch_interval([1.0, 1.0, 1.0], [0.25, 0.25])
    assert (iv.estimate, iv.low, iv.high) == (0.75, 0.75, 0.75)
    iv = core.paired_interval([1.0, 0.0, 1.0], [0.0, -1.0, 0.0])
    assert (iv.estimate, iv.low, iv.high) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    "a, b, kw",
    [
        ([1.0], [1.0, 2.0], {}),
        ([1.0, 2.0], [np.nan, 1.0], {}),
        ([1.0, 2.0, 3.0], [1.0, 2.0], {"paired": True}),
        ([1.0, 2.0], [2.0, 3.0], {"level": 1.0}),
        ([1.0, 2.0], [2.0, 3.0], {"level": 0.0}),
    ],
)
def test_difference_interval_errors(a, b, kw):
    kw = dict(kw)
    paired = kw.pop("paired", False)
    interval = core.paired_interval if paired else core.welch_interval
    with pytest.raises(ValueError):
        interval(a, b, **kw)
    with pytest.raises(ValueError):
        evaluate.smallest_difference({"x": (a, b)}, paired=paired, **kw)


def test_smallest_difference_is_the_bonferroni_minimum():
    rng = np.random.default_rng(5)
    pairs = {
        "x": (rng.normal(1.0, 1.0, 50), rng.normal(0.0, 1.0, 50)),
        "y": (rng.normal(0.4, 1.0, 50), rng.normal(0.0, 1.0, 50)),
        "z": (rng.normal(2.0, 1.0, 50), rng.normal(0.0, 1.0, 50)),
    }
    name, iv = evaluate.smallest_difference(pairs, 0.95)
    each = {k: core.welch_interval(a, b, 1 - 0.05 / 3) for k, (a, b) in pairs.items()}
    assert name == min(each, key=lambda k: each[k].estimate) == "y"
    assert iv.estimate == each["y"].estimate
    assert iv.low == min(e.low for e in each.values()) and iv.high == min(
        e.high for e in each.values()
    )
    # each Bonferroni interval is wider than the plain 95% one
    plain = core.welch_interval(*pairs["y"])
    assert each["y"].low < plain.low and each["y"].high > plain.high
    # one comparison: the plain interval
    name1, one = evaluate.smallest_difference({"y": pairs["y"]})
    assert name1 == "y" and one[:5] == plain[:5] and one.level == 0.95
    # paired mode passes through
    _, p = evaluate.smallest_difference({"y": pairs["y"]}, paired=True)
    assert p[:5] == core.paired_interval(*pairs["y"])[:5]
    # several differences: the method names the Bonferroni levels
    assert iv.method == (
        "smallest of 3 differences, each Welch (Student-t, Welch's df) 98.3% "
        "(Bonferroni for 95% together)"
    )
    with pytest.raises(ValueError, match="at least one"):
        evaluate.smallest_difference({})


def test_smallest_difference_covers_at_the_stated_level():
    """Coverage by simulation: two differences with true values 0.2 and 0.5; the smallest true
    difference (0.2) must lie in the simultaneous 90% interval in at least about 90% of draws."""
    rng = np.random.default_rng(6)
    hits = 0
    for _ in range(400):
        pairs = {
            "a": (rng.normal(0.2, 1.0, 12), rng.normal(0.0, 1.0, 12)),
            "b": (rng.normal(0.5, 1.0, 12), rng.normal(0.0, 1.0, 12)),
        }
        _, iv = evaluate.smallest_difference(pairs, 0.9)
        hits += iv.low <= 0.2 <= iv.high
    assert hits / 400 > 0.86


# =============================================================================================
# Shidoku metrics
# =============================================================================================


def test_grid_uniformity_all_grids_once():
    grids = data.shidoku_grids()
    shuffled = grids[np.random.default_rng(0).permutation(len(grids))]
    res = evaluate.grid_uniformity(shuffled)
    assert res.valid == 1.0 and res.chi2 == 0.0 and res.pvalue == pytest.approx(1.0)
    np.testing.assert_array_equal(res.counts, np.ones(data.N_SHIDOKU_GRIDS))


def test_grid_uniformity_invalid_grids_lower_validity_only():
    grids = data.shidoku_grids()
    blank = grids[0].copy()
    blank[3] = data.BLANK
    repeated = grids[1].copy()
    repeated[0], repeated[1] = repeated[1], repeated[0]  # two equal digits in a column
    assert not data.valid_grid_mask(repeated[None])[0]
    res = evaluate.grid_uniformity(np.concatenate([grids, blank[None], repeated[None]]))
    assert res.valid == pytest.approx(288 / 290)
    assert res.chi2 == 0.0 and res.counts.sum() == 288
    none = evaluate.grid_uniformity(np.stack([blank, repeated]))
    assert none.valid == 0.0 and none.counts.sum() == 0
    assert math.isnan(none.chi2) and math.isnan(none.pvalue)


def test_grid_uniformity_counts_land_at_grid_index_and_chi2_by_hand():
    grids = data.shidoku_grids()
    rows = [5, 5, 5, 17, 200]
    sample = grids[rows]
    assert list(data.grid_to_index(sample)) == rows
    res = evaluate.grid_uniformity(sample)
    expected = np.zeros(288)
    expected[5], expected[17], expected[200] = 3, 1, 1
    np.testing.assert_array_equal(res.counts, expected)
    # Pearson: sum o^2 / e - N with e = 5 / 288
    assert res.chi2 == pytest.approx((9 + 1 + 1) * 288 / 5 - 5, rel=1e-12)
    assert res.pvalue == pytest.approx(stats.chi2.sf(res.chi2, 287), rel=1e-9)


def test_grid_uniformity_detects_a_skewed_sample():
    grids = data.shidoku_grids()
    rng = np.random.default_rng(1)
    uniform = grids[rng.integers(0, 288, size=2880)]
    assert evaluate.grid_uniformity(uniform).pvalue > 1e-3
    skewed = grids[np.concatenate([rng.integers(0, 288, size=2880), np.zeros(300, dtype=int)])]
    res = evaluate.grid_uniformity(skewed)
    assert res.valid == 1.0 and res.pvalue < 1e-10
    half = grids[rng.integers(0, 144, size=2880)]  # only half of the grids ever drawn
    assert evaluate.grid_uniformity(half).pvalue < 1e-10


def test_solved_fraction_hand_built():
    grids = data.shidoku_grids()
    g0, g1 = grids[0], grids[1]
    puzzle0 = data.make_puzzles(g0, rng=0)
    assert evaluate.solved_fraction(g0[None], puzzle0[None]) == 1.0
    # a valid grid contradicting a clue
    diff = np.flatnonzero(g0 != g1)
    clue = np.zeros(16, dtype=int)
    clue[diff[0]] = g0[diff[0]]
    assert evaluate.solved_fraction(g1[None], clue[None]) == 0.0
    # a different valid grid that agrees with every clue still solves the puzzle
    same = np.flatnonzero(g0 == g1)
    clue_same = np.zeros(16, dtype=int)
    clue_same[same] = g0[same]
    assert evaluate.solved_fraction(g1[None], clue_same[None]) == 1.0
    # an invalid grid (a blank) agreeing with its (empty) clues
    broken = g0.copy()
    broken[5] = data.BLANK
    no_clues = np.zeros(16, dtype=int)
    assert evaluate.solved_fraction(broken[None], no_clues[None]) == 0.0
    # all together: rows 0, 2 and 4 solved (a blank puzzle is solved by any valid grid)
    tokens = np.stack([g0, g1, g1, broken, g0])
    clues = np.stack([puzzle0, clue, clue_same, no_clues, no_clues])
    assert evaluate.solved_fraction(tokens, clues) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="same shape"):
        evaluate.solved_fraction(tokens, clues[:4])


# =============================================================================================
# oracles
# =============================================================================================

CHAIN = data.MarkovChain(4, seed=0)
W4 = torch.eye(4, dtype=DT)


def test_markov_oracle_vmf_is_the_chain_posterior_exactly():
    h = _unit((3, 5, 4), 0)
    post = evaluate.markov_oracle(CHAIN, W4)
    for kappa in (0.0, 2.5, 17.0):
        p = post(h, kappa)
        ref = CHAIN.posterior_marginals(h.numpy(), W4.numpy(), kappa)
        assert p.dtype == DT and torch.equal(p, torch.as_tensor(ref))
    # a float32 state gives a float32 posterior with the same values
    p32 = evaluate.markov_oracle(CHAIN, W4.float())(h.float(), 2.5)
    assert p32.dtype == torch.float32
    torch.testing.assert_close(p32, post(h.float().double(), 2.5).float())
    # the emissions matter: a different kappa gives a different posterior
    assert not torch.allclose(post(h, 2.5), post(h, 17.0))


@pytest.mark.parametrize(
    "path, levels",
    [
        ("vmf", (0.0, 5.0, 40.0)),
        ("geodesic", (0.0, 0.5, 0.99, 1.0)),
        ("euclidean", (0.0, 0.5, 0.99, 1.0)),
    ],
)
def test_markov_oracle_outputs_probabilities_on_every_path(path, levels):
    h = _unit((3, 5, 4), 1)
    post = evaluate.markov_oracle(CHAIN, W4, path)
    for level in levels:
        p = post(h, level)
        assert p.shape == (3, 5, 4)
        assert torch.isfinite(p).all() and (p >= 0).all()
        torch.testing.assert_close(p.sum(-1), torch.ones(3, 5, dtype=DT))


@pytest.mark.parametrize("path", ["geodesic", "euclidean"])
def test_oracles_cap_the_baselines_level(path, monkeypatch):
    h = _unit((3, 5, 4), 2)
    post = evaluate.markov_oracle(CHAIN, W4, path)
    p = post(h, 1.0)  # t = 1: the likelihoods are singular there; no error, finite probabilities
    assert torch.isfinite(p).all() and (p >= 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(3, 5, dtype=DT))
    # the likelihood at the cap, in the path's own form
    ref = CHAIN.posterior_marginals(paths.emission_loglik(h.numpy(), W4.numpy(), T_CAP, path))
    np.testing.assert_array_equal(p.numpy(), ref)
    # (for one-hot embeddings t = 1 and t = T_CAP give the same posterior, so look at the level
    # the oracles hand to the likelihood: capped for the baselines, untouched for vMF and below
    # the cap)
    seen = []
    real = paths.emission_loglik

    def spy(h_, W_, level, path_):
        seen.append((float(level), path_))
        return real(h_, W_, level, path_)

    monkeypatch.setattr(paths, "emission_loglik", spy)
    # (a random Shidoku state at t = 0.5 can be impossible for all 288 grids on the geodesic
    # path: levels 1 and 0 only)
    hg = _unit((2, 16, 5), 3)
    for oracle, state, levels in (
        (evaluate.markov_oracle(CHAIN, W4, path), h, (1.0, 0.5, 0.0)),
        (evaluate.grid_oracle(torch.eye(5, dtype=DT), path), hg, (1.0, 0.0)),
    ):
        seen.clear()
        for level in levels:
            oracle(state, level)
        assert seen == [(T_CAP if level == 1.0 else level, path) for level in levels]
    seen.clear()
    evaluate.markov_oracle(CHAIN, W4, "vmf")(h, 17.0)
    evaluate.grid_oracle(torch.eye(5, dtype=DT), "vmf")(hg, 17.0)
    assert seen == [(17.0, "vmf"), (17.0, "vmf")]


def test_markov_oracle_baselines_against_independent_forms():
    h = _unit((4, 5, 4), 3)
    vmf = evaluate.markov_oracle(CHAIN, W4, "vmf")
    # Euclidean: log p(x | w) = t / (1 - t)^2 w.x, i.e. the vMF emissions at kappa = t / (1 - t)^2
    euc = evaluate.markov_oracle(CHAIN, W4, "euclidean")
    for t in (0.25, 0.5, 0.8):
        torch.testing.assert_close(euc(h, t), vmf(h, t / (1 - t) ** 2), rtol=0, atol=1e-12)
    # geodesic at t = 0: the state is a uniform point whatever the token, so the posterior is the
    # prior
    geo = evaluate.markov_oracle(CHAIN, W4, "geodesic")
    torch.testing.assert_close(geo(h, 0.0), vmf(h, 0.0), rtol=0, atol=1e-12)
    prior = CHAIN.posterior_marginals(np.zeros((5, 4)))
    torch.testing.assert_close(
        vmf(h, 0.0), torch.as_tensor(prior).expand(4, 5, 4), rtol=0, atol=1e-12
    )
    with pytest.raises(ValueError, match="path"):
        evaluate.markov_oracle(CHAIN, W4, "slerp")


def test_grid_oracle_respects_clues_and_matches_the_data_oracle():
    W5 = torch.eye(5, dtype=DT)
    grids = data.shidoku_grids()
    clues = data.make_puzzles(grids[[3, 100, 250]], rng=4)
    h = _unit((3, 16, 5), 5)
    post = evaluate.grid_oracle(W5, clues=clues)
    for kappa in (0.0, 3.0, 30.0):
        p = post(h, kappa)
        ref = data.oracle_posterior_grids(h.numpy(), W5.numpy(), kappa, clues=clues).marginals
        assert p.shape == (3, 16, 5)
        torch.testing.assert_close(p, torch.as_tensor(ref), rtol=0, atol=1e-15)
    # tokens that no grid agreeing with the clues has at a cell get probability exactly 0, on every
    # path; the states are drawn from each path at its level for the puzzles' own grids (a random
    # state can be impossible for every grid on the geodesic path, whose likelihood has compact
    # support)
    truth = torch.as_tensor(grids[[3, 100, 250]])
    for path, level in (("vmf", 3.0), ("geodesic", 0.5), ("euclidean", 0.5)):
        hp = paths.noisy_states(
            W5.T[truth], torch.full((3,), level, dtype=DT), path, torch.Generator().manual_seed(6)
        )
        p = evaluate.grid_oracle(W5, path, clues=clues)(hp, level).numpy()
        assert np.isfinite(p).all()
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-12)
        for b in range(3):
            agree = grids[np.all((clues[b] == 0) | (clues[b] == grids), axis=1)]
            allowed = np.zeros((16, 5), dtype=bool)
            allowed[np.arange(16)[None, :], agree] = True
            assert (p[b][~allowed] == 0).all()
            assert (
                p[b][np.arange(16), grids[[3, 100, 250]][b]] > 0
            ).all()  # the true grid is possible
            if path != "geodesic":  # full-support likelihoods: every allowed token keeps some mass
                assert (p[b][allowed] > 0).all()
            clued = clues[b] > 0
            np.testing.assert_allclose(p[b][clued, clues[b][clued]], 1.0, atol=1e-12)
    # without clues the blank gets no mass but every digit does
    free = evaluate.grid_oracle(W5)(h, 3.0)
    assert (free[..., 0] == 0).all() and (free[..., 1:] > 0).all()
    # a restricted support of one grid: the posterior is that grid
    one = evaluate.grid_oracle(W5, grids=grids[7:8])(h, 3.0)
    torch.testing.assert_close(one.argmax(-1), torch.as_tensor(grids[7]).expand(3, 16))
    torch.testing.assert_close(one.max(-1).values, torch.ones(3, 16, dtype=DT), rtol=0, atol=1e-15)


# =============================================================================================
# generate
# =============================================================================================

V_TINY, L_TINY, B_TINY, S_TINY, KMAX_TINY = 4, 5, 8, 3, 20.0


def _counting(post):
    calls = []

    def wrapped(h, level):
        calls.append(level)
        return post(h, level)

    return wrapped, calls


@pytest.mark.parametrize(
    "sampler, kwargs, path",
    [
        ("ode", {}, "vmf"),
        ("pc", {"correctors": 2}, "vmf"),
        ("pc", {"correctors": 0}, "vmf"),
        ("sde", {"sigma2": 0.5}, "vmf"),
        ("geodesic", {}, "geodesic"),
        ("euclidean", {}, "euclidean"),
    ],
)
def test_generate_runs_every_sampler_with_its_nfe(sampler, kwargs, path):
    post, calls = _counting(evaluate.markov_oracle(CHAIN, W4, path))
    extra = {} if path != "vmf" else {"kappa_max": KMAX_TINY, "psi": _psi(4, KMAX_TINY, 21, 51)}
    out = evaluate.generate(sampler, post, W4, L_TINY, B_TINY, S_TINY, seed=0, **extra, **kwargs)
    expected = samplers.count_nfe(S_TINY, kwargs.get("correctors", 0))
    assert out.nfe == expected == len(calls)
    if sampler == "pc" and kwargs["correctors"] == 2:
        assert out.nfe == S_TINY * 3 + 1
    assert out.tokens.shape == (B_TINY, L_TINY) and out.tokens.dtype == torch.int64
    assert ((out.tokens >= 0) & (out.tokens < V_TINY)).all()
    top = 1.0 if path != "vmf" else KMAX_TINY
    assert calls[-1] == top  # the read-out at the end of the path
    # same seed: identical tokens and states; another seed: different ones
    again = evaluate.generate(sampler, post, W4, L_TINY, B_TINY, S_TINY, seed=0, **extra, **kwargs)
    assert torch.equal(out.tokens, again.tokens) and torch.equal(out.state, again.state)
    other = evaluate.generate(sampler, post, W4, L_TINY, B_TINY, S_TINY, seed=1, **extra, **kwargs)
    assert not torch.equal(out.tokens, other.tokens) and not torch.equal(out.state, other.state)
    # forbid reaches the sampler's read-out
    banned = evaluate.generate(
        sampler, post, W4, L_TINY, B_TINY, S_TINY, seed=0, forbid=[1, 2], **extra, **kwargs
    )
    assert ((banned.tokens == 0) | (banned.tokens == 3)).all()


def test_generate_is_the_seeded_library_sampler():
    psi = _psi(4, KMAX_TINY, 21, 51)
    post = evaluate.markov_oracle(CHAIN, W4)
    g = lambda s: torch.Generator().manual_seed(s)  # noqa: E731
    args = (post, W4, L_TINY, B_TINY)
    out = evaluate.generate(
        "pc", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, correctors=2, eps0=0.05, seed=7
    )
    ref = samplers.sample_pc(*args, KMAX_TINY, S_TINY, psi, correctors=2, eps0=0.05, generator=g(7))
    assert torch.equal(out.state, ref.state) and torch.equal(out.tokens, ref.tokens)
    out = evaluate.generate("sde", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, sigma2=0.3, seed=7)
    ref = samplers.sample_sde(*args, KMAX_TINY, S_TINY, psi, sigma2=0.3, generator=g(7))
    assert torch.equal(out.state, ref.state)
    # the corrector step size and the SDE noise level are passed on
    pc_other = evaluate.generate(
        "pc", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, correctors=2, eps0=0.2, seed=7
    )
    assert not torch.equal(pc_other.state, ref.state)
    sde_other = evaluate.generate(
        "sde", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, sigma2=1.5, seed=7
    )
    assert not torch.equal(sde_other.state, out.state)
    # pc without correctors is the ODE sampler
    ode = evaluate.generate("ode", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, seed=3)
    pc0 = evaluate.generate("pc", *args, S_TINY, kappa_max=KMAX_TINY, psi=psi, correctors=0, seed=3)
    assert torch.equal(ode.state, pc0.state)
    ref = samplers.sample_ode(*args, KMAX_TINY, S_TINY, psi, generator=g(3))
    assert torch.equal(ode.state, ref.state)
    for name, fn in (
        ("geodesic", samplers.sample_geodesic),
        ("euclidean", samplers.sample_euclidean),
    ):
        base = evaluate.markov_oracle(CHAIN, W4, name)
        out = evaluate.generate(name, base, W4, L_TINY, B_TINY, S_TINY, seed=2)
        ref = fn(base, W4, L_TINY, B_TINY, S_TINY, generator=g(2))
        assert torch.equal(out.state, ref.state)


def test_generate_errors():
    post = evaluate.markov_oracle(CHAIN, W4)
    psi = _psi(4, KMAX_TINY, 21, 51)
    with pytest.raises(ValueError, match=r"one of .*ode.*pc.*sde.*geodesic.*euclidean.*'dpm'"):
        evaluate.generate("dpm", post, W4, L_TINY, B_TINY, S_TINY, kappa_max=KMAX_TINY, psi=psi)
    for name in ("ode", "pc", "sde"):
        with pytest.raises(ValueError, match="kappa_max and psi"):
            evaluate.generate(name, post, W4, L_TINY, B_TINY, S_TINY, psi=psi)
        with pytest.raises(ValueError, match="kappa_max and psi"):
            evaluate.generate(name, post, W4, L_TINY, B_TINY, S_TINY, kappa_max=KMAX_TINY)


# =============================================================================================
# the plumbing end to end: exact posterior -> ODE -> read-out reproduces the Markov language
# =============================================================================================

CONV_V, CONV_L, CONV_KMAX, CONV_N = 4, 4, 40.0, 4000
ALL_SEQS = np.array(
    list(itertools.product(range(CONV_V), repeat=CONV_L))
)  # row i: base-4 digits of i


def _chi_square(tokens: torch.Tensor, probs: np.ndarray):
    """Pearson goodness of fit over all V^L sequences, cells with expected count < 5 merged."""
    idx = tokens.numpy() @ (CONV_V ** np.arange(CONV_L - 1, -1, -1))
    obs = np.bincount(idx, minlength=CONV_V**CONV_L).astype(float)
    exp = probs * tokens.shape[0]
    big = exp >= 5
    assert exp[~big].sum() >= 5  # the merged cell itself is large enough
    return stats.chisquare(
        np.append(obs[big], obs[~big].sum()), np.append(exp[big], exp[~big].sum())
    )


def test_ode_with_the_exact_posterior_samples_the_markov_language():
    chain = data.MarkovChain(CONV_V, seed=0)
    probs = np.exp(chain.log_prob(ALL_SEQS))
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    W = torch.eye(CONV_V, dtype=DT)
    psi = _psi(CONV_V, CONV_KMAX)
    post = evaluate.markov_oracle(chain, W)

    def run(posterior, steps):
        return evaluate.generate(
            "ode", posterior, W, CONV_L, CONV_N, steps, kappa_max=CONV_KMAX, psi=psi, seed=0
        )

    # Euler's bias falls like 1/S: at 64 steps the total variation to the exact law is ~0.033
    # (40000 samples), which 4000 samples detect for about half the seeds (p < 1e-3 for 4 of seeds
    # 0-9); at 256 steps (TV ~0.011) the ten seeds 0-9 all gave p > 5e-3 (0.02 at seed 0).
    good = _chi_square(run(post, 256).tokens, probs)
    assert good.pvalue > 1e-3
    # power: one step misses the coupling between positions (chi2 ~ 17000 seen)
    one = _chi_square(run(post, 1).tokens, probs)
    assert one.pvalue < 1e-3 and one.statistic > 50 * good.statistic

    # and a wrong posterior (uniform over tokens) is rejected as well (chi2 ~ 4e5 seen)
    def uniform(h, level):
        return torch.full(h.shape[:-1] + (CONV_V,), 1.0 / CONV_V, dtype=h.dtype)

    wrong = _chi_square(run(uniform, 256).tokens, probs)
    assert wrong.pvalue < 1e-3 and wrong.statistic > 50 * good.statistic


# =============================================================================================
# model: learning-rate schedule and train_posterior
# =============================================================================================


def _net(**kw) -> PosteriorTransformer:
    args = dict(kappa_max=10.0, width=8, depth=1, heads=2, lr=1e-2, seed=0)
    args.update(kw)
    return PosteriorTransformer(torch.eye(4), 5, **args)


def test_lr_schedule_warmup_then_cosine_to_a_tenth():
    net = _net(warmup_steps=10, total_steps=110)
    cfg = net.configure_optimizers()
    opt, sched = cfg["optimizer"], cfg["lr_scheduler"]["scheduler"]
    assert isinstance(opt, torch.optim.AdamW) and isinstance(
        sched, torch.optim.lr_scheduler.LambdaLR
    )
    assert cfg["lr_scheduler"]["interval"] == "step"
    f = sched.lr_lambdas[0]
    assert f(0) == pytest.approx(1 / 10)
    assert f(4) == pytest.approx(5 / 10)
    assert f(9) == pytest.approx(1.0) and f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway through the cosine part
    assert (
        f(110) == pytest.approx(0.1)
        and f(111) == pytest.approx(0.1)
        and f(10_000) == pytest.approx(0.1)
    )
    values = [f(s) for s in range(120)]
    assert all(a < b for a, b in zip(values[:10], values[1:10]))  # rising warm-up
    assert all(a >= b for a, b in zip(values[10:], values[11:]))  # then never rising
    # the optimiser's learning rate follows, step by step
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 / 10)
    for step in range(1, 61):
        opt.step()  # no gradients: a no-op, but keeps the scheduler's order check quiet
        sched.step()
        if step in (9, 60):
            assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 * f(step))
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.55)


def test_lr_schedule_without_warmup_and_without_total():
    f = (
        _net(warmup_steps=0, total_steps=100)
        .configure_optimizers()["lr_scheduler"]["scheduler"]
        .lr_lambdas[0]
    )
    assert f(0) == 1.0 and f(50) == pytest.approx(0.55) and f(100) == pytest.approx(0.1)
    assert isinstance(_net(warmup_steps=5).configure_optimizers(), torch.optim.AdamW)  # no schedule


@pytest.mark.parametrize(
    "kw",
    [
        {"warmup_steps": -1},
        {"warmup_steps": 1.5},
        {"warmup_steps": True},
        {"warmup_steps": 10, "total_steps": 10},
        {"warmup_steps": 10, "total_steps": 5},
        {"warmup_steps": 0, "total_steps": 0},
        {"warmup_steps": 0, "total_steps": 2.5},
    ],
)
def test_schedule_options_are_checked(kw):
    with pytest.raises(ValueError, match="warmup_steps|total_steps"):
        _net(**kw)


def _tiny_tokens(n=256, L=5, seed=0):
    chain = data.MarkovChain(4, seed=seed)
    return chain.sample(n, L, np.random.default_rng(seed))


def test_train_posterior_is_deterministic_and_returns_eval_mode():
    tokens = _tiny_tokens()
    net = Net(width=8, depth=1, heads=2, lr=3e-3, warmup_steps=2, batch_size=16, train_steps=20)
    kw = dict(kappa_max=10.0)
    a = train_posterior(tokens, torch.eye(4), net, seed=0, **kw)
    b = train_posterior(tokens, torch.eye(4), net, seed=0, **kw)
    c = train_posterior(tokens, torch.eye(4), net, seed=1, **kw)
    assert not a.training and not any(m.training for m in a.modules())
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].is_floating_point())
    # it trained: the weights moved away from the initialisation with the same seed
    init = PosteriorTransformer(
        torch.eye(4), 5, kappa_max=10.0, width=8, depth=1, heads=2, seed=0
    ).state_dict()
    assert any(not torch.equal(sa[k], init[k]) for k in init if k != "W")
    assert a.total_steps == 20 and a.warmup_steps == 2
    with pytest.raises(ValueError, match="tokens must be"):
        train_posterior(tokens[0], torch.eye(4), net, **kw)
    with pytest.raises(ValueError, match="clues must have"):
        train_posterior(tokens, torch.eye(4), net, clues=tokens[:, :-1], n_clue_tokens=4, **kw)


def test_train_posterior_lowers_the_loss():
    tokens = _tiny_tokens(n=512)
    kw = dict(kappa_max=10.0, width=16, depth=1, heads=2, seed=0)
    before = PosteriorTransformer(torch.eye(4), 5, **kw)
    net = Net(width=16, depth=1, heads=2, lr=3e-3, warmup_steps=10, batch_size=64, train_steps=150)
    after = train_posterior(tokens, torch.eye(4), net, kappa_max=10.0, seed=0)
    batch = torch.as_tensor(tokens[:256])
    with torch.no_grad():
        l0 = float(before.loss(batch, generator=torch.Generator().manual_seed(123)))
        l1 = float(after.loss(batch, generator=torch.Generator().manual_seed(123)))
    assert l1 < l0 - 0.2, (l0, l1)


# =============================================================================================
# experiments: the Markov-language task and the checkpoint cache
# =============================================================================================

LANG = Language(V=4, L=5, kappa_max=20.0)
NET = Net(width=8, depth=1, heads=2, train_steps=5, warmup_steps=1, n_train=64, batch_size=16)


def test_language_task_is_seeded_by_data_seed():
    task = experiments.language_task(LANG, NET)
    again = experiments.language_task(LANG, NET)
    chain = data.MarkovChain(LANG.V, LANG.chain_seed, LANG.concentration)
    np.testing.assert_array_equal(task.chain.log_trans, chain.log_trans)
    np.testing.assert_array_equal(task.chain.log_init, chain.log_init)
    assert task.train.shape == (NET.n_train, LANG.L) and task.train.dtype == np.int64
    assert task.train.min() >= 0 and task.train.max() < LANG.V
    np.testing.assert_array_equal(task.train, again.train)
    np.testing.assert_array_equal(
        task.train, chain.sample(NET.n_train, LANG.L, np.random.default_rng([NET.data_seed]))
    )
    other = experiments.language_task(LANG, dataclasses.replace(NET, data_seed=NET.data_seed + 1))
    assert not np.array_equal(task.train, other.train)
    assert task.W.dtype == DT and torch.equal(task.W, torch.eye(LANG.V, dtype=DT))
    assert task.target == pytest.approx(chain.expected_nll_per_token(LANG.L))
    other_chain = experiments.language_task(Language(V=4, L=5, kappa_max=20.0, chain_seed=3), NET)
    assert not np.array_equal(other_chain.chain.log_trans, task.chain.log_trans)


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _checkpoint_files(root):
    return sorted(p.name for p in (root / "reduced" / experiments.SLUG).glob("*.pt"))


def test_language_network_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    task = experiments.language_task(LANG, NET)
    first, loaded = experiments.language_network(task, LANG, NET, profile="reduced")
    assert loaded is False and not first.training
    files = _checkpoint_files(tmp_path)
    assert len(files) == 1 and files[0].startswith("language-vmf-s0-")
    second, loaded = experiments.language_network(task, LANG, NET, profile="reduced")
    assert loaded is True and not second.training and second is not first
    assert _same_weights(first, second)
    # the network is the one train_posterior builds from the configs
    ref = train_posterior(task.train, task.W.float(), NET, kappa_max=LANG.kappa_max, seed=0)
    assert _same_weights(first, ref)
    # another path, time conditioning, seed or net: new cache entries, trained afresh
    for kw, net in (
        ({"path": "geodesic"}, NET),
        ({"time_conditioned": True}, NET),
        ({"seed": 1}, NET),
        ({}, dataclasses.replace(NET, width=16)),
    ):
        model, loaded = experiments.language_network(task, LANG, net, profile="reduced", **kw)
        assert loaded is False
    assert model.embed.out_features == 16
    assert len(_checkpoint_files(tmp_path)) == 5
    # each of them is now cached too
    _, loaded = experiments.language_network(
        task, LANG, NET, profile="reduced", time_conditioned=True
    )
    assert loaded is True
    # another profile is another cache folder
    _, loaded = experiments.language_network(task, LANG, NET, profile="full")
    assert loaded is False


def test_language_network_always_train_still_writes_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    task = experiments.language_task(LANG, NET)
    trained, loaded = experiments.language_network(
        task, LANG, NET, profile="reduced", always_train=True
    )
    assert loaded is False and not trained.training
    assert len(_checkpoint_files(tmp_path)) == 1
    cached, loaded = experiments.language_network(task, LANG, NET, profile="reduced")
    assert loaded is True and _same_weights(trained, cached)
    # with a checkpoint present, always_train still trains (and returns the same deterministic
    # weights)
    again, loaded = experiments.language_network(
        task, LANG, NET, profile="reduced", always_train=True
    )
    assert loaded is False and again is not cached and _same_weights(again, cached)
    with pytest.raises(ValueError, match="path"):
        experiments.language_network(task, LANG, NET, profile="reduced", path="slerp")


# =============================================================================================
# config
# =============================================================================================

NOTEBOOKS = {
    "01_vmf_path": config.PathConfig,
    "02_perfect_posterior": config.OracleConfig,
    "03_learning_the_posterior": config.LearnConfig,
    "04_three_paths": config.PathsConfig,
    "05_time_conditioning": config.TimeConfig,
    "06_shidoku_puzzles": config.PuzzleConfig,
    "07_sudoku_9x9": config.SudokuConfig,
}


def test_every_profile_is_tested():
    assert set(NOTEBOOKS) == set(config.PROFILES)


def test_puzzle_config_pc_settings_match_the_ode_cost():
    for profile in ("reduced", "full", "smoke"):
        cfg = core.resolve_notebook(config.PROFILES, "06_shidoku_puzzles", profile)
        assert {samplers.count_nfe(S, c) for S, c in cfg.pc} == {samplers.count_nfe(cfg.steps)}


@pytest.mark.parametrize("notebook", sorted(NOTEBOOKS))
def test_resolve_gives_both_profiles(notebook):
    reduced, full = (
        core.resolve_notebook(config.PROFILES, notebook, "reduced"),
        core.resolve_notebook(config.PROFILES, notebook, "full"),
    )
    assert type(reduced) is NOTEBOOKS[notebook] and type(full) is NOTEBOOKS[notebook]
    assert (
        reduced
        == config.PROFILES[notebook]["reduced"]
        == core.resolve_notebook(config.PROFILES, notebook, "reduced")
    )
    assert full == config.PROFILES[notebook]["full"]
    assert reduced != full


def test_learn_config_pc_settings_have_matched_nfe():
    for profile, nfe in (("reduced", 33), ("full", None), ("smoke", 9)):
        cfg = core.resolve_notebook(config.PROFILES, "03_learning_the_posterior", profile)
        counts = {samplers.count_nfe(S, c) for S, c in cfg.pc}
        assert len(counts) == 1, (profile, cfg.pc)
        if nfe is not None:
            assert counts == {nfe}
            assert all(S * (1 + c) + 1 == nfe for S, c in cfg.pc)
        assert any(c == 0 for _, c in cfg.pc) and any(c > 0 for _, c in cfg.pc)
        assert cfg.eval_at[-1] == cfg.net.train_steps
        assert list(cfg.eval_at) == sorted(cfg.eval_at)


@pytest.mark.parametrize("profile", ["reduced", "full", "smoke"])
def test_path_config_kappa_max_gives_mean_cosine_near_0_9(profile):
    cfg = core.resolve_notebook(config.PROFILES, "01_vmf_path", profile)
    assert len(cfg.kappa_max) == len(cfg.dims)
    for d, k in zip(cfg.dims, cfg.kappa_max):
        a = float(geometry.mean_cosine(d, k))
        assert 0.85 < a < 0.95, (d, k, a)


@pytest.mark.parametrize(
    "notebook, claim",
    [
        ("03_learning_the_posterior", "C5"),
        ("04_three_paths", "C4"),
        ("05_time_conditioning", "C6"),
        ("06_shidoku_puzzles", "C7"),
    ],
)
def test_claims_about_training_are_decided_only_with_three_training_seeds(notebook, claim):
    """C4-C7 compare or describe trained networks: a profile decides them only if it trains at
    least three seeds of each network, and marks them needs_full otherwise."""
    from reprobook.core import get_chapter

    c = get_chapter("vmf_sphere_flow").claim(claim)
    assert c.evidence == "statistical"
    for profile in ("reduced", "full"):
        seeds = core.resolve_notebook(config.PROFILES, notebook, profile).train_seeds
        assert len(set(seeds)) == len(seeds)
        assert bool(c.check_for(profile).get("needs_full")) == (len(seeds) < 3), (profile, seeds)


def test_c1_and_c2_sizes():
    for profile in ("reduced", "full", "smoke"):
        p = core.resolve_notebook(config.PROFILES, "01_vmf_path", profile)
        assert p.fractions[-1] == 1.0 and all(0 < f <= 1 for f in p.fractions)
        o = core.resolve_notebook(config.PROFILES, "02_perfect_posterior", profile)
        assert o.n_final >= o.n


def test_profiles_are_keyed_by_the_notebooks_file_stems():
    folder = core.book_root() / "notebooks" / "16_vmf_sphere_flow"
    assert {p.stem for p in folder.glob("*.ipynb")} == set(config.PROFILES)


@pytest.mark.parametrize(
    "notebook",
    [
        "03_learning_the_posterior",
        "04_three_paths",
        "05_time_conditioning",
        "06_shidoku_puzzles",
        "07_sudoku_9x9",
    ],
)
def test_the_warp_parameter_sets_the_nested_net_field(notebook):
    # the notebooks pass net__warp=warp to core.start: the configuration recorded is the
    # profile's with only net.warp replaced
    for profile in ("reduced", "full", "smoke"):
        base = config.PROFILES[notebook][profile]
        on = core.profiles.resolve(config.PROFILES[notebook], profile, net__warp=True)
        assert on == dataclasses.replace(base, net=dataclasses.replace(base.net, warp=True))
        off = core.profiles.resolve(config.PROFILES[notebook], profile, net__warp=False)
        assert off == base


def test_resolve_errors_come_from_the_core():
    with pytest.raises(ValueError, match="notebook"):
        core.resolve_notebook(config.PROFILES, "nope", "reduced")
    with pytest.raises(ValueError, match="profile"):
        core.resolve_notebook(config.PROFILES, "01_vmf_path", "huge")
    with pytest.raises(ValueError, match="override"):
        core.resolve_notebook(config.PROFILES, "01_vmf_path", "reduced", n="many")
    assert core.resolve_notebook(config.PROFILES, "01_vmf_path", "reduced", n=10).n == 10


def test_grid_oracle_geodesic_survives_states_off_the_path():
    """Coarse geodesic steps leave states where every allowed grid has likelihood 0 (the geodesic
    likelihood has holes); the oracle must fall back to the nearest grid instead of raising."""
    W = torch.eye(5, dtype=torch.float64)
    clues = data.make_puzzles(data.shidoku_grids()[:64], rng=0)
    for post, n, c in (
        (evaluate.grid_oracle(W, "geodesic", clues=clues), 64, clues),
        (evaluate.grid_oracle(W, "geodesic"), 256, None),
    ):
        out = evaluate.generate("geodesic", post, W, 16, n, 4, seed=0, forbid=0)
        if c is None:
            assert evaluate.grid_uniformity(out.tokens.numpy()).valid == 1.0
        else:
            assert evaluate.solved_fraction(out.tokens.numpy(), c) == 1.0


def test_metric_errors_name_the_problem():
    with pytest.raises(ValueError, match="finite; 1 of 3"):
        evaluate.smallest_difference({"x": ([1.0, np.nan, 2.0], [1.0, 2.0])})
    with pytest.raises(ValueError, match="N >= 1"):
        evaluate.grid_uniformity(np.zeros((0, 16), dtype=int))


def test_as_posterior_returns_the_state_dtype_and_device():
    from reprobook.papers.vmf_sphere_flow import model as vmodel

    W = torch.eye(4)
    m = vmodel.PosteriorTransformer(W, 3, kappa_max=10.0, width=8, depth=1, heads=2)
    h = torch.nn.functional.normalize(torch.randn(5, 3, 4, dtype=torch.float64), dim=-1)
    p = vmodel.as_posterior(m)(h, 2.0)
    assert p.dtype == torch.float64 and p.device == h.device and p.shape == (5, 3, 4)
    assert torch.allclose(p.sum(-1), torch.ones(5, 3, dtype=torch.float64), atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("path", paths.PATHS)
def test_training_and_sampling_on_a_gpu(path):
    """The full profile trains on the GPU: the noise must be drawn on the data's device."""
    from reprobook.papers.vmf_sphere_flow import model as vmodel

    chain = data.MarkovChain(4, seed=0)
    seqs = chain.sample(64, 5, np.random.default_rng(0))
    net = Net(width=8, depth=1, heads=2, lr=3e-4, warmup_steps=0, train_steps=2)
    m = vmodel.train_posterior(seqs, torch.eye(4), net, kappa_max=10.0, path=path)
    m = experiments.to_accelerator(m)
    W = torch.eye(4, dtype=torch.float64)
    out = evaluate.generate(
        SAMPLERS_FOR[path],
        vmodel.as_posterior(m),
        W,
        5,
        8,
        3,
        kappa_max=10.0,
        psi=geometry.PsiTable(4, 10.0),
        seed=0,
    )
    assert out.tokens.shape == (8, 5)


SAMPLERS_FOR = {"vmf": "ode", "geodesic": "geodesic", "euclidean": "euclidean"}


def test_cross_entropy_by_level_is_log_v_for_a_uniform_posterior_and_repeatable():
    chain = data.MarkovChain(4, seed=0)
    x = torch.as_tensor(chain.sample(50, 5, np.random.default_rng(0)))
    W = torch.eye(4, dtype=torch.float64)
    uniform = lambda h, level: torch.full(h.shape[:-1] + (4,), 0.25, dtype=h.dtype)  # noqa: E731
    ce = evaluate.cross_entropy_by_level(uniform, x, W, (0.0, 5.0))
    assert ce == pytest.approx({0.0: math.log(4), 5.0: math.log(4)}, abs=1e-12)
    exact = evaluate.markov_oracle(chain, W)
    first = evaluate.cross_entropy_by_level(exact, x, W, (0.0, 5.0, 30.0))
    assert first == evaluate.cross_entropy_by_level(exact, x, W, (0.0, 5.0, 30.0))
    assert first[30.0] < first[5.0] < first[0.0] < math.log(4)  # more signal, lower cross-entropy


def test_intervals_over_training_seeds_are_accepted_for_claims_that_need_them():
    # C4 and C6 (Welch over two sets of networks) and C7, C8 (paired over seeds, Bonferroni for
    # both baselines) are decided over training seeds at the full profile; the book's record
    # accepts only a Student-t interval there, and a simultaneous one for a min over baselines.
    from reprobook.core.chapters import get_chapter
    from reprobook.core.claims import _check_design

    chapter = get_chapter("vmf_sphere_flow")
    a, b = [2.1, 2.3, 2.2, 2.4, 2.0], [2.5, 2.4, 2.7, 2.6, 2.5]
    _check_design(chapter.claim("C6"), core.welch_interval(a, b))
    pairs = {"geodesic": (b, a), "euclidean": (b, a)}
    _check_design(chapter.claim("C4"), evaluate.smallest_difference(pairs)[1])
    _check_design(chapter.claim("C7"), evaluate.smallest_difference(pairs, paired=True)[1])
    for cid in ("C3", "C4", "C5", "C6", "C7", "C8"):
        claim = chapter.claim(cid)
        assert claim.trained and claim.replicates == "training seeds"
        assert claim.verdict(None, "reduced") == "needs_full"


def test_no_effect_of_the_language_claims_is_the_context_free_gap():
    # C2 and C5 take as no effect the gap of a sampler whose posterior ignores the context:
    # each token drawn from its position's marginal. Computed exactly from the chain.
    from reprobook.core.chapters import get_chapter
    from reprobook.papers.vmf_sphere_flow import config, data

    lang = config.Language()
    chain = data.MarkovChain(lang.V, lang.chain_seed, lang.concentration)
    margs = [chain.init]
    for _ in range(lang.L - 1):
        margs.append(margs[-1] @ chain.trans)
    free = -(margs[0] * chain.log_init).sum()
    true = free
    for prev, cur in zip(margs[:-1], margs[1:]):
        free += -(np.outer(prev, cur) * chain.log_trans).sum()
        true += -(prev[:, None] * chain.trans * chain.log_trans).sum()
    gap = (free - true) / lang.L
    chapter = get_chapter("vmf_sphere_flow")
    for cid in ("C2", "C5"):
        assert chapter.claim(cid).no_effect == pytest.approx(gap, abs=0.05)
    assert chapter.claim("C6").no_effect < gap


def test_smoke_profile_keeps_what_the_full_notebooks_compare():
    """Smoke trains two seeds of every network (the full profile's intervals over training
    seeds can be formed), samples each path at one NFE with and without correctors, and runs
    the exact-posterior ODE at 17, 33 and 65 NFE, where notebook 2 compares the samplers."""
    oracle = core.resolve_notebook(config.PROFILES, "02_perfect_posterior", "smoke")
    assert {samplers.count_nfe(S) for S in oracle.ode_steps} >= {17, 33, 65}
    assert oracle.n_final >= oracle.n
    for notebook in ("03_learning_the_posterior", "04_three_paths", "05_time_conditioning"):
        cfg = core.resolve_notebook(config.PROFILES, notebook, "smoke")
        assert cfg.train_seeds == (0, 1) and cfg.net.width % cfg.net.heads == 0
    paths = core.resolve_notebook(config.PROFILES, "04_three_paths", "smoke")
    assert samplers.count_nfe(*paths.pc) == samplers.count_nfe(max(paths.steps))
    sudoku = core.resolve_notebook(config.PROFILES, "07_sudoku_9x9", "smoke")
    assert sudoku.paths == ("vmf", "geodesic", "euclidean") and len(sudoku.train_seeds) == 2
    assert {samplers.count_nfe(S, c) for S, c in sudoku.pc} == {samplers.count_nfe(sudoku.steps)}
