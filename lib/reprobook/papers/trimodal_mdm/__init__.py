"""The Design Space of Tri-Modal Masked Diffusion Models.

Library of chapter 03 (notebooks/03_trimodal_mdm): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
