"""A small end-to-end run of chapter 14's experiments: cached trainings, both studies."""

import dataclasses

import numpy as np
import pytest

from reprobook.papers.dcat_merging import config, experiments


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path_factory.mktemp("ckpt")))
    d = config.DataConfig(n_vision_test=30, n_audio_test=30, n_text_train=64)
    llm = config.LLMConfig(d=16, heads=2, mlp=32, base_steps=2, donor_steps=2, recipient_steps=2)
    first = experiments.trained(d, llm, 5, "reduced", base_seed=5)
    again = experiments.trained(d, llm, 5, "reduced", base_seed=5)
    yield d, llm, first, again
    mp.undo()


def test_trainings_are_cached_and_share_the_base(tiny):
    d, llm, first, again = tiny
    assert not any(first.loaded.values()) and all(again.loaded.values())
    for k in first.recipient:
        assert (first.recipient[k] == again.recipient[k]).all()
    assert set(first.base) < set(first.donor)  # the donor holds W0's keys and more
    row = experiments.abilities(first)
    assert 0 <= row["recipient on audio"] <= 1 and row["|tau_S| (donor)"] > 0


def test_studies_run_and_choose_on_calibration_data(tiny):
    d, llm, s, _ = tiny
    common = dict(data=d, llm=llm, n_seeds=1, alphas=(0.0, 1.0), n_cal=8)
    a = experiments.asymmetry_study(s, config.MergeConfig(**common, lambdas=(0.1, 1.0)))
    assert set(a["gains"]) == {"donor into recipient", "norm-matched donor", "recipient into donor"}
    assert len(a["set"]) == 1 + 4 + 2 + 1  # TA at alpha 1, 4 baselines, 2 DCAT-A, DCAT-B
    assert np.isfinite(a["set"].bound).all()
    cfg = config.DcatConfig(**common, lambdas=(0.0, 1.0), gammas_b=(1.0,), cal_sizes=(4, 8))
    b = experiments.dcat_study(s, cfg)
    assert list(b["sizes"].n_cal) == [4, 8]
    assert set(b["table"].model) >= {"recipient (unmerged)", "DCAT-A", "DCAT-B", "RegMean"}
    chosen = b["table"].set_index("model").coefficient["DCAT-A"]
    best = b["lambdas"].set_index("lambda").cal_bound.idxmax()
    assert chosen == best  # lambda is the one with the largest calibration bound
    with pytest.raises(ValueError, match="n must be"):
        experiments.dcat_study(s, dataclasses.replace(cfg, n_cal=0))
