"""Tests of chapter 16's side-by-side runs (reprobook.papers.vmf_sphere_flow.experiments,
arXiv 2605.05629): the networks that :func:`experiments.language_samples` trains in two
processes equal, weight for weight, those trained one by one in this process, and the runs it
samples give the same numbers as the same runs here; it caches what it trains and the scores it
draws, and a second call reads them; a network not cached yet in two jobs is refused.
:func:`experiments.puzzle_samples` (in one process) gives the numbers of the puzzle networks
trained by :func:`model.train_posterior` and of the exact posterior, and caches its
networks. The shortcuts that make training and sampling cheaper on the CPU (the noise drawn
without per-position checks, a foreach AdamW, no NaN fill of new tensors, no loss logging, the
psi table's kappa weights computed once) change no number: the weights equal, bit for bit,
those of the plain route, and the psi table reads the same values for one kappa or many.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch

from reprobook.papers.vmf_sphere_flow import (
    config,
    data,
    evaluate,
    experiments,
    geometry,
    model,
    paths,
)

LANG = config.Language(V=4, L=4, kappa_max=20.0)
NET = config.Net(width=8, depth=1, heads=2, warmup_steps=1, batch_size=8, train_steps=3, n_train=32)


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the notebooks at the reduced profile and the workers
    yield
    torch.set_num_threads(threads)


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sb = b.state_dict()
    for k, w in a.state_dict().items():
        torch.testing.assert_close(w, sb[k], rtol=0, atol=0, msg=lambda m, k=k: f"{k}: {m}")


def test_language_networks_side_by_side_equal_those_trained_one_by_one(
    tmp_path, monkeypatch, one_thread
):
    run = dict(sampler="ode", n=6, steps=2, seeds=[0, 1])
    jobs = {
        "vmf": (dict(path="vmf", seed=1), [run, dict(run, sampler="pc", correctors=1)]),
        "geodesic": (dict(path="geodesic", time_conditioned=True), [dict(run, sampler="geodesic")]),
        "exact": ({"exact": "vmf"}, [run]),
    }
    monkeypatch.setenv("REPROBOOK_THREADS", "2")  # two workers even if the suite sets one
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "side"))
    side = experiments.language_samples(LANG, NET, jobs, profile="reduced")
    task = experiments.language_task(LANG, NET)
    psi = geometry.PsiTable(LANG.V, LANG.kappa_max)
    for name, (network, runs) in jobs.items():
        if "exact" in network:
            post = evaluate.markov_oracle(task.chain, task.W, network["exact"])
        else:
            monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "alone"))
            alone, loaded = experiments.language_network(
                task, LANG, NET, profile="reduced", **network
            )
            assert not loaded
            monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "side"))
            there, loaded = experiments.language_network(
                task, LANG, NET, profile="reduced", **network
            )
            assert loaded  # trained and cached by its job
            _same_weights(there, alone)
            post = experiments.as_posterior(alone)
        for r, got in zip(runs, side[name], strict=True):
            r = dict(r)
            args = (task.chain, r.pop("sampler"), post, task.W, LANG.L, r.pop("n"), r.pop("steps"))
            want = evaluate.language_scores(*args, kappa_max=LANG.kappa_max, psi=psi, **r)
            np.testing.assert_array_equal(got.nll, want.nll)
            np.testing.assert_array_equal(got.entropy, want.entropy)
            assert got.nfe == want.nfe
    # a second call reads every score from the cache; "pc" without correctors is the ODE
    ode_as_pc = dict(run, sampler="pc", correctors=0, eps0=0.5)
    again = experiments.language_samples(
        LANG, NET, {**jobs, "as pc": (dict(path="vmf", seed=1), [ode_as_pc])}, profile="reduced"
    )
    # one file per seed and run; "as pc" shares the ODE's
    assert len(list((tmp_path / "side").rglob("*.npz"))) == 8
    for name, got in [*side.items(), ("as pc", side["vmf"][:1])]:
        for a, b in zip(got, again[name], strict=True):
            np.testing.assert_array_equal(a.nll, b.nll)
            np.testing.assert_array_equal(a.entropy, b.entropy)
    twice = {"a": (dict(path="euclidean"), [run]), "b": (dict(path="euclidean"), [run])}
    with pytest.raises(ValueError, match="same uncached network"):
        experiments.language_samples(LANG, NET, twice, profile="reduced")


def test_puzzle_networks_side_by_side_equal_those_trained_one_by_one(
    tmp_path, monkeypatch, one_thread
):
    grids = data.shidoku_grids()[:8]
    clues = data.make_puzzles(grids, (8, 12), rng=np.random.default_rng(0))
    puzzles = torch.as_tensor(data.make_puzzles(grids[:4], (8, 12), rng=np.random.default_rng(1)))
    W = torch.eye(5, dtype=torch.float64)
    task = experiments.PuzzleData(grids, clues, W, 5, 40.0)
    net = config.Net(width=8, depth=1, heads=2, warmup_steps=1, batch_size=4, train_steps=3)
    run = dict(sampler="ode", clues=puzzles, steps=2, seeds=[0, 1])
    jobs = {
        "vmf": (dict(path="vmf", seed=0), [run, dict(run, sampler="pc", correctors=1)]),
        "euclidean": (dict(path="euclidean", seed=2), [dict(run, sampler="euclidean")]),
        "exact": ({"exact": "vmf"}, [run]),
    }
    # in this process (one worker): the side-by-side path is core.parallel_map's, tested above
    # with the language networks; this checks the puzzle jobs and their cache
    monkeypatch.setenv("REPROBOOK_THREADS", "1")
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "side"))
    side = experiments.puzzle_samples(task, net, jobs, eps0=0.01, profile="reduced")
    psi = geometry.PsiTable(5, 40.0)
    for name, (network, runs) in jobs.items():
        if "exact" in network:
            post = evaluate.grid_oracle(W, "vmf", clues=puzzles.numpy())
        else:
            alone = model.train_posterior(
                grids, W, net, kappa_max=40.0, clues=clues, n_clue_tokens=5, **network
            )
            there, loaded = experiments.puzzle_network(task, net, profile="reduced", **network)
            assert loaded
            _same_weights(there, alone)
            post = experiments.as_posterior(alone, puzzles, forbid=0)
        for r, (rates, nfe) in zip(runs, side[name], strict=True):
            r = dict(r)
            args = (r.pop("sampler"), post, W, r.pop("clues"), r.pop("steps"))
            want, want_nfe = evaluate.puzzle_solve_rates(
                *args, kappa_max=40.0, psi=psi, eps0=0.01, **r
            )
            np.testing.assert_array_equal(rates, want)
            assert nfe == want_nfe


class _PlainAdamW(torch.optim.AdamW):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "foreach": False})  # torch's CPU default


def _logged_step(self, batch, batch_idx):
    tokens, clues = batch if isinstance(batch, (list, tuple)) else (batch, None)
    loss = self.loss(tokens, clues)
    self.log("train_loss", loss, on_step=False, on_epoch=True)
    return loss


def _checked_noise(self, tokens, generator=None):
    level = paths.sample_levels(tokens.shape[0], self.path, self.kappa_max, generator)
    h = paths.noisy_states(self.W.T[tokens].to(torch.float64), level, self.path, generator)
    return h.to(torch.float32), level, torch.ones_like(level)


@pytest.mark.parametrize(
    "path, with_clues", [("vmf", False), ("geodesic", True), ("euclidean", False)]
)
def test_training_shortcuts_change_no_weight(path, with_clues, monkeypatch, one_thread):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, LANG.V, (20, LANG.L))
    clues = rng.integers(0, 3, (20, LANG.L)) if with_clues else None
    kw = dict(kappa_max=LANG.kappa_max, path=path)
    kw.update(clues=clues, n_clue_tokens=3 if with_clues else None, seed=3)
    # batches of 8, 8 and 4: seven steps run into a third epoch
    net = config.Net(
        width=8, depth=1, heads=2, lr=3e-4, warmup_steps=1, batch_size=8, train_steps=7
    )
    fast = model.train_posterior(tokens, torch.eye(LANG.V), net, **kw)
    monkeypatch.setattr(model.PosteriorTransformer, "noisy_batch", _checked_noise)
    monkeypatch.setattr(model.PosteriorTransformer, "training_step", _logged_step)
    monkeypatch.setattr(torch.optim, "AdamW", _PlainAdamW)
    monkeypatch.setattr(model, "unfilled_allocations", contextlib.nullcontext)
    plain = model.train_posterior(tokens, torch.eye(LANG.V), net, **kw)
    _same_weights(fast, plain)


def test_psi_table_reads_the_same_numbers_for_one_kappa_or_many():
    table = geometry.PsiTable(4, 20.0, n_kappa=9, n_s=17)
    s = torch.linspace(-1.0, 1.0, 31, dtype=torch.float64).reshape(31, 1).expand(31, 3)
    for kappa in (0.0, 7.3, 20.0):
        one = table(s, kappa)
        many = table(s, torch.full((31, 3), kappa, dtype=torch.float64))
        torch.testing.assert_close(one, many, rtol=0, atol=0)
    per_row = table(s[:, :1], torch.tensor([0.0, 7.3, 20.0], dtype=torch.float64))
    assert per_row.shape == (31, 3)
    torch.testing.assert_close(per_row[:, 1], table(s[:, 0], 7.3), rtol=0, atol=0)
    for bad_s, bad_kappa in ((torch.tensor([0.1, float("nan")]), 1.0), (torch.zeros(2), math.inf)):
        with pytest.raises(ValueError, match="finite"):
            table(bad_s, bad_kappa)
