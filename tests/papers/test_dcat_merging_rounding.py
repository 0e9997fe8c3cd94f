"""Chapter 14's closed forms under rounding: the Gram solves must not amplify the last bits.

The calibration Gram matrices have fewer rows behind them than inputs at the small calibration
sizes (rank 16 of 64 with 4 clips), so without the ridge the systems are singular and the merge
would be whatever the machine's rounding makes of them. Inputs are moved with
``core.jitter(x, seed, rel=1e-12)``; each test says what it would catch.
"""

import pytest
import torch

from reprobook import core
from reprobook.papers.dcat_merging import merging

SEEDS = range(8)


def _rank_deficient(seed=0, d_out=12, d_in=32, n_m=8, n_t=20):
    """Weights, and Gram matrices of fewer samples than inputs (G_m has rank 8 of 32)."""
    g = torch.Generator().manual_seed(seed)
    W_T, W_S = torch.randn(d_out, d_in, generator=g), torch.randn(d_out, d_in, generator=g)
    X_m, X_t = torch.randn(d_in, n_m, generator=g), torch.randn(d_in, n_t, generator=g)
    X_m, X_t = X_m.double(), X_t.double()
    C = X_t[:, :n_m] @ X_m.T  # paired caption inputs times the modality inputs
    return W_T.double(), W_S.double(), X_m @ X_m.T, X_t @ X_t.T, C


def _j(t, seed):
    return torch.as_tensor(core.jitter(t.numpy(), seed))


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("lam", [0.0, 1.0, 30.0])
def test_dcat_closed_form_moves_at_rounding_level_under_jitter(lam):
    # With the notebooks' ridge (gamma = 1e-3 of the mean diagonal) the condition number is at
    # most (trace + gamma) / gamma, about 1e5 here: a 1e-12 move of the inputs may move the
    # merge by at most about 1e-7 relative. Catches a solve that loses the ridge, or one
    # computed through an explicit inverse of the singular G_m (the merge then moves by O(1)).
    W_T, W_S, G_m, G_t, _ = _rank_deficient()
    gamma = 1e-3 * float(torch.diagonal(G_m + G_t).mean())
    ref = merging.dcat_closed_form(W_T, W_S, G_m, G_t, lam, gamma)
    for s in SEEDS:
        got = merging.dcat_closed_form(
            _j(W_T, s), _j(W_S, s + 10), _j(G_m, s + 20), _j(G_t, s + 30), lam, gamma
        )
        assert _rel(got, ref) <= 1e-7


def test_dcat_b_and_regmean_move_at_rounding_level_under_jitter():
    # The same for DCAT-B (ridge gamma_b mean diag(G_m)) and RegMean (off-diagonals shrunk by
    # 0.9, which keeps the summed Grams positive definite although each is singular).
    W_TA, W_S, G_m, G_t, C = _rank_deficient(seed=1)
    gamma = 0.01 * float(torch.diagonal(G_m).mean())
    ref_b = merging.dcat_b_closed_form(W_TA, W_S, G_m, C, gamma)
    ref_r = merging.regmean_weight([W_TA, W_S], [G_m, G_t], 0.9)
    for s in SEEDS:
        got_b = merging.dcat_b_closed_form(
            _j(W_TA, s), _j(W_S, s + 1), _j(G_m, s + 2), _j(C, s + 3), gamma
        )
        assert _rel(got_b, ref_b) <= 1e-7
        got_r = merging.regmean_weight(
            [_j(W_TA, s), _j(W_S, s + 1)], [_j(G_m, s + 2), _j(G_t, s + 3)], 0.9
        )
        assert _rel(got_r, ref_r) <= 1e-7


def test_singular_systems_without_a_ridge_are_refused():
    # Without a ridge the rank-8 G_m alone (lambda = 0) has no inverse: the answer would be
    # noise that differs between machines, so the closed form refuses it by name.
    W_T, W_S, G_m, G_t, _ = _rank_deficient()
    with pytest.raises(core.checks.InputError, match="singular to working precision.*gamma > 0"):
        merging.dcat_closed_form(W_T, W_S, G_m, G_t, 0.0, 0.0)
    with pytest.raises(core.checks.InputError, match="singular.*scale < 1"):
        merging.regmean_weight([W_T, W_S], [G_m, G_m], 1.0)
    dead = G_t.clone()
    dead[3], dead[:, 3] = 0.0, 0.0  # an input that is zero on every calibration row
    with pytest.raises(core.checks.InputError, match="singular"):
        merging.regmean_weight([W_T, W_S], [dead, dead], 0.9)
    # a full-rank system needs no ridge, and gives the exact minimiser as before
    W_T, W_S, G_m, G_t, _ = _rank_deficient(n_t=40)  # G_m + G_t has full rank
    W = merging.dcat_closed_form(W_T, W_S, G_m, G_t, 1.0, 0.0)
    W = W.requires_grad_(True)
    A = G_m + G_t
    grad = 2 * ((W - W_T) @ G_m + (W - W_S) @ G_t)
    assert float(grad.abs().max()) < 1e-8 * float(A.abs().max() * W_T.abs().max())
