"""TasteBench: a multimodal benchmark for sensory prediction of plant-based foods (no arXiv id).

Library of chapter 06 (notebooks/06_tastebench):

- :mod:`.data`: the release's files (``data/tastebench``) and the paper's printed tables;
- :mod:`.metrics`: pairwise accuracy, Spearman, Kendall and R@k of a ranking, the random
  ranker, and the bootstrap that resamples products within categories (its BCa intervals are
  ``core.bca_from_replicates``);
- :mod:`.panel`: Krippendorff's alpha, Kendall's W, split-half reliability, leave-one-out
  panelist accuracy, the group-size curve and k*, and the panel simulator;
- :mod:`.ranking`: LOOCV Bradley-Terry, ridge and RankSVM on synthetic products;
- :mod:`.molecules`: the molecular task's scores, McNemar's test and the fingerprint model;
- :mod:`.dmpnn`: the D-MPNN of the full profile, in torch (loaded on first use);
- :mod:`.config`: the notebooks' profiles.
"""

from reprobook import core

from . import config, data, metrics, molecules, panel, ranking

__all__ = ["config", "data", "metrics", "molecules", "panel", "ranking"]

__getattr__ = core.lazy_submodules(__name__)  # dmpnn (torch, Lightning) loads on first use
