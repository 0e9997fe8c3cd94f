"""Profiles of the notebooks of chapter 01 (the FACTS Leaderboard): one frozen dataclass per
notebook, with a ``reduced`` instance (2 CPU cores, well under a minute a notebook), a ``full``
one and a ``smoke`` one (the full one with every size cut to seconds on a CPU), keyed by the
notebook's file stem. Notebooks call ``core.start(fl, "01_protocol", profile, seed, ...)``.

Notebooks: ``01_protocol`` (C1, C2, the rubric scorer, and the open models on the public
Grounding examples), ``02_judges`` (C3, C4), ``03_parametric_search`` (C5). FACTS-lite is an
offline simulation at every profile. ``ProtocolConfig.llm`` chooses what else notebook 01 runs:
``"real"`` (full and smoke) adds two open models as responders and judges of the public FACTS
Grounding examples (:mod:`.open_llms`), ``"emulated"`` (reduced) keeps the scripted stand-ins
only, and the run records the choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    # "real": the open models answer and judge the public Grounding examples (full, smoke);
    # "emulated": the scripted responders and rule-based judges stand in for them (reduced)
    llm: str = "emulated"
    open_models: tuple[str, ...] = ()  # the open models, responders and judges in this order
    n_grounding: int = 860  # public Grounding examples answered (860: all of them)
    response_tokens: int = 512  # new tokens of an answer, at most
    eligibility_tokens: int = 16  # new tokens of an eligibility rating, at most
    label_tokens: int = 512  # new tokens of a reply of sentence labels, at most
    batch_size: int = 4  # prompts generated together


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

_PROTOCOL_FULL = ProtocolConfig(
    n_prompts=20_000, n_digits=898, n_random_tables=100_000, llm="real", open_models=_OPEN
)
_JUDGES_FULL = JudgesConfig(n_prompts=20_000, n_resamples=10_000)
_QA_FULL = QAConfig(n_resamples=10_000, n_draws=20)

PROFILES: dict[str, dict[str, Any]] = {
    "01_protocol": {
        "reduced": ProtocolConfig(),
        "full": _PROTOCOL_FULL,
        "smoke": replace(
            _PROTOCOL_FULL,
            n_prompts=30,
            n_digits=40,
            n_random_tables=100,
            n_grounding=3,
            response_tokens=12,
            eligibility_tokens=4,
            label_tokens=12,
            batch_size=2,
        ),
    },
    "02_judges": {
        "reduced": JudgesConfig(),
        "full": _JUDGES_FULL,
        "smoke": replace(_JUDGES_FULL, n_prompts=30, n_resamples=200),
    },
    "03_parametric_search": {
        "reduced": QAConfig(),
        "full": _QA_FULL,
        "smoke": replace(_QA_FULL, n_resamples=200, n_draws=2),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor). The
# simulation runs on CPUs at every size; the open models (llm="real") want one GPU, one 7-8B
# model in bfloat16 at a time. The full profile's hours are an estimate: its open-model path
# (2 x 860 answers and 2 x 2 x 860 judgements, documents of up to about 32k tokens) has not been
# timed at full size; the smoke profile runs it on tiny fixtures in seconds.
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "smoke": Resources(gpus=0, cpus=2, mem_gb=4, hours=0.05),
    "full": Resources(
        gpus=1,
        cpus=8,
        mem_gb=32,
        hours=5.0,
        inputs=(
            Input(
                notebooks=("01_protocol",),
                unless="llm=emulated",
                name="transformers",
                kind="package",
                find="module:transformers",
                get="pip install transformers",
                licence="Apache-2.0",
            ),
            Input(
                notebooks=("01_protocol",),
                unless="llm=emulated",
                name="Qwen2.5-7B-Instruct",
                kind="weights",
                find="hf-model:Qwen/Qwen2.5-7B-Instruct",
                get="hf download Qwen/Qwen2.5-7B-Instruct",
                licence="Apache-2.0",
                size_gb=15.0,
            ),
            Input(
                notebooks=("01_protocol",),
                unless="llm=emulated",
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
                unless="llm=emulated",
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
