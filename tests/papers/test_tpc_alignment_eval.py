"""Tests of reprobook.papers.tpc_alignment theory, diagnostics and attacks (arXiv 2607.03143).

Exact properties only: Theorem 5.1's closed form against dense sampling of the ambiguity set,
Lemma A.1 on random view sets and its equality cases, the PAC quantities of Theorem 5.2, ranks and
recalls against brute-force loops and hand-made cases, ECE / risk-coverage against hand
computations, candidate-set invariants, and the attacks' box and ball constraints.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.functional.classification import multiclass_calibration_error

from reprobook.papers.tpc_alignment import attacks
from reprobook.papers.tpc_alignment import data as data_mod
from reprobook.papers.tpc_alignment import diagnostics as dg
from reprobook.papers.tpc_alignment import evaluate as ev
from reprobook.papers.tpc_alignment import loss as lo
from reprobook.papers.tpc_alignment import model as mo
from reprobook.papers.tpc_alignment import theory as th


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def unit(*shape, seed: int) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, generator=gen(seed)), dim=-1)


def class_relevance(labels: torch.Tensor, K: int) -> torch.Tensor:
    """Relevance (N*K, N): a caption is relevant to every image of its image's class."""
    return labels.repeat_interleave(K)[:, None] == labels[None, :]


# ============================================================================ theory: Theorem 5.1


@pytest.mark.parametrize("seed", range(4))
def test_theorem_5_1_dim_u_one_is_exact(seed):
    # dim U = 1: the boundary samples are exactly +-rho, so the sampled min IS the infimum.
    res = th.check_theorem_5_1(
        d=8, dim_U=1, rho=0.2 + 0.15 * seed, n_samples=200, generator=gen(seed)
    )
    assert abs(res["gap"]) < 1e-12
    assert abs(res["at_r_star"] - res["closed"]) < 1e-12
    assert res["violation"] < 1e-12


def test_theorem_5_1_dense_circle_in_three_dimensions():
    # d = 3, U a plane: dense sampling of the circle ||r|| = rho reaches the closed form.
    res = th.check_theorem_5_1(d=3, dim_U=2, rho=0.6, n_samples=200_000, generator=gen(7))
    assert 0.0 <= res["gap"] < 1e-6
    assert abs(res["at_r_star"] - res["closed"]) < 1e-12


@pytest.mark.parametrize("d,dim_U,rho", [(16, 3, 0.3), (64, 10, 0.5), (64, 63, 0.9), (5, 4, 1.0)])
def test_theorem_5_1_closed_form_lower_bounds_every_sample(d, dim_U, rho):
    g = gen(d + dim_U)
    v, c, U = th.random_instance(d, dim_U, g)
    closed = th.worst_case_similarity(v, c, U, rho)
    samples = th.sample_ambiguity_set(c, U, rho, 5000, g)
    sims = samples @ v
    assert float(sims.min()) >= closed - 1e-12
    r_star = th.worst_case_residual(v, c, U, rho)
    t_star = math.sqrt(1 - rho**2) * c + r_star
    assert abs(float(t_star @ v) - closed) < 1e-12
    assert abs(float(t_star.norm()) - 1) < 1e-12


def test_ambiguity_samples_are_members_with_boundary_and_interior():
    v, c, U = th.random_instance(10, 4, gen(1))
    rho = 0.4
    t = th.sample_ambiguity_set(c, U, rho, 1001, gen(2))
    assert t.shape == (1001, 10)
    assert torch.allclose(t.norm(dim=1), torch.ones(1001, dtype=torch.float64), atol=1e-12)
    r = t - (t @ c)[:, None] * c
    assert torch.allclose(r @ U @ U.T, r, atol=1e-12)  # r lies in U
    rn = r.norm(dim=1)
    assert float(rn.max()) <= rho + 1e-12
    assert int((rn > rho - 1e-12).sum()) >= 501 and int((rn < rho - 1e-3).sum()) > 300
    assert bool(((t @ c) > 0).all())  # the c-component sqrt(1 - ||r||^2) is positive


def test_theorem_5_1_limits_and_zero_projection():
    v, c, U = th.random_instance(6, 2, gen(3))
    a, b = float(v @ c), float((U.T @ v).norm())
    assert th.worst_case_similarity(v, c, U, 0.0) == pytest.approx(a, abs=1e-15)
    assert th.worst_case_similarity(v, c, U, 1.0) == pytest.approx(-b, abs=1e-15)
    # v in span(c) + U^perp: b = 0, the worst case only shrinks the core term.
    v0 = v - U @ (U.T @ v)
    assert th.worst_case_similarity(v0, c, U, 0.6) == pytest.approx(float(v0 @ c) * 0.8, abs=1e-14)
    r0 = th.worst_case_residual(v0, c, U, 0.6)
    assert float(r0.norm()) == pytest.approx(0.6) and torch.allclose(U @ (U.T @ r0), r0, atol=1e-14)


def test_theorem_5_1_bad_inputs():
    v, c, U = th.random_instance(6, 2, gen(4))
    with pytest.raises(ValueError, match="a = v . c >= 0"):
        th.worst_case_similarity(-v, c, U, 0.5)
    with pytest.raises(ValueError, match="orthonormal"):
        th.worst_case_similarity(v, c, 2 * U, 0.5)
    bad_U = F.normalize(U[:, :1] + 0.1 * c[:, None], dim=0)  # one unit column, tilted towards c
    with pytest.raises(ValueError, match="orthogonal to c"):
        th.worst_case_similarity(v, c, bad_U, 0.5)
    with pytest.raises(ValueError, match="unit vector"):
        th.worst_case_similarity(v, 2 * c, U, 0.5)
    with pytest.raises(ValueError, match="rho must lie"):
        th.worst_case_residual(v, c, U, 1.5)
    with pytest.raises(ValueError, match="shape"):
        th.worst_case_similarity(v[:3], c, U, 0.5)
    with pytest.raises(ValueError, match="dim_U"):
        th.random_instance(4, 4)
    with pytest.raises(ValueError, match="n must be"):
        th.sample_ambiguity_set(c, U, 0.5, 0)


# ============================================================================ theory: Lemma A.1


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_lemma_a1_on_random_view_sets(K):
    for seed, spread in enumerate((0.05, 0.3, 1.0, 5.0)):
        g = gen(100 * K + seed)
        core = F.normalize(torch.randn(200, 1, 16, generator=g), dim=-1)
        t = F.normalize(core + spread * torch.randn(200, K, 16, generator=g), dim=-1)
        u, rho2, Ku = th.lemma_a1(t)
        assert u.shape == (200,)
        assert th.lemma_a1_violation(t) <= 1e-12
        assert bool(((u >= -1e-15) & (u <= 1 + 1e-15)).all())
        assert torch.allclose(Ku, K * u)


def test_lemma_a1_equality_cases():
    # all views equal: u = rho^2 = 0
    t = unit(1, 16, seed=5).repeat(4, 1)
    u, rho2, Ku = th.lemma_a1(t)
    assert float(u) < 1e-12 and float(rho2) < 1e-12 and float(Ku) < 1e-12
    # two views: the residuals have equal norms, so u = rho^2 (lower bound tight)
    t2 = unit(2, 16, seed=6)
    u, rho2, _ = th.lemma_a1(t2)
    assert float(u) == pytest.approx(float(rho2), abs=1e-12) and float(u) > 0.1
    # K - 1 views equal and one off: rho^2 is the off view's residual; check against a hand formula
    base = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    off = torch.tensor([math.cos(0.5), math.sin(0.5), 0.0], dtype=torch.float64)
    t3 = torch.stack([base, base, off])
    c = F.normalize(t3.sum(0), dim=0)
    u, rho2, _ = th.lemma_a1(t3)
    assert float(u) == pytest.approx(float((1 - (t3 @ c) ** 2).mean()), abs=1e-14)
    assert float(rho2) == pytest.approx(1 - float(off @ c) ** 2, abs=1e-14)


def test_lemma_a1_bad_inputs():
    with pytest.raises(ValueError, match="unit vectors"):
        th.lemma_a1(2 * unit(3, 4, seed=0))
    with pytest.raises(ValueError, match="shape"):
        th.lemma_a1(torch.ones(4))


# ============================================================================ theory: Theorem 5.2


def test_pac_eta_and_epsilon_formulas():
    sigma, K, n, delta = 0.3, 9, 1000, 0.05
    eta = sigma / 3 + sigma * math.sqrt(2 * math.log(2 * n / delta) / 9)
    assert th.pac_denoising_eta(sigma, K, n, delta) == pytest.approx(eta, rel=1e-15)
    assert th.pac_epsilon(0.2) == pytest.approx(0.5)
    assert th.pac_epsilon(0.0) == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        th.pac_epsilon(1.0)
    with pytest.raises(ValueError, match="delta"):
        th.pac_denoising_eta(0.1, 4, 10, 1.5)
    with pytest.raises(ValueError, match="K must be"):
        th.pac_denoising_eta(0.1, 0, 10, 0.1)


@pytest.mark.parametrize(
    "sigma,n,delta,eps", [(0.1, 1000, 0.05, 0.5), (0.05, 10**6, 0.01, 0.2), (0.5, 10, 0.1, 1.0)]
)
def test_views_needed_is_the_smallest_sufficient_k(sigma, n, delta, eps):
    K = th.views_needed(sigma, n, delta, eps)

    def ok(k):
        e = th.pac_denoising_eta(sigma, k, n, delta)
        return e < 1 and th.pac_epsilon(e) <= eps

    assert ok(K) and (K == 1 or not ok(K - 1))
    # closed form: eta = A / sqrt(K) <= eps / (2 + eps)
    A = sigma * (1 + math.sqrt(2 * math.log(2 * n / delta)))
    assert abs(K - math.ceil((A * (2 + eps) / eps) ** 2)) <= 1
    assert th.views_needed(2 * sigma, n, delta, eps) >= K
    assert th.views_needed(0.0, n, delta, eps) == 1
    assert th.corollary_5_3_rate(sigma, n, delta, eps) == pytest.approx(
        sigma**2 * math.log(n / delta) / eps**2
    )


# ============================================================================ diagnostics


def test_view_dispersion_and_leakage_hand_cases():
    e = torch.eye(4)
    t = torch.stack([e[:3], e[0].repeat(3, 1)])  # (2, 3, 4): orthogonal views; identical views
    disp = dg.view_dispersion(t)
    assert torch.allclose(disp, torch.tensor([1.0, 0.0]))
    v = F.normalize(torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]]), dim=-1)
    leak = dg.consensus_leakage(v, t)
    # image 0 is aligned with its consensus (e0+e1+e2)/sqrt3: the residuals are orthogonal to v
    assert torch.allclose(leak[0], torch.zeros(3), atol=1e-12)
    assert torch.allclose(leak[1], torch.zeros(3), atol=1e-12)  # identical views: r = 0
    # brute force on random data
    v, t = unit(6, 8, seed=1), unit(6, 4, 8, seed=2)
    c = F.normalize(t.sum(1), dim=-1)
    brute = torch.tensor(
        [
            [float(v[i] @ (t[i, k] - (t[i, k] @ c[i]) * c[i])) ** 2 for k in range(4)]
            for i in range(6)
        ]
    )
    assert torch.allclose(dg.consensus_leakage(v, t), brute, atol=1e-6)
    with pytest.raises(ValueError, match="K >= 2"):
        dg.view_dispersion(t[:, :1])


def test_ranks_match_brute_force():
    N, K, d = 12, 3, 5
    v, q = unit(N, d, seed=3), unit(N, K, d, seed=4)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 4])
    for rel in (None, class_relevance(labels, K)):
        R = dg.default_relevance(N, K) if rel is None else rel
        ranks = dg.text_to_image_ranks(v, q, rel)
        i2t = dg.image_to_text_ranks(v, q, rel)
        for i in range(N):
            for k in range(K):
                m = i * K + k
                s = [float(q[i, k] @ v[j]) for j in range(N)]
                best = max(s[j] for j in range(N) if R[m, j])
                expect = 1 + sum(1 for j in range(N) if not R[m, j] and s[j] > best)
                assert int(ranks[i, k]) == expect
        for j in range(N):
            s = [float(v[j] @ q[i, k]) for i in range(N) for k in range(K)]
            best = max(s[m] for m in range(N * K) if R[m, j])
            assert int(i2t[j]) == 1 + sum(1 for m in range(N * K) if not R[m, j] and s[m] > best)


def test_caption_retrieval_hand_case():
    # three images on the axes; image 0's captions both hit it; image 1's second caption points at
    # image 2
    v = torch.eye(3)
    q = torch.stack(
        [
            torch.stack([v[0], v[0]]),
            torch.stack([v[1], F.normalize(v[1] + 2 * v[2], dim=0)]),
            torch.stack([v[2], F.normalize(v[2] + 0.1 * v[0], dim=0)]),
        ]
    )
    ranks = dg.text_to_image_ranks(v, q)
    assert ranks.tolist() == [[1, 1], [1, 2], [1, 1]]
    out = dg.caption_retrieval(v, q)
    assert out["t2i_r1"] == pytest.approx(5 / 6) and out["mean_caption_r1"] == out["t2i_r1"]
    assert out["t2i_r5"] == 1.0
    assert out["worst_caption_r1"] == pytest.approx(2 / 3)
    assert out["caption_sensitivity"] == pytest.approx(0.5 / 3)  # population std of (1, 2) is 0.5
    assert out["rank_volatility"] == pytest.approx(0.5 * (math.log(3) - math.log(2)) / 3)
    assert out["i2t_r1"] == 1.0
    vol = dg.rank_volatility(ranks)
    assert vol[0] == 0 and vol[1] == pytest.approx(0.5 * math.log(1.5))


def test_posterior_diagnostics_match_brute_force():
    N, K, d, tau = 7, 2, 4, 0.1
    v, q = unit(N, d, seed=8), unit(N, K, d, seed=9)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    R = class_relevance(labels, K)
    hnm = dg.hard_negative_mass(v, q, tau, R)
    ce = dg.confident_error(v, q, tau, R)
    for i in range(N):
        acc = 0.0
        for k in range(K):
            p = torch.softmax(torch.stack([q[i, k] @ v[j] for j in range(N)]) / tau, 0)
            acc += max(float(p[j]) for j in range(N) if not R[i * K + k, j])
            top = int(p.argmax())
            assert float(ce[i, k]) == pytest.approx(
                float(p.max()) * (not R[i * K + k, top]), abs=1e-6
            )
        assert float(hnm[i]) == pytest.approx(acc / K, abs=1e-6)
    # a per-query temperature is accepted in both (N, K) and (N*K,) form
    taus = torch.full((N, K), tau)
    assert torch.allclose(dg.confident_error(v, q, taus, R), ce)
    assert torch.allclose(dg.confident_error(v, q, taus.reshape(-1), R), ce)
    q_neg = -q
    assert dg.hard_negative_accuracy(v, q, q_neg) == pytest.approx(
        float(((q * v[:, None]).sum(-1) > 0).double().mean())
    )


def test_candidate_sets_invariants():
    N, K, d = 40, 2, 6
    v, q = unit(N, d, seed=10), unit(N, K, d, seed=11)
    labels = torch.arange(N) % 5
    R = class_relevance(labels, K)
    cand = dg.candidate_sets(v, q, R, n_top=5, n_random=10, generator=gen(0))
    assert cand.shape == (N * K, 16)
    own = torch.arange(N).repeat_interleave(K)
    assert torch.equal(cand[:, 0], own)
    for m in range(N * K):
        row = cand[m].tolist()
        assert len(set(row)) == len(row)  # no image twice, so the ground truth appears once
        assert not any(R[m, j] for j in row[1:])  # no other relevant image
        s = (q.reshape(-1, d)[m] @ v.T).masked_fill(R[m], float("-inf"))
        assert row[1:6] == s.topk(5).indices.tolist()  # the hardest negatives, in order
    # reproducible under a generator seed, different under another
    assert torch.equal(cand, dg.candidate_sets(v, q, R, n_top=5, n_random=10, generator=gen(0)))
    assert not torch.equal(cand, dg.candidate_sets(v, q, R, n_top=5, n_random=10, generator=gen(1)))
    # sizes capped by the 32 irrelevant images each query has
    capped = dg.candidate_sets(v, q, R, n_top=100, n_random=300, generator=gen(0))
    assert capped.shape == (N * K, 33)
    assert all(len(set(r)) == 33 for r in capped.tolist())


def test_retrieval_calibration_hand_case():
    N, K, d = 30, 2, 8
    v, q = unit(N, d, seed=12), unit(N, K, d, seed=13)
    cand = dg.candidate_sets(v, q, None, n_top=4, n_random=6, generator=gen(2))
    tau = torch.linspace(0.05, 0.2, N * K)
    out = dg.retrieval_calibration(v, q, tau, cand)
    S = torch.einsum("md,mcd->mc", q.reshape(-1, d), v[cand]) / tau[:, None]
    p = torch.softmax(S, 1)
    assert torch.allclose(out["confidence"], p.max(1).values, atol=1e-6)
    assert torch.equal(out["correct"], p.argmax(1) == 0)
    assert out["nll"] == pytest.approx(float(-torch.log(p[:, 0]).mean()), rel=1e-5)
    target = torch.zeros_like(p)
    target[:, 0] = 1
    assert out["brier"] == pytest.approx(float(((p - target) ** 2).sum(1).mean()), rel=1e-5)
    # a per-query temperature changes the probabilities, never which candidate is on top
    flat = dg.retrieval_calibration(v, q, 0.07, cand)
    assert torch.equal(flat["correct"], out["correct"])
    assert not torch.allclose(flat["confidence"], out["confidence"])
    with pytest.raises(ValueError, match="column 0"):
        dg.retrieval_calibration(v, q, 0.07, cand.flip(1))


def test_ece_against_hand_computation():
    conf = torch.tensor([0.1, 0.15, 0.55, 0.62, 0.95, 0.97])
    correct = torch.tensor([0, 1, 1, 0, 1, 1]).bool()
    # 15 bins of width 1/15: {0.1}, {0.15}, {0.55}, {0.62} alone; {0.95, 0.97} together
    # (mean 0.96, acc 1)
    hand = (0.1 + 0.85 + 0.45 + 0.62 + 2 * 0.04) / 6
    assert dg.expected_calibration_error(conf, correct) == pytest.approx(hand, abs=1e-6)
    # a confidence of exactly 1.0 joins the last bin: {0.95, 1.0} (mean 0.975, acc 0.5) and {0.5}
    conf1 = torch.tensor([0.95, 1.0, 0.5])
    corr1 = torch.tensor([True, False, True])
    hand1 = (2 * abs(0.5 - 0.975) + abs(1 - 0.5)) / 3
    assert dg.expected_calibration_error(conf1, corr1) == pytest.approx(hand1, abs=1e-6)
    bins = dg.reliability_bins(conf, correct)
    nonempty = bins["count"] > 0
    from_bins = float(
        (
            bins["count"][nonempty] / 6 * (bins["accuracy"] - bins["confidence"])[nonempty].abs()
        ).sum()
    )
    assert from_bins == pytest.approx(hand, abs=1e-6)  # float32 confidences
    assert int(bins["count"].sum()) == 6 and int(bins["count"][14]) == 2
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dg.expected_calibration_error(conf + 1, correct)


def test_zero_shot_calibration_matches_torchmetrics():
    logits = 3 * torch.randn(500, 10, generator=gen(14))
    labels = torch.randint(0, 10, (500,), generator=gen(15))
    out = dg.zero_shot_calibration(logits, labels)
    assert out["accuracy"] == pytest.approx(float((logits.argmax(1) == labels).float().mean()))
    tm = float(
        multiclass_calibration_error(torch.softmax(logits, 1), labels, num_classes=10, n_bins=15)
    )
    assert out["ece"] == pytest.approx(tm, abs=1e-6)
    assert out["nll"] == pytest.approx(float(F.cross_entropy(logits, labels)), rel=1e-5)
    p = torch.softmax(logits, 1)
    assert out["brier"] == pytest.approx(
        float(((p - F.one_hot(labels, 10)) ** 2).sum(1).mean()), rel=1e-5
    )
    with pytest.raises(ValueError, match="labels must lie"):
        dg.zero_shot_calibration(logits, labels + 10)


def test_risk_coverage_hand_case_and_auroc():
    unc = torch.tensor([0.3, 0.1, 0.2, 0.1])
    err = torch.tensor([1, 0, 1, 1]).bool()
    cov, risk = dg.risk_coverage(unc, err)
    # stable ascending order: items 1, 3, 2, 0 -> errors 0, 1, 1, 1
    assert cov.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert torch.allclose(risk, torch.tensor([0.0, 0.5, 2 / 3, 0.75], dtype=torch.float64))
    assert dg.aurc(cov, risk) == pytest.approx((0 + 0.5 + 2 / 3 + 0.75) / 4)
    assert dg.auroc(
        torch.tensor([0.1, 0.2, 0.8, 0.9]), torch.tensor([0, 0, 1, 1])
    ) == pytest.approx(1.0)
    assert dg.auroc(
        torch.tensor([0.9, 0.8, 0.2, 0.1]), torch.tensor([0, 0, 1, 1])
    ) == pytest.approx(0.0)
    # scores outside [0, 1] are rescaled, not squashed by a float32 sigmoid (which would tie 29,
    # 30, 31 and 100 at 1.0 and give 4/6): errors score 30 and 100, non-errors -5, 31, 29 -> 5 of
    # 6 pairs
    s = torch.tensor([-5.0, 30.0, 31.0, 29.0, 100.0])
    e = torch.tensor([0, 1, 0, 0, 1])
    assert dg.auroc(s, e) == pytest.approx(dg.auroc((s + 5) / 105, e)) == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="both errors"):
        dg.auroc(s, torch.zeros(5))
    with pytest.raises(ValueError, match="one shape"):
        dg.risk_coverage(unc, err[:3])


def test_diagnostics_bad_inputs():
    v, q = unit(4, 3, seed=0), unit(4, 2, 3, seed=1)
    with pytest.raises(ValueError, match=r"\(N, K, d\)"):
        dg.text_to_image_ranks(v, q[:3])
    with pytest.raises(ValueError, match="bool tensor of shape"):
        dg.text_to_image_ranks(v, q, torch.ones(8, 4))
    with pytest.raises(ValueError, match="own image"):
        dg.text_to_image_ranks(v, q, torch.zeros(8, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="tau must be > 0"):
        dg.hard_negative_mass(v, q, 0.0)
    with pytest.raises(ValueError, match="n_top"):
        dg.candidate_sets(v, q, None, n_top=-1)


# ============================================================================ attacks


class LinearProbe(nn.Module):
    """A fixed linear classifier on pixels: a small margin, so l_inf attacks bite."""

    def __init__(self, n_classes: int = 10, size: int = 16, seed: int = 0):
        super().__init__()
        self.lin = nn.Linear(3 * size * size, n_classes)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(self.lin.weight.shape, generator=gen(seed)) * 0.05)
            self.lin.bias.zero_()

    def forward(self, x):
        return self.lin(x.flatten(1))


@pytest.fixture(scope="module")
def probe_data():
    torch.manual_seed(0)
    model = LinearProbe()
    x = torch.rand(200, 3, 16, 16, generator=gen(20))
    with torch.no_grad():
        y = model(x).argmax(1)
    y[::4] = (y[::4] + 1) % 10  # some clean errors
    return model, x, y


def test_pgd_perturb_box_ball_and_ascent(probe_data):
    model, x, y = probe_data
    loss_fn = lambda z: F.cross_entropy(model(z), y)  # noqa: E731
    value = lambda z: float(loss_fn(z).detach())  # noqa: E731
    eps = 4 / 255
    x_adv = attacks.pgd_perturb(loss_fn, x, eps=eps, alpha=1 / 255, steps=5, generator=gen(0))
    assert x_adv.shape == x.shape and x_adv.dtype == x.dtype and not x_adv.requires_grad
    assert float((x_adv - x).abs().max()) <= eps + 1e-6
    assert float(x_adv.min()) >= 0 and float(x_adv.max()) <= 1
    assert value(x_adv) > value(x) + 0.1
    assert all(p.grad is None for p in model.parameters())  # input gradients only
    # reproducible under a generator seed; no random start is deterministic anyway
    again = attacks.pgd_perturb(loss_fn, x, eps=eps, alpha=1 / 255, steps=5, generator=gen(0))
    assert torch.equal(x_adv, again)
    other = attacks.pgd_perturb(loss_fn, x, eps=eps, alpha=1 / 255, steps=5, generator=gen(1))
    assert not torch.equal(x_adv, other)
    with torch.no_grad():  # still works when the caller disabled gradients
        x_ng = attacks.pgd_perturb(loss_fn, x, eps=eps, alpha=1 / 255, steps=2, random_start=False)
    assert value(x_ng) > value(x)
    assert torch.equal(attacks.pgd_perturb(loss_fn, x, eps=eps, alpha=1 / 255, steps=0), x)


def test_pgd_perturb_bad_inputs(probe_data):
    model, x, y = probe_data
    loss_fn = lambda z: F.cross_entropy(model(z), y)  # noqa: E731
    with pytest.raises(ValueError, match="eps"):
        attacks.pgd_perturb(loss_fn, x, eps=-1.0, alpha=0.01, steps=1)
    with pytest.raises(ValueError, match="alpha"):
        attacks.pgd_perturb(loss_fn, x, eps=0.1, alpha=0.0, steps=1)
    with pytest.raises(ValueError, match="steps"):
        attacks.pgd_perturb(loss_fn, x, eps=0.1, alpha=0.01, steps=1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        attacks.pgd_perturb(loss_fn, x * 2, eps=0.1, alpha=0.01, steps=1)
    with pytest.raises(ValueError, match="scalar"):
        attacks.pgd_perturb(lambda z: model(z), x, eps=0.1, alpha=0.01, steps=1)


@pytest.mark.parametrize("attack", attacks.ATTACKS)
def test_robust_accuracy(probe_data, attack):
    model, x, y = probe_data
    state = np.random.get_state()
    clean = float((model(x).argmax(1) == y).float().mean())
    res0 = attacks.robust_accuracy(model, x, y, attack=attack, eps=0.0, steps=5, seed=0)
    assert res0["clean_acc"] == pytest.approx(clean) and res0["robust_acc"] == res0["clean_acc"]
    assert res0["max_linf"] == 0.0
    res = attacks.robust_accuracy(
        model, x, y, attack=attack, eps=1 / 255, steps=5, seed=0, batch_size=64
    )
    assert res["clean_acc"] == pytest.approx(clean)
    assert res["robust_acc"] < res["clean_acc"] - 0.1  # the attack bites
    assert res["max_linf"] <= 1 / 255 + 1e-6 and res["n_images"] == 200
    assert (
        attacks.robust_accuracy(
            model, x, y, attack=attack, eps=1 / 255, steps=5, seed=0, batch_size=64
        )
        == res
    )
    bigger = attacks.robust_accuracy(model, x, y, attack=attack, eps=4 / 255, steps=5, seed=0)
    assert bigger["robust_acc"] <= res["robust_acc"]
    assert np.array_equal(np.random.get_state()[1], state[1])  # NumPy's global stream untouched
    assert model.training  # the module's mode is restored


def test_robust_accuracy_bad_inputs(probe_data):
    model, x, y = probe_data
    with pytest.raises(ValueError, match="unknown attack"):
        attacks.robust_accuracy(model, x, y, attack="fgsm", eps=0.01, steps=5, seed=0)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        attacks.robust_accuracy(model, x, y, attack="pgd", eps=0.01, steps=0, seed=0)
    with pytest.raises(ValueError, match="labels must be"):
        attacks.robust_accuracy(model, x, y[:5], attack="pgd", eps=0.01, steps=5, seed=0)
    with pytest.raises(ValueError, match="labels must lie"):
        attacks.robust_accuracy(model, x, y + 20, attack="pgd", eps=0.01, steps=5, seed=0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        attacks.robust_accuracy(model, x - 0.5, y, attack="apgd", eps=0.01, steps=5, seed=0)
    with pytest.raises(ValueError, match="seed"):
        attacks.robust_accuracy(model, x, y, attack="apgd", eps=0.01, steps=5, seed=-1)
    with pytest.raises(ValueError, match="nn.Module"):
        attacks.robust_accuracy(lambda z: z, x, y, attack="pgd", eps=0.01, steps=5, seed=0)


# ================================================================= Lemma A.1 on the training code


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_lemma_a1_u_is_the_training_disagreement(K):
    """theory.lemma_a1's u equals loss.disagreement(t, loss.consensus_core(t)), the quantity the TPC
    loss uses, so the lemma is checked on the code used in training; and Lemma A.1's inequalities
    u <= rho^2 <= K u hold for that u, with rho^2 = max_k ||loss.residual(t_k, c)||^2 from the loss
    module too."""
    for seed, spread in enumerate((0.1, 0.5, 2.0)):
        g = gen(1000 + 10 * K + seed)
        core = F.normalize(torch.randn(150, 1, 12, generator=g, dtype=torch.float64), dim=-1)
        t = F.normalize(
            core + spread * torch.randn(150, K, 12, generator=g, dtype=torch.float64), dim=-1
        )
        c = lo.consensus_core(t)
        u_train = lo.disagreement(t, c)
        u_lemma, rho2_lemma, _ = th.lemma_a1(t)
        assert torch.allclose(u_lemma, u_train, rtol=0, atol=1e-12)
        rho2 = lo.residual(t, c[:, None, :].expand_as(t)).square().sum(-1).amax(-1)
        assert torch.allclose(rho2, rho2_lemma, rtol=0, atol=1e-12)
        assert bool((u_train <= rho2 + 1e-12).all()) and bool((rho2 <= K * u_train + 1e-12).all())
        if K > 1:
            assert bool((u_train > 1e-4).all())  # non-degenerate sets


# ============================================================================ evaluate


@pytest.fixture(scope="module")
def eval_setup():
    data = data_mod.generate(40, 11)
    cfg = mo.ModelConfig(cnn_channels=(8, 16, 16), embed_dim=16, text_width=16)
    model = mo.DualEncoder(cfg, lo.TPCConfig(), mo.OptimConfig(), seed=0)  # identity filter at init
    return ev.test_set(data), model


def test_evaluate_per_image_and_summary_agree_with_diagnostics(eval_setup):
    """On a tiny generated set with a fresh model (identity filter): cos(c_hat, c) = cos(t, c), the
    leakage is diagnostics.consensus_leakage against the consensus, the ranks are
    diagnostics.text_to_image_ranks of the c_hat queries under the caption relevance, and summary
    restores the model's training mode (train and eval alike)."""
    test, model = eval_setup
    e = mo.embed(model, test.data)
    assert torch.allclose(e.c_hat, e.t, atol=1e-6)  # identity filter
    per = ev.per_image(model, test)
    assert per["ranks"].shape == (40, 5)
    assert torch.allclose(per["cos_chat_c"], per["cos_t_c"], atol=1e-6)
    leak = dg.consensus_leakage(e.v, e.t)
    assert torch.allclose(per["leakage"], leak, atol=1e-7)
    assert torch.equal(per["ranks"], dg.text_to_image_ranks(e.v, e.c_hat, test.relevance))
    assert torch.allclose(per["u_hat"], torch.zeros(40, 5), atol=1e-6)
    for mode in (True, False):
        model.train(mode)
        out, per2 = ev.summary(model, test)
        assert model.training is mode
        assert out["cos_chat_c"] == pytest.approx(out["cos_t_c"], abs=1e-6)
        assert out["leakage"] == pytest.approx(float(leak.double().mean()), rel=1e-6)
        assert torch.equal(per2["ranks"], per["ranks"])
        assert out["t2i_r1"] == pytest.approx(float((per["ranks"] == 1).double().mean()))
        assert 0.0 <= out["zero_shot"] <= 1.0
    model.train()


def test_evaluate_queries_are_the_filtered_cores(eval_setup):
    """With a non-identity filter the ranks are those of the c_hat queries (the paper's inference
    rule), not of the raw captions t, and cos(c_hat, c) is measured on c_hat."""
    test, base = eval_setup
    model = mo.DualEncoder(base.model_cfg, lo.TPCConfig(), mo.OptimConfig(), seed=0)
    with torch.no_grad():
        model.core_filter.linear.weight.add_(0.8 * torch.randn(16, 16, generator=gen(3)))
    e = mo.embed(model, test.data)
    per = ev.per_image(model, test)
    by_chat = dg.text_to_image_ranks(e.v, e.c_hat, test.relevance)
    assert torch.equal(per["ranks"], by_chat)
    assert not torch.equal(
        by_chat, dg.text_to_image_ranks(e.v, e.t, test.relevance)
    )  # the test can tell
    c = lo.consensus_core(e.t)
    assert torch.allclose(per["cos_chat_c"], (e.c_hat * c[:, None]).sum(-1), atol=1e-6)
    assert not torch.allclose(per["cos_chat_c"], per["cos_t_c"], atol=1e-3)
    assert torch.allclose(
        per["leakage"], dg.consensus_leakage(e.v, e.t), atol=1e-7
    )  # residual by consensus


# ====================================================================== per-replicate statistics


def test_calibration_ways_score_the_candidate_sets_of_the_model(eval_setup):
    """A TPC model is scored at tau(y) and at tau0, a CLIP model at tau0 only, on candidate sets
    built once from its own scores with the given seed; each way is retrieval_calibration of the
    filtered cores, and u_hat is the model's query uncertainty."""
    test, base = eval_setup
    model = mo.DualEncoder(base.model_cfg, lo.TPCConfig(), mo.OptimConfig(), seed=0)
    with torch.no_grad():
        model.core_filter.linear.weight.add_(0.3 * torch.randn(16, 16, generator=gen(4)))
    kw = dict(tau0=0.07, n_top=5, n_random=10, seed=7)
    ways, u_hat = ev.calibration_ways(model, test.data, test.relevance, tpc_arm=True, **kw)
    assert list(ways) == ["TPC at tau(y)", "TPC at tau0"] and set(ways) < set(ev.WAYS)
    e = mo.embed(model, test.data)
    cand = dg.candidate_sets(e.v, e.c_hat, test.relevance, n_top=5, n_random=10, generator=gen(7))
    tau_y = model.query_temperature(e.t).reshape(-1)
    for way, tau in (("TPC at tau(y)", tau_y), ("TPC at tau0", 0.07)):
        ref = dg.retrieval_calibration(e.v, e.c_hat, tau, cand)
        assert ways[way]["ece"] == ref["ece"] and ways[way]["nll"] == ref["nll"]
        assert torch.equal(ways[way]["correct"], ref["correct"])
    assert torch.allclose(u_hat, model.uncertainty(e.t).reshape(-1))
    assert ways["TPC at tau(y)"]["nll"] != ways["TPC at tau0"]["nll"]  # the test can tell
    clip, _ = ev.calibration_ways(model, test.data, test.relevance, tpc_arm=False, **kw)
    assert list(clip) == ["CLIP-FT at tau0"]
    assert clip["CLIP-FT at tau0"]["ece"] == ways["TPC at tau0"]["ece"]
    scores = ev.calibration_metrics(ways["TPC at tau(y)"], u_hat)
    error = ~ways["TPC at tau(y)"]["correct"]
    assert scores["auroc_u_hat"] == pytest.approx(dg.auroc(u_hat, error))
    assert scores["aurc_u_hat"] == pytest.approx(dg.aurc(*dg.risk_coverage(u_hat, error)))
    assert scores["ece"] == ways["TPC at tau(y)"]["ece"]
    no_u = ev.calibration_metrics(ways["TPC at tau(y)"])
    assert math.isnan(no_u["auroc_u_hat"]) and math.isnan(no_u["aurc_u_hat"])
    assert no_u["auroc_confidence"] == scores["auroc_confidence"]


def test_binned_means_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    y = np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0])
    b = ev.binned_means(x, y, 3)  # edges at 1, 2.67, 4.33, 6: {1, 2}, {3, 4}, {5, 6}
    assert b["x"].tolist() == [1.5, 3.5, 5.5] and b["y"].tolist() == [1.0, 5.0, 9.0]
    assert b["n"].tolist() == [2, 2, 2]
    assert ev.binned_means(x, y, 1)["n"].tolist() == [6]
    tied = ev.binned_means(np.zeros(4), np.arange(4.0), 3)  # one edge value: one bin
    assert tied["y"].tolist() == [1.5]
    with pytest.raises(ValueError, match="n_bins"):
        ev.binned_means(x, y, 0)
    with pytest.raises(ValueError, match="same shape"):
        ev.binned_means(x, y[:5], 2)


def test_paired_values_follow_the_sorted_replicates():
    a, b = {2: 0.5, 0: 0.3, 1: 0.1}, {1: 0.2, 2: 0.25, 0: 0.1}
    assert ev.paired(a, b) == pytest.approx([0.2, -0.1, 0.25])
    assert ev.paired(a, b, how="ratio") == pytest.approx([3.0, 0.5, 2.0])


@pytest.mark.parametrize(
    "a, b, how, match",
    [
        ({0: 1.0, 1: 2.0}, {0: 1.0}, "difference", "same replicates"),
        ({}, {}, "difference", "no replicates"),
        ({0: 1.0}, {0: 0.0}, "ratio", "denominator is 0"),
        ({0: 1.0}, {0: 1.0}, "log", "difference' or 'ratio"),
    ],
)
def test_paired_bad_inputs(a, b, how, match):
    with pytest.raises(ValueError, match=match):
        ev.paired(a, b, how=how)


def _iv(low, high):
    from reprobook.core import Interval

    return Interval((low + high) / 2, low, high, "Student-t 95% over 3", 3, se=0.1)


def test_deciding_interval_gives_the_verdict_of_every_ablation_together():
    bar = 0.005
    # every interval clears the bar: the one with the lowest low end decides (and clears it)
    clear = {"a": _iv(0.02, 0.05), "b": _iv(0.006, 0.2), "c": _iv(0.01, 0.02)}
    assert ev.deciding_interval(clear, bar)[0] == "b"
    # one straddles the bar and none lies below it: the straddling one decides (inconclusive)
    straddle = {"a": _iv(0.02, 0.05), "b": _iv(-0.01, 0.03), "c": _iv(0.001, 0.002 + 0.1)}
    assert ev.deciding_interval(straddle, bar)[0] == "b"
    # one lies wholly below the bar: it decides, even when a wider one has a lower low end
    below = {
        "wide": _iv(-0.5, 0.5),
        "low": _iv(-0.01, 0.004),
        "lower": _iv(-0.003, 0.001),
        "ok": _iv(0.1, 0.2),
    }
    name, iv = ev.deciding_interval(below, bar)
    assert name == "lower" and iv.high < bar
    # the rule agrees with "all clear -> reproduced, any wholly below -> not reproduced" on random
    # sets
    rng = np.random.default_rng(0)
    for _ in range(500):
        ivs = {}
        for k in range(4):
            lo_, hi_ = np.sort(rng.normal(0.01, 0.01, size=2))
            ivs[str(k)] = _iv(float(lo_), float(hi_))
        _, d = ev.deciding_interval(ivs, bar)
        assert (d.low >= bar) == all(v.low >= bar for v in ivs.values())
        assert (d.high < bar) == any(v.high < bar for v in ivs.values())


def test_deciding_interval_bad_inputs():
    with pytest.raises(ValueError, match="no intervals"):
        ev.deciding_interval({}, 0.0)
    with pytest.raises(TypeError, match="Student-t interval"):
        ev.deciding_interval({"a": (0.0, 1.0)}, 0.0)
    # an interval that is not a Student-t one (no standard error) is refused too
    from reprobook.core import proportion_interval

    with pytest.raises(TypeError, match="Student-t interval"):
        ev.deciding_interval({"a": proportion_interval(3, 10)}, 0.0)
    # core.t_interval's intervals are taken
    from reprobook.core import t_interval

    assert ev.deciding_interval({"a": t_interval([0.1, 0.2, 0.3])}, 0.0)[0] == "a"


def test_profiles_use_three_replicates_and_subsets_are_checked():
    from reprobook.core import ProfileError, resolve_notebook
    from reprobook.papers.tpc_alignment import config

    def resolve(notebook, profile, **overrides):
        return resolve_notebook(config.PROFILES, notebook, profile, **overrides)

    for notebook in config.PROFILES:
        for profile in ("reduced", "full"):
            assert len(resolve(notebook, profile).replicates) >= 3
    assert resolve("04_robustness", "full").robust_replicates == (0, 1, 2)
    # every notebook trains in the claims' world; the sweep holds it, the full one all four rates
    assert {resolve(nb, "reduced").p_wrong for nb in config.PROFILES} == {0.25}
    assert resolve("06_worlds", "reduced").worlds == (0.0, 0.25)
    assert resolve("06_worlds", "full").worlds == (0.0, 0.1, 0.25, 0.4)
    with pytest.raises(ValueError, match="worlds must hold the claims' world"):
        resolve("06_worlds", "reduced", worlds=(0.0, 0.4))
    with pytest.raises(ValueError, match="worlds must be distinct"):
        resolve("06_worlds", "reduced", worlds=(0.25, 0.25))
    with pytest.raises(ValueError, match="p_wrong"):
        resolve("02_core_residual", "reduced", p_wrong=1.5)
    with pytest.raises(ValueError, match="robust_replicates must be a non-empty subset"):
        resolve("04_robustness", "reduced", robust_replicates=())
    with pytest.raises(ValueError, match="replicates must be distinct non-negative"):
        resolve("01_diagnostic", "reduced", replicates=(0, 0, 1))
    with pytest.raises(ValueError, match="replicates must be an integer >= 0"):
        resolve("01_diagnostic", "reduced", replicates=(0, -1, 2))
    # bad profiles and keys are the core's errors, naming what is allowed
    with pytest.raises(ProfileError, match="valid profiles"):
        resolve("01_diagnostic", "large")
    with pytest.raises(ProfileError, match="valid keys"):
        resolve("01_diagnostic", "reduced", n_replicates=3)


def test_contrast_is_the_claims_ratios_and_differences():
    from reprobook.papers.tpc_alignment.worlds import contrast

    pre = {"leakage": 0.05, "worst_caption_r1": 0.3}
    clip = {"leakage": 0.08, "worst_caption_r1": 0.40, "ece": 0.10}
    tpc_ = {"leakage": 0.04, "worst_caption_r1": 0.45, "ece": 0.08}
    out = contrast(pre, clip, tpc_)
    assert out["leakage_ratio"] == pytest.approx(0.04 / 0.05)  # the smaller baseline
    assert out["worst_caption_gain"] == pytest.approx(0.05)
    assert out["ece_ratio"] == pytest.approx(0.8)
    # the baseline swaps when CLIP-FT leaks less than the pretrained model
    out = contrast({**pre, "leakage": 0.2}, clip, tpc_)
    assert out["leakage_ratio"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="must hold 'ece'"):
        contrast(pre, {"leakage": 0.1, "worst_caption_r1": 0.1}, tpc_)
    with pytest.raises(ValueError, match="positive"):
        contrast({**pre, "leakage": 0.0}, clip, tpc_)


def test_datasets_follow_the_configured_world_and_own_images_stay_relevant():
    from reprobook.core import resolve_notebook
    from reprobook.papers.tpc_alignment import config
    from reprobook.papers.tpc_alignment.evaluate import test_set
    from reprobook.papers.tpc_alignment.train import datasets

    cfg = resolve_notebook(config.PROFILES, "02_core_residual", "reduced", n_train=40, n_test=30)
    train, test = datasets(cfg, 3)
    assert train.spec["p_wrong"] == 0.25 and test.wrong is not None
    clean_train, clean_test = datasets(cfg, 3, p_wrong=0.0)
    assert "p_wrong" not in clean_train.spec and clean_test.wrong is None
    for data in (test, clean_test):
        rel = test_set(data).relevance.reshape(len(data), data.n_views, len(data))
        assert bool(rel[torch.arange(len(data)), :, torch.arange(len(data))].all())
    # by its text alone, a caption that states a wrong detail does not fit its own image
    wrong = test.wrong.any(-1)  # (N, K)
    n = len(test)
    strict = data_mod.caption_relevance(test).reshape(n, test.n_views, n)
    own = strict[torch.arange(n), :, torch.arange(n)]  # (N, K)
    assert bool(wrong.any()) and not bool(own[wrong].any()) and bool(own[~wrong].all())


def test_every_world_fine_tunes_from_the_claims_worlds_pretrained_model(tmp_path, monkeypatch):
    from reprobook.core import resolve_notebook
    from reprobook.papers.tpc_alignment import config, train, worlds

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    tiny = dict(n_train=64, n_test=40, pretrain_steps=2, finetune_steps=2, batch_size=32)
    cfg = resolve_notebook(config.PROFILES, "06_worlds", "reduced", n_top=8, n_random=8, **tiny)
    seen = []
    real = train.pretrain

    def spy(data, **kw):
        seen.append(data.spec.get("p_wrong", 0.0))
        return real(data, **kw)

    monkeypatch.setattr(train, "pretrain", spy)
    out = {p: worlds.world_scores(cfg, p, seed=5, replicate=0, profile="test") for p in (0.0, 0.25)}
    assert seen == [0.25, 0.25]  # both worlds start from the claims' world's pretraining
    names = sorted(p.stem.rsplit("-", 1)[0] for p in tmp_path.rglob("*.pt"))
    assert names == ["ft-clip_ft", "ft-clip_ft", "ft-tpc", "ft-tpc", "pretrain"]
    for p, row in out.items():
        assert row["p_wrong"] == p and row["replicate"] == 0
        assert math.isfinite(row["leakage_ratio"]) and math.isfinite(row["ece_ratio"])
    assert math.isnan(out[0.0]["auroc_u_hat_vs_wrong"])


def test_models_trained_side_by_side_are_those_trained_one_after_the_other(tmp_path, monkeypatch):
    from reprobook.core import resolve_notebook
    from reprobook.papers.tpc_alignment import config, train

    tiny = dict(n_train=64, n_test=8, pretrain_steps=3, finetune_steps=3, batch_size=32)
    cfg = resolve_notebook(config.PROFILES, "04_robustness", "reduced", **tiny)
    base_train = train.datasets(cfg, 3)[0]  # the claims' world
    world = train.datasets(cfg, 3, p_wrong=0.0)[0]  # the arms fine-tune in another world
    arms = ("clip_ft", ("tpc", True))
    monkeypatch.setenv("REPROBOOK_THREADS", "2")
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "side"))
    kw = dict(arms=arms, replicates=(0, 2), seed=3, profile="reduced")
    assert train.train_side_by_side(cfg, base_train, world, **kw) == 6  # 2 pretrained + 4 arms
    assert train.train_side_by_side(cfg, base_train, world, **kw) == 0  # all cached now

    def models(folder):
        monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / folder))
        out = {}
        for i in (0, 2):
            base, out[(i, "base")] = train.pretrained(
                cfg, base_train, seed=3 + i, profile="reduced"
            )
            out[i] = base
            for arm, adv in (("clip_ft", False), ("tpc", True)):
                m, out[(i, arm, "loaded")] = train.arm_model(
                    cfg, base, world, arm, seed=3 + i, profile="reduced", adversarial=adv
                )
                out[(i, arm)] = m
        return out

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers' (and the notebooks') one thread
    try:
        side, alone = models("side"), models("alone")
    finally:
        torch.set_num_threads(threads)
    for i in (0, 2):
        assert side[(i, "base")] and side[(i, "clip_ft", "loaded")] and side[(i, "tpc", "loaded")]
        assert not alone[(i, "base")] and not alone[(i, "tpc", "loaded")]
        for which in (i, (i, "clip_ft"), (i, "tpc")):
            a, b = side[which].state_dict(), alone[which].state_dict()
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="unknown arm"):
        train.train_side_by_side(cfg, base_train, arms=("clip",), seed=3, profile="reduced")
    plain = resolve_notebook(config.PROFILES, "02_core_residual", "reduced", **tiny)
    with pytest.raises(ValueError, match="adv_steps"):
        train.train_side_by_side(plain, base_train, arms=(("tpc", True),), seed=3, profile="x")


def test_train_worlds_trains_every_model_world_scores_loads_and_nothing_twice(
    tmp_path, monkeypatch
):
    from reprobook.core import resolve_notebook
    from reprobook.papers.tpc_alignment import config, train, worlds

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    monkeypatch.setenv("REPROBOOK_THREADS", "1")  # in this process: the spy below sees it
    tiny = dict(n_train=64, n_test=40, pretrain_steps=2, finetune_steps=2, batch_size=32)
    cfg = resolve_notebook(
        config.PROFILES, "06_worlds", "reduced", n_top=8, n_random=8, replicates=(0,), **tiny
    )
    kw = dict(seed=5, profile="reduced")
    assert worlds.train_worlds(cfg, (0.0, 0.25), **kw) == 5  # 1 pretrained + 2 arms x 2 worlds
    assert worlds.train_worlds(cfg, (0.0, 0.25), **kw) == 0
    with pytest.raises(ValueError, match="worlds"):
        worlds.train_worlds(cfg, (1.5,), **kw)

    def no_training(*args, **kwargs):
        raise AssertionError("world_scores trained a model that train_worlds should have")

    monkeypatch.setattr(train, "fit", no_training)
    for p in (0.0, 0.25):
        row = worlds.world_scores(cfg, p, seed=5, replicate=0, profile="reduced")
        assert row["p_wrong"] == p
    assert len(list(tmp_path.rglob("*.pt"))) == 5


def test_the_smoke_profile_trains_the_full_models_on_a_few_images():
    """Smoke: the full profile's ViT and text Transformer, two replicates (the statistical
    claims take a Student-t interval over replicates, also over the adversarial ones), and
    candidate sets and attacks that fit its test set."""
    from reprobook.core import resolve_notebook
    from reprobook.papers.tpc_alignment import config, train

    for notebook, table in config.PROFILES.items():
        cfg = resolve_notebook(config.PROFILES, notebook, "smoke")
        model = train.setup(cfg).model
        assert model.image_encoder == "vit" and model.text_layers > 0
        assert len(cfg.replicates) >= 2 and cfg.p_wrong == table["full"].p_wrong
        if hasattr(cfg, "n_top"):
            assert cfg.n_top + cfg.n_random < cfg.n_test
    robust = resolve_notebook(config.PROFILES, "04_robustness", "smoke")
    assert len(robust.robust_replicates) >= 2 and robust.n_attack <= robust.n_test


# ============================================================================ speed-ups, exactly


def test_caption_retrieval_reuses_given_ranks_exactly(eval_setup):
    """caption_retrieval with the ranks the caller already has (summary passes per_image's)
    gives exactly what it computes itself, and summary gives exactly the metrics of
    caption_retrieval on the model's c_hat queries."""
    test, model = eval_setup
    e = mo.embed(model, test.data)
    ranks = dg.text_to_image_ranks(e.v, e.c_hat, test.relevance)
    alone = dg.caption_retrieval(e.v, e.c_hat, test.relevance)
    assert dg.caption_retrieval(e.v, e.c_hat, test.relevance, ranks=ranks) == alone
    out, _ = ev.summary(model, test)
    assert {k: out[k] for k in alone} == alone
    with pytest.raises(ValueError, match="ranks"):
        dg.caption_retrieval(e.v, e.c_hat, test.relevance, ranks=ranks[:, :2])


def test_generated_sets_are_kept_and_load_as_generated(tmp_path, monkeypatch):
    """train.generated keeps a set in the checkpoint folder and loads it back field for field
    (tensors bit for bit, captions, spec); without a profile it only generates."""
    from dataclasses import fields

    from reprobook.papers.tpc_alignment import train

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    for p_wrong in (0.0, 0.25):
        fresh = data_mod.generate(24, 3, image_size=16, p_wrong=p_wrong)
        kept = train.generated(24, 3, profile="test", image_size=16, p_wrong=p_wrong)
        loaded = train.generated(24, 3, profile="test", image_size=16, p_wrong=p_wrong)
        for got in (kept, loaded, train.generated(24, 3, image_size=16, p_wrong=p_wrong)):
            for f in fields(fresh):
                a, b = getattr(fresh, f.name), getattr(got, f.name)
                if isinstance(a, torch.Tensor):
                    assert a.dtype == b.dtype and torch.equal(a, b), f.name
                elif isinstance(a, dict) and f.name == "attrs":
                    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
                else:
                    assert a == b, f.name
    assert len(list(tmp_path.rglob("data-*.dataset"))) == 2
    assert not list(tmp_path.rglob("*.pt"))  # no file that looks like a model checkpoint
