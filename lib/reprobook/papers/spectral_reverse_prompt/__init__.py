"""Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting.

Library of chapter 17 (notebooks/17_spectral_reverse_prompt): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
