"""Tests of chapter 03's library (replace with the paper's exact properties)."""

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.trimodal_mdm import config, method


def test_estimate_is_the_sample_mean():
    assert method.estimate([1.0, 2.0, 6.0]) == 3.0
    x = np.random.default_rng(0).normal(size=50)
    assert method.estimate(x) == pytest.approx(x.mean(), abs=1e-12)


def test_estimate_refuses_bad_input():
    with pytest.raises(ValueError, match="x must be a 1-D array"):
        method.estimate(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least one draw"):
        method.estimate([])


def test_profiles_resolve():
    reduced = core.resolve_notebook(config.PROFILES, "first", "reduced")
    assert core.resolve_notebook(config.PROFILES, "first", "reduced", n_repeats=7).n_repeats == 7
    assert core.resolve_notebook(config.PROFILES, "first", "full").n > reduced.n
