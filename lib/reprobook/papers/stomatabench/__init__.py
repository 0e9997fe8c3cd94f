"""StomataBench: stomatal detection under distribution shift (no arXiv id).

Library of chapter 15 (notebooks/15_stomatabench): the synthetic epidermis (:mod:`.synth`),
the three detector lineages of the reduced profile (:mod:`.detectors`), the measurement
metrics (:mod:`.metrics`), the experiments the notebooks share (:mod:`.experiments`), what
the full profile needs (:mod:`.full`), and the profiles (:mod:`.config`).
"""

from . import config, synth

__all__ = ["config", "synth"]
