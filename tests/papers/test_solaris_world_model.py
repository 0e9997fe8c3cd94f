"""Tests of chapter 19's library: DuetGrid, the judges, the masks, the multiplayer DiT, flow
matching, the cached rollout and Checkpointed Self Forcing."""

import dataclasses

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers import solaris_world_model as solaris
from reprobook.papers.solaris_world_model import (
    config,
    experiments,
    flow,
    judges,
    model,
    selfforcing,
    stages,
    world,
)


def _net(variant="multiplayer", seed=0):
    torch.manual_seed(seed)
    net = model.WorldModel(variant, width=16, depth=2, heads=2).double()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))  # leave the zero initialisation
    return net


def _inputs(B=2, P=2, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, P, T, 3, 16, 16, generator=g, dtype=torch.float64)
    s = torch.rand(B, P, T, generator=g, dtype=torch.float64)
    a = torch.randn(B, P, T, 7, generator=g, dtype=torch.float64)
    return x, s, a


def test_teacher_forcing_mask_is_its_four_quadrant_specification():
    for T, L in [(1, 1), (4, 2), (6, 3), (5, 5), (7, 1)]:
        m = model.teacher_forcing_mask(T, L).numpy()
        for i in range(2 * T):
            for j in range(2 * T):
                qi, kj = i % T, j % T
                if i < T and j < T:  # clean -> clean: causal window
                    want = kj <= qi and kj > qi - L
                elif i < T:  # clean -> noisy: never
                    want = False
                elif j < T:  # noisy -> clean: strictly earlier, in the window
                    want = kj < qi and kj > qi - L
                else:  # noisy -> noisy: itself only
                    want = qi == kj
                assert m[i, j] == want, (T, L, i, j)


def test_causal_window_sees_min_i_plus_one_and_window_frames():
    for T, L in [(8, 3), (5, 1), (6, 6), (4, 10)]:
        m = model.causal_window_mask(T, L)
        assert m.sum(1).tolist() == [min(i + 1, L) for i in range(T)]
    assert model.causal_window_mask(5, -1).sum(1).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="window"):
        model.causal_window_mask(4, 0)


def test_token_mask_blocks_other_players_only_when_independent():
    fm = torch.ones(2, 2, dtype=torch.bool)
    joint = model.token_mask(fm, 2, 3, per_player=False)
    alone = model.token_mask(fm, 2, 3, per_player=True)
    assert joint.all() and alone.sum() == (2 * 2 * 3) ** 2 // 2
    assert not alone[0, 3] and alone[0, 6]  # token 3 is player 1; token 6 player 0, frame 1


def test_kv_cache_rollout_equals_one_causal_forward():
    net = _net()
    x, s, a = _inputs(T=6)
    for L in (1, 2, 4, 6):
        full, _ = net(x, s, a, model.causal_window_mask(6, L), torch.arange(6))
        cached = flow.cached_forward(net, x, s, a, L)
        assert torch.allclose(full, cached, atol=1e-10), L


def test_replay_matches_rollout_and_naive_gradients():
    net = _net()
    x, _, a = _inputs(T=5)
    g = torch.Generator().manual_seed(3)
    for exit_step in range(4):
        with torch.no_grad():
            X0, Xs = flow.rollout(net, x[:, :, :1], a, 3, flow.STUDENT_SCHEDULE, g, exit_step)
        sig = flow.STUDENT_SCHEDULE[exit_step]
        rep = selfforcing.replay(net, X0, Xs, sig, a, 3)
        nai = selfforcing.naive_exit(net, X0, Xs, sig, a, 3)
        assert torch.allclose(rep, X0[:, :, 1:], atol=1e-10)
        assert torch.allclose(rep, nai, atol=1e-10)
        w = torch.randn(rep.shape, dtype=torch.float64, generator=g)
        params = list(net.parameters())
        gr = torch.autograd.grad((rep * w).sum(), params, allow_unused=True)
        gn = torch.autograd.grad((nai * w).sum(), params, allow_unused=True)
        for p, q in zip(gr, gn):
            assert (p is None) == (q is None)
            if p is not None:
                assert torch.allclose(p, q, atol=1e-9)


def test_replay_differs_without_the_teacher_forcing_mask():
    net = _net()
    x, _, a = _inputs(T=4)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        X0, Xs = flow.rollout(net, x[:, :, :1], a, 2, flow.STUDENT_SCHEDULE, g, 1)
    wrong = selfforcing.replay(net, X0, Xs, 0.75, a, 4)  # a wider window than the rollout's
    assert not torch.allclose(wrong, X0[:, :, 1:], atol=1e-6)


def test_permuting_players_with_their_embeddings_permutes_outputs():
    net = _net()
    x, s, a = _inputs(P=3, T=3)
    fm, t = torch.ones(3, 3, dtype=torch.bool), torch.arange(3)
    out, _ = net(x, s, a, fm, t)
    perm = [2, 0, 1]
    with torch.no_grad():
        net.player.weight[:3] = net.player.weight[:3][perm].clone()
    out_p, _ = net(x[:, perm], s[:, perm], a[:, perm], fm, t)
    assert torch.allclose(out_p, out[:, perm], atol=1e-10)
    with torch.no_grad():  # identical embeddings and inputs: identical players
        net.player.weight[:3] = net.player.weight[0].clone()
    same, _ = net(
        x[:, :1].repeat(1, 3, 1, 1, 1, 1),
        s[:, :1].repeat(1, 3, 1),
        a[:, :1].repeat(1, 3, 1, 1),
        fm,
        t,
    )
    assert torch.allclose(same[:, 1], same[:, 0], atol=1e-10)


def test_independent_variant_ignores_the_other_player():
    net = _net("independent")
    x, s, a = _inputs(T=3)
    fm, t = torch.ones(3, 3, dtype=torch.bool), torch.arange(3)
    out, _ = net(x, s, a, fm, t)
    x2, a2 = x.clone(), a.clone()
    x2[:, 1] += 1.0
    a2[:, 1] += 1.0
    out2, _ = net(x2, s, a2, fm, t)
    assert torch.allclose(out[:, 0], out2[:, 0], atol=1e-10)
    assert not torch.allclose(out[:, 1], out2[:, 1])
    mp = _net("multiplayer")
    assert not torch.allclose(mp(x, s, a, fm, t)[0][:, 0], mp(x2, s, a2, fm, t)[0][:, 0])


def test_concat_refuses_another_number_of_players():
    net = _net("concat")
    x, s, a = _inputs(P=3, T=2)
    with pytest.raises(ValueError, match="built for 2 players"):
        net(x, s, a, torch.ones(2, 2, dtype=torch.bool), torch.arange(2))


def test_perfect_predictor_has_zero_flow_matching_loss():
    x, s, _ = _inputs()
    eps = torch.randn_like(x)
    assert flow.flow_matching_loss(eps - x, x, eps).item() == 0.0
    assert flow.flow_matching_loss(eps - x + 0.5, x, eps).item() == pytest.approx(0.25)
    xs = flow.noisy(x, s, eps)
    assert torch.allclose(flow.x0_from_v(xs, s, eps - x), x, atol=1e-12)


def test_noise_levels_are_shared_or_per_player_frame():
    g = torch.Generator().manual_seed(0)
    std = flow.noise_levels(64, 2, 4, "standard", g)
    df = flow.noise_levels(64, 2, 4, "diffusion_forcing", g)
    assert (std == std[:, :1, :1]).all() and not (df == df[:, :1, :1]).all()
    assert torch.allclose((df * 1000).round(), df * 1000, atol=1e-3)
    assert df.min() >= 0 and df.max() <= 1
    with pytest.raises(ValueError, match="mode"):
        flow.noise_levels(2, 2, 2, "uniform", g)


def test_dmd_gradient_is_zero_when_critic_equals_teacher():
    net = _net()
    x, _, a = _inputs(T=3)
    x0 = x[:, :, 1:].clone().requires_grad_(True)
    loss = selfforcing.dmd_loss(x0, x[:, :, :1], a, net, net, torch.Generator().manual_seed(0))
    loss.backward()
    assert loss.item() == 0.0 and x0.grad.abs().max().item() == 0.0


def test_replay_saved_activations_grow_linearly():
    net = _net().float()
    per = []
    for T in (2, 4, 8):
        X0, Xs, a = (
            torch.randn(1, 2, T, 3, 16, 16),
            torch.randn(1, 2, T, 3, 16, 16),
            torch.zeros(1, 2, T, 7),
        )
        m = selfforcing.saved_bytes(
            lambda X0=X0, Xs=Xs, a=a: selfforcing.replay(net, X0, Xs, 0.5, a, 2),
            list(net.parameters()),
        )
        per.append(m["structural"] / T)
        assert m["attention"] == (2 * T * 32) ** 2 * 4 * 2  # one dense mask per block
    assert max(per) == pytest.approx(min(per), rel=1e-9)


def test_simulator_is_deterministic_per_seed():
    a = world.episode("explore", 2, 6, 11)
    b = world.episode("explore", 2, 6, 11)
    c = world.episode("explore", 2, 6, 12)
    assert np.array_equal(a["frames"], b["frames"]) and np.array_equal(a["actions"], b["actions"])
    assert not np.array_equal(a["frames"], c["frames"])


def test_placed_block_shows_in_every_view_that_covers_it():
    rng = np.random.default_rng(0)
    for trial in range(20):
        w = world.new_world(3, 16, rng)
        acts = np.zeros((3, 7), np.float32)
        acts[0] = world.action(("place",))
        block = (w.pos[0] + world.FORWARD[w.heading[0]]) % w.size
        world.step(w, acts)
        for p in range(3):
            cells = world.view_cells(w, p)
            covers = np.any((cells == block).all(-1))
            occupied = any((w.pos[q] == block).all() for q in range(3) if q != p)
            shown = judges.structure(world.render(w, p)[None])[0]
            if not occupied:
                assert shown == covers, (trial, p)


def test_judges_are_right_on_ground_truth_and_refuse_bad_input():
    for kind in judges.JUDGED_KINDS:
        e = world.episodes(kind, 30, 2, 4, 5)
        assert judges.accuracy(kind, e["frames"], e["labels"]) == 1.0
    with pytest.raises(ValueError, match="frames"):
        judges.presence(np.zeros((2, 8, 8, 3)))
    with pytest.raises(ValueError, match="kind"):
        judges.judge("memory", np.zeros((1, 2, 4, 16, 16, 3)))
    with pytest.raises(ValueError, match="how"):
        judges.broken(np.zeros((2, 2, 4, 16, 16, 3)), "reversed", np.random.default_rng(0))


def test_world_refuses_bad_input():
    with pytest.raises(ValueError, match="n_players"):
        world.new_world(0, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match="kind"):
        world.episode("combat", 2, 4, 0)
    with pytest.raises(ValueError, match="mix"):
        world.training_set(10, 2, 4, 0, (1.0, 0.0))


def test_profiles_resolve():
    for nb in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, nb, "reduced")
        full = core.resolve_notebook(config.PROFILES, nb, "full")
        assert type(reduced) is type(full)
    full = core.resolve_notebook(config.PROFILES, "03_self_forcing", "full")
    assert full.sf.horizon == 32 and full.sf.window == 8 and full.rollout_frames == 128
    with pytest.raises(ValueError):
        core.resolve_notebook(config.PROFILES, "02_variants", "reduced", nonsense=1)


def test_smoke_profile_keeps_the_full_windows_and_shares_its_networks():
    """Smoke trains the full profile's stages (window 8, 32-frame clips, a generator step
    every 5th Self Forcing iteration) at tiny sizes, over two seeds, and notebooks 2-4 share
    its stage-2 networks through one variants configuration."""
    smoke = {nb: core.resolve_notebook(config.PROFILES, nb, "smoke") for nb in config.PROFILES}
    sf = smoke["03_self_forcing"]
    assert sf.variants == smoke["02_variants"] == smoke["04_more_players"].variants
    assert sf.sf.horizon == 32 and sf.sf.window == 8 and sf.sf.generator_every == 5
    assert sf.sf.iterations > sf.sf.generator_every and sf.causal.frames == 32
    assert sf.rollout_frames > 2 * sf.sf.window and smoke["02_variants"].seeds == 2
    arch = smoke["02_variants"].arch
    assert arch.width % arch.heads == 0 and arch.patch == 4


def test_the_package_reaches_every_module_and_start_resolves_its_notebooks(tmp_path, monkeypatch):
    assert solaris.stages.train_stage and solaris.flow.rollout
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        solaris.nope  # noqa: B018
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    run, cfg = core.start(solaris, "03_self_forcing", "reduced", 0, threads=1, rollout_frames=12)
    assert cfg == dataclasses.replace(config.SelfForcingConfig(), rollout_frames=12)
    assert run.notebook == "03_self_forcing"


def test_stages_keep_their_loss_curves_in_the_checkpoint(tmp_path, monkeypatch):
    """Stages 1-3 keep the loss of every step, stage 4 the DMD loss of every generator step
    (0 in between), in the buffer ``losses`` that a loaded model carries too."""
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    cfg = config.PROFILES["03_self_forcing"]["reduced"]
    arch = experiments._arch(cfg.variants)
    teach = dataclasses.replace(cfg.variants.multiplayer, steps=3, episodes=12, batch=4)
    causal = dataclasses.replace(cfg.causal, steps=4, episodes=16, batch=4)
    sf = dataclasses.replace(cfg.sf, iterations=7, generator_every=3, batch=2, episodes=5)

    def train():
        t, _ = stages.train_stage("teacher", "multiplayer", arch, teach, 1, "reduced")
        c, _ = stages.train_stage("causal", "multiplayer", arch, causal, 1, "reduced", t, "t")
        s, loaded = stages.train_self_forcing(arch, sf, 1, "reduced", c, t, "c")
        return t, c, s, loaded

    t, c, s, loaded = train()
    assert not loaded and t.losses.shape == (3,) and c.losses.shape == (4,)
    assert bool((t.losses > 0).all()) and bool((c.losses > 0).all())
    assert s.losses.shape == (7,)
    between = [i for i in range(7) if i % 3]
    assert bool((s.losses[between] == 0).all()) and float(s.losses[3]) > 0
    again = train()
    assert again[3]  # loaded
    for a, b in zip((t, c, s), again[:3]):
        assert torch.equal(a.losses, b.losses)
    every_other = stages._curve_buffer(np.array([2.0, 1.0], np.float32), 5, 2)
    assert every_other.tolist() == [2.0, 0.0, 1.0, 0.0, 0.0]
