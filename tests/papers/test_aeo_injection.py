"""Tests of chapter 13's library: the language's checker, the Gaussian scores, the asymmetric
loss, the metrics, generation with hidden states and steering, and that no weight changes."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.covariance import LedoitWolf
from sklearn.metrics import roc_auc_score

from reprobook import core
from reprobook.papers.aeo_injection import config, correct, detect, experiments, full
from reprobook.papers.aeo_injection import language as lang
from reprobook.papers.aeo_injection.model import TinyGPT, generate, parameter_checksum


def tokens_of(symbols):
    return np.asarray(symbols) + lang.SYM0


def test_rules_on_hand_cases():
    p = [0, 5, 15, 3, 9]
    assert lang.apply_rule(lang.RULES.index("COPY"), p).tolist() == p
    assert lang.apply_rule(lang.RULES.index("SHIFT1"), p).tolist() == [1, 6, 0, 4, 10]
    assert lang.apply_rule(lang.RULES.index("SHIFT2"), p).tolist() == [2, 7, 1, 5, 11]
    assert lang.apply_rule(lang.RULES.index("FIRST3"), p).tolist() == [0, 5, 15]
    assert lang.apply_rule(lang.RULES.index("REPEAT"), p).tolist() == [0, 0, 0, 0]
    assert lang.apply_rule(lang.RULES.index("PERM"), p).tolist() == [11, 2, 10, 0, 12]
    assert sorted(lang.PERMUTATION.tolist()) == list(range(16))


def test_checker_on_hand_cases():
    p, first3 = [0, 5, 15, 3, 9], lang.RULES.index("FIRST3")
    good = np.concatenate([tokens_of([0, 5, 15]), [lang.EOS, lang.PAD, lang.PAD]])
    assert lang.is_compliant(good, first3, p)
    assert lang.is_compliant(np.concatenate([tokens_of([0, 5, 15]), [lang.EOS] * 3]), first3, p)
    no_eos = np.concatenate([tokens_of([0, 5, 15, 3]), [lang.EOS, lang.PAD]])
    assert not lang.is_compliant(no_eos, first3, p)  # one symbol too many
    assert not lang.is_compliant(tokens_of([0, 5, 15, 3, 9, 1]), first3, p)
    assert not lang.is_compliant(np.concatenate([tokens_of([0, 5]), [lang.EOS] * 4]), first3, p)
    assert lang.response_of(good).tolist() == tokens_of([0, 5, 15]).tolist()


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="rule"):
        lang.apply_rule(6, [0] * 5)
    with pytest.raises(ValueError, match="payload symbols"):
        lang.apply_rule(0, [0, 1, 2, 3, 16])
    with pytest.raises(ValueError, match="family"):
        lang.make_prompts("T9", 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="convention"):
        detect.fpr95([0, 1], [0.0, 1.0], "both")
    with pytest.raises(ValueError, match="both classes"):
        detect.fpr95([1, 1], [0.0, 1.0])


@pytest.mark.parametrize("family", lang.FAMILIES)
def test_prompts_are_well_formed(family):
    p = lang.make_prompts(family, 50, np.random.default_rng(1))
    assert p.tokens.shape == (50, lang.PROMPT_LEN) and (p.tokens[:, -1] == lang.AST).all()
    first = np.argmax(p.tokens != lang.PAD, axis=1)
    assert (p.tokens[np.arange(50), first] == lang.SYS).all()
    has_injection = family not in ("aligned", "restated")
    assert ((p.injected >= 0) == has_injection).all()
    assert (p.injected != p.rule).all()
    assert (np.isin(p.tokens, [lang.IGNORE, lang.NOW]).any(1) == (family in
            ("T1", "T2", "T3", "T5", "T6"))).all()  # fmt: skip
    assert ((p.tokens == lang.NOW).any(1) == (family == "T5")).all()


def test_training_mix_has_no_unseen_forms():
    mix = lang.training_mix(400, np.random.default_rng(0))
    assert set(mix.family) == {"aligned", "restated", "T1"}
    assert not (mix.tokens == lang.NOW).any()
    assert (mix.family == "aligned").sum() == 300


def _spd(rng, k):
    a = rng.normal(size=(k, k))
    return a @ a.T + 0.5 * np.eye(k)


def test_gaussian_kl_zero_and_nonnegative_and_closed_form():
    rng = np.random.default_rng(0)
    mu, cov = rng.normal(size=4), _spd(rng, 4)
    assert detect.gaussian_kl(mu, cov, mu, cov) == pytest.approx(0.0, abs=1e-10)
    for _ in range(20):
        assert detect.gaussian_kl(rng.normal(size=4), _spd(rng, 4), mu, cov) >= 0
    # one dimension: log(s_c / s_r) + (s_r^2 + (m_r - m_c)^2) / (2 s_c^2) - 1/2
    kl = detect.gaussian_kl([1.0], [[4.0]], [0.0], [[9.0]])
    assert kl == pytest.approx(np.log(3 / 2) + (4 + 1) / 18 - 0.5, abs=1e-12)


def test_gaussian_kl_matches_monte_carlo():
    rng = np.random.default_rng(2)
    mr, cr, mc, cc = rng.normal(size=2), _spd(rng, 2), rng.normal(size=2), _spd(rng, 2)
    x = rng.multivariate_normal(mr, cr, size=100_000)

    def logpdf(x, m, c):
        d = x - m
        q = np.einsum("ni,ij,nj->n", d, np.linalg.inv(c), d)
        return -0.5 * (q + np.log(np.linalg.det(c)) + 2 * np.log(2 * np.pi))

    mc_kl = np.mean(logpdf(x, mr, cr) - logpdf(x, mc, cc))
    assert detect.gaussian_kl(mr, cr, mc, cc) == pytest.approx(mc_kl, abs=0.05)


def test_mahalanobis_is_the_nll_up_to_a_constant_and_entropy_matches():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 10)) @ rng.normal(size=(10, 10))
    g = detect.fit_compliant(X, 6)
    z = g.project(rng.normal(size=(50, 10)))
    diff = detect.gaussian_nll(z, g) - 0.5 * detect.mahalanobis(z, g)
    assert np.ptp(diff) < 1e-9
    from scipy.stats import multivariate_normal

    ref = -multivariate_normal(g.mean, g.cov).logpdf(z)
    np.testing.assert_allclose(detect.gaussian_nll(z, g), ref, rtol=1e-9)
    assert g.entropy() == pytest.approx(multivariate_normal(g.mean, g.cov).entropy(), rel=1e-9)


def test_shrunk_covariances_are_positive_definite():
    rng = np.random.default_rng(4)
    for n in (2, 4, 8):  # fewer points than dimensions: the sample covariance is singular
        X = rng.normal(size=(n, 16))
        assert np.linalg.eigvalsh(np.cov(X, rowvar=False)).min() < 1e-10
        assert np.linalg.eigvalsh(detect.shrunk_covariance(X)).min() > 1e-3
    big = LedoitWolf().fit(rng.normal(size=(500, 16))).covariance_
    assert np.linalg.eigvalsh(big).min() > 0
    clouds = rng.normal(size=(5, 4, 12))
    g = detect.fit_compliant(rng.normal(size=(200, 12)), 8)
    scores = detect.token_cloud_kl(clouds, g)
    assert np.isfinite(scores).all() and (scores >= 0).all()


def test_token_cloud_kl_is_the_kl_of_each_shrunk_cloud_bit_for_bit():
    # token_cloud_kl inverts the compliant covariance once and asks sklearn for the Ledoit-Wolf
    # shrinkage alone: the scores must be those of gaussian_kl on each cloud's shrunk Gaussian,
    # with the shrinkage of sklearn's ledoit_wolf, to the last bit
    from sklearn.covariance import ledoit_wolf

    rng = np.random.default_rng(5)
    clouds = rng.normal(size=(12, 4, 10)) * rng.uniform(0.5, 2.0, size=(12, 1, 1))
    g = detect.fit_compliant(rng.normal(size=(300, 10)), 6)
    Z = g.project(clouds.reshape(-1, 10)).reshape(12, 4, -1)
    for X in Z:
        S = np.cov(X, rowvar=False, bias=True)
        s = max(float(ledoit_wolf(X)[1]), 0.1)
        mu = max(float(np.trace(S)) / S.shape[0], 1e-12)
        want = (1 - s) * S + s * mu * np.eye(S.shape[0])
        assert detect.shrunk_covariance(X).tobytes() == want.tobytes()
    want = [detect.gaussian_kl(X.mean(0), detect.shrunk_covariance(X), g.mean, g.cov) for X in Z]
    assert detect.token_cloud_kl(clouds, g).tolist() == want


def test_auroc_is_invariant_to_monotone_transforms():
    rng = np.random.default_rng(5)
    y, s = rng.random(200) < 0.3, rng.normal(size=200)
    a = detect.auroc(y, s)
    assert detect.auroc(y, np.exp(3 * s) + 1) == pytest.approx(a, abs=1e-12)
    assert detect.auroc(y, -s) == pytest.approx(1 - a, abs=1e-12)
    assert a == pytest.approx(roc_auc_score(y, s))


def test_fpr95_on_a_hand_built_list():
    # 20 violations scored 1..20, 10 compliant scored 0.5, 1.5, ..., 9.5
    y = np.r_[np.ones(20), np.zeros(10)]
    s = np.r_[np.arange(1, 21), np.arange(10) + 0.5]
    # catching 19 of 20 violations needs threshold 2: compliant above it: 2.5..9.5 -> 8/10
    assert detect.fpr95(y, s, "violation") == pytest.approx(0.8)
    # passing 95% of compliant (all 10 at this size) needs a threshold of 9.5: violations
    # at or below it are 1..9 -> 9/20
    assert detect.fpr95(y, s, "compliant") == pytest.approx(0.45)
    assert detect.fpr95(y, np.r_[np.ones(20) * 5, np.zeros(10)]) == 0.0


def _fpr95_brute_force(y, s):
    """FPR95 over every threshold: the smallest FPR of a threshold t (positives flagged when
    their score is >= t) whose TPR reaches 0.95, counted in integers."""
    y, s = np.asarray(y, bool), np.asarray(s, float)
    best = 1.0
    for t in np.unique(s):
        if 20 * np.sum(s[y] >= t) >= 19 * y.sum():
            best = min(best, np.sum(s[~y] >= t) / np.sum(~y))
    return best


def test_fpr95_keeps_the_threshold_where_tpr_first_reaches_095_under_ties():
    # OpenOOD's auc_and_fpr_recall (openood/evaluators/metrics.py) defines FPR95 as the FPR at
    # the first ROC point with TPR >= 0.95. 20 violations, 10 compliant, tied scores: at
    # score 3, 18 violations and 4 compliant; at 2 and at 1, one of each; 4 compliant at 0.
    # The ROC points (FPR, TPR) (0.4, 0.9), (0.5, 0.95), (0.6, 1.0) are collinear, so
    # roc_curve's default drop_intermediate=True removes (0.5, 0.95) and the old code gave
    # 0.6; the threshold 2 catches 19 of 20 violations and flags 5 of 10 compliant: 0.5.
    y = np.r_[np.ones(20), np.zeros(10)]
    s = np.r_[np.full(18, 3.0), 2.0, 1.0, np.full(4, 3.0), 2.0, 1.0, np.zeros(4)]
    assert _fpr95_brute_force(y, s) == 0.5
    assert detect.fpr95(y, s, "violation") == 0.5
    # brute force over all thresholds on random tied lists, both conventions
    rng = np.random.default_rng(3)
    for _ in range(300):
        n_pos, n_neg = rng.integers(1, 40, size=2)
        y = np.r_[np.ones(n_pos), np.zeros(n_neg)]
        s = rng.integers(0, 6, size=n_pos + n_neg).astype(float)
        assert detect.fpr95(y, s, "violation") == pytest.approx(_fpr95_brute_force(y, s))
        assert detect.fpr95(y, s, "compliant") == pytest.approx(_fpr95_brute_force(1 - y, -s))


def test_asymmetric_loss_by_hand_and_head_separates():
    c = torch.zeros(2)
    ec = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    ev = torch.tensor([[3.0, 0.0], [0.5, 0.0]])
    # pull: (1 + 4) / 2; push with m = 4: (max(0, 4 - 9) + max(0, 4 - 0.25)) / 2
    loss = detect.asymmetric_loss(ec, ev, c, 4.0, lam=2.0)
    assert float(loss) == pytest.approx(2.5 + 2.0 * 3.75 / 2)
    rng = np.random.default_rng(6)
    zc, zv = rng.normal(size=(200, 5)) * 0.3, rng.normal(size=(40, 5)) * 3
    head = detect.train_asymmetric_head(zc, zv, steps=100, seed=0)
    again = detect.train_asymmetric_head(zc, zv, steps=100, seed=0)
    assert detect.auroc(np.r_[np.zeros(200), np.ones(40)], head.score(np.r_[zc, zv])) > 0.95
    np.testing.assert_array_equal(head.score(zc), again.score(zc))


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    return TinyGPT(d=16, layers=2, heads=2).eval()


def test_hooked_states_equal_output_hidden_states(small_model):
    x = torch.as_tensor(lang.make_prompts("T3", 6, np.random.default_rng(0)).tokens)
    seen = []
    handles = [b.register_forward_hook(lambda m, i, o: seen.append(o)) for b in small_model.blocks]
    with torch.no_grad():
        _, states = small_model(x, output_hidden_states=True)
    for h in handles:
        h.remove()
    assert len(states) == 3
    for a, b in zip(seen, states[1:]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_generation_states_are_the_forward_states(small_model):
    p = lang.make_prompts("aligned", 5, np.random.default_rng(1))
    gen = generate(small_model, p)
    full_seq = torch.as_tensor(np.concatenate([p.tokens, gen.tokens[:, :-1]], axis=1))
    with torch.no_grad():
        logits, states = small_model(full_seq, output_hidden_states=True)
    start = lang.PROMPT_LEN - 1
    np.testing.assert_array_equal(gen.tokens, logits[:, start:].argmax(-1).numpy())
    for ell in range(3):
        np.testing.assert_allclose(gen.states[:, ell], states[ell][:, start:].numpy(), atol=1e-5)


def test_alpha_zero_or_infinite_tau_reproduce_the_base_exactly(small_model):
    p = lang.make_prompts("T1", 20, np.random.default_rng(2))
    base = generate(small_model, p)
    v = np.random.default_rng(3).normal(size=16) * 5.0
    score = np.linspace(0, 1, 20)
    for tau, alpha in ((-1.0, 0.0), (np.inf, 3.0)):
        out = correct.gated_correction(small_model, p, base, score, tau, v, alpha, 2)
        np.testing.assert_array_equal(out, base.tokens)
    # a zero vector steers nothing either, through the hook path
    out = correct.gated_correction(small_model, p, base, score, -1.0, np.zeros(16), 1.0, 1)
    np.testing.assert_array_equal(out, base.tokens)
    big = correct.gated_correction(small_model, p, base, score, 0.5, v * 100, 1.0, 2)
    assert (big[score <= 0.5] == base.tokens[score <= 0.5]).all()
    assert (big[score > 0.5] != base.tokens[score > 0.5]).any()


def test_no_parameter_changes_during_detection_and_correction(small_model):
    before = parameter_checksum(small_model)
    p = lang.make_prompts("T4", 30, np.random.default_rng(3))
    base = generate(small_model, p)
    g = detect.fit_compliant(base.states[:, 2].mean(1), 4)
    s = detect.mahalanobis(g.project(base.states[:, 2].mean(1)), g)
    correct.gated_correction(small_model, p, base, s, float(np.median(s)), np.ones(16), 2.0, 2)
    assert parameter_checksum(small_model) == before
    with torch.no_grad():
        small_model.head.bias[0] += 1.0
    assert parameter_checksum(small_model) != before
    with torch.no_grad():
        small_model.head.bias[0] -= 1.0


def test_correction_runs_regenerate_each_gate_once_with_the_same_answers(small_model, monkeypatch):
    cfg = replace(
        config.AEOConfig(),
        d=16,
        heads=2,
        n_pool_aligned=30,
        n_pool_t1=30,
        n_val=10,
        n_test_aligned=10,
        n_test_family=6,
        k=3,
        head_hidden=4,
        head_out=2,
        head_steps=5,
        alphas=(1.0, 3.0),
    )
    rng = np.random.default_rng(6)
    runs = {}
    for name, p in experiments.prompt_sets(cfg, 0).items():
        run = experiments.run_model(cfg, small_model, p)
        run.ok = rng.random(len(p)) < 0.5  # labels of both classes for the untrained model
        runs[name] = run
    det, got, why = experiments.fit_and_score(cfg, runs, 0)
    assert why is None
    r = experiments.SeedResult(0, small_model, runs, det, got, "")
    calls = []
    real = experiments.gated_correction

    def counted(model, prompts, base, score, tau, v, alpha, layer):
        calls.append((len(prompts), alpha, (np.asarray(score) > tau).tobytes()))
        return real(model, prompts, base, score, tau, v, alpha, layer)

    monkeypatch.setattr(experiments, "gated_correction", counted)
    per = experiments.correction_runs(cfg, r)
    assert len(calls) == len(set(calls))  # no gate regenerated twice
    assert cfg.tau_quantile in experiments.TAUS  # so the sweep meets the chosen gate again
    # each answer is what a call of its own gives
    ell = experiments.detection_layer(cfg)
    pool, test = runs["pool"], runs["test"]
    v = correct.steering_vector(pool.z[:, ell], pool.ok)
    pool_c = experiments.scores(cfg, det, pool)[experiments.GATE][pool.ok]
    s = got[experiments.GATE]
    for q, acc in per["sweep"].items():
        t = float(np.quantile(pool_c, q))
        tokens = real(small_model, test.prompts, test.gen, s, t, v, per["alpha"], ell)
        np.testing.assert_array_equal(acc, correct.accuracy(tokens, test.prompts))
    np.testing.assert_array_equal(per["acc"]["gated"], per["sweep"][cfg.tau_quantile])
    assert per["acc"]["gated"] is not per["sweep"][cfg.tau_quantile]  # copies, not one array


def test_training_targets_cover_only_the_response():
    from reprobook.papers.aeo_injection.model import training_tensors

    p = lang.make_prompts("aligned", 4, np.random.default_rng(4))
    x, y = training_tensors(p)
    assert x.shape == (4, lang.CONTEXT - 1)
    for i in range(4):
        want = lang.target_tokens(int(p.rule[i]), p.payload[i])
        got = y[i][y[i] != -100].numpy()
        assert got.tolist() == want.tolist()


def test_profiles_and_the_full_path():
    red = core.resolve_notebook(config.PROFILES, "03_detection", "reduced")
    fu = core.resolve_notebook(config.PROFILES, "03_detection", "full")
    assert (red.layers, red.d) == (2, 64) and (red.backbone, red.benchmark) == ("tiny", "toy")
    assert fu.backbone == config.QWEN and fu.benchmark == config.IHEVAL
    assert core.resolve_notebook(config.PROFILES, "04_correction", "reduced", k=8).k == 8
    assert "tiny GPTs" in experiments.setting(red, "reduced")
    assert config.QWEN in experiments.setting(fu, "full")
    with pytest.raises(ValueError, match="uses no inputs"):
        full.load_backbone(fu, "reduced")


def test_the_tiny_gpt_keeps_the_loss_of_every_training_step():
    """train_tiny_gpt keeps core.fit's per-step loss (the response cross-entropy) in the
    buffer that the checkpoint carries, one value per step."""
    from dataclasses import replace

    from reprobook.papers.aeo_injection.model import train_tiny_gpt

    cfg = replace(config.PROFILES["01_language_and_model"]["reduced"], train_steps=3, d=16)
    model = train_tiny_gpt(replace(cfg, batch_size=4, layers=1, heads=2), seed=0)
    curve = model.loss_curve
    assert curve.shape == (3,) and torch.isfinite(curve).all() and (curve > 0).all()


def test_the_package_reaches_every_module_from_its_one_import():
    from reprobook.papers import aeo_injection as aeo

    assert aeo.experiments is experiments and aeo.detect is detect and aeo.language is lang


def test_a_trained_tiny_gpt_loads_into_a_freshly_built_one():
    """The checkpoint cache rebuilds the model before loading its state: every buffer must have
    its trained shape from the start, or each notebook silently trains the model again."""
    from reprobook.papers.aeo_injection.model import TinyGPT

    trained = TinyGPT(16, 1, 2, 1e-3, 7)
    trained.loss_curve[:] = torch.arange(7.0)
    fresh = TinyGPT(16, 1, 2, 1e-3, 7)
    fresh.load_state_dict(trained.state_dict())  # raises on any shape mismatch
    assert torch.equal(fresh.loss_curve, torch.arange(7.0))
