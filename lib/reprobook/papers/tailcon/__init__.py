"""TailCon: memory consolidation for long-tailed recognition (NeurIPS 2026; no arXiv id).

Library of chapter 08 (notebooks/08_tailcon): the long-tail data and profile (:mod:`.data`),
the baselines' losses (:mod:`.losses`), TailCon's memory, retrieval and FOCUS consolidation as
this chapter reconstructs them (:mod:`.memory`), the networks and LightningModules
(:mod:`.models`), the erosion toy (:mod:`.toy`), the shared training runs
(:mod:`.experiments`) and the notebooks' profiles (:mod:`.config`). Other submodules
(:mod:`.fixtures`) load on first use (``tc.fixtures``).
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

__all__ = ["config", "data", "experiments", "losses", "memory", "models", "toy"]
__getattr__ = core.lazy_submodules(__name__)
