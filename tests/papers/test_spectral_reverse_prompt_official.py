"""Chapter 17 against the released code of the paper (github.com/keris-yang/Spectral-Reversal).

Each test pins one behaviour of the official implementation that our re-implementation must
share, on a hand-built case whose answer is computed here independently:

- ``node/prompt_ablation.py``, ``SRP_Bi.get_prompt``: the U-shaped mask is the sum of the two
  one-sided gates capped at 1;
- ``node/prompt_ablation.py``, ``SRP_NS``: no threshold parameter; a fallback layer is the plain
  projection z = h P (no mask), a dual layer the null channel only;
- ``graph/model.py``, ``GINConv``: MLP((1 + eps) h_i + sum_j ReLU(h_j)) with the MLP
  Linear -> BatchNorm1d -> ReLU -> Linear and a learnable eps starting at 0; the prompt's W is
  ``mlp[0].weight`` (``graph/downstream_task.py``, ``GraphTask.initialize_prompt``).
"""

import numpy as np
import pytest
import torch
from torch import nn

from reprobook.papers.spectral_reverse_prompt import models, srp


def _sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))


def test_bimodal_mask_is_min_of_one_and_the_two_gates_when_thresholds_cross():
    # the learned low threshold (0.8) has passed the high one (0.2): both gates are open in
    # the middle, their sum is about 2 there, and the official mask is capped at 1
    sigma = np.array([10.0, 6.0, 5.0, 4.0, 1.9, 0.5])
    g_low = _sigmoid(10 * (0.8 * 10.0 - sigma))
    g_high = _sigmoid(10 * (sigma - 0.2 * 10.0))
    expected = np.minimum(1.0, g_low + g_high)
    assert (g_low + g_high).max() > 1.99  # the uncapped sum would be far above 1
    got = srp.bimodal_mask(
        torch.tensor(sigma, dtype=torch.float64),
        torch.tensor(0.8, dtype=torch.float64),
        torch.tensor(0.2, dtype=torch.float64),
    )
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-15)
    # where the gates do not overlap the cap does nothing: the ordinary U shape
    lo, hi = torch.tensor(0.2), torch.tensor(0.8)
    s = torch.tensor([10.0, 5.0, 0.5])
    plain = _sigmoid(10 * (2.0 - s.numpy())) + _sigmoid(10 * (s.numpy() - 8.0))
    np.testing.assert_allclose(srp.bimodal_mask(s, lo, hi).numpy(), plain, atol=1e-7)


def test_bi_fallback_with_crossed_thresholds_passes_h_unchanged():
    # W = diag(3, 2, 1, 0.5); tau_low = 0.95 > tau_high = 0.05, so every direction has
    # g_low + g_high >= 1 and the capped mask is exactly 1: h_weak = h. With P = Q = I the
    # prompt is h itself (the uncapped sum, about 2 in the middle, would give about 2 h there).
    sig = torch.tensor([3.0, 2.0, 1.0, 0.5])
    layer = srp.SRPPrompt(torch.diag(sig), rank=4, null_dim=2, variant="srp_bi")
    assert not layer.dual
    with torch.no_grad():
        layer.theta.copy_(torch.logit(torch.tensor([0.95, 0.05])))
        layer.P.copy_(torch.eye(4))
        layer.Q.copy_(torch.eye(4))
    g = _sigmoid(10 * (0.95 * 3 - sig.numpy())) + _sigmoid(10 * (sig.numpy() - 0.05 * 3))
    assert g.min() >= 1.0
    assert torch.equal(layer.mask(), torch.ones(4))
    h = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(layer(h), h, atol=1e-6)


def test_ns_fallback_layer_is_a_plain_projection_with_no_threshold():
    w = torch.randn(12, 12, generator=torch.Generator().manual_seed(1))
    layer = srp.SRPPrompt(w, rank=4, null_dim=4, variant="srp_ns")
    assert not layer.dual and not hasattr(layer, "theta")
    names = sorted(n for n, _ in layer.named_parameters())
    assert names == ["P", "Q", "b"]
    count = sum(p.numel() for p in layer.parameters())
    assert count == 12 * 4 + 4 * 12 + 12  # P, Q, b: no threshold
    assert count == srp.srp_parameter_count((12, 12), 4, 4, variant="srp_ns")
    with torch.no_grad():
        layer.b.normal_()
        h = torch.randn(5, 12, generator=torch.Generator().manual_seed(2))
        assert torch.allclose(layer(h), h @ layer.P @ layer.Q + layer.b, atol=1e-6)


def test_ns_dual_layer_is_the_null_channel_only_with_no_threshold():
    w = torch.randn(8, 40, generator=torch.Generator().manual_seed(3))
    x = torch.randn(100, 40, generator=torch.Generator().manual_seed(4))
    layer = srp.SRPPrompt(w, x, rank=4, null_dim=4, variant="srp_ns")
    assert layer.dual and sorted(n for n, _ in layer.named_parameters()) == ["B", "Q", "b"]
    assert srp.srp_parameter_count((40, 8), 4, 4, variant="srp_ns") == 4 * 4 + 4 * 8 + 8
    with torch.no_grad():
        h = torch.randn(5, 40)
        assert torch.allclose(layer(h), (h @ layer.N) @ layer.B @ layer.Q + layer.b, atol=1e-6)


@pytest.mark.parametrize(
    "variant,thetas", [("srp", 1), ("srp_nm", 1), ("srp_bi", 2), ("srp_nr", 0), ("srp_ns", 0)]
)
def test_threshold_parameters_per_layer_follow_the_code(variant, thetas):
    # SRP and SRP_NM: one `threshold`; SRP_Bi: `tau_low` and `tau_high`; SRP_NR, SRP_NS: none
    layer = srp.SRPPrompt(torch.randn(12, 12), rank=4, null_dim=4, variant=variant)
    n = layer.theta.numel() if hasattr(layer, "theta") else 0
    assert n == thetas
    assert sum(p.numel() for p in layer.parameters()) == srp.srp_parameter_count(
        (12, 12), 4, 4, variant=variant
    )


def test_gin_block_has_the_code_s_mlp_and_eps():
    enc = models.GINEncoder(3, 4, layers=2)
    for conv in enc.convs:
        assert [type(m) for m in conv.mlp] == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear]
        assert conv.eps.requires_grad and conv.eps.shape == (1,) and float(conv.eps.detach()) == 0.0
    assert enc.weights()[0] is enc.convs[0].mlp[0].weight
    assert [tuple(w.shape) for w in enc.weights()] == [(4, 3), (4, 4)]
    assert len(enc.norms) == 2  # the outer BatchNorm after each convolution


def test_gin_block_sums_relu_messages_and_the_scaled_self_term():
    # the path 0 - 1 - 2 with negative features, so the ReLU on messages matters
    torch.manual_seed(0)
    conv = models.GINBlock(3, 4).eval()
    with torch.no_grad():
        conv.eps.fill_(0.25)
        conv.mlp[1].running_mean.normal_()
        conv.mlp[1].running_var.uniform_(0.5, 2.0)
    x = torch.tensor([[1.0, -2.0, 0.5], [-1.0, 3.0, -0.5], [2.0, -1.0, -3.0]])
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    r = torch.relu
    agg = torch.stack(
        [1.25 * x[0] + r(x[1]), 1.25 * x[1] + r(x[0]) + r(x[2]), 1.25 * x[2] + r(x[1])]
    )
    lin0, bn, lin1 = conv.mlp[0], conv.mlp[1], conv.mlp[3]
    z = (agg @ lin0.weight.T + lin0.bias - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps)
    by_hand = r(z * bn.weight + bn.bias) @ lin1.weight.T + lin1.bias
    with torch.no_grad():
        assert torch.allclose(conv(x, ei), by_hand, atol=1e-5)
        # PyG's plain GINConv (no ReLU on messages) would give a different sum here
        plain = torch.stack([1.25 * x[0] + x[1], 1.25 * x[1] + x[0] + x[2], 1.25 * x[2] + x[1]])
        assert not torch.allclose(agg, plain)
