"""TailCon: Memory Consolidation for Long-Tailed Recognition.

Library of chapter 08 (notebooks/08_tailcon): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
