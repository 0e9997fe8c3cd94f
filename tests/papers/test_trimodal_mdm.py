"""Tests of chapter 03's library: exact properties of the reparameterisation, the masked
diffusion objective, the complementary masks and the sampler."""

import math

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.core import checks
from reprobook.papers.trimodal_mdm import config, data, experiments, mdm, model, reparam

BASE = reparam.AdamW(3e-3, 0.9, 0.98, 1e-8, 0.01)


def close(a: reparam.AdamW, b: reparam.AdamW, rel=1e-12):
    for f in ("lr", "beta1", "beta2", "eps", "weight_decay"):
        assert getattr(a, f) == pytest.approx(getattr(b, f), rel=rel), f


# --- reparameterisation -------------------------------------------------------------------


def test_kappa_one_returns_the_base():
    k = reparam.kappa(32, 1e6, base_batch=32, base_budget=1e6, gamma=0.44)
    assert k == 1.0
    close(reparam.scale(BASE, k), BASE)


def test_two_reparameterisations_compose_to_the_product():
    close(reparam.scale(reparam.scale(BASE, 2.5), 0.3), reparam.scale(BASE, 0.75), rel=1e-10)


def test_gamma_zero_removes_the_budget():
    a = reparam.kappa(64, 1e6, base_batch=32, base_budget=1e5, gamma=0.0)
    b = reparam.kappa(64, 7e9, base_batch=32, base_budget=1e5, gamma=0.0)
    assert a == b == 2.0
    assert reparam.kappa(32, 4e5, base_batch=32, base_budget=1e5, gamma=1.0) == 0.25
    assert reparam.kappa(32, 4e5, base_batch=32, base_budget=1e5, gamma=0.5) == 0.5


@pytest.mark.parametrize("k", [0.1, 1.0, 3.0, 17.0])
def test_sde_invariants(k):
    h = reparam.scale(BASE, k)
    assert h.lr**2 / k == pytest.approx(BASE.lr**2, rel=1e-12)
    assert math.log(h.beta1) / k == pytest.approx(math.log(BASE.beta1), rel=1e-12)
    assert math.log(h.beta2) / k == pytest.approx(math.log(BASE.beta2), rel=1e-12)
    assert h.eps * math.sqrt(k) == pytest.approx(BASE.eps, rel=1e-12)


def test_steps_times_batch_times_length_is_the_budget():
    for b in (8, 16, 256):
        s = reparam.n_steps(b * 65 * 40, b, 65)
        assert s * b * 65 == b * 65 * 40
    with pytest.raises(ValueError, match="multiple of batch"):
        reparam.n_steps(1000, 3, 7)


def test_adamw_timescale_fixed_when_only_the_batch_moves():
    d = 1e7
    taus = [
        reparam.adamw_timescale(
            reparam.recipe("sde", BASE, b, d, base_batch=32, base_budget=1e6, gamma=0.44), b, d
        )
        for b in (8, 32, 128, 1024)
    ]
    assert np.allclose(taus, taus[0], rtol=1e-12)


def test_recipes_differ_as_defined():
    n = reparam.recipe("naive", BASE, 128, 1.0, base_batch=32, base_budget=1.0)
    lin = reparam.recipe("linear", BASE, 128, 1.0, base_batch=32, base_budget=1.0)
    assert n == BASE
    assert lin.lr == pytest.approx(4 * BASE.lr) and lin.beta2 == BASE.beta2
    with pytest.raises(ValueError, match="recipe must be one of"):
        reparam.recipe("sqrt", BASE, 1, 1.0, base_batch=1, base_budget=1.0)
    with pytest.raises(ValueError, match="gamma"):
        reparam.kappa(1, 1, base_batch=1, base_budget=1, gamma=1.5)


def test_critical_batch_and_flat_range():
    b = [8, 16, 32, 64, 128, 256]
    v = [1.00, 1.01, 1.00, 1.015, 1.05, 1.5]
    assert reparam.critical_batch(b, v) == 64
    assert reparam.critical_batch(b, v, delta=0.1) == 128
    assert reparam.flat_range(b, v, 32) == 3.0  # 8..64
    assert reparam.flat_range(b, [1.5, 1.2, 1.0, 1.3, 2, 3], 32) == 0.0
    assert reparam.flat_range(b, [1.0, 1.5, 1.5, 1.5, 1.5, 1.5], 32) == 0.0
    with pytest.raises(ValueError, match="centre must be one of"):
        reparam.flat_range(b, v, 12)


def test_scaling_law_fit_recovers_a_power_law():
    n = np.array([1e3, 3e3, 1e4, 3e4, 1e5])
    fit = reparam.fit_scaling_law(n, reparam.power_law(n, 1.2, 30.0, 0.5))
    assert fit["alpha"] == pytest.approx(0.5, rel=1e-3)
    assert fit["E"] == pytest.approx(1.2, rel=1e-3)


def test_noisy_quadratic_without_noise_is_deterministic_and_converges():
    kw = dict(curvatures=np.array([1.0, 0.5]), noise=0.0, w0=1.0, replicates=3, seed=0)
    h = reparam.AdamW(0.05, 0.9, 0.999, 1e-8, 0.0)
    a = reparam.noisy_quadratic(h, 4, 4 * 200, **kw)
    assert a == reparam.noisy_quadratic(h, 4, 4 * 200, **kw)
    assert a < 0.75 * 0.01  # started at 0.75


# --- masked diffusion ---------------------------------------------------------------------


def test_linear_weight_is_one_over_t():
    t = torch.linspace(0.05, 0.95, 19, dtype=torch.float64)
    assert torch.allclose(mdm.elbo_weight(t, "linear"), 1 / t)
    assert torch.allclose(mdm.complement_weight(t, "linear"), 1 / (1 - t))


def test_schedules_end_points_and_derivatives():
    t = torch.tensor([0.0, 1.0], dtype=torch.float64)
    s = torch.linspace(0.1, 0.9, 9, dtype=torch.float64, requires_grad=True)
    for name in mdm.SCHEDULES:
        assert torch.allclose(mdm.alpha(t, name), torch.tensor([1.0, 0.0], dtype=torch.float64))
        (grad,) = torch.autograd.grad(mdm.alpha(s, name).sum(), s)
        assert torch.allclose(grad, mdm.alpha_prime(s.detach(), name))
    with pytest.raises(ValueError, match="schedule must be one of"):
        mdm.alpha(t, "sigmoid")


def test_masked_fraction_averages_one_minus_alpha():
    g = torch.Generator().manual_seed(0)
    for name in mdm.SCHEDULES:
        t = torch.full((4000,), 0.3)
        m = mdm.sample_mask((4000, 50), t, g, name).float().mean()
        want = float(1 - mdm.alpha(torch.tensor(0.3), name))
        se = math.sqrt(want * (1 - want) / (4000 * 50))
        assert abs(float(m) - want) < 4 * se


def test_complement_pair_is_unbiased_for_a_fixed_per_token_loss():
    # With l_i = 1 at every position, E[w(t) |M|] = L for any schedule, and so must the pair.
    g = torch.Generator().manual_seed(1)
    for name in ("cosine", "poly2"):
        t = mdm.sample_times(200_000, g)
        m = mdm.sample_mask((200_000, 4), t, g, name)
        k = m.sum(1).double()
        pair = 0.5 * (mdm.elbo_weight(t, name) * k + mdm.complement_weight(t, name) * (4 - k))
        assert float(pair.mean()) == pytest.approx(4.0, rel=0.02)


def test_complementary_masks_partition_positions():
    m = torch.rand(5, 13, generator=torch.Generator().manual_seed(2)) < 0.4
    a, b = mdm.complementary_masks(m)
    assert torch.all(a ^ b) and not torch.any(a & b)


def one_hot_denoiser(x0, vocab):
    """Puts (almost) all its mass on the true tokens of x0, whatever the input."""

    def f(x):
        return torch.nn.functional.one_hot(x0, vocab).float() * 1e4

    return f


def test_true_one_hot_predictor_has_zero_loss():
    x0 = torch.randint(0, 9, (6, 11), generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(4)
    for anti in (False, True):
        assert float(mdm.mdm_loss(one_hot_denoiser(x0, 9), x0, 9, g, "cosine", anti)) == 0.0


def test_uniform_predictor_has_log_v_per_token():
    v, length = 13, 20
    x0 = torch.randint(0, v, (4000, length), generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(6)
    uniform = lambda x: torch.zeros(*x.shape, v)  # noqa: E731
    t = mdm.sample_times(len(x0), g)
    m = mdm.sample_mask(x0.shape, t, g, "linear")
    per_seq = mdm.elbo_weight(t) * mdm.masked_nll(uniform, x0, m, v) / length
    se = float(per_seq.std() / math.sqrt(len(per_seq)))
    assert abs(float(per_seq.mean()) - math.log(v)) < 3 * se


def test_sampler_fills_every_target_and_keeps_the_condition():
    torch.manual_seed(0)
    net = model.MLPDenoiser(data.DIGIT_LENGTH, data.DIGIT_VOCAB, 16)
    prompt = data.digit_tokens(0)[1][:7]
    target = torch.zeros_like(prompt, dtype=torch.bool)
    target[:, 1:] = True
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        out = mdm.unmask_sample(net, prompt, target, data.DIGIT_MASK, 5, generator=g)
    assert not torch.any(out == data.DIGIT_MASK)
    assert torch.equal(out[:, 0], prompt[:, 0])
    g = torch.Generator().manual_seed(0)
    again = mdm.unmask_sample(net, prompt, target, data.DIGIT_MASK, 5, generator=g)
    assert torch.equal(out, again)


def test_training_is_deterministic_under_a_seed():
    train, test = data.digit_tokens(0)
    a = model.train_mlp(train, BASE, 8, 3, hidden=8, seed=5)
    b = model.train_mlp(train, BASE, 8, 3, hidden=8, seed=5)
    assert model.held_out(a, test[:20]) == model.held_out(b, test[:20])


def test_variance_ratio_of_equal_estimators_and_bad_input():
    single = np.random.default_rng(0).exponential(size=12) + 1.0
    r = experiments.variance_ratio(single, single / 2)  # anti = single / 2: ratio exactly 1
    assert r.estimate == pytest.approx(1.0)
    assert r.low == pytest.approx(1.0) and r.high == pytest.approx(1.0)
    with pytest.raises(checks.InputError, match="1-D of one length"):
        experiments.variance_ratio(single, single[:10])


def test_strata_are_mirrored_geometric_and_cover_the_times():
    e = experiments.stratum_edges(8, t_min=1e-3)
    assert e[0] == pytest.approx(1e-3) and e[-1] == pytest.approx(1 - 1e-3)
    assert e[4] == pytest.approx(0.5)
    np.testing.assert_allclose(e[:5], 1 - e[::-1][:5])  # mirrored about 1/2
    np.testing.assert_allclose(np.diff(np.log(e[:5])), np.log(500) / 4)  # geometric below 1/2
    with pytest.raises(checks.InputError, match="even"):
        experiments.stratum_edges(7)


def test_gradient_inner_products_match_autograd():
    """The factored inner products <g_a, g_b> equal those of the per-sequence gradients that
    autograd computes one sequence at a time, for every layer."""
    train, _ = data.digit_tokens(0)
    torch.manual_seed(0)
    net = model.MLPDenoiser(data.DIGIT_LENGTH, data.DIGIT_VOCAB, 8)
    g = torch.Generator().manual_seed(1)
    x = train[:5]
    t = torch.tensor([0.05, 0.3, 0.5, 0.7, 0.99])
    m = mdm.sample_mask(x.shape, t, g)
    z, w = mdm.apply_mask(x, m, data.DIGIT_MASK), mdm.elbo_weight(t)
    grads = []
    for j in range(5):
        net.zero_grad()
        logits = net(z[j : j + 1])
        nll = torch.nn.functional.cross_entropy(logits[0], x[j], reduction="none")
        (w[j] * (nll * m[j]).sum() / data.DIGIT_LENGTH).backward()
        grads.append(torch.cat([p.grad.flatten() for p in net.parameters()]).double())
    brute = torch.stack(grads) @ torch.stack(grads).T
    inner = experiments.gradient_factors(net, z, x, m, w)
    ids = torch.arange(5)
    torch.testing.assert_close(inner(ids, ids), brute, rtol=1e-4, atol=1e-9)


def test_stratified_variance_of_a_context_free_denoiser_has_its_closed_form():
    """With a zero embedding the MLP's logits ignore the input, and on its output layer the
    per-token gradients a_i do not depend on the mask: then Var(one draw) = A sum_i |a_i|^2 / L^2
    per sequence with A = E[(1 - t)/t], and the complementary pair's ratio is exactly 1 - 1/A
    (eq. trimodal-mdm-context-free)."""
    train, _ = data.digit_tokens(0)
    torch.manual_seed(0)
    net = model.MLPDenoiser(data.DIGIT_LENGTH, data.DIGIT_VOCAB, 8)
    with torch.no_grad():
        net.embed.weight.zero_()
    x = train[:2]
    single, anti = experiments.stratified_gradient_variance(
        net, x, n_strata=16, draws=4, groups=200, seed=0, parts=("out",)
    )
    r = experiments.variance_ratio(single, anti)
    assert r.low < experiments.context_free_ratio() < r.high
    assert r.high - r.low < 0.05
    # the closed form of Var(one draw): per-token gradients of the output layer
    with torch.no_grad():
        logits = net(x)
        a3 = torch.nn.functional.gelu(net.body[1](torch.zeros(8)))  # gelu(0) = 0 feeds body[1]
    e = torch.softmax(logits, -1) - torch.nn.functional.one_hot(x, data.DIGIT_VOCAB)
    sq = (e**2).sum(-1) * (1.0 + (a3**2).sum())  # |a_i|^2 for weight and bias, (b, L)
    a = experiments.context_free_ratio()  # 1 - 1/A
    exact = (1.0 / (1.0 - a)) * sq.sum() / data.DIGIT_LENGTH**2 / len(x) ** 2
    assert np.mean(single) == pytest.approx(float(exact), rel=0.03)


def test_stratified_variance_is_deterministic_under_a_seed():
    train, _ = data.digit_tokens(0)
    net = model.MLPDenoiser(data.DIGIT_LENGTH, data.DIGIT_VOCAB, 8)
    a = experiments.stratified_gradient_variance(net, train[:3], draws=2, groups=3, seed=4)
    b = experiments.stratified_gradient_variance(net, train[:3], draws=2, groups=3, seed=4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert np.all(a[0] > 0) and np.all(a[1] > 0)


def test_marginal_nelbo_is_the_mean_cross_entropy_of_position_frequencies():
    rng = np.random.default_rng(1)
    train = torch.as_tensor(rng.integers(0, 3, (20, 4)))
    test = torch.as_tensor(rng.integers(0, 3, (7, 4)))
    brute = 0.0
    for i in range(4):
        counts = np.array([(train[:, i] == v).sum().item() for v in range(3)]) + 0.5
        brute += sum(-np.log(counts[int(x)] / counts.sum()) for x in test[:, i])
    assert experiments.marginal_nelbo(train, test, 3) == pytest.approx(brute / 28)
    with pytest.raises(checks.InputError, match="one L"):
        experiments.marginal_nelbo(train, test[:, :3], 3)


# --- data and profiles --------------------------------------------------------------------


def test_text_round_trip_and_vocabulary_layout():
    s = "Masked diffusion, 3 modalities!"
    assert data.decode_text(data.encode_text(s)) == s
    assert data.decode_text(data.encode_text("caf\u00e9\tx")) == "caf? x"
    assert data.VOCAB == 95 + 17 + 32 + 4 and data.LENGTH == 80


def test_synthetic_speech_depends_on_the_digit():
    w = data.synth_speech(np.array([0, 9]), np.random.default_rng(0))
    spec = np.abs(np.fft.rfft(w[:, :800], axis=1))
    freqs = np.fft.rfftfreq(800, 1 / 8000)
    peaks = freqs[spec.argmax(1)]
    assert abs(peaks[0] - 300) < 40 and abs(peaks[1] - 1920) < 130


def test_mixture_refuses_bad_ratios():
    c = type("C", (), {"train": {m: torch.zeros(3, 80, dtype=torch.long) for m in data.MODALITIES}})
    with pytest.raises(ValueError, match="ratio"):
        data.mixture_batch(c, 4, (0.0, 0.0, 0.0), np.random.default_rng(0))
    assert data.mixture_batch(c, 4, (0, 1, 0), np.random.default_rng(0)).shape == (4, 80)


def test_profiles_resolve():
    for name in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, name, "reduced")
        full = core.resolve_notebook(config.PROFILES, name, "full")
        assert reduced != full
    batch = core.resolve_notebook(config.PROFILES, "03_batch_size", "reduced", n_seeds=5)
    assert batch.n_seeds == 5
    # every batch of the full sweep divides the budget into whole steps
    for name in ("03_batch_size", "04_batch_budget"):
        cfg = core.resolve_notebook(config.PROFILES, name, "full")
        for b in cfg.batches:
            reparam.n_steps(cfg.base_steps * cfg.base_batch * 65, b, 65)


def test_the_smoke_profile_cuts_the_full_sweeps_to_what_the_notebooks_need():
    """Smoke runs the full profile's code: its batch sweep must divide the budget into whole
    steps, its intervals need two seeds, and the scaling-law fit three widths."""
    for name in ("03_batch_size", "04_batch_budget"):
        cfg = core.resolve_notebook(config.PROFILES, name, "smoke")
        assert cfg.n_seeds >= 2 and set(cfg.batches) <= set(config.PROFILES[name]["full"].batches)
        for f in (1, cfg.budget_factor):
            for b in cfg.batches:
                assert reparam.n_steps(f * cfg.base_steps * cfg.base_batch * 65, b, 65) >= 1
    gamma = core.resolve_notebook(config.PROFILES, "05_gamma_horizon", "smoke")
    assert len(gamma.widths) >= 3 and max(gamma.budgets) > 1 and 0.5 in gamma.gammas
    for name in ("01_mdm_basics", "02_trimodal_pretraining"):
        assert core.resolve_notebook(config.PROFILES, name, "smoke").n_seeds >= 2


# --- studies and training -----------------------------------------------------------------


def test_the_package_reaches_every_module_by_name():
    from reprobook.papers import trimodal_mdm as mdm

    assert mdm.experiments.batch_sweep is experiments.batch_sweep
    assert not hasattr(mdm, "nothing_here")


def test_gamma_sweep_is_the_batch_sweep_at_its_one_batch():
    train, test = data.digit_tokens(0)
    cfg = config.GammaConfig(hidden=8, batch=8, base_steps=2, gammas=(0.0, 1.0), budgets=(1, 2))
    sweep = experiments.gamma_sweep(cfg, 3, train, test[:20])
    point = config.BatchConfig(hidden=8, base_batch=8, base_steps=2, batches=(8,))
    base = experiments.batch_sweep(point, 3, train, test[:20], "sde", budget_factor=1)
    assert sweep.shape == (2, 2) and np.all(sweep[0] == base[0])
    at_one = experiments.batch_sweep(point, 3, train, test[:20], "sde", budget_factor=2, gamma=1.0)
    assert sweep[1, 1] == at_one[0]


def test_a_sweep_point_trained_once_is_read_by_the_next_notebook(tmp_path, monkeypatch):
    """Notebooks 3-5 share sweep points: with a profile, a point is trained once, kept beside
    the checkpoints, and read back equal to what training it again gives."""
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    train, test = data.digit_tokens(0)
    point = config.BatchConfig(hidden=8, base_batch=8, base_steps=2, batches=(4, 8))
    kw = dict(budget_factor=2, profile="reduced")
    fresh = experiments.batch_sweep(point, 3, train, test[:20], "sde", budget_factor=2)
    first = experiments.batch_sweep(point, 3, train, test[:20], "sde", **kw)
    assert np.array_equal(first, fresh)
    assert len(list(tmp_path.rglob("nelbo-*.json"))) == 2

    def no_training(*args, **kwargs):
        raise AssertionError("a cached point was trained again")

    monkeypatch.setattr(experiments.model, "train_mlp", no_training)
    assert np.array_equal(experiments.batch_sweep(point, 3, train, test[:20], "sde", **kw), first)
    gamma = config.GammaConfig(hidden=8, batch=8, base_steps=2, gammas=(0.0,), budgets=(2,))
    assert experiments.gamma_sweep(gamma, 3, train, test[:20], profile="reduced")[0, 0] == first[1]
    with pytest.raises(AssertionError, match="trained again"):  # another seed is not cached
        experiments.batch_sweep(point, 4, train, test[:20], "sde", **kw)


def test_the_trimodal_model_trains_through_core_fit_one_loss_a_step():
    rng = torch.Generator().manual_seed(0)
    tokens = {m: torch.randint(0, data.VOCAB - 1, (6, data.LENGTH), generator=rng)
              for m in data.MODALITIES}  # fmt: skip
    corpus = type("C", (), {"train": tokens})
    batches = model.mixture_batches(corpus, 4, 3, (1.0, 1.0, 1.0), 0)
    assert len(batches) == 12

    def train():
        torch.manual_seed(0)
        net = model.MaskedDiffusionLM(8, 1, 2, 16, BASE, 3, seed=0)
        return core.fit(net, batches, steps=3, batch=4, shuffle=False)

    curve = train()
    assert curve.shape == (3,) and curve.dtype == np.float32 and np.all(np.isfinite(curve))
    np.testing.assert_array_equal(curve, train())
