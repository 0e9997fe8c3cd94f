"""TTB: Test-Time Baking for Large View Synthesis Models.

Library of chapter 11 (notebooks/11_test_time_baking): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
