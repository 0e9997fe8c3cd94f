"""Tests of chapter 11's library: scenes and rays, the fast-weight layer, the decoders."""

import math

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers.test_time_baking import (
    config,
    cost,
    experiments,
    fast_weights,
    scenes,
    tokens,
)
from reprobook.papers.test_time_baking.model import VARIANTS, ViewSynthesisModel

SMALL = dict(patch=4, dim=8, depth=1, heads=2, mlp_hidden=16, fw_hidden=16)


def _tokens(n_ctx=2, n_tgt=1, ids=(0, 1)):
    cfg = config.Train(size=8, patch=4, n_ctx=n_ctx, n_tgt=n_tgt)
    return experiments.scene_tokens(list(ids), cfg)


def test_plucker_directions_are_unit_and_moment_slides():
    g = torch.Generator().manual_seed(0)
    o, d = (
        torch.randn(50, 3, generator=g, dtype=torch.float64),
        torch.randn(50, 3, dtype=torch.float64, generator=g),
    )
    p = tokens.plucker(o, d)
    assert torch.allclose(p[:, :3].norm(dim=-1), torch.ones(50, dtype=torch.float64))
    t = torch.randn(50, 1, generator=g, dtype=torch.float64)
    assert torch.allclose(tokens.plucker(o + t * d, d)[:, 3:], p[:, 3:], atol=1e-12)


def test_camera_ray_directions_are_unit_and_start_at_the_centre():
    c2w = scenes.look_at(30.0, 20.0)
    o, d = scenes.camera_rays(c2w, 8)
    assert torch.allclose(d.norm(dim=-1), torch.ones(8, 8), atol=1e-6)
    assert torch.allclose(o[0, 0].norm(), torch.tensor(scenes.CAM_RADIUS), atol=1e-5)


def test_ray_sphere_depth_matches_the_closed_form():
    o = torch.tensor([[0.0, 0.0, -5.0], [0.0, 3.0, -5.0]])
    d = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    t = scenes.ray_sphere_depth(o, d, torch.zeros(3), torch.tensor(2.0))
    assert t[0].item() == pytest.approx(3.0)  # |o - c| - r for the central ray
    assert math.isinf(t[1].item())  # misses


def test_scenes_are_determined_by_their_seed():
    a, ca = scenes.scene_views(5, 2, 1, 8)
    b, cb = scenes.scene_views(5, 2, 1, 8)
    c, _ = scenes.scene_views(6, 2, 1, 8)
    assert torch.equal(a, b) and torch.equal(ca, cb) and not torch.equal(a, c)
    assert a.min() >= 0 and a.max() <= 1


def _fw(seed=0, b=2, n=7, d=5, h=6):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    W = (r(b, d, h), r(b, h, d), r(b, d, h))
    return W, r(b, n, d), r(b, n, d), r(b, n, 1).abs()


@pytest.mark.parametrize("loss", ["dot", "mse"])
def test_manual_gradient_equals_autograd(loss):
    W, k, v, eta = _fw()
    Wr = tuple(w.clone().requires_grad_(True) for w in W)
    f = fast_weights.swiglu(Wr, k)
    L = (
        -(eta * (f * v).sum(-1, keepdim=True)).sum()
        if loss == "dot"
        else (0.5 * (eta * ((f - v) ** 2).sum(-1, keepdim=True)).sum())
    )
    auto = torch.autograd.grad(L, Wr)
    for a, m in zip(auto, fast_weights.fit_gradient(W, k, v, eta, loss)):
        assert torch.allclose(a, m, atol=1e-10)


def test_zero_rate_leaves_the_weights_unchanged():
    W, k, v, eta = _fw()
    out = fast_weights.update(W, k, v, torch.zeros_like(eta), muon_steps=0, renorm=False)
    for a, b in zip(W, out):
        assert torch.equal(a, b)


def test_renormalisation_restores_column_norms():
    W, k, v, eta = _fw()
    out = fast_weights.update(W, k, v, 10 * eta, muon_steps=0, renorm=True)
    for a, b in zip(W, out):
        assert torch.allclose(a.norm(dim=-2), b.norm(dim=-2), rtol=1e-5)
        assert not torch.allclose(a, b)


def test_newton_schulz_singular_values_are_near_one():
    G = torch.randn(3, 16, 40, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    s = torch.linalg.svdvals(fast_weights.newton_schulz(G, 5))
    assert s.min() > 0.5 and s.max() < 1.5
    tall = torch.linalg.svdvals(fast_weights.newton_schulz(G.transpose(-1, -2), 5))
    assert torch.allclose(s, tall)


def test_kv_cache_rendering_equals_a_masked_full_forward():
    torch.manual_seed(0)
    m = ViewSynthesisModel("kv", **SMALL).double().eval()
    ctx_gt, _, tgt, _ = (x.double() for x in _tokens(n_ctx=3, n_tgt=2))
    with torch.no_grad():
        a = m.render(m.prefill(ctx_gt), tgt)
        b = m.kv_masked_forward(ctx_gt, tgt)
    assert torch.allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("variant", VARIANTS)
def test_outputs_are_invariant_to_permuting_context_views(variant):
    torch.manual_seed(0)
    m = ViewSynthesisModel(variant, **SMALL).double().eval()
    ctx_gt, ctx_rd, tgt, _ = (x.double() for x in _tokens(n_ctx=3))
    perm = torch.tensor([2, 0, 1])
    with torch.no_grad():
        a = m(ctx_gt, ctx_rd, tgt)
        b = m(ctx_gt[:, perm], ctx_rd[:, perm], tgt)
    assert torch.allclose(a, b, atol=1e-9)


def test_fast_render_flops_do_not_change_with_n():
    cfg = config.RenderCost(size=8, patch=4, dim=8, depth=1, heads=2, fw_hidden=16)
    for variant in ("ttt", "ttb_a", "ttb_b"):
        m = cost.random_model(variant, cfg)
        assert len({cost.render_flops(m, *cost.random_tokens(cfg, n))[1] for n in (1, 3)}) == 1
    kv = cost.random_model("kv", cfg)
    kv_flops = [cost.render_flops(kv, *cost.random_tokens(cfg, n))[1] for n in (1, 3)]
    assert kv_flops[1] > kv_flops[0]


def test_with_images_zeroed_disentangled_and_plain_fits_coincide():
    torch.manual_seed(0)
    a = ViewSynthesisModel("ttb_a", **SMALL).double()
    b = ViewSynthesisModel("ttb_gt_input", **SMALL).double()
    b.load_state_dict(a.state_dict())
    _, ctx_rd, _, _ = (x.double() for x in _tokens(n_ctx=1))
    with torch.no_grad():
        wa = a.ttb_prefill(ctx_rd, ctx_rd)[0]  # GT tokens with their images zeroed
        wb = b.ttb_prefill(ctx_rd, ctx_rd)[0]
        ctx_gt = _tokens(n_ctx=1)[0].double()
        wc = b.ttb_prefill(ctx_gt, ctx_rd)[0]
    for x, y, z in zip(wa, wb, wc):
        assert torch.allclose(x, y, atol=1e-10)
        assert not torch.allclose(x, z, atol=1e-6)


def test_kv_and_fast_variants_have_matched_parameter_counts():
    from reprobook.papers.test_time_baking.model import count_parameters

    n = {v: count_parameters(ViewSynthesisModel(v, **SMALL)) for v in VARIANTS}
    assert len({n[v] for v in VARIANTS if v != "kv"}) == 1
    assert abs(n["kv"] - n["ttt"]) / n["ttt"] < 0.02


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="variant"):
        ViewSynthesisModel("attention")
    with pytest.raises(ValueError, match="divisible"):
        ViewSynthesisModel("kv", dim=10, heads=4)
    with pytest.raises(ValueError, match="multiple of patch"):
        tokens.patchify(torch.zeros(1, 1, 3, 10, 10), 4)
    with pytest.raises(ValueError, match="ctx_render"):
        ViewSynthesisModel("ttb_a", **SMALL).prefill(torch.zeros(1, 1, 4, 144))
    W, k, v, eta = _fw()
    with pytest.raises(ValueError, match="loss"):
        fast_weights.fit_gradient(W, k, v, eta, "l1")


def test_seedwise_interval_is_the_union_of_seed_intervals():
    g = torch.Generator().manual_seed(0)
    diffs = [(torch.randn(30, generator=g) + 1).numpy() for _ in range(3)]
    iv = experiments.seedwise_paired_interval(diffs, n_resamples=500)
    each = [core.bootstrap_interval(d, n_resamples=500, seed=s) for s, d in enumerate(diffs)]
    assert iv.low == min(e.low for e in each) and iv.high == max(e.high for e in each)
    assert iv.n == 3


def test_seed_mean_interval_is_student_t_over_the_seed_means():
    diffs = [np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]), np.array([4.0])]
    per_seed, iv = experiments.seed_mean_interval(diffs)
    assert per_seed.tolist() == [2.0, 0.5, 4.0]
    t = core.t_interval(per_seed)
    assert (iv.estimate, iv.low, iv.high, iv.n) == (t.mean, t.low, t.high, 3)
    assert "Student-t" in iv.method


def test_kept_share_is_zero_at_the_floor_one_at_the_reference_and_zero_without_a_gain():
    floor = np.array([10.0, 12.0])
    ref = [np.array([14.0, 16.0]), np.array([9.0, 11.0])]  # the second seed is below the floor
    assert experiments.kept_share([floor, floor], ref, floor).tolist() == [0.0, 0.0]
    assert experiments.kept_share([ref[0], ref[0]], ref, floor).tolist() == [1.0, 0.0]
    assert experiments.kept_share([np.array([12.0, 14.0])], ref[:1], floor).tolist() == [0.5]


def test_the_package_reaches_every_module_from_its_one_import():
    from reprobook.papers import test_time_baking as ttb

    assert ttb.experiments is experiments and ttb.cost is cost and ttb.config is config
    with pytest.raises(AttributeError, match="no attribute"):
        ttb.no_such_module  # noqa: B018


def test_profiles_resolve():
    red = core.resolve_notebook(config.PROFILES, "02_ttt_vs_ttb", "reduced")
    full = core.resolve_notebook(config.PROFILES, "02_ttt_vs_ttb", "full")
    assert full.dim > red.dim and full.n_ctx == 8 and full.size == 64
    assert config.train_key(red) == config.train_key(
        core.resolve_notebook(config.PROFILES, "03_variants_and_ablation", "reduced")
    )
    rc = core.resolve_notebook(config.PROFILES, "04_render_cost", "full")
    assert rc.dim == 768 and rc.depth == 24 and rc.size == 256 and rc.bf16


def test_floor_guard_keeps_a_cleared_interval_and_widens_past_every_bar_otherwise():
    iv = core.Interval(0.3, 0.1, 0.5, "m", 3)
    ok, short = core.Interval(2.0, 1.0, 3.0, "m", 3), core.Interval(0.6, 0.2, 1.0, "m", 3)
    assert experiments.floor_guard(iv, {"A": ok}, 0.5, [1.0, 2.0]) == iv
    wide = experiments.floor_guard(iv, {"A": ok, "B": short}, 0.5, [1.0, 2.0])
    assert (wide.estimate, wide.low, wide.high) == (0.3, 0.0, 3.0)
    assert "B" in wide.method and "A" not in wide.method.split("widened")[1]
    with pytest.raises(ValueError, match="margin"):
        experiments.floor_guard(iv, {"A": ok}, -1.0, [0.0])


def test_mean_colour_of_uniform_views_is_that_colour():
    cfg = config.Train(size=8, patch=4, n_ctx=2, n_tgt=1)
    ctx_gt, ctx_rd, tgt, images = experiments.scene_tokens([3], cfg)
    rgb = torch.tensor([0.2, 0.5, 0.7])
    flat = ctx_gt.unflatten(-1, (-1, 9)).clone()
    flat[..., :3] = rgb - 0.5
    pred = experiments.mean_colour((flat.flatten(-2), ctx_rd, tgt, images))
    assert pred.shape == images.shape
    assert torch.allclose(pred, rgb[None, None, :, None, None].expand_as(pred), atol=1e-6)


def test_fit_errors_are_deterministic_and_cover_every_layer():
    cfg = config.Train(size=8, patch=4, dim=8, depth=2, heads=2, mlp_hidden=16, fw_hidden=16)
    torch.manual_seed(0)
    module = experiments.TTBAModule(cfg)
    data = experiments.scene_tokens([0, 1], cfg)
    a, b = experiments.fit_errors(module, data), experiments.fit_errors(module, data)
    assert a == b and [r["layer"] for r in a] == [0, 1]
    assert all(0 <= r[k] <= 2 for r in a for k in ("before", "after", "held_out"))
    with pytest.raises(ValueError, match="variant"):
        experiments.fit_errors(experiments.KVModule(cfg), data)


def test_models_trained_side_by_side_equal_those_trained_one_by_one(tmp_path, monkeypatch):
    """train_all trains the uncached models in two processes; each training seeds itself, so
    the weights equal those of trained() in this process, and a second call only loads."""
    import dataclasses

    cfg = dataclasses.replace(
        config.PROFILES["02_ttt_vs_ttb"]["reduced"], steps=3, warmup=1, n_train=64, batch=8
    )
    monkeypatch.setenv("REPROBOOK_THREADS", "2")  # two workers even if the suite sets one
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "b"))
    side = experiments.train_all(["kv", "ttt"], cfg, [0, 1], profile="reduced")
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "c"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the notebooks at the reduced profile and the workers
    try:
        alone = {(v, s): experiments.trained(v, cfg, s, profile="reduced") for v, s in side}
    finally:
        torch.set_num_threads(threads)
    for (v, s), m in side.items():
        alone_m, loaded = alone[v, s]
        assert not loaded
        assert torch.isfinite(m.curve).all() and m.curve.shape == (cfg.steps,)  # core.fit's
        for k, w in m.state_dict().items():
            torch.testing.assert_close(
                w, alone_m.state_dict()[k], rtol=0, atol=0, msg=lambda m, k=k: f"{k}: {m}"
            )
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "b"))
    assert all(experiments.trained(v, cfg, s, profile="reduced")[1] for v, s in side)


def test_smoke_profile_cuts_sizes_and_keeps_the_full_switches():
    """Smoke trains the full profile's variants (Muon steps, TTB-B, bfloat16 timing) at shapes
    that fit together, and its three training notebooks share one checkpoint key."""
    smoke = {nb: core.resolve_notebook(config.PROFILES, nb, "smoke") for nb in config.PROFILES}
    full = config.PROFILES["03_variants_and_ablation"]["full"]
    training = ("01_scenes_and_kv", "02_ttt_vs_ttb", "03_variants_and_ablation")
    assert len({tuple(config.train_key(smoke[nb]).items()) for nb in training}) == 1
    cfg = smoke["03_variants_and_ablation"]
    assert cfg.with_b and cfg.muon_steps == full.muon_steps == 5 and cfg.n_seeds == 2
    assert cfg.size % cfg.patch == 0 and cfg.dim % cfg.heads == 0
    assert cfg.fw_hidden % cfg.fw_heads == 0 and smoke["01_scenes_and_kv"].n_show <= cfg.n_test
    rc = smoke["04_render_cost"]
    assert rc.bf16 and rc.size % rc.patch == 0 and rc.dim % rc.heads == 0
    assert set(rc.n_views) <= set(config.PROFILES["04_render_cost"]["full"].n_views)
