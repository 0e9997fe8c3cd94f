"""The FACTS Leaderboard: A Comprehensive Benchmark for Large Language Model Factuality.

Library of chapter 01 (notebooks/01_facts_leaderboard): the suite's scores (:mod:`.scoring`),
the offline FACTS-lite benchmark (:mod:`.corpus`, :mod:`.policies`, :mod:`.judges`,
:mod:`.qa`, :mod:`.rubric`), the panel statistics (:mod:`.analysis`) and the notebooks'
profiles (:mod:`.config`). The responders and judges are scripted stand-ins for language
models, never models themselves.
"""

from . import analysis, config, corpus, judges, policies, qa, rubric, scoring

__all__ = ["analysis", "config", "corpus", "judges", "policies", "qa", "rubric", "scoring"]
