"""Tests of chapter 17's SRP layer and its diagnostics: exact properties of eqs.
spectral-reverse-prompt-mask, -null, -dual, -fallback, -out and -energy."""

import dataclasses

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.papers.spectral_reverse_prompt import config, diagnostics, srp


def _weight(d_out, d_in, seed=0):
    return torch.randn(d_out, d_in, generator=torch.Generator().manual_seed(seed))


def test_mask_is_the_closed_form_and_weak_directions_pass():
    sigma = torch.tensor([4.0, 2.0, 1.0, 0.1])
    tau = torch.tensor(0.5)
    expected = 1 / (1 + np.exp(-10 * (0.5 * 4.0 - sigma.numpy())))
    assert np.allclose(srp.reverse_mask(sigma, tau).numpy(), expected, atol=1e-7)
    m = srp.reverse_mask(sigma, tau)
    assert m[0] < 1e-8 and m[-1] > 1 - 1e-7  # dominant suppressed, weakest kept
    assert torch.all(m[1:] >= m[:-1])  # monotone in sigma


def test_bimodal_mask_keeps_both_ends_and_suppresses_the_middle():
    sigma = torch.tensor([10.0, 5.0, 0.5])
    m = srp.bimodal_mask(sigma, torch.tensor(0.2), torch.tensor(0.8))
    assert m[0] > 0.99 and m[2] > 0.99 and m[1] < 1e-6


@pytest.mark.parametrize(
    "d_in,d_out,m",
    [(64, 32, 16), (49, 32, 16), (48, 32, 16), (160, 128, 16), (128, 128, 16), (20, 40, 4)],
)
def test_switch_holds_exactly_when_d_in_exceeds_k_plus_m(d_in, d_out, m):
    k = min(d_in, d_out)
    assert srp.use_decomposition(d_in, d_out, m) == (d_in > k + m)
    layer = srp.SRPPrompt(_weight(d_out, d_in), torch.randn(40, d_in), rank=8, null_dim=m)
    assert layer.dual == (d_in > k + m)


def test_null_space_basis_is_orthonormal_and_orthogonal_to_v():
    x = torch.randn(300, 60, dtype=torch.float64)
    _, _, vt = torch.linalg.svd(_weight(20, 60).double(), full_matrices=False)
    n = srp.null_space_basis(x, vt.T, 16)
    assert n.shape == (60, 16)
    assert torch.linalg.matrix_norm(vt @ n) < 1e-6
    assert torch.allclose(n.T @ n, torch.eye(16, dtype=torch.float64), atol=1e-10)
    # the top direction of the residual: no unit vector off span(V) has more variance
    resid = x - x @ vt.T @ vt
    resid = resid - resid.mean(0)
    var_n = (resid @ n[:, 0]).var()
    for _ in range(20):
        u = torch.randn(60, dtype=torch.float64)
        u = u - vt.T @ (vt @ u)
        assert (resid @ (u / u.norm())).var() <= var_n + 1e-9


def test_null_space_basis_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="same d_in"):
        srp.null_space_basis(torch.randn(10, 8), torch.randn(7, 2), 2)
    with pytest.raises(ValueError, match="m must be"):
        srp.null_space_basis(torch.randn(10, 8), torch.randn(8, 4), 5)


@pytest.mark.parametrize("variant", ["srp", "srp_nr", "srp_ns"])
def test_fallback_with_mask_one_and_p_identity_returns_h(variant):
    # NR and NS have no mask at all: their fallback is z = h P (the released code's SRP_NR
    # and SRP_NS in node/prompt_ablation.py)
    layer = srp.SRPPrompt(_weight(12, 12), rank=12, null_dim=4, variant=variant)
    assert not layer.dual
    with torch.no_grad():
        layer.P.copy_(torch.eye(12))
        layer.Q.copy_(torch.eye(12))
    if variant == "srp":
        layer.mask = lambda: torch.ones(12)
    h = torch.randn(7, 12)
    assert torch.allclose(layer(h), h, atol=1e-5)
    if variant == "srp":
        layer.mask = lambda: torch.full((12,), 0.5)  # a partial mask does change h
        assert not torch.allclose(layer(h), h, atol=1e-3)


def test_fallback_with_mask_zero_leaves_nothing_along_v():
    layer = srp.SRPPrompt(_weight(12, 12), rank=12, null_dim=4)
    with torch.no_grad():
        layer.P.copy_(torch.eye(12))
        layer.Q.copy_(torch.eye(12))
    layer.mask = lambda: torch.zeros(12)  # every direction dominant
    h = torch.randn(7, 12)
    h_weak = layer(h)
    assert torch.allclose(h_weak @ layer.V, torch.zeros(7, 12), atol=1e-5)


def test_dual_layer_stores_an_orthonormal_null_basis():
    layer = srp.SRPPrompt(_weight(16, 64), torch.randn(200, 64), rank=8, null_dim=16)
    assert layer.dual and layer.N.shape == (64, 16)
    assert float(torch.linalg.matrix_norm(layer.V.T.double() @ layer.N.double())) < 1e-5
    assert torch.allclose(layer.N.T @ layer.N, torch.eye(16), atol=1e-5)


def test_dual_layer_needs_features():
    with pytest.raises(ValueError, match="features must be given"):
        srp.SRPPrompt(_weight(16, 64), None, null_dim=16)


def test_ablations_drop_their_parts():
    w, x = _weight(16, 64), torch.randn(100, 64)
    full = srp.SRPPrompt(w, x, rank=8, null_dim=16)
    assert hasattr(full, "B") and full.A is not None
    assert not hasattr(srp.SRPPrompt(w, x, rank=8, null_dim=16, variant="srp_nm"), "B")
    ns = srp.SRPPrompt(w, x, rank=8, null_dim=16, variant="srp_ns")
    assert ns.A is None and not hasattr(ns, "theta")
    with pytest.raises(ValueError, match="has no threshold"):
        ns.tau()
    nr = srp.SRPPrompt(w, x, rank=8, null_dim=16, variant="srp_nr")
    assert not hasattr(nr, "theta") and torch.all(nr.mask() == 1)
    assert srp.SRPPrompt(w, x, rank=8, null_dim=16, variant="srp_bi").theta.shape == (2,)
    with pytest.raises(ValueError, match="variant must be one of"):
        srp.SRPPrompt(w, x, variant="srp_xx")


def test_cora_shape_has_17154_prompt_parameters():
    w0, w1 = _weight(128, 1433), _weight(128, 128, 1)
    layers = [srp.SRPPrompt(w0, torch.randn(64, 1433)), srp.SRPPrompt(w1)]
    count = sum(p.numel() for m in layers for p in m.parameters())
    # layer 0 (dual): A 128x32 + B 16x32 + Q 32x128 + b 128 + theta; layer 1 (fallback):
    # P 128x32 + Q 32x128 + b 128 + theta
    by_hand = (128 * 32 + 16 * 32 + 32 * 128 + 128 + 1) + (128 * 32 + 32 * 128 + 128 + 1)
    assert count == by_hand == 17_154
    assert srp.srp_parameter_count((1433, 128, 128), 32, 16) == 17_154
    assert [m.dual for m in layers] == [True, False]


def test_degree_gate_starts_at_one_half_of_the_normalised_prompt():
    layer = srp.SRPPrompt(_weight(8, 8), rank=4, null_dim=2, degree_gate=True)
    h = torch.randn(5, 8)
    p = layer(h, torch.tensor([0, 1, 2, 3, 4]))
    layer.degree_gate = False
    q = torch.nn.functional.layer_norm(layer(h), (8,))
    assert torch.allclose(p, 0.5 * q, atol=1e-6)
    layer.degree_gate = True
    with pytest.raises(ValueError, match="deg must be given"):
        layer(h)


def test_energy_shares_sum_to_one_and_ignore_the_output_basis():
    w, x = _weight(10, 30), torch.randn(200, 30)
    e = diagnostics.energy_shares(w, x)
    assert e.shape == (10,) and abs(e.sum() - 1) < 1e-12
    o, _ = torch.linalg.qr(torch.randn(10, 10, dtype=torch.float64))
    e_rot = diagnostics.energy_shares(o @ w.double(), x)
    assert np.allclose(e, e_rot, atol=1e-12)
    # the shares are the output variance along each left singular direction
    u, _, _ = np.linalg.svd(w.double().numpy(), full_matrices=False)
    out = (x.double().numpy() - x.double().numpy().mean(0)) @ w.double().numpy().T
    direct = ((out @ u) ** 2).sum(0)
    assert np.allclose(e, direct / direct.sum(), atol=1e-10)


def test_summaries_of_the_shares():
    assert diagnostics.effective_rank(np.full(8, 1 / 8)) == pytest.approx(8.0)
    assert diagnostics.effective_rank(np.array([1.0, 0, 0])) == pytest.approx(1.0)
    assert diagnostics.top_share(np.array([0.5, 0.3, 0.2]), 0.1) == pytest.approx(0.5)
    assert diagnostics.stable_rank(torch.eye(4)) == pytest.approx(4.0)
    assert diagnostics.stable_rank(torch.diag(torch.tensor([2.0, 1.0]))) == pytest.approx(1.25)
    with pytest.raises(ValueError, match="x must have shape"):
        diagnostics.energy_shares(torch.eye(3), torch.randn(5, 4))


def test_profiles_resolve():
    for nb in config.PROFILES:
        reduced = core.resolve_notebook(config.PROFILES, nb, "reduced")
        full = core.resolve_notebook(config.PROFILES, nb, "full")
        assert full.spec.dim == 1433 and full.encoder.hidden == 128
        assert reduced.n_seeds >= 3 and full.n_seeds >= reduced.n_seeds
    assert list(config.PROFILES) == [
        "01_spectral_bias",
        "02_srp_vs_baselines",
        "03_ablations_shift",
    ]
    bias = core.resolve_notebook(config.PROFILES, "01_spectral_bias", "reduced", n_seeds=4)
    assert bias.n_seeds == 4
    # a notebook's downstream parameters reach the nested settings; None keeps the profile's
    cfg = core.resolve_notebook(
        config.PROFILES,
        "02_srp_vs_baselines",
        "reduced",
        downstream__shots=7,
        downstream__epochs=None,
    )
    assert cfg.downstream.shots == 7
    assert cfg.downstream.epochs == config.Downstream().epochs
    assert cfg == dataclasses.replace(config.CompareConfig(), downstream=config.Downstream(shots=7))
    untouched = core.resolve_notebook(
        config.PROFILES, "03_ablations_shift", "reduced", downstream__shots=None
    )
    assert untouched == config.AblationConfig()


def test_smoke_profile_fits_the_full_protocol_into_small_sizes():
    """Smoke keeps every graph, method and variant of the full profile and scores at every
    step; its sizes still fit the CSBM blocks, the probes and the SRP bottleneck."""
    for nb in config.PROFILES:
        smoke = core.resolve_notebook(config.PROFILES, nb, "smoke")
        full = config.PROFILES[nb]["full"]
        spec = smoke.spec
        assert spec.nuisance_dim + spec.n_classes < spec.dim and spec.n_classes == 7
        assert smoke.n_seeds == 2 and smoke.encoder.hidden == 32
        if hasattr(smoke, "downstream"):
            down = smoke.downstream
            assert down.eval_every == full.downstream.eval_every == 1
            assert max(down.rank, down.null_dim) <= smoke.encoder.hidden
    bias = core.resolve_notebook(config.PROFILES, "01_spectral_bias", "smoke")
    assert bias.probe_dirs + bias.null_dim <= bias.encoder.hidden
    compare = core.resolve_notebook(config.PROFILES, "02_srp_vs_baselines", "smoke")
    assert compare.methods == config.PROFILES["02_srp_vs_baselines"]["full"].methods
