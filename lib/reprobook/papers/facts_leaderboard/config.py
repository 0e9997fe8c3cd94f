"""Profiles of the notebooks of chapter 01 (the FACTS Leaderboard): one frozen dataclass per
notebook, with a ``reduced`` instance (2 CPU cores, well under a minute a notebook) and a
``full`` one. Notebooks call ``core.resolve_notebook(config.PROFILES, "protocol", profile, ...)``.

Notebooks: ``protocol`` (C1, C2, the rubric scorer), ``judges`` (C3, C4), ``parametric_search``
(C5). Everything is an offline simulation; the full profile scales it up and, where
``transformers``, the open models' weights and the public Grounding file are present, adds two
open models as responders and judges (they are not in this book's environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reprobook.core.resources import Input, Resources

__all__ = ["ProtocolConfig", "JudgesConfig", "QAConfig", "PROFILES", "RESOURCES"]


@dataclass(frozen=True)
class ProtocolConfig:
    """C1 (the score), C2 (eligibility against evasion), the rubric scorer on digits."""

    n_prompts: int = 200  # FACTS-lite grounding prompts
    max_chars: int = 3000  # document length cap, characters
    min_terms: int = 2  # key terms an eligibility judge needs to see
    p_flip: float = 0.05  # eligibility judges' chance of flipping Major / No Issues
    p_unparseable: float = 0.02  # eligibility judges' chance of an unusable verdict
    lexical_coverage: float = 0.8  # lexical judge: share of content words that must match
    tfidf_threshold: float = 0.6  # TF-IDF judge: cosine needed for "supported"
    n_digits: int = 300  # image questions (the rest of the 1,797 digits train the describers)
    n_random_tables: int = 1000  # random per-split accuracy tables for C1's identity
    grounding_path: str | None = None  # the public Grounding file (full profile only)
    open_models: tuple[str, ...] = ()  # open models as responders and judges (full only)


@dataclass(frozen=True)
class JudgesConfig:
    """C3 (self-preference against panel size), C4 (judge quality and disagreement)."""

    n_prompts: int = 200  # prompts answered by every responder
    families: tuple[str, ...] = ("A", "B", "C")  # responder and judge families
    # hallucination rates of a family's responders, the same in every family: the families
    # differ only in the judge that favours them, so a family advantage is self-preference
    hallucination: tuple[float, ...] = (0.1, 0.25, 0.4)
    p_miss: float = 0.15  # simulated judges miss an unsupported sentence
    p_false: float = 0.05  # simulated judges flag a supported sentence
    self_leniency: float = 0.5  # extra leniency on the judge's own family
    p_unparseable: float = 0.02  # simulated judges return nothing usable
    lexical_coverage: float = 0.8
    tfidf_threshold: float = 0.6
    n_resamples: int = 2000  # bootstrap resamples over prompts


@dataclass(frozen=True)
class QAConfig:
    """C5 (closed book against search; the four metrics against the abstention threshold)."""

    p_recall_error: float = 0.1  # closed book: a memorised answer recalled wrongly
    thresholds: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(20))
    n_resamples: int = 2000  # bootstrap resamples over questions
    n_draws: int = 1  # independent closed-book draws pooled (full: more)


_OPEN = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")

PROFILES: dict[str, dict[str, Any]] = {
    "protocol": {
        "reduced": ProtocolConfig(),
        "full": ProtocolConfig(
            n_prompts=20_000, n_digits=898, n_random_tables=100_000, open_models=_OPEN
        ),
    },
    "judges": {
        "reduced": JudgesConfig(),
        "full": JudgesConfig(n_prompts=20_000, n_resamples=10_000),
    },
    "parametric_search": {
        "reduced": QAConfig(),
        "full": QAConfig(n_resamples=10_000, n_draws=20),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The
# simulation runs on CPUs at every size; the open models, when present, want one GPU.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=32,
        hours=3.0,
        inputs=(
            Input(
                notebooks=("01_protocol",),
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers",
                licence="Apache-2.0",
            ),
            Input(
                notebooks=("01_protocol",),
                name="Qwen2.5-7B-Instruct",
                kind="weights",
                find="hf-model:Qwen/Qwen2.5-7B-Instruct",
                get="hf download Qwen/Qwen2.5-7B-Instruct",
                licence="Apache-2.0",
                size_gb=15.0,
            ),
            Input(
                notebooks=("01_protocol",),
                name="Llama-3.1-8B-Instruct",
                kind="weights",
                find="hf-model:meta-llama/Llama-3.1-8B-Instruct",
                get="accept the licence on the hub, then "
                "hf download meta-llama/Llama-3.1-8B-Instruct",
                licence="Llama 3.1 Community Licence",
                size_gb=16.0,
            ),
            Input(
                notebooks=("01_protocol",),
                name="FACTS Grounding public examples",
                kind="dataset",
                find="hf-dataset:google/FACTS-grounding-public",
                get="hf download google/FACTS-grounding-public --repo-type dataset",
                licence="CC-BY-4.0",
                size_gb=0.02,
            ),
        ),
    ),
}
