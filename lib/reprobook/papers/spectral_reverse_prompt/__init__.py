"""Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting (arXiv 2609.32143).

Library of chapter 17 (notebooks/17_spectral_reverse_prompt): the SRP layer and its ablations
(:mod:`.srp`), encoders with prompt hooks, GraphCL and the baselines (:mod:`.models`), the
spectral-bias diagnostics (:mod:`.diagnostics`), the offline graphs (:mod:`.data`), the
downstream protocol (:mod:`.protocol`), the notebooks' experiments (:mod:`.experiments`) and
their profiles (:mod:`.config`).
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

__all__ = ["config", "data", "diagnostics", "models", "protocol", "srp"]

__getattr__ = core.lazy_submodules(__name__)  # experiments loads on first use
