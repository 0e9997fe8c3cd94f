"""Directional Cross-Modal Alignment Transfer (DCAT).

Library of chapter 14 (notebooks/14_dcat_merging): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
