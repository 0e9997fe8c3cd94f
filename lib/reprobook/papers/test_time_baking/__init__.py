"""TTB: Test-Time Baking for Large View Synthesis Models (NeurIPS 2026, no arXiv id).

Library of chapter 11 (notebooks/11_test_time_baking): procedural posed scenes
(:mod:`.scenes`), Plücker tokens (:mod:`.tokens`), the LaCT-style fast-weight layer
(:mod:`.fast_weights`), the decoder-only view-synthesis models with KV cache, TTT and TTB
(:mod:`.model`), their training and evaluation (:mod:`.experiments`), and the cost harness
(:mod:`.cost`). :mod:`.config` holds the notebooks' profiles. The notebooks import the package
alone (``from reprobook.papers import test_time_baking as ttb``); the modules that need torch's
training stack (:mod:`.experiments`, :mod:`.model`, ...) load on first use (``ttb.experiments``).
"""

from reprobook import core

from . import config, scenes, tokens

__getattr__ = core.lazy_submodules(__name__)

__all__ = ["config", "scenes", "tokens"]
