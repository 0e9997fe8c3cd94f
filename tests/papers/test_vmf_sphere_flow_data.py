"""Tests of reprobook.papers.vmf_sphere_flow.data: the offline tasks and their exact oracles.

Exact properties: the 288 Shidoku grids against a brute-force count over row permutations and
against single-cell corruptions; the grid posterior against brute-force normalisation, its limits
in kappa and its clue conditioning; the Sudoku generator's validity and the solver's counts
(unique, two-solution and conflicting puzzles, and agreement with the Shidoku enumeration);
forward-backward against enumeration of all sequences; the Markov chain's exact expected NLL
against the NLL of its samples; seed reproducibility; and clear errors on bad input. The
oracles are the exact posteriors of eq. vmf-emission of notebooks/16_vmf_sphere_flow/index.md:
forward-backward must equal brute-force enumeration for V = 3, L = 4, and the Shidoku
enumerator must return exactly 288 grids, which the validator accepts and no others.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from reprobook.papers.vmf_sphere_flow.data import (
    BLANK,
    N_SHIDOKU_GRIDS,
    SHIDOKU_VOCAB,
    MarkovChain,
    emission_loglik,
    forward_backward,
    grid_to_index,
    is_valid_grid,
    make_puzzles,
    make_unique_puzzle,
    oracle_posterior_grids,
    shidoku_grids,
    solve,
    split_grids,
    sudoku_solution,
    valid_grid_mask,
)

# --------------------------------------------------------------------------------------------
# Shidoku enumeration and validity
# --------------------------------------------------------------------------------------------


def test_shidoku_has_exactly_288_distinct_valid_grids():
    g = shidoku_grids()
    assert g.shape == (N_SHIDOKU_GRIDS, 16) == (288, 16)
    assert g.dtype == np.int64
    assert len({tuple(r) for r in g}) == 288
    assert set(np.unique(g)) == {1, 2, 3, 4}
    assert valid_grid_mask(g).all()
    assert all(is_valid_grid(r) for r in g)
    assert all(is_valid_grid(r.reshape(4, 4)) for r in g[:10])
    # lexicographic order, and a fresh copy each call
    assert [tuple(r) for r in g] == sorted(tuple(r) for r in g)
    g[0, 0] = 0
    assert shidoku_grids()[0, 0] != 0


def test_validator_rejects_every_single_cell_change():
    g = shidoku_grids()
    variants = []
    for cell in range(16):
        for v in range(6):  # the blank 0, the other three digits, and the out-of-range 5
            changed = g.copy()
            changed[:, cell] = v
            variants.append(changed[g[:, cell] != v])
    variants = np.concatenate(variants)
    assert variants.shape == (288 * 16 * 5, 16)
    assert not valid_grid_mask(variants).any()
    rng = np.random.default_rng(0)
    assert not any(
        is_valid_grid(variants[i]) for i in rng.choice(len(variants), 200, replace=False)
    )


def test_brute_force_over_row_permutations_finds_the_same_288():
    perms = np.array(list(itertools.permutations(range(1, 5))))  # (24, 4)
    idx = np.stack(np.meshgrid(*[np.arange(24)] * 4, indexing="ij"), axis=-1).reshape(-1, 4)
    candidates = perms[idx].reshape(-1, 16)  # every grid whose rows are permutations: 24^4
    assert candidates.shape[0] == 24**4
    ok = valid_grid_mask(candidates)
    assert ok.sum() == 288
    assert {tuple(r) for r in candidates[ok]} == {tuple(r) for r in shidoku_grids()}


def test_validator_on_9x9_and_16x16():
    for seed in range(3):
        s = sudoku_solution(seed)
        assert is_valid_grid(s, n=9)
        bad = s.copy().reshape(9, 9)
        bad[0, [0, 1]] = bad[0, [1, 0]]  # the row stays a permutation, two columns break
        assert not is_valid_grid(bad, n=9)
    assert is_valid_grid(sudoku_solution(0, box=4), n=16)


def test_grid_to_index_round_trip():
    g = shidoku_grids()
    assert np.array_equal(grid_to_index(g), np.arange(288))
    assert np.array_equal(grid_to_index(g[[5, 3]].reshape(1, 2, 16)), [[5, 3]])
    bad = g[:3].copy()
    bad[0, 0] = 0
    bad[1, [0, 1]] = bad[1, [1, 0]]
    bad[2, 0] = 9
    assert np.array_equal(grid_to_index(bad), [-1, -1, -1])


# --------------------------------------------------------------------------------------------
# Shidoku puzzles and split
# --------------------------------------------------------------------------------------------


def test_split_grids_partitions_and_is_seeded():
    train, test = split_grids(seed=0)
    assert train.shape == (230, 16) and test.shape == (58, 16)
    all_idx = np.concatenate([grid_to_index(train), grid_to_index(test)])
    assert sorted(all_idx) == list(range(288))
    train2, test2 = split_grids(seed=0)
    assert np.array_equal(test, test2) and np.array_equal(train, train2)
    assert not np.array_equal(test, split_grids(seed=1)[1])
    assert split_grids(0.5, seed=0)[1].shape == (144, 16)


def test_make_puzzles_blanks_and_clues():
    g = shidoku_grids()
    grids = np.repeat(g, 4, axis=0)
    p = make_puzzles(grids, rng=0)
    assert p.shape == grids.shape
    n_blank = (p == BLANK).sum(1)
    assert n_blank.min() >= 8 and n_blank.max() <= 12
    assert set(n_blank) == {8, 9, 10, 11, 12}
    assert np.all((p == BLANK) | (p == grids))
    assert np.array_equal(p, make_puzzles(grids, rng=np.random.default_rng(0)))
    assert not np.array_equal(p, make_puzzles(grids, rng=1))
    # single grid and 9x9 grids
    one = make_puzzles(g[7], (3, 3), rng=2)
    assert one.shape == (16,) and (one == 0).sum() == 3
    s = np.stack([sudoku_solution(i) for i in range(5)])
    p9 = make_puzzles(s, (50, 55), rng=3)
    assert np.all(((p9 == 0).sum(1) >= 50) & ((p9 == 0).sum(1) <= 55))
    # blanked cells are spread over all positions
    assert np.all((make_puzzles(grids, rng=4) == 0).any(axis=0))


# --------------------------------------------------------------------------------------------
# the grid oracle
# --------------------------------------------------------------------------------------------


def brute_force_grid_posterior(loglik, grids, clues=None):
    scores = np.array([sum(loglik[l, gr[l]] for l in range(16)) for gr in grids])
    if clues is not None:
        ok = np.array([all(c == 0 or c == x for c, x in zip(clues, gr)) for gr in grids])
        scores = np.where(ok, scores, -np.inf)
    probs = np.exp(scores - logsumexp(scores))
    marg = np.zeros(loglik.shape)
    for p, gr in zip(probs, grids):
        marg[np.arange(16), gr] += p
    return probs, marg


def test_oracle_posterior_equals_brute_force_normalisation():
    rng = np.random.default_rng(0)
    g = shidoku_grids()
    for _ in range(3):
        loglik = rng.normal(scale=2.0, size=(16, SHIDOKU_VOCAB))
        probs, marg = brute_force_grid_posterior(loglik, g)
        post = oracle_posterior_grids(loglik)
        np.testing.assert_allclose(post.probs, probs, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(post.marginals, marg, rtol=1e-10, atol=1e-14)
        assert np.allclose(post.marginals.sum(-1), 1.0)
        assert np.all(post.marginals[:, BLANK] == 0.0)
    # batched equals item by item; a forbidden blank token (-inf) changes nothing
    batch = rng.normal(size=(2, 3, 16, 5))
    post = oracle_posterior_grids(batch)
    assert post.probs.shape == (2, 3, 288) and post.marginals.shape == (2, 3, 16, 5)
    np.testing.assert_allclose(
        post.probs[1, 2], oracle_posterior_grids(batch[1, 2]).probs, rtol=1e-12
    )
    masked = batch.copy()
    masked[..., BLANK] = -np.inf
    np.testing.assert_allclose(oracle_posterior_grids(masked).probs, post.probs, rtol=1e-12)


def test_oracle_from_h_equals_oracle_from_loglik():
    rng = np.random.default_rng(1)
    d = 8
    W = rng.normal(size=(d, 5))
    W /= np.linalg.norm(W, axis=0)
    h = rng.normal(size=(4, 16, d))
    h /= np.linalg.norm(h, axis=-1, keepdims=True)
    kappa = np.array([0.0, 1.0, 5.0, 30.0])
    a = oracle_posterior_grids(h, W, kappa)
    b = oracle_posterior_grids(kappa[:, None, None] * (h @ W))
    np.testing.assert_allclose(a.probs, b.probs, rtol=1e-12)
    np.testing.assert_allclose(emission_loglik(h, W, 3.0), 3.0 * h @ W)
    # kappa = 0: uniform over the 288 grids, hence 1/4 per digit at every position
    np.testing.assert_allclose(a.probs[0], 1 / 288)
    np.testing.assert_allclose(a.marginals[0][:, 1:], 0.25)


def test_oracle_concentrates_on_the_true_grid_as_kappa_grows():
    rng = np.random.default_rng(2)
    W = np.eye(5)  # one-hot embeddings, d = V = 5
    g = shidoku_grids()
    for true_index in (0, 137, 287):
        h = W[:, g[true_index]].T + 0.4 * rng.normal(size=(16, 5))
        h /= np.linalg.norm(h, axis=-1, keepdims=True)
        scores = (h @ W)[np.arange(16), g].sum(1)
        assert np.argmax(scores) == true_index  # the noise level keeps the true grid the mode
        p_true = [
            oracle_posterior_grids(h, W, k).probs[true_index]
            for k in (0.0, 1.0, 4.0, 16.0, 64.0, 256.0)
        ]
        assert p_true[0] == pytest.approx(1 / 288)
        assert np.all(np.diff(p_true) >= 0) and p_true[1] < 0.99  # increasing, from uniform ...
        assert p_true[-1] > 1 - 1e-12  # ... to a point mass on the true grid
        top = oracle_posterior_grids(h, W, 256.0).marginals.argmax(-1)
        assert np.array_equal(top, g[true_index])


def test_oracle_respects_clues():
    rng = np.random.default_rng(3)
    g = shidoku_grids()
    puzzles = make_puzzles(g[[3, 100, 250]], rng=5)
    loglik = rng.normal(size=(3, 16, 5))
    post = oracle_posterior_grids(loglik, clues=puzzles)
    for b in range(3):
        probs, marg = brute_force_grid_posterior(loglik[b], g, puzzles[b])
        np.testing.assert_allclose(post.probs[b], probs, rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(post.marginals[b], marg, rtol=1e-10, atol=1e-15)
        consistent = np.all((puzzles[b] == 0) | (g == puzzles[b]), axis=1)
        assert np.all(post.probs[b][~consistent] == 0.0) and np.all(post.probs[b][consistent] > 0)
        clued = puzzles[b] > 0
        np.testing.assert_allclose(post.marginals[b][clued], np.eye(5)[puzzles[b][clued]])
    # a full set of clues pins the grid whatever the emissions; one puzzle broadcasts over a batch
    full = oracle_posterior_grids(loglik, clues=g[42])
    assert np.all(full.probs[:, 42] == 1.0)
    # restricting the support to the training grids
    train, test = split_grids(seed=0)
    sub = oracle_posterior_grids(loglik[0], grids=train)
    assert sub.probs.shape == (230,)
    probs, marg = brute_force_grid_posterior(loglik[0], train)
    np.testing.assert_allclose(sub.probs, probs, rtol=1e-10)
    np.testing.assert_allclose(sub.marginals, marg, rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match="agree with none"):
        oracle_posterior_grids(loglik[0], clues=test[0], grids=train)  # a held-out grid as clues


# --------------------------------------------------------------------------------------------
# 9x9 Sudoku generator and solver
# --------------------------------------------------------------------------------------------


def test_sudoku_solutions_are_valid_seeded_and_varied():
    sols = [sudoku_solution(np.random.default_rng(s)) for s in range(10)]
    assert all(s.shape == (81,) and is_valid_grid(s, n=9) for s in sols)
    assert len({tuple(s) for s in sols}) == 10
    assert np.array_equal(sudoku_solution(3), sols[3])
    # the same construction at box = 2 stays inside the 288 Shidoku grids and visits many of them
    small = {int(grid_to_index(sudoku_solution(s, box=2))) for s in range(300)}
    assert -1 not in small and len(small) > 20


def test_unique_puzzles_solve_back_and_are_minimal():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        sol = sudoku_solution(rng)
        p = make_unique_puzzle(sol, rng)
        assert np.all((p == 0) | (p == sol))
        assert 17 <= (p > 0).sum() <= 40
        res = solve(p)
        assert res.n_solutions == 1 and np.array_equal(res.solution, sol)
        assert solve(p.reshape(9, 9)).n_solutions == 1
        for cell in np.flatnonzero(p):  # minimal: every clue is needed
            q = p.copy()
            q[cell] = 0
            assert solve(q, limit=2).n_solutions == 2
    # reproducible, and min_clues stops early at exactly that many clues (same removal order)
    a = make_unique_puzzle(sudoku_solution(7), np.random.default_rng(7))
    b = make_unique_puzzle(sudoku_solution(7), np.random.default_rng(7))
    assert np.array_equal(a, b)
    p35 = make_unique_puzzle(sudoku_solution(7), np.random.default_rng(7), min_clues=35)
    assert (p35 > 0).sum() == 35 and solve(p35).n_solutions == 1
    assert np.all((a == 0) | (a == p35))  # the minimal puzzle continues the same removals


ALL_BINARY_18 = ((np.arange(2**18)[:, None] >> np.arange(18)) & 1).astype(bool)


def digit_swap_puzzle(grid, a: int, b: int):
    """Blank the 18 cells holding a or b; count its completions by brute force over {a, b}^18.

    Every blank can only take a or b, and each row, column and box holds exactly two blanks,
    which must differ: the count is the number of 2-colourings of that graph.
    """
    cells = np.flatnonzero((grid == a) | (grid == b))
    r, c = cells // 9, cells % 9
    units = [r, c, (r // 3) * 3 + c // 3]
    edges = [np.flatnonzero(u == k) for u in units for k in range(9)]
    assert all(len(e) == 2 for e in edges)
    x = ALL_BINARY_18  # every assignment, a = 0 and b = 1
    ok = np.ones(len(x), dtype=bool)
    for i, j in edges:
        ok &= x[:, i] != x[:, j]
    puzzle = grid.copy()
    puzzle[cells] = 0
    return puzzle, int(ok.sum())


def test_solver_counts_two_solutions_and_conflicts():
    g = sudoku_solution(0)
    seen = {}
    for a, b in itertools.combinations(range(1, 10), 2):
        p, count = digit_swap_puzzle(g, a, b)
        seen[count] = p
        assert solve(p, limit=1000).n_solutions == count
        assert solve(p, limit=2).n_solutions == 2  # never unique: swapping a and b everywhere
    assert 2 in seen and max(seen) > 2  # both exactly-two puzzles and ones with more solutions
    p = seen[2]
    one = solve(p, limit=1)
    assert one.n_solutions == 1 and is_valid_grid(one.solution, n=9)
    assert np.all((p == 0) | (one.solution == p))
    conflict = g.copy()
    conflict[[0, 1]] = 0
    conflict[0] = g[2]  # digit g[2] now appears twice in row 0
    res = solve(conflict)
    assert res.n_solutions == 0 and res.solution is None
    # a blank grid has many solutions
    assert solve(np.zeros(81, dtype=int)).n_solutions == 2


def test_solver_counts_match_shidoku_enumeration():
    g = shidoku_grids()
    assert solve(np.zeros(16, dtype=int), limit=1000).n_solutions == 288
    puzzles = make_puzzles(g[::6], (6, 14), rng=11)
    for p in puzzles:
        n_consistent = int(np.all((p == 0) | (g == p), axis=1).sum())
        assert solve(p, limit=1000).n_solutions == n_consistent
        assert solve(p, limit=2).n_solutions == min(n_consistent, 2)


# --------------------------------------------------------------------------------------------
# Markov-chain language
# --------------------------------------------------------------------------------------------


def brute_force_marginals(chain: MarkovChain, loglik):
    L, V = loglik.shape
    seqs = np.array(list(itertools.product(range(V), repeat=L)))
    score = chain.log_prob(seqs) + loglik[np.arange(L), seqs].sum(1)
    log_z = logsumexp(score)
    w = np.exp(score - log_z)
    marg = np.zeros((L, V))
    for l in range(L):
        np.add.at(marg[l], seqs[:, l], w)
    return marg, log_z


@pytest.mark.parametrize("method", ["auto", "matmul", "logsumexp"])
def test_forward_backward_equals_brute_force(method):
    chain = MarkovChain(3, seed=4)
    rng = np.random.default_rng(5)
    e = rng.normal(scale=3.0, size=(6, 4, 3))
    marg, log_z = forward_backward(chain.log_init, chain.log_trans, e, method=method)
    assert marg.shape == (6, 4, 3) and log_z.shape == (6,)
    for b in range(6):
        ref, ref_z = brute_force_marginals(chain, e[b])
        np.testing.assert_allclose(marg[b], ref, atol=1e-10)
        assert log_z[b] == pytest.approx(ref_z, abs=1e-10)
    single = chain.posterior_marginals(e[2], method=method)
    np.testing.assert_allclose(single, marg[2], atol=1e-12)


def test_forward_backward_extreme_inputs():
    rng = np.random.default_rng(6)
    chain = MarkovChain(3, seed=7, concentration=0.05)
    # huge emission ranges (kappa in the thousands) and a near-zero transition (logsumexp path)
    e = rng.normal(scale=500.0, size=(4, 3))
    ref, _ = brute_force_marginals(chain, e)
    for method in ("matmul", "logsumexp"):
        m = chain.posterior_marginals(e, method=method)
        assert np.all(np.isfinite(m))
        np.testing.assert_allclose(m, ref, atol=1e-10)
    log_trans = chain.log_trans.copy()
    log_trans[0, 1] = -2000.0
    log_trans[0] -= logsumexp(log_trans[0])
    m_auto, _ = forward_backward(chain.log_init, log_trans, e)
    m_slow, _ = forward_backward(chain.log_init, log_trans, e, method="logsumexp")
    np.testing.assert_allclose(m_auto, m_slow, atol=1e-12)


def test_posterior_marginals_from_h():
    rng = np.random.default_rng(8)
    chain = MarkovChain(6, seed=9)
    W = rng.normal(size=(4, 6))
    W /= np.linalg.norm(W, axis=0)
    h = rng.normal(size=(5, 7, 4))
    h /= np.linalg.norm(h, axis=-1, keepdims=True)
    kappa = np.linspace(0.0, 40.0, 5)
    a = chain.posterior_marginals(h, W, kappa)
    b = chain.posterior_marginals(kappa[:, None, None] * (h @ W))
    np.testing.assert_allclose(a, b, atol=1e-12)
    # kappa = 0: the prior marginals pi P^(l-1)
    prior = [chain.init]
    for _ in range(6):
        prior.append(prior[-1] @ chain.trans)
    np.testing.assert_allclose(a[0], np.array(prior), atol=1e-12)


def test_sampled_nll_matches_exact_expected_nll():
    chain = MarkovChain(16, seed=0)
    L, n = 16, 20000
    x = chain.sample(n, L, np.random.default_rng(1))
    assert x.shape == (n, L) and x.min() >= 0 and x.max() < 16
    nll = chain.nll(x)
    expected = chain.expected_nll_per_token(L)
    se = nll.std(ddof=1) / np.sqrt(n)
    assert abs(nll.mean() - expected) < 4 * se
    # first tokens follow pi
    freq = np.bincount(x[:, 0], minlength=16) / n
    assert np.max(np.abs(freq - chain.init)) < 0.02
    # transitions follow P (rows seen often enough)
    counts = np.zeros((16, 16))
    np.add.at(counts, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    rows = counts.sum(1) > 5000
    assert rows.sum() >= 3
    emp = counts[rows] / counts[rows].sum(1, keepdims=True)
    assert np.max(np.abs(emp - chain.trans[rows])) < 0.03


def test_nll_entropy_rate_and_stationary_are_exact():
    chain = MarkovChain(5, seed=2, concentration=0.5)
    x = np.array([[0, 3, 3, 1], [4, 4, 2, 0]])
    manual = [
        -(np.log(chain.init[s[0]]) + sum(np.log(chain.trans[a, b]) for a, b in zip(s[:-1], s[1:])))
        / 4
        for s in x
    ]
    np.testing.assert_allclose(chain.nll(x), manual, rtol=1e-12)
    np.testing.assert_allclose(chain.nll(x[0]), manual[:1], rtol=1e-12)
    mu = chain.stationary()
    np.testing.assert_allclose(mu @ chain.trans, mu, atol=1e-12)
    assert mu.sum() == pytest.approx(1.0)
    h_init = -np.sum(chain.init * np.log(chain.init))
    assert chain.expected_nll_per_token(1) == pytest.approx(h_init, rel=1e-12)
    # L = 3 by enumeration of all 125 sequences
    seqs = np.array(list(itertools.product(range(5), repeat=3)))
    p = np.exp(chain.log_prob(seqs))
    assert p.sum() == pytest.approx(1.0)
    assert chain.expected_nll_per_token(3) == pytest.approx(float(p @ chain.nll(seqs)), rel=1e-12)
    # long sequences approach the entropy rate at rate O(1/L)
    H = chain.entropy_rate()
    assert 0 < H < np.log(5)
    assert abs(chain.expected_nll_per_token(4000) - H) < 2e-3
    assert abs(chain.expected_nll_per_token(4000) - H) < abs(chain.expected_nll_per_token(40) - H)


def test_markov_chain_reproducible_and_sparse():
    a, b, c = MarkovChain(16, 3), MarkovChain(16, 3), MarkovChain(16, 4)
    assert np.array_equal(a.trans, b.trans) and np.array_equal(a.init, b.init)
    assert not np.allclose(a.trans, c.trans)
    np.testing.assert_allclose(a.trans.sum(1), 1.0)
    assert np.array_equal(a.sample(10, 8, 5), b.sample(10, 8, np.random.default_rng(5)))
    assert not np.array_equal(a.sample(10, 8, 5), a.sample(10, 8, 6))
    # smaller concentration: sparser rows, lower entropy rate
    rates = [MarkovChain(16, 0, k).entropy_rate() for k in (0.05, 0.3, 3.0)]
    assert rates[0] < rates[1] < rates[2] < np.log(16)
    tiny = MarkovChain(8, 0, 0.01)
    assert np.all(np.isfinite(tiny.log_trans))


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: is_valid_grid(np.ones(15, dtype=int)), ValueError, "shape"),
        (lambda: is_valid_grid(np.ones(16), n=5), ValueError, "perfect square"),
        (lambda: valid_grid_mask(np.full((2, 16), 1.5)), ValueError, "integer"),
        (lambda: make_puzzles(shidoku_grids(), (12, 8), rng=0), ValueError, "n_blank_range"),
        (lambda: make_puzzles(shidoku_grids(), (8, 17), rng=0), ValueError, "n_blank_range"),
        (
            lambda: make_puzzles(make_puzzles(shidoku_grids(), rng=0), rng=0),
            ValueError,
            "no blanks",
        ),
        (lambda: make_puzzles(shidoku_grids(), rng=None), TypeError, "rng"),
        (lambda: split_grids(0.0, seed=0), ValueError, "test_fraction"),
        (lambda: split_grids(1.0, seed=0), ValueError, "test_fraction"),
        (lambda: oracle_posterior_grids(np.zeros((16, 4))), ValueError, "V = 4"),
        (lambda: oracle_posterior_grids(np.zeros((15, 5))), ValueError, "shape"),
        (lambda: oracle_posterior_grids(np.full((16, 5), np.nan)), ValueError, "NaN"),
        (
            lambda: oracle_posterior_grids(np.zeros((16, 5)), clues=np.full(16, 7)),
            ValueError,
            "clues",
        ),
        (
            lambda: oracle_posterior_grids(np.zeros((16, 3)), np.ones((3, 5)), 1.0),
            ValueError,
            "unit-norm",
        ),
        (lambda: oracle_posterior_grids(np.zeros((16, 5)), np.eye(5), -1.0), ValueError, "kappa"),
        (
            lambda: oracle_posterior_grids(np.zeros((16, 5)), np.eye(5)),
            ValueError,
            "kappa is required",
        ),
        (lambda: solve(np.zeros(80, dtype=int)), ValueError, "n\\^2 cells"),
        (lambda: solve(np.full(81, 10)), ValueError, "0..9"),
        (lambda: solve(np.zeros(81, dtype=int), limit=0), ValueError, "limit"),
        (lambda: make_unique_puzzle(np.ones(81, dtype=int), 0), ValueError, "valid Sudoku grid"),
        (lambda: make_unique_puzzle(sudoku_solution(0), 0, min_clues=82), ValueError, "min_clues"),
        (lambda: sudoku_solution(None), TypeError, "rng"),
        (lambda: MarkovChain(1, 0), ValueError, "V"),
        (lambda: MarkovChain(4, 0, concentration=0.0), ValueError, "concentration"),
        (lambda: MarkovChain(4, 0).sample(3, 0, 0), ValueError, "L"),
        (lambda: MarkovChain(4, 0).nll([[0, 4]]), ValueError, "0..3"),
        (lambda: MarkovChain(4, 0).posterior_marginals(np.zeros((5, 3))), ValueError, "V = 4"),
        (
            lambda: MarkovChain(4, 0).posterior_marginals(np.zeros((2, 2, 5, 4))),
            ValueError,
            "shape",
        ),
        (
            lambda: MarkovChain(4, 0).posterior_marginals(np.zeros((5, 4)), method="exact"),
            ValueError,
            "method",
        ),
    ],
)
def test_bad_inputs_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()
