"""Solaris: Building a Multiplayer Video World Model in Minecraft.

Library of chapter 19 (notebooks/19_solaris_world_model): replace the example estimator
(:mod:`.method`) with the paper's method; :mod:`.config` holds the notebooks' profiles.
"""

from . import config, method
from .method import estimate

__all__ = ["config", "method", "estimate"]
