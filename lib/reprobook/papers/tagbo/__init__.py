"""TagBO: Task-aware Graph Bayesian Optimization.

Library of chapter 09 (notebooks/09_tagbo): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
