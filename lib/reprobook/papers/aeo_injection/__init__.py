"""Asymmetric Entropic Optimization (AEO) against Instruction Injection.

Library of chapter 13 (notebooks/13_aeo_injection): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
