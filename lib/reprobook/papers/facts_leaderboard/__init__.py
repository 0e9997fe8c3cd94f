"""The FACTS Leaderboard: A Comprehensive Benchmark for Large Language Model Factuality.

Library of chapter 01 (notebooks/01_facts_leaderboard): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
