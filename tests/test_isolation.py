"""Each unit test's changes to the process environment end with it (``tests/conftest.py``), so
that nothing a test sets reaches a later test or a notebook kernel that nbval starts on the same
worker. The two tests run in this order, on one worker (a file stays on one worker)."""

from __future__ import annotations

import os

import lightning

PROBE = "REPROBOOK_ISOLATION_PROBE"


def test_a_test_that_seeds_lightning_and_sets_a_variable():
    assert PROBE not in os.environ
    lightning.seed_everything(3, workers=True, verbose=False)
    os.environ[PROBE] = "set"
    os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + "/nonexistent"
    assert os.environ["PL_GLOBAL_SEED"] == "3"


def test_the_next_test_sees_none_of_it():
    assert PROBE not in os.environ
    assert "PL_GLOBAL_SEED" not in os.environ and "PL_SEED_WORKERS" not in os.environ
    assert not os.environ.get("PATH", "").endswith("/nonexistent")
