"""Chapter 08 (TailCon): the episodic memory holds one slot per training item, the
leave-one-out memory posterior leaves out every copy of an item, and the full profile refuses
to run without CIFAR-LT instead of putting other data in its place.

Source of the memory's rule: a memory of training items keeps one row per item and writes the
item's new feature into that row (Wu et al., CVPR 2018, official code
``zhirongw/lemniscate.pytorch``, ``lib/LinearAverage.py``, ``LinearAverageOp.backward``:
``memory.index_copy_(0, y, ...)`` with ``y`` the items' indices); its kNN vote weighs each
neighbour by ``exp(sim / sigma)`` (same repository, ``test.py``, ``kNN``). TailCon's memory
stores rare or uncertain *representations* of items, optionally by index (the chapter's
eq. `tailcon-insert`); the leave-one-out posterior of eq. `tailcon-focus` is meant to bring
evidence from an item's neighbours, not from the item itself.
"""

import sys
import types

import numpy as np
import pytest
import torch
from torch import nn

from reprobook.papers.tailcon import config, data, experiments, memory, models


def test_a_memory_fed_the_same_item_twice_holds_one_slot_for_it():
    mem = memory.EpisodicMemory(2, 4, 2)
    mem.add(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]), torch.tensor([7, 8]))
    mem.add(torch.tensor([[5.0, 5.0]]), torch.tensor([0]), torch.tensor([7]))  # item 7 again
    H, y, idx = mem.read()
    assert len(mem) == 2 and mem.counts().tolist() == [2, 0]
    assert idx.tolist() == [8, 7]  # item 7 updated in place and now the newest
    assert torch.equal(H[1], torch.tensor([5.0, 5.0]))  # its newest feature


def test_repeated_items_never_crowd_out_distinct_ones():
    mem = memory.EpisodicMemory(2, 3, 1)
    for i in (1, 1, 1, 2, 2, 1):  # an old memory kept three copies of item 1
        mem.add(torch.tensor([[float(i)]]), torch.tensor([1]), torch.tensor([i]))
    assert sorted(mem.read()[2].tolist()) == [1, 2] and len(mem) == 2
    mem.add(torch.tensor([[3.0], [4.0]]), torch.tensor([1, 1]), torch.tensor([3, 4]))
    assert mem.read()[2].tolist() == [1, 3, 4]  # FIFO over distinct items: 2 was oldest


def test_an_item_keeps_one_label():
    mem = memory.EpisodicMemory(3, 2, 1)
    mem.add(torch.zeros(1, 1), torch.tensor([0]), torch.tensor([5]))
    with pytest.raises(ValueError, match="item 5 is stored with label 0"):
        mem.add(torch.zeros(1, 1), torch.tensor([2]), torch.tensor([5]))


def _copies():
    """Item 0 stored three times (label 0) beside items 1 and 2 (label 1)."""
    H = torch.tensor([[1.0, 0.0], [1.0, 0.01], [0.99, 0.0], [0.8, 0.6], [0.6, 0.8]])
    y = torch.tensor([0, 0, 0, 1, 1])
    ids = torch.tensor([0, 0, 0, 1, 2])
    return H, y, ids


def test_the_leave_one_out_posterior_gives_no_weight_to_any_copy_of_the_item():
    H, y, ids = _copies()
    p = memory.knn_posterior(H, H, y, 2, k=3, T=0.1, exclude=(ids, ids))
    assert torch.allclose(p[:3, 0], torch.zeros(3))  # only items 1 and 2 vote for item 0
    # brute force for item 1: its neighbours are the other four rows; k = 3 nearest allowed
    cos = torch.nn.functional.normalize(H, dim=1) @ torch.nn.functional.normalize(H, dim=1)[3]
    allowed = torch.tensor([0, 1, 2, 4])
    top = allowed[cos[allowed].argsort(descending=True)[:3]]
    w = torch.exp(cos[top] / 0.1)
    expected = torch.stack([w[y[top] == c].sum() for c in (0, 1)]) / w.sum()
    assert torch.allclose(p[3], expected, atol=1e-6)
    with pytest.raises(ValueError, match="no key left"):
        memory.knn_posterior(H[:3], H[:3], y[:3], 2, exclude=(ids[:3], ids[:3]))


def test_own_label_mass_is_the_leave_one_item_out_posterior_on_the_label():
    H, y, ids = _copies()
    mass = memory.own_label_mass(H, y, ids, 2, k=3)
    assert torch.allclose(mass[:3], torch.zeros(3))
    slot_out = memory.own_label_mass(H, y, torch.arange(5), 2, k=3)
    assert torch.all(slot_out[:3] > 0.9)  # leaving out one slot lets the copies vote


def test_focus_fits_to_the_posterior_that_leaves_out_every_copy(monkeypatch):
    H, y, ids = _copies()
    seen = {}

    def capture(head, sur, H, y, p_mem, **kw):
        seen["p_mem"] = p_mem
        return []

    monkeypatch.setattr(memory, "focus_fit", capture)
    memory.focus(nn.Linear(2, 2), H, y, ids, k=3)
    expected = memory.knn_posterior(H, H, y, 2, k=3, exclude=(ids, ids))
    assert torch.equal(seen["p_mem"], expected) and torch.all(seen["p_mem"][:3, 0] == 0)


def _tiny_split():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), [30, 10, 4])
    x = (rng.normal(size=(y.size, 1, 8)) + y[:, None, None]).astype(np.float32)
    yt = np.repeat(np.arange(3), 5)
    xt = (rng.normal(size=(15, 1, 8)) + yt[:, None, None]).astype(np.float32)
    return data.Split(x, y, xt, yt, xt, yt, np.array([30, 10, 4]), "tiny")


def test_training_for_several_epochs_stores_each_item_once():
    split = _tiny_split()  # the tail class (4 items) re-enters the memory every epoch
    kw = dict(kind="cnn1d", d_in=8, counts=split.counts, epochs=4, capacity=8, k=2)
    module = models.TailConModule(**kw, focus_every=2, focus_steps=2)
    torch.manual_seed(0)
    experiments._fit(module, split, config.MemoryConfig(batch_size=8, epochs=4), 0)
    _, y, idx = module.memory.read()
    assert idx.unique().numel() == idx.numel() == len(module.memory)
    assert (y == 2).sum() == 4  # all four tail items, once each


def test_the_full_profile_refuses_without_cifar_and_substitutes_nothing(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    def substitute(*args, **kwargs):
        raise AssertionError("MNIST-1D was put in place of CIFAR-LT")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    monkeypatch.setattr(data, "mnist1d", substitute)
    with pytest.raises(data.DataUnavailable) as err:
        experiments.load_split("cifar10", 100.0, "full")
    message = str(err.value)
    assert "uoft-cs/cifar10" in message and "load_dataset" in message
    assert "does not substitute" in message
