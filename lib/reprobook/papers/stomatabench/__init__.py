"""StomataBench: stomatal detection under distribution shift (no arXiv id).

Library of chapter 15 (notebooks/15_stomatabench): the synthetic epidermis (:mod:`.synth`),
the three detector lineages of the reduced profile (:mod:`.detectors`), the measurement
metrics (:mod:`.metrics`), the experiments the notebooks share (:mod:`.experiments`), what
the full profile trains beyond them (:mod:`.full`: torchvision's Faster R-CNN and FCOS, or
their recorded stand-in), the real stomata it reads from the hub (:mod:`.hub`), the smoke
profile's fixture of them (:mod:`.fixtures`), and the profiles (:mod:`.config`). The
notebooks import the package (``from reprobook.papers import stomatabench as stomata``); its
other modules load on first use (``stomata.experiments``).
"""

from reprobook import core

from . import config, synth

__all__ = ["config", "synth"]

__getattr__ = core.lazy_submodules(__name__)
