"""Tests of chapter 14's toy data and tiny MLLM."""

import dataclasses

import numpy as np
import pytest
import torch

from reprobook.papers.dcat_merging import config, data, model


def test_digit_sounds_sound_at_their_pitch_and_are_reproducible():
    labels = np.arange(10)
    kw = dict(snr_db=(60.0, 60.0), detune=0.0)
    a = data.digit_sounds(labels, np.random.default_rng(1), **kw)
    b = data.digit_sounds(labels, np.random.default_rng(1), **kw)
    assert a.shape == (10, 1000) and np.array_equal(a, b)
    spectrum = np.abs(np.fft.rfft(a * np.hanning(1000), n=8000, axis=1))
    freqs = np.fft.rfftfreq(8000, 1 / 4000)
    lowest = [freqs[np.argmax(s * (freqs < 200 + 60 * k + 30))] for k, s in zip(labels, spectrum)]
    assert np.allclose(lowest, 200 + 60 * labels, atol=3)
    with pytest.raises(ValueError, match="labels must be"):
        data.digit_sounds(np.array([10]), np.random.default_rng(0))


def test_band_energies_find_the_band_of_a_pure_tone():
    t = np.arange(1000) / 4000
    e = data.band_energies(np.sin(2 * np.pi * 440 * t)[None], 4000, 64)
    edges = np.geomspace(100, 2000, 65)
    assert e.shape == (1, 64)
    assert edges[np.argmax(e[0])] <= 440 < edges[np.argmax(e[0]) + 1]


def test_splits_are_balanced_disjoint_and_seeded():
    train, cal, test = data.audio_splits(40, 64, 60, seed=3)
    assert (len(train), len(cal), len(test)) == (40, 64, 60)
    assert np.array_equal(np.bincount(train.y), np.full(10, 4))
    again = data.audio_splits(40, 64, 60, seed=3)
    assert np.array_equal(train.x, again[0].x)
    assert np.array_equal(cal.take(8).y, cal.y[:8])
    vt, vc, vs = data.vision_splits(64, 397, seed=0)
    assert (len(vt), len(vc), len(vs)) == (1336, 64, 397)
    with pytest.raises(ValueError, match="n_cal"):
        data.vision_splits(1000, 900, seed=0)


def test_templates_share_positions():
    p, c = data.prompt_ids([3]), data.caption_ids([3])
    assert p.shape == c.shape == (1, 11)
    soft = data.SOFT_POSITIONS
    assert all(data.VOCAB[i] == "<soft>" for i in p[0, soft])
    assert [data.VOCAB[i] for i in c[0, soft]] == ["this", "is", "a", "three"]
    assert np.array_equal(p[0, 5:], c[0, 5:])  # same question and answer
    assert data.VOCAB[p[0, data.ANSWER_POSITION]] == "?"
    assert data.copy_ids([[1, 2, 3]]).shape == (1, 11)
    corpus = data.text_corpus(10, np.random.default_rng(0))
    assert corpus.shape == (10, 11)


def test_rotation_is_orthogonal():
    R = data.rotation(64, 5)
    assert np.allclose(R @ R.T, np.eye(64), atol=1e-10)
    assert not np.allclose(R, data.rotation(64, 6))


def test_mllm_places_soft_tokens_and_training_is_deterministic():
    llm = dataclasses.replace(config.LLMConfig(), d=16, heads=2, mlp=32)
    torch.manual_seed(0)
    m = model.MLLM(llm, 1e-3)
    x = torch.randn(3, 64)
    ids = torch.as_tensor(data.prompt_ids([0, 1, 2]))[:, :-1]
    emb = m.embed(x, ids)
    soft = m.projector(x).view(3, 4, 16)
    assert torch.allclose(emb[:, 1:5], soft)
    assert torch.equal(emb[:, 5:], m.llm.tok(ids)[:, 5:])
    logits, states = m(x, ids, hidden=True)
    assert logits.shape == (3, 10, len(data.VOCAB)) and len(states) == llm.layers + 1
    tensors = (x, torch.as_tensor(data.prompt_ids([0, 1, 2])))
    weights = []
    for _ in range(2):
        torch.manual_seed(1)
        net = model.MLLM(llm, 1e-2)
        model.fit(net, tensors, steps=3, batch=2, seed=4)
        weights.append(net.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not torch.equal(weights[0]["projector.weight"], m.projector.weight)
