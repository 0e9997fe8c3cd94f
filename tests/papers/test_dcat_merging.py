"""Tests of chapter 14's merges, the DCAT closed forms and the InfoNCE bound."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers import dcat_merging as dcat
from reprobook.papers.dcat_merging import alignment, config, merging, paper_scale


def _problem(seed=0, d_out=5, d_in=4, n_m=7, n_t=9):
    g = torch.Generator().manual_seed(seed)
    W_T, W_S = torch.randn(d_out, d_in, generator=g), torch.randn(d_out, d_in, generator=g)
    X_m, X_t = torch.randn(d_in, n_m, generator=g), torch.randn(d_in, n_t, generator=g)
    return W_T.double(), W_S.double(), X_m.double(), X_t.double()


def _objective(W, W_T, W_S, X_m, X_t, lam, gamma):
    return (
        ((W - W_T) @ X_m).pow(2).sum()
        + lam * ((W - W_S) @ X_t).pow(2).sum()
        + gamma * (W - W_T).pow(2).sum()
    )


def test_closed_form_equals_gradient_descent_on_the_objective():
    W_T, W_S, X_m, X_t = _problem()
    lam, gamma = 0.7, 0.3
    closed = merging.dcat_closed_form(W_T, W_S, X_m @ X_m.T, X_t @ X_t.T, lam, gamma)
    W = W_T.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([W], lr=1, max_iter=500, tolerance_grad=1e-14, tolerance_change=0)

    def step():
        opt.zero_grad()
        loss = _objective(W, W_T, W_S, X_m, X_t, lam, gamma)
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(step)
    assert torch.allclose(closed, W.detach(), atol=1e-5)
    # and it is a stationary point: the gradient of the objective vanishes there
    Wc = closed.clone().requires_grad_(True)
    _objective(Wc, W_T, W_S, X_m, X_t, lam, gamma).backward()
    assert Wc.grad.abs().max() < 1e-9


def test_variant_b_equals_gradient_descent_on_its_objective():
    W_TA, W_S, X_m, X_t = _problem(seed=1, n_m=6, n_t=6)
    gamma = 0.5
    closed = merging.dcat_b_closed_form(W_TA, W_S, X_m @ X_m.T, X_t @ X_m.T, gamma)
    W = W_TA.clone().requires_grad_(True)
    loss = (W @ X_m - W_S @ X_t).pow(2).sum() + gamma * (W - W_TA).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, W)
    Wc = closed.clone().requires_grad_(True)
    loss_c = (Wc @ X_m - W_S @ X_t).pow(2).sum() + gamma * (Wc - W_TA).pow(2).sum()
    (grad_c,) = torch.autograd.grad(loss_c, Wc)
    assert grad.abs().max() > 1e-3  # the starting point is not the optimum
    assert grad_c.abs().max() < 1e-9


def test_lambda_zero_gives_the_recipient():
    W_T, W_S, X_m, X_t = _problem()
    W = merging.dcat_closed_form(W_T, W_S, X_m @ X_m.T, X_t @ X_t.T, 0.0, 0.1)
    assert torch.allclose(W, W_T, atol=1e-12)


def test_without_modality_inputs_it_follows_the_donor_on_the_span_of_text_inputs():
    W_T, W_S, _, X_t = _problem(d_in=6, n_t=3)  # X_t spans 3 of 6 input directions
    G_m = torch.zeros(6, 6, dtype=torch.float64)
    W = merging.dcat_closed_form(W_T, W_S, G_m, X_t @ X_t.T, 1.0, 1e-10)
    assert torch.allclose(W @ X_t, W_S @ X_t, atol=1e-6)
    assert not torch.allclose(W, W_S, atol=1e-3)  # off the span, it keeps W_T's part
    P = X_t @ torch.linalg.pinv(X_t)  # projector on span(X_t)
    eye = torch.eye(6, dtype=torch.float64)
    assert torch.allclose(W @ (eye - P), W_T @ (eye - P), atol=1e-5)


def test_closed_forms_are_invariant_to_scaling_and_permuting_calibration_inputs():
    W_T, W_S, X_m, X_t = _problem(n_m=8, n_t=8)
    c, lam, gamma = 3.7, 0.4, 0.2
    base = merging.dcat_closed_form(W_T, W_S, X_m @ X_m.T, X_t @ X_t.T, lam, gamma)
    scaled = merging.dcat_closed_form(
        W_T, W_S, (c * X_m) @ (c * X_m).T, (c * X_t) @ (c * X_t).T, lam, c**2 * gamma
    )
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(3))
    Xm_p, Xt_p = X_m[:, perm], X_t[:, perm]
    permuted = merging.dcat_closed_form(W_T, W_S, Xm_p @ Xm_p.T, Xt_p @ Xt_p.T, lam, gamma)
    assert torch.allclose(base, scaled, atol=1e-10)
    assert torch.allclose(base, permuted, atol=1e-10)
    G1, G2 = X_m @ X_m.T, X_t @ X_t.T
    rm = merging.regmean_weight([W_T, W_S], [G1, G2], 0.9)
    rm_scaled = merging.regmean_weight([W_T, W_S], [c**2 * G1, c**2 * G2], 0.9)
    rm_perm = merging.regmean_weight([W_T, W_S], [Xm_p @ Xm_p.T, Xt_p @ Xt_p.T], 0.9)
    assert torch.allclose(rm, rm_scaled, atol=1e-10)
    assert torch.allclose(rm, rm_perm, atol=1e-10)


def test_regmean_is_the_least_squares_merge():
    W_1, W_2, X_1, X_2 = _problem(seed=4, n_m=10, n_t=10)
    W = merging.regmean_weight([W_1, W_2], [X_1 @ X_1.T, X_2 @ X_2.T], 1.0)
    W = W.requires_grad_(True)
    loss = ((W - W_1) @ X_1).pow(2).sum() + ((W - W_2) @ X_2).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, W)
    assert grad.abs().max() < 1e-9


def _states(seed=0):
    """Tiny 'MLLM' state dicts: an encoder buffer, a projector and two LLM parameters."""
    g = torch.Generator().manual_seed(seed)

    def one():
        return {
            "rotation": torch.randn(3, 3, generator=g),
            "projector.weight": torch.randn(6, 3, generator=g),
            "llm.blocks.0.fc1.weight": torch.randn(4, 3, generator=g),
            "llm.ln_f.weight": torch.randn(3, generator=g),
        }

    return one(), one(), one()  # base, recipient, donor


def test_two_identical_models_merge_to_themselves_and_alpha_zero_is_the_recipient():
    base, rec, don = _states()
    G = {"llm.blocks.0.fc1.weight": torch.eye(3) + 0.1}
    same = merging.regmean(rec, rec, G, {k: 2 * v for k, v in G.items()}, 0.9)
    for k in rec:
        assert torch.allclose(same[k], rec[k], atol=1e-6)
    tau = merging.task_vector(don, base)
    ta0 = merging.task_arithmetic(rec, tau, 0.0)
    assert all(torch.equal(ta0[k], rec[k]) for k in rec)
    ta1 = merging.task_arithmetic(rec, tau, 1.0)
    assert torch.allclose(ta1["llm.ln_f.weight"], rec["llm.ln_f.weight"] + tau["llm.ln_f.weight"])


def test_ties_with_one_vector_and_no_trimming_is_task_arithmetic():
    base, rec, don = _states(1)
    tau = merging.task_vector(don, base)
    ties = merging.ties(rec, base, [tau], density=1.0, scale=0.6)
    ta = merging.task_arithmetic(base, tau, 0.6)
    for k in tau:
        assert torch.allclose(ties[k], ta[k], atol=1e-6)


def test_ties_trims_and_elects_signs():
    base = {"llm.w": torch.zeros(4)}
    rec = {"llm.w": torch.zeros(4), "projector.weight": torch.ones(2)}
    t1 = {"llm.w": torch.tensor([1.0, -2.0, 0.1, 3.0])}
    t2 = {"llm.w": torch.tensor([3.0, 1.5, -0.1, -1.0])}
    out = merging.ties(rec, base, [t1, t2], density=0.5, scale=1.0)
    # t1 keeps (-2, 3), t2 keeps (3, 1.5): signs elected (+, -, 0, +); disjoint means
    assert torch.allclose(out["llm.w"], torch.tensor([3.0, -2.0, 0.0, 3.0]))


def test_dare_is_unbiased_and_reproducible():
    tau = {"llm.w": torch.ones(20000)}
    a, b = merging.dare(tau, 0.5, 7), merging.dare(tau, 0.5, 7)
    assert torch.equal(a["llm.w"], b["llm.w"])
    assert set(a["llm.w"].unique().tolist()) == {0.0, 2.0}
    assert abs(float(a["llm.w"].mean()) - 1.0) < 0.03
    with pytest.raises(ValueError, match="drop must be"):
        merging.dare(tau, 1.0, 0)


def test_merges_leave_encoder_and_projector_bit_identical():
    base, rec, don = _states(2)
    tau = merging.task_vector(don, base)
    G = {"llm.blocks.0.fc1.weight": torch.eye(3, dtype=torch.float64)}
    merged = [
        merging.task_arithmetic(rec, tau, 0.8),
        merging.average(rec, don),
        merging.ties(rec, base, [merging.task_vector(rec, base), tau], 0.5, 1.0),
        merging.regmean(rec, don, G, G, 0.9),
        merging.dcat(rec, don, tau, G, G, 1.0, 1e-3, 0.5),
        merging.dcat_b(rec, don, G, G, 1.0),
    ]
    for out in merged:
        for k in ("rotation", "projector.weight"):
            assert torch.equal(out[k], rec[k])
        assert not torch.equal(out["llm.blocks.0.fc1.weight"], rec["llm.blocks.0.fc1.weight"])


def test_merges_refuse_mismatched_states():
    _, rec, _ = _states()
    with pytest.raises(ValueError, match="llm"):
        merging.llm_keys({"projector.weight": torch.ones(2)})
    bad = {"llm.ln_f.weight": torch.ones(5)}
    with pytest.raises(ValueError, match="does not match"):
        merging.task_arithmetic(rec, bad, 1.0)
    with pytest.raises(ValueError, match="lam must be"):
        merging.dcat_closed_form(torch.eye(2), torch.eye(2), torch.eye(2), torch.eye(2), -1, 0)


def test_infonce_bound_is_at_most_log_n_and_reaches_it_for_separated_pairs():
    rng = np.random.default_rng(0)
    for _ in range(20):
        m, t = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))
        assert alignment.info_nce_bound(m, t, 0.3) <= math.log(8) + 1e-12
    basis = np.eye(6)  # perfectly aligned, orthogonal pairs
    gaps = [math.log(6) - alignment.info_nce_bound(basis, basis, tau) for tau in (1, 0.1, 0.01)]
    assert gaps[0] > gaps[1] > gaps[2] >= 0
    assert gaps[2] < 1e-6
    assert alignment.info_nce_bound(basis, basis[::-1], 0.01) < 0  # mismatched pairs
    a = alignment.alignment(basis, basis)
    assert a["positive"] == pytest.approx(1.0) and a["negative"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="tau must be"):
        alignment.info_nce_bound(basis, basis, 0.0)


def test_gram_and_layer_inputs_by_hooks():
    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.llm = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))

    toy = Toy()
    x = torch.randn(4, 5, 3)
    X = merging.layer_inputs(toy, lambda: toy.llm(x))
    assert set(X) == {"llm.0.weight", "llm.1.weight"}
    assert torch.allclose(X["llm.0.weight"], x.double())
    G = merging.gram(X["llm.0.weight"], [1, 2])
    Z = x[:, [1, 2]].reshape(-1, 3).double()
    assert torch.allclose(G, Z.T @ Z)
    assert not toy.llm[0]._forward_hooks  # hooks removed


def test_lora_delta_and_the_paper_scale_message(tmp_path):
    A, B = torch.randn(2, 5), torch.randn(3, 2)
    assert torch.allclose(paper_scale.lora_delta(A, B, 4.0), 2.0 * B @ A)
    with pytest.raises(ValueError, match="A must be"):
        paper_scale.lora_delta(A, torch.randn(3, 4), 1.0)
    with pytest.raises(core.MissingInputs, match="vicuna-7b-v1.5"):
        paper_scale.require(tmp_path)
    assert not any("benchmarks" in m for m in paper_scale.missing(tmp_path))  # none promised
    assert "benchmarks" in paper_scale.NOT_RUN


def test_dcat_isotropic_is_the_closed_form_with_identity_grams():
    W_T, W_S, _, _ = _problem(seed=4)
    eye = torch.eye(W_T.shape[1], dtype=torch.float64)
    for lam, gamma in ((0.0, 0.1), (0.5, 0.0), (2.0, 0.3)):
        expected = merging.dcat_closed_form(W_T, W_S, eye, eye, lam, gamma)
        assert torch.allclose(merging.dcat_isotropic(W_T, W_S, lam, gamma), expected, atol=1e-12)
    assert torch.equal(merging.dcat_isotropic(W_T, W_S, 0.0, 0.1), W_T)
    with pytest.raises(ValueError, match="same shape"):
        merging.dcat_isotropic(W_T, W_S[:, :2], 1.0, 0.1)


def test_profiles_resolve():
    assert list(config.PROFILES) == [
        "01_two_modalities_one_llm",
        "02_asymmetric_merging",
        "03_dcat_closed_form",
    ]
    for name in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, name, "reduced")
        full = core.resolve_notebook(config.PROFILES, name, "full")
        assert full.llm.d > reduced.llm.d
    nb3 = {
        p: core.resolve_notebook(config.PROFILES, "03_dcat_closed_form", p)
        for p in ("reduced", "full", "smoke")
    }
    assert nb3["full"].modelcompose and nb3["smoke"].modelcompose
    assert not nb3["reduced"].modelcompose  # the stand-in: the toy alone
    eight = core.resolve_notebook(config.PROFILES, "03_dcat_closed_form", "reduced", n_cal=8)
    assert eight.n_cal == 8
    with pytest.raises(ValueError, match="valid keys"):
        core.resolve_notebook(config.PROFILES, "02_asymmetric_merging", "reduced", nope=1)


def test_the_package_reaches_every_module_and_start_resolves_its_notebooks(tmp_path, monkeypatch):
    assert dcat.experiments.trained and dcat.merging.dcat and dcat.paper_scale.study
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        dcat.nope  # noqa: B018
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    run, cfg = core.start(dcat, "02_asymmetric_merging", "reduced", 0, threads=1, n_cal=8)
    assert cfg == dataclasses.replace(config.PROFILES["02_asymmetric_merging"]["reduced"], n_cal=8)
    assert run.notebook == "02_asymmetric_merging"
