"""Asymmetric Entropic Optimization (AEO) against instruction injection: chapter 13
(notebooks/13_aeo_injection).

Paper: "Asymmetric Entropic Optimization (AEO)" (no arXiv id; only its abstract was read, so the
layer, the chaos scores, the asymmetric head and the correction are our reconstruction).

Modules: :mod:`.language` (the instruction-hierarchy language and its checker), :mod:`.model`
(a tiny GPT, batched greedy generation with hidden states and steering), :mod:`.detect` (PCA, the
compliant Gaussian, chaos scores, the asymmetric head, baselines, AUROC and FPR95),
:mod:`.correct` (gated steering), :mod:`.experiments` (what the notebooks share, on both paths),
:mod:`.full` (the full profile's backbone: loading, decoding with states, steering, checksum),
:mod:`.iheval` (IHEval's settings as the chapter's families, its scorers, the replicate splits),
:mod:`.fixtures` (the smoke profile's tiny backbone and IHEval rows), :mod:`.config` (the
profiles). Notebooks import the package alone (``from reprobook.papers import aeo_injection as
aeo``) and reach every module from it.
"""

from reprobook import core

from . import config, language

# the other modules (torch, Lightning, transformers) load on first use: ``aeo.experiments``
__getattr__ = core.lazy_submodules(__name__)

__all__ = ["config", "language"]
