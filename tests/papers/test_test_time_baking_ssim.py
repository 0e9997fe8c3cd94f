"""SSIM of chapter 11 in the convention of its evaluation lineage.

LVSM's evaluation code (github.com/haian-jin/LVSM, ``utils/metric_utils.py``, ``compute_ssim``;
Efficient-LVSM's code makes the same call) scores a view with scikit-image's
``structural_similarity(gt, pred, win_size=11, gaussian_weights=True, channel_axis=0,
data_range=1.0)``: an 11 x 11 Gaussian window of sigma 1.5, the SSIM map averaged over the
full ("valid") windows only, as in Wang et al.'s reference ``ssim_index.m`` (IEEE TIP 13(4),
2004), with scikit-image's default sample covariance (a factor 121 / 120). The earlier code
averaged torchmetrics' reflect-padded map over every pixel, which at 16 x 16 differs by up to
0.17 on the mean-colour floor: these tests fail on it.
"""

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from reprobook import core
from reprobook.papers.test_time_baking import experiments


def _pair(size=16):
    """A hand-built target (a two-tone checker on a horizontal ramp, one tint per channel) and
    the mean-colour prediction of chapter 11's floor, both (1, 3, size, size) in [0, 1]."""
    i, j = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    checker = ((i // 4 + j // 4) % 2).astype(float)
    ramp = j / (size - 1)
    target = np.stack([0.2 + 0.5 * checker, 0.1 + 0.8 * ramp, 0.3 * checker + 0.4 * ramp])
    pred = np.broadcast_to(target.mean(axis=(1, 2), keepdims=True), target.shape)
    return torch.tensor(pred[None]), torch.tensor(target[None])


def _lvsm(pred, target, **extra):
    """LVSM's call of scikit-image on each (C, H, W) view."""
    return np.array([
        structural_similarity(t.numpy(), p.numpy(), win_size=11, gaussian_weights=True,
                              channel_axis=0, data_range=1.0, **extra)
        for p, t in zip(pred, target)
    ])  # fmt: skip


def _brute_force(x, y, data_range=1.0, sample=False):
    """Wang et al.'s definition by a loop over the full 11 x 11 windows: the window is
    MATLAB's ``fspecial('gaussian', 11, 1.5)``, weighted means, variances and covariance, and
    the mean of the index over the windows, then over the channels."""
    u = np.arange(11) - 5
    w = np.exp(-(u[:, None] ** 2 + u[None, :] ** 2) / (2 * 1.5**2))
    w /= w.sum()
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    norm = 121 / 120 if sample else 1.0
    per_channel = []
    for a, b in zip(x, y):
        vals = []
        for r in range(a.shape[0] - 10):
            for c in range(a.shape[1] - 10):
                pa, pb = a[r : r + 11, c : c + 11], b[r : r + 11, c : c + 11]
                ma, mb = (w * pa).sum(), (w * pb).sum()
                va = norm * (w * (pa - ma) ** 2).sum()
                vb = norm * (w * (pb - mb) ** 2).sum()
                cov = norm * (w * (pa - ma) * (pb - mb)).sum()
                num = (2 * ma * mb + c1) * (2 * cov + c2)
                vals.append(num / ((ma**2 + mb**2 + c1) * (va + vb + c2)))
        per_channel.append(np.mean(vals))
    return float(np.mean(per_channel))


def test_scores_ssim_of_the_floor_equals_lvsms_evaluation_call():
    """On the mean-colour floor at the reduced profile's 16 x 16, the per-scene SSIM of
    ``scores`` equals LVSM's ``compute_ssim`` (scikit-image) to float precision."""
    pred, target = _pair(16)
    got = experiments.scores(pred[:, None], target[:, None])["ssim"]
    np.testing.assert_allclose(got, _lvsm(pred, target), rtol=0, atol=1e-12)


def test_ssim_equals_lvsm_and_wang_on_random_pairs():
    """Both covariance settings, non-square images, several images at once: equal to
    scikit-image (``use_sample_covariance`` default and ``False``, Wang et al.'s setting)."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(3, 3, 16, 21, generator=g, dtype=torch.float64)
    b = (a + 0.2 * torch.randn(a.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    np.testing.assert_allclose(experiments.ssim(b, a).numpy(), _lvsm(b, a), atol=1e-12)
    wang = _lvsm(b, a, sigma=1.5, use_sample_covariance=False)
    got = experiments.ssim(b, a, sample_covariance=False).numpy()
    np.testing.assert_allclose(got, wang, atol=1e-12)


@pytest.mark.parametrize("sample", [False, True])
def test_ssim_equals_a_brute_force_loop_over_full_windows(sample):
    pred, target = _pair(16)
    got = experiments.ssim(pred, target, sample_covariance=sample).item()
    want = _brute_force(pred[0].numpy(), target[0].numpy(), sample=sample)
    assert got == pytest.approx(want, abs=1e-12)


def test_ssim_of_flat_images_is_the_luminance_term_and_of_equal_images_one():
    """Constant images a, b have zero variances: SSIM = (2ab + C1) / (a^2 + b^2 + C1)."""
    a, b = 0.3, 0.7
    x, y = torch.full((1, 1, 12, 13), a), torch.full((1, 1, 12, 13), b)
    c1 = 0.01**2
    want = (2 * a * b + c1) / (a * a + b * b + c1)
    assert experiments.ssim(x, y).item() == pytest.approx(want, abs=1e-7)
    _, target = _pair(16)
    assert experiments.ssim(target, target).item() == pytest.approx(1.0, abs=1e-12)


def test_ssim_refuses_bad_inputs():
    x = torch.rand(1, 3, 16, 16)
    with pytest.raises(core.InputError, match="at least 11 x 11"):
        experiments.ssim(torch.rand(1, 3, 10, 16), torch.rand(1, 3, 10, 16))
    with pytest.raises(core.InputError, match="same shape"):
        experiments.ssim(x, x[..., :15])
    with pytest.raises(core.InputError, match=r"\(n, C, H, W\)"):
        experiments.ssim(x[0], x[0])
    with pytest.raises(core.InputError, match="data_range"):
        experiments.ssim(x, x, data_range=0)


def test_shape_checks_compare_shapes_not_numbers_of_axes():
    """``checks.same_shape`` takes the arrays themselves: given ``.shape`` it compared the
    shapes' lengths, so images of one rank but different sizes, or seed lists of different
    lengths, slipped through to an unrelated error."""
    x = torch.rand(1, 1, 3, 16, 16)
    with pytest.raises(core.InputError, match="same shape"):
        experiments.scores(x, x[..., :15])
    with pytest.raises(core.InputError, match="same shape"):
        experiments.kept_share([[20.0]] * 3, [[21.0]] * 2, [18.0])
