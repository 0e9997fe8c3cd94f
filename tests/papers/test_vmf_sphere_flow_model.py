"""The posterior network of the spherical flow: shapes, the loss, learning, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers.vmf_sphere_flow import data, samplers
from reprobook.papers.vmf_sphere_flow.config import Net
from reprobook.papers.vmf_sphere_flow.geometry import PsiTable
from reprobook.papers.vmf_sphere_flow.model import (
    PosteriorTransformer,
    as_posterior,
    posterior_network,
    train_posterior,
)


def _dataset(tokens, clues):
    from reprobook.papers.vmf_sphere_flow.model import _Tokens

    return _Tokens(tokens, clues)


def _markov(V=4, L=6, n=512, seed=0):
    chain = data.MarkovChain(V, seed=seed, concentration=0.3)
    return chain, chain.sample(n, L, np.random.default_rng(seed))


def test_forward_shapes_and_loss_is_the_cross_entropy():
    W = torch.eye(4)
    net = PosteriorTransformer(W, 6, kappa_max=20.0, seed=0)
    tokens = torch.randint(0, 4, (8, 6), generator=torch.Generator().manual_seed(0))
    h, kappa, weight = net.noisy_batch(tokens, torch.Generator().manual_seed(1))
    assert h.shape == (8, 6, 4) and torch.allclose(h.norm(dim=-1), torch.ones(8, 6), atol=1e-5)
    assert ((kappa >= 0) & (kappa <= 20)).all()
    assert torch.equal(weight, torch.ones(8, dtype=weight.dtype))  # no warp: unit weights
    logits = net(h)
    assert logits.shape == (8, 6, 4)
    manual = -(torch.log_softmax(logits, -1).gather(-1, tokens[..., None])).mean()
    loss = net.loss(tokens, generator=torch.Generator().manual_seed(1))
    assert float(loss.detach()) == pytest.approx(float(manual.detach()), rel=1e-6)


def test_training_learns_the_posterior_and_is_deterministic():
    chain, seqs = _markov()
    W = torch.eye(4)

    def train(seed):
        net = PosteriorTransformer(
            W, seqs.shape[1], kappa_max=20.0, width=32, depth=1, heads=2, lr=3e-3, seed=seed
        )
        opt = net.configure_optimizers()
        g = torch.Generator().manual_seed(seed)
        tok = torch.as_tensor(seqs)
        for _ in range(150):
            idx = torch.randint(0, len(tok), (64,), generator=g)
            loss = net.loss(tok[idx], generator=g)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return net

    a, b = train(0), train(0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    # at a high concentration the learned posterior should read the tokens off h: far below log V
    tok = torch.as_tensor(seqs[:256])
    h = a.W.T[tok]  # kappa -> infinity: h on the token embeddings
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(a(h).reshape(-1, 4), tok.reshape(-1))
    assert float(ce) < 0.3 < np.log(4)
    # on noisy inputs it beats the untrained network's cross-entropy
    untrained = PosteriorTransformer(
        W, seqs.shape[1], kappa_max=20.0, width=32, depth=1, heads=2, seed=0
    )
    with torch.no_grad():
        assert (
            float(a.loss(tok, generator=torch.Generator().manual_seed(5)))
            < float(untrained.loss(tok, generator=torch.Generator().manual_seed(5))) - 0.2
        )


def test_as_posterior_drives_a_sampler_with_counted_evaluations():
    W = torch.eye(5, dtype=torch.float64)
    net = PosteriorTransformer(W, 16, kappa_max=30.0, width=32, depth=1, heads=2, seed=0)
    table = PsiTable(5, 30.0, n_kappa=31, n_s=51)
    out = samplers.sample_ode(
        as_posterior(net, forbid=0),
        W,
        16,
        4,
        30.0,
        5,
        table,
        generator=torch.Generator().manual_seed(0),
    )
    assert out.nfe == 6 and out.tokens.shape == (4, 16) and (out.tokens != 0).all()


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="unit norm"):
        PosteriorTransformer(2 * torch.eye(3), 4, kappa_max=1.0)
    with pytest.raises(ValueError, match="multiple of heads"):
        PosteriorTransformer(torch.eye(3), 4, kappa_max=1.0, width=30, heads=4)
    net = PosteriorTransformer(torch.eye(3), 4, kappa_max=1.0, n_clue_tokens=4)
    with pytest.raises(ValueError, match="clue tokens"):
        net(torch.ones(2, 4, 3) / np.sqrt(3))
    with pytest.raises(ValueError, match="h must be"):
        net(torch.ones(2, 5, 3), clues=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="clues must have"):
        train_posterior(
            np.zeros((3, 4), int), torch.eye(3), Net(), kappa_max=1.0, clues=np.zeros((3, 5), int)
        )


@pytest.mark.parametrize("with_clues", [False, True])
def test_train_posterior_fits_the_network_of_its_config(with_clues):
    grids = data.shidoku_grids()
    clues = data.make_puzzles(grids, rng=0) if with_clues else None
    W = torch.eye(5)
    cfg = Net(width=32, depth=1, heads=2, lr=3e-4, warmup_steps=0, batch_size=32, train_steps=5)
    n_clue_tokens = 5 if with_clues else None
    net = posterior_network(W, 16, cfg, kappa_max=20.0, n_clue_tokens=n_clue_tokens, seed=0)
    assert (net.lr, net.warmup_steps, net.total_steps, net.warp) == (3e-4, 0, 5, None)
    before = [p.detach().clone() for p in net.parameters()]
    kw = dict(kappa_max=20.0, clues=clues, n_clue_tokens=n_clue_tokens, seed=0)
    trained = train_posterior(grids, W, cfg, **kw)
    assert not trained.training
    assert any(not torch.equal(a, b) for a, b in zip(before, trained.parameters()))
    # what train_posterior does: core.fit over shuffled batches from a generator seeded by the
    # seed, with the global generator seeded for the noise draws
    torch.manual_seed(0)
    curve = core.fit(net, _dataset(grids, clues), steps=5, batch=32, seed=0)
    assert curve.shape == (5,) and np.all(np.isfinite(curve))
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), trained.parameters()))
