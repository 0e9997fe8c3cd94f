"""The FACTS Leaderboard: A Comprehensive Benchmark for Large Language Model Factuality.

Library of chapter 01 (notebooks/01_facts_leaderboard): the suite's scores (:mod:`.scoring`),
the offline FACTS-lite benchmark (:mod:`.corpus`, :mod:`.policies`, :mod:`.judges`,
:mod:`.qa`, :mod:`.rubric`), the panel statistics (:mod:`.analysis`), the open models on the
public Grounding examples (:mod:`.open_llms`, the full profile's ``llm="real"``) and the notebooks'
profiles (:mod:`.config`). FACTS-lite's responders and judges are scripted stand-ins for
language models; :mod:`.fixtures` builds the tiny offline models and rows of the smoke profile.
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

# every other submodule (fixtures, which imports transformers) loads on first use: fl.fixtures
__getattr__ = core.lazy_submodules(__name__)

__all__ = [
    "analysis",
    "config",
    "corpus",
    "judges",
    "open_llms",
    "policies",
    "qa",
    "rubric",
    "scoring",
]
