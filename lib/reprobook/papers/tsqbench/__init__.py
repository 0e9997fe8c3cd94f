"""TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning (arXiv 2606.03629).

Library of chapter 12 (notebooks/12_tsqbench): :mod:`.bench` (TSQBench-lite, the pair
generator and the no-tool view), :mod:`.tools` (the Inspector's analysis tools, cached per
series), :mod:`.agent` (the no-tool judge, the Inspector's rules, the Adjudicator, the
Perceiver's rewards and GRPO), :mod:`.rating` (soft labels, the Bradley-Terry rater, CBF, CO2
and data selection), :mod:`.experiments` (the notebooks' steps), :mod:`.full` (the LLM roles of
the full profile), :mod:`.fixtures` (their tiny model at the smoke profile) and :mod:`.config`
(the profiles). Notebooks import the package alone (``from reprobook.papers import tsqbench
as tsq``) and reach every module from it.
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

# full (the LLM roles: transformers, trl, peft) and fixtures load on first use: ``tsq.full``
__getattr__ = core.lazy_submodules(__name__)

__all__ = ["agent", "bench", "config", "experiments", "rating", "tools"]
