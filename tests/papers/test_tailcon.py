"""Exact properties of chapter 08's library (TailCon): the long-tail profile, the baselines'
losses, the episodic memory, kNN retrieval, FOCUS and its merge, and the erosion toy."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reprobook import core
from reprobook.papers.tailcon import config, data, experiments, losses, memory, models, toy


@pytest.mark.parametrize("n_max,C,IF", [(104, 10, 10.0), (5000, 10, 100.0), (500, 100, 100.0)])
def test_profile_is_monotone_from_n_max_to_floor_of_n_max_over_if(n_max, C, IF):
    n = data.longtail_counts(n_max, C, IF)
    assert n.size == C and n[0] == n_max and n[-1] == n_max // int(IF)
    assert np.all(np.diff(n) <= 0)
    assert n[5] == np.floor(n_max * IF ** (-5 / (C - 1)))


def test_profile_refuses_bad_input():
    with pytest.raises(ValueError, match="imbalance"):
        data.longtail_counts(100, 10, 0.5)
    with pytest.raises(ValueError, match="n_classes"):
        data.longtail_counts(100, 1, 10)


def test_longtail_subset_keeps_the_counts_and_tertiles_split_three_ways():
    y = np.repeat(np.arange(4), 20)
    idx = data.longtail_subset(y, [20, 9, 4, 2], np.random.default_rng(0))
    assert np.bincount(y[idx]).tolist() == [20, 9, 4, 2]
    with pytest.raises(ValueError, match="only 20 items"):
        data.longtail_subset(y, [21, 1, 1, 1], np.random.default_rng(0))
    assert data.class_groups(np.array([5, 9, 1, 7, 3, 2])).tolist() == [1, 0, 2, 0, 1, 2]


def test_la_with_tau_zero_is_ce_and_tau_shifts_by_the_log_prior():
    g = torch.Generator().manual_seed(0)
    z, y = torch.randn(32, 5, generator=g), torch.randint(0, 5, (32,), generator=g)
    prior = losses.log_prior(np.array([50, 20, 10, 5, 2]))
    assert torch.equal(losses.la_loss(z, y, prior, 0.0), F.cross_entropy(z, y))
    assert torch.allclose(losses.la_loss(z, y, prior, 1.0), F.cross_entropy(z + prior, y))


def test_posthoc_la_gives_the_balanced_error_threshold_of_two_gaussians():
    mu0, mu1, sigma, pi1 = -1.0, 2.0, 1.5, 0.1
    x = torch.linspace(-6, 8, 140_001, dtype=torch.float64)
    logpdf = lambda m: -0.5 * ((x - m) / sigma) ** 2  # noqa: E731 - shared constants cancel
    prior = torch.log(torch.tensor([1 - pi1, pi1], dtype=torch.float64))
    z = torch.stack([logpdf(mu0), logpdf(mu1)], dim=1) + prior  # Bayes posterior logits
    pred = losses.posthoc_adjust(z, prior, 1.0).argmax(dim=1)
    threshold = float(x[pred.argmax()])  # first x predicted as class 1
    assert threshold == pytest.approx((mu0 + mu1) / 2, abs=2e-4)
    plain = float(x[z.argmax(dim=1).argmax()])  # the unadjusted threshold: moved towards mu1
    shift = sigma**2 * np.log((1 - pi1) / pi1) / (mu1 - mu0)
    assert plain == pytest.approx((mu0 + mu1) / 2 + shift, abs=2e-4)


def test_ldam_margins_scale_as_n_to_the_minus_quarter_with_largest_half():
    n = np.array([1000.0, 100.0, 16.0, 1.0])
    m = losses.ldam_margins(n).numpy()
    assert m.max() == pytest.approx(0.5) and m[-1] == pytest.approx(0.5)
    assert np.allclose(m * n**0.25, 0.5, atol=1e-6)


def test_drw_weights_sum_to_the_classes_and_favour_the_tail():
    w = losses.drw_weights(np.array([100, 10, 1]), beta=0.99).numpy()
    assert w.sum() == pytest.approx(3.0, abs=1e-5) and np.all(np.diff(w) > 0)


def test_lws_identity_and_rank_surrogate_starts_at_identity():
    z, h = torch.randn(7, 4), torch.randn(7, 6)
    assert torch.equal(losses.LWS(4)(z), z)
    assert torch.equal(memory.RankSurrogate(4, 6)(z, h), z)


def _filled(cap=3, mode="feature"):
    mem = memory.EpisodicMemory(2, cap, 2, mode)
    feats = torch.arange(10.0).reshape(5, 2).requires_grad_(True) * 1.0
    mem.add(feats, torch.tensor([0, 0, 0, 0, 1]), torch.tensor([10, 11, 12, 13, 14]))
    return mem


def test_memory_needs_no_gradients_keeps_its_capacity_and_evicts_first_in_first_out():
    mem = _filled()
    assert all(not b.requires_grad for b in mem.buffers())
    assert list(mem.parameters()) == []
    assert mem.counts().tolist() == [3, 1] and len(mem) == 4
    H, y, idx = mem.read()
    assert idx.tolist() == [11, 12, 13, 14] and y.tolist() == [0, 0, 0, 1]  # 10 evicted
    assert torch.equal(H[0], torch.tensor([2.0, 3.0])) and not H.requires_grad
    mem.add(torch.zeros(1, 2), torch.tensor([0]), torch.tensor([15]))
    assert mem.read()[2].tolist() == [12, 13, 15, 14]


def test_index_memory_re_encodes_and_state_survives_a_round_trip():
    mem = _filled(mode="index")
    x = torch.arange(40.0).reshape(20, 2)
    H, _, idx = mem.read(lambda v: 2 * v, x)
    assert torch.equal(H, 2 * x[idx])
    with pytest.raises(ValueError, match="index memory"):
        mem.read()
    copy = memory.EpisodicMemory(2, 3, 2, "index")
    copy.load_state_dict(mem.state_dict())
    assert torch.equal(copy.read(lambda v: v, x)[2], idx)


def test_insert_mask_takes_rare_classes_and_negative_margins():
    z = torch.tensor([[3.0, 0.0, 0.0], [0.0, 1.0, 2.0], [5.0, 0.0, 1.0]])
    y = torch.tensor([0, 1, 2])
    rare = torch.tensor([False, False, True])
    assert memory.insert_mask(z, y, rare).tolist() == [False, True, True]


def test_knn_with_k_one_returns_the_label_of_an_identical_feature():
    g = torch.Generator().manual_seed(1)
    keys, labels = torch.randn(20, 8, generator=g), torch.randint(0, 4, (20,), generator=g)
    p = memory.knn_posterior(keys[[3, 7]] * 2.5, keys, labels, 4, k=1)
    assert torch.equal(p.argmax(dim=1), labels[[3, 7]]) and torch.allclose(
        p.max(dim=1).values, torch.ones(2)
    )
    ids = torch.arange(20)
    q = memory.knn_posterior(keys, keys, labels, 4, k=5, exclude=(ids, ids))
    assert torch.allclose(q.sum(dim=1), torch.ones(20))
    assert torch.allclose(memory.mix(p, p * 0 + 0.25, 0.0), p)


def _head(seed=0, d=6, C=4):
    torch.manual_seed(seed)
    return nn.Linear(d, C)


def test_focus_with_zero_steps_is_a_no_op():
    head, H, y = _head(), torch.randn(12, 6), torch.randint(0, 4, (12,))
    before = [p.clone() for p in head.parameters()]
    memory.focus(head, H, y, steps=0)
    memory.focus(head, H, y, kind="rank", steps=0)
    assert all(torch.equal(a, b) for a, b in zip(before, head.parameters()))


@pytest.mark.parametrize("kind", ["lws", "rank"])
def test_merged_head_equals_head_then_surrogate(kind):
    head, H, y = _head(), torch.randn(30, 6), torch.randint(0, 4, (30,))
    sur = memory.make_surrogate(kind, 4, 6, seed=2)
    ids = torch.arange(30)
    p_mem = memory.knn_posterior(H, H, y, 4, k=3, exclude=(ids, ids))
    memory.focus_fit(head, sur, H, y, p_mem, steps=20)
    with torch.no_grad():
        expected = sur(head(H), H)
    assert not torch.allclose(expected, head(H))  # the surrogate moved
    memory.merge(head, sur)
    assert torch.allclose(head(H), expected, atol=1e-5)


def test_transfer_ratio():
    assert memory.transfer_ratio(0.75, 0.70, 0.80) == pytest.approx(0.5)
    assert np.isnan(memory.transfer_ratio(0.75, 0.70, 0.70))


def _tiny_split():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), [30, 10, 4])
    x = (rng.normal(size=(y.size, 1, 8)) + y[:, None, None]).astype(np.float32)
    yt = np.repeat(np.arange(3), 5)
    xt = (rng.normal(size=(15, 1, 8)) + yt[:, None, None] + 100).astype(np.float32)
    return data.Split(x, y, xt, yt, xt, yt, np.array([30, 10, 4]), "tiny")


def test_no_test_example_enters_the_memory_and_training_is_deterministic():
    split = _tiny_split()
    kw = dict(
        kind="cnn1d",
        d_in=8,
        counts=split.counts,
        epochs=2,
        capacity=4,
        focus_every=1,
        focus_steps=3,
        k=2,
        mode="index",
        x_train=torch.from_numpy(split.x_train),
    )
    cfg = config.MemoryConfig(batch_size=8, epochs=2)
    states = []
    for _ in range(2):
        torch.manual_seed(0)
        m = experiments._fit(models.TailConModule(**kw), split, cfg, 0)
        H, _, idx = m.memory.read(m.net.features, m.x_train)
        assert len(m.memory) > 0 and idx.max() < split.y_train.size
        before = m.memory.stamp.clone()
        experiments.with_retrieval(m, split.x_test, 0.3, 2, 0.1)
        assert torch.equal(m.memory.stamp, before)  # evaluation adds nothing
        assert m.focus_epochs.tolist() == [True, True]
        states.append(m.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_toy_means_have_the_conflict_cosine_and_c3_score():
    mu = toy.toy_means(16, 0.5, 2.0)
    cos = mu[0] @ mu[toy.TAIL] / (np.linalg.norm(mu[0]) * np.linalg.norm(mu[toy.TAIL]))
    assert cos == pytest.approx(0.5) and mu[1] @ mu[toy.TAIL] == 0
    g = np.zeros((1, 2, 2))
    g[0, 1, 1] = 0.3
    assert toy.c3_score(g)[0] == pytest.approx(0.05)
    g[0, 0, 0] = 0.1  # a gain without conflict breaks "vanishes"
    assert toy.c3_score(g)[0] == pytest.approx(-0.05)


def test_profiles_resolve_under_the_notebooks_stems():
    from conftest import ROOT

    stems = sorted(p.stem for p in (ROOT / "notebooks" / "08_tailcon").glob("*.ipynb"))
    assert sorted(config.PROFILES) == stems
    for nb in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, nb, "reduced")
        full = core.resolve_notebook(config.PROFILES, nb, "full")
        assert reduced != full
    table = config.PROFILES["01_baselines"]
    assert core.resolve(table, "reduced", n_seeds=7).n_seeds == 7
    with pytest.raises(ValueError):
        core.resolve(table, "reduced", nonsense=1)


def test_the_package_reaches_every_module_from_one_import():
    from reprobook.papers import tailcon as tc

    assert tc.toy is toy and tc.experiments is experiments
    assert tc.fixtures.FIXTURES  # loaded on first use
    with pytest.raises(AttributeError, match="no attribute or submodule 'nonsense'"):
        tc.nonsense  # noqa: B018


def test_the_erosion_grid_reads_its_sizes_from_notebook_fours_config():
    cfg = config.ErosionConfig(
        rhos=(0.5, 0.1), kappas=(0.0, 0.9), n_steps=60, n_test=30, focus_every=20, focus_steps=2
    )
    grid = toy.erosion_grid(cfg, [0, 1])
    assert grid["plain"].shape == grid["gain"].shape == (2, 2, 2)
    np.testing.assert_array_equal(grid["gain"], grid["tailcon"] - grid["plain"])
    rng = np.random.default_rng([1, 1, 0])
    mu = toy.toy_means(cfg.dim, 0.0, cfg.radius)
    x, y = toy.toy_stream(cfg.n_steps, 0.1, mu, rng)
    xt, yt = toy.toy_stream(cfg.n_test, 0.1, mu, rng, balanced=True)
    run = toy.train_toy(x, y, xt, yt, lr=cfg.lr, tailcon=False, seed=1)
    assert grid["plain"][1, 1, 0] == run.tail_recall
    np.testing.assert_array_equal(grid["traces"][("plain", 1, 0.1, 0.0)], run.margins)


def test_cifar_lt_without_the_data_says_what_to_do(monkeypatch):
    import sys
    import types

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(data.DataUnavailable, match="uoft-cs/cifar100"):
        data.cifar_lt("cifar100")
    with pytest.raises(ValueError, match="name"):
        data.cifar_lt("cifar11")


def test_full_profile_paths_resnet32_and_the_sgd_schedule():
    net = models.Net("resnet32", 0, 10)
    assert net.features(torch.zeros(2, 3, 32, 32)).shape == (2, 64)
    n_params = sum(p.numel() for p in net.backbone.parameters())
    assert 450_000 < n_params < 480_000  # ResNet-32's known size, about 0.46 M
    module = models.LDAMDRWModule(
        "mlp", 64, [50, 5], epochs=4, lr=0.1, optimizer="sgd", milestones=(2, 3), warmup=2
    )
    (opt,), (sched,) = module.configure_optimizers()
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.05, 0.1, 0.01, 0.001])


def test_generating_mnist1d_leaves_the_global_generators_where_they_were():
    import random

    random.seed(3)
    np.random.seed(3)
    expected = random.random(), np.random.random()
    random.seed(3)
    np.random.seed(3)
    split = data.mnist1d(1000, 10.0, val_per_class=5)  # make_dataset seeds both generators
    assert split.counts[0] == int(np.bincount(split.y_train).max())
    assert (random.random(), np.random.random()) == expected
