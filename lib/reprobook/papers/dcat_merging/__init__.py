"""Directional Cross-Modal Alignment Transfer (DCAT), NeurIPS 2026 submission (no arXiv id).

Library of chapter 14 (notebooks/14_dcat_merging): the toy data (:mod:`.data`), the tiny MLLM
(:mod:`.model`), the merges on state dicts and the DCAT closed form (:mod:`.merging`), the
alignment quantities and the InfoNCE bound (:mod:`.alignment`), the cached trainings and the
experiments of the notebooks (:mod:`.experiments`), the paper's scale (:mod:`.paper_scale`:
ModelCompose's LoRAs on Vicuna-7B, read and merged in weight space), its smoke fixture
(:mod:`.fixtures`) and the profiles (:mod:`.config`). The notebooks import the package
(``from reprobook.papers import dcat_merging as dcat``); its other modules load on first use
(``dcat.experiments``).
"""

from reprobook import core

from . import config, data

__all__ = ["config", "data"]

__getattr__ = core.lazy_submodules(__name__)
