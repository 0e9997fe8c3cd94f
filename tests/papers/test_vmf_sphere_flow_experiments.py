"""Tests of the helpers the notebooks of chapter 16 run their experiments with
(reprobook.papers.vmf_sphere_flow.evaluate and .experiments, arXiv 2605.05629).

What is checked: ``language_scores`` is the NLL and entropy of :func:`evaluate.generate`'s
sequences, seed by seed in order; ``puzzle_solve_rates`` is the per-puzzle mean of
:func:`evaluate.solved` over the sampling seeds, and ``solved_fraction`` is the mean of
``solved``; ``ScoreDuringTraining`` scores only at the listed steps, with the module in eval
mode, and hands it back in training mode; bad inputs raise errors that name the argument.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from reprobook.papers.vmf_sphere_flow import data, evaluate, experiments, geometry

DT = torch.float64
CHAIN = data.MarkovChain(4, seed=0)
W4 = torch.eye(4, dtype=DT)
L, N, STEPS, KMAX = 5, 6, 3, 20.0
PSI = geometry.PsiTable(4, KMAX, n_kappa=21, n_s=51)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("sampler, extra", [("ode", {}), ("pc", {"correctors": 1})])
def test_language_scores_are_the_generated_sequences_scores(sampler, extra):
    post = evaluate.markov_oracle(CHAIN, W4)
    kw = dict(kappa_max=KMAX, psi=PSI, **extra)
    got = evaluate.language_scores(CHAIN, sampler, post, W4, L, N, STEPS, seeds=(3, 5), **kw)
    nll, ent = [], []
    for s in (3, 5):
        out = evaluate.generate(sampler, post, W4, L, N, STEPS, seed=s, **kw)
        nll.append(CHAIN.nll(out.tokens.numpy()))
        ent.append(evaluate.sequence_entropy(out.tokens.numpy(), 4))
    np.testing.assert_array_equal(got.nll, np.concatenate(nll))
    np.testing.assert_array_equal(got.entropy, np.concatenate(ent))
    assert got.nll.shape == (2 * N,) and got.nfe == out.nfe
    with pytest.raises(ValueError, match="seeds"):
        evaluate.language_scores(CHAIN, sampler, post, W4, L, N, STEPS, seeds=(), **kw)


def test_solved_marks_valid_grids_that_keep_the_clues():
    grids = data.shidoku_grids()[:3]
    clues = data.make_puzzles(grids, rng=0)
    tokens = grids.copy()
    tokens[1, :2] = tokens[1, [1, 0]]  # two cells swapped: no longer a valid grid
    breaks = [g for g in data.shidoku_grids() if np.any((clues[2] != 0) & (clues[2] != g))]
    tokens[2] = breaks[0]  # a valid grid that breaks a clue
    np.testing.assert_array_equal(evaluate.solved(tokens, clues), [True, False, False])
    assert evaluate.solved_fraction(tokens, clues) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same shape"):
        evaluate.solved(tokens[:, :4], clues)


def test_puzzle_solve_rates_average_the_seeds():
    W5 = torch.eye(5, dtype=DT)
    psi = geometry.PsiTable(5, 40.0, n_kappa=21, n_s=51)
    clues = data.make_puzzles(data.shidoku_grids()[::40], rng=1)  # 8 puzzles
    post = evaluate.grid_oracle(W5, clues=clues)
    kw = dict(kappa_max=40.0, psi=psi)
    rates, nfe = evaluate.puzzle_solve_rates(
        "ode", post, W5, torch.as_tensor(clues), 2, seeds=(0, 1, 2), **kw
    )
    runs = [
        evaluate.solved(
            evaluate.generate(
                "ode", post, W5, 16, len(clues), 2, seed=s, forbid=0, **kw
            ).tokens.numpy(),
            clues,
        )
        for s in (0, 1, 2)
    ]
    np.testing.assert_array_equal(rates, np.mean(runs, axis=0))
    assert rates.shape == (len(clues),) and nfe == 3
    assert set(np.round(rates * 3).astype(int)) <= {0, 1, 2, 3}
    with pytest.raises(ValueError, match="clues"):
        evaluate.puzzle_solve_rates("ode", post, W5, clues[0], 2, seeds=(0,), **kw)
    with pytest.raises(ValueError, match="seeds"):
        evaluate.puzzle_solve_rates("ode", post, W5, clues, 2, seeds=(), **kw)


def test_score_during_training_scores_at_the_listed_steps_in_eval_mode():
    module = torch.nn.Linear(2, 2)
    seen = []

    def score(m):
        seen.append(m.training)
        return {"value": len(seen)}

    cb = experiments.ScoreDuringTraining(score, at=(2, 4))
    for step in range(1, 6):
        module.train()
        cb.on_train_batch_end(SimpleNamespace(global_step=step), module, None, None, step)
        assert module.training
    assert cb.rows == [{"step": 2, "value": 1}, {"step": 4, "value": 2}]
    assert seen == [False, False]
    with pytest.raises(TypeError, match="score"):
        experiments.ScoreDuringTraining(None, at=(1,))
