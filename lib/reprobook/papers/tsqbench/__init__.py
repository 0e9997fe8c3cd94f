"""TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning.

Library of chapter 12 (notebooks/12_tsqbench): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
