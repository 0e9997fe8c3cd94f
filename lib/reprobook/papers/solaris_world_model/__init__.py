"""Solaris: Building a Multiplayer Video World Model in Minecraft (arXiv 2602.22208).

Library of chapter 19 (notebooks/19_solaris_world_model): the DuetGrid world (:mod:`.world`),
programmatic judges (:mod:`.judges`), the multiplayer DiT and its masks (:mod:`.model`), flow
matching and the cached rollout (:mod:`.flow`), Checkpointed Self Forcing (:mod:`.selfforcing`),
the staged training (:mod:`.stages`), experiment helpers (:mod:`.experiments`) and the
notebooks' profiles (:mod:`.config`). The notebooks import the package (``from
reprobook.papers import solaris_world_model as solaris``) and reach every module from it
(``solaris.flow.rollout``).
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

__all__ = ["config", "experiments", "flow", "judges", "model", "selfforcing", "stages", "world"]

__getattr__ = core.lazy_submodules(__name__)
