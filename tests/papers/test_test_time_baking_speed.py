"""Chapter 11's speed-ups give the same numbers, bit for bit, as the plain paths they replace."""

import copy

import torch

from reprobook import core
from reprobook.papers.test_time_baking import config, experiments, tokens

CFG = config.Train(
    size=8, patch=4, dim=8, depth=2, heads=2, mlp_hidden=16, fw_hidden=16,
    batch=8, steps=3, warmup=1, n_train=16, n_test=8,
)  # fmt: skip


def test_tokens_from_shared_rays_equal_tokens_that_compute_their_own():
    images, c2w = experiments.scenes.scene_batch([3, 4], 2, 1, 8)
    rays = tokens.plucker_maps(c2w, 8)
    for colour in (True, False):
        a = tokens.view_tokens(images, c2w, 4, with_colour=colour)
        b = tokens.view_tokens(images, c2w, 4, with_colour=colour, rays=rays)
        assert torch.equal(a, b)


def test_fit_without_the_nan_fill_equals_core_fit_with_it():
    """experiments._fit skips the deterministic mode's NaN fill of new tensors; the weights
    and the curve equal those of core.fit with the fill on."""
    from torch.utils.data import TensorDataset

    torch.manual_seed(0)
    a = experiments.TTBGTInputModule(CFG)
    b = copy.deepcopy(a)
    experiments._fit(a, 0)
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        pool = TensorDataset(*experiments.train_pool(CFG, 0))
        curve = core.fit(b, pool, steps=CFG.steps, batch=CFG.batch, seed=0, drop_last=True)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill
    b.curve[:] = torch.from_numpy(curve)
    for k, w in a.state_dict().items():
        assert torch.equal(w, b.state_dict()[k]), k


def test_the_labels_live_in_the_model_and_experiments_shows_the_same():
    from reprobook.papers.test_time_baking import model

    assert experiments.LABELS is model.LABELS
    assert set(model.LABELS) == set(model.VARIANTS)
