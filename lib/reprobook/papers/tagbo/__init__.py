"""TagBO: Task-aware Graph Bayesian Optimization (NeurIPS 2026; no arXiv id).

Library of chapter 09 (notebooks/09_tagbo), a reconstruction from the abstract:
:mod:`.data` (the vendored reaction tables), :mod:`.similarity` (Tanimoto, the ordinal-tier
graph and its diffusion kernel), :mod:`.kernels` (the gpytorch kernel and the tier mean),
:mod:`.priors` (the oracle-derived emulation of a tier prior), :mod:`.llm` (the tiers an open
LLM gives, at the full profile), :mod:`.synthetic` (the constrained formulation task),
:mod:`.bo` (models, acquisition and the benchmark harness), :mod:`.experiments` (the
notebooks' benchmark loops); :mod:`.config` holds the notebooks' profiles and :mod:`.fixtures`
the smoke profile's tiny model.

The package imports the modules every notebook uses (the BO harness and what it needs: the
import of botorch's acquisition functions draws from NumPy's global generator, so it comes
before a notebook seeds its run); :mod:`.llm`, :mod:`.synthetic` and :mod:`.fixtures` load on
first use (``tagbo.llm``).
"""

from reprobook import core

from . import bo, config, data, experiments, kernels, priors, similarity

__all__ = ["bo", "config", "data", "experiments", "kernels", "priors", "similarity"]
__getattr__ = core.lazy_submodules(__name__)
