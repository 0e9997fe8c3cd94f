"""Scripted responders for FACTS-lite's grounding prompts: stand-ins for language models, each
with a known behaviour, so that every sentence they write has a gold label.

- ``extractive`` copies the target sentences (after a framing sentence);
- ``paraphrasing`` rewrites them with a fixed synonym table and an attribution prefix (the
  facts are kept);
- ``hallucinating`` copies them but changes one fact in one of them (a number, else its rarest
  word), so that sentence is unsupported;
- ``evasive`` answers with the document's lead sentence only: true, but beside the request;
- ``hedging`` writes only caveats that claim nothing.

Gold labels: a copied or paraphrased sentence is "supported", a changed one "unsupported", a
frame or caveat "no_rad". A response is on-request when it carries the target facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .corpus import Document, Prompt, content_words, numbers

__all__ = ["POLICIES", "FRAMES", "HEDGES", "Response", "respond", "paraphrase", "perturb"]

POLICIES = ("extractive", "paraphrasing", "hallucinating", "evasive", "hedging")
FRAMES = (
    "Here is what the document says on this.",
    "In short, the document covers the following.",
)
HEDGES = (
    "The document alone cannot settle this question.",
    "It is best to consult a specialist source before relying on any answer here.",
)
_SYNONYMS = {
    "contains": "holds",
    "returns": "gives back",
    "return": "give back",
    "uses": "employs",
    "used": "employed",
    "each": "every",
    "number": "count",
    "value": "quantity",
    "values": "quantities",
    "called": "invoked",
    "must": "has to",
    "only": "solely",
    "also": "as well",
    "data": "records",
    "method": "routine",
    "function": "routine",
}


@dataclass(frozen=True)
class Response:
    """One response: who wrote it (policy, family), its sentences, their gold labels, and
    whether it carries what the request asked for (the gold eligibility)."""

    prompt_id: int
    policy: str
    family: str
    sentences: tuple[str, ...]
    gold: tuple[str, ...]
    on_request: bool


def paraphrase(sentence: str) -> str:
    """The sentence with the synonym table applied word by word and an attribution prefix;
    numbers and the other words are kept, so its facts are unchanged."""
    words = sentence.split(" ")
    swapped = [_SYNONYMS.get(w.lower(), w) if w.isalpha() else w for w in words]
    text = " ".join(swapped)
    return "According to the document, " + text[0].lower() + text[1:]


def perturb(sentence: str, rng: np.random.Generator, vocabulary: list[str]) -> str:
    """The sentence with one fact changed: a number moved by 1 to 9 (keeping its decimals), or,
    when it has none, its last content word replaced by a different word of ``vocabulary``."""
    rng = checks.generator(rng)
    nums = numbers(sentence)
    if nums:
        target = nums[int(rng.integers(len(nums)))]
        shift = int(rng.integers(1, 10))
        if "." in target:
            places = len(target.split(".")[1])
            new = f"{float(target) + shift:.{places}f}"
        else:
            new = str(int(target) + shift)
        pattern = rf"(?<![A-Za-z0-9_.]){re.escape(target)}(?![A-Za-z0-9_])"
        return re.sub(pattern, new, sentence, count=1)
    words = [w for w in content_words(sentence) if not w[0].isdigit()]
    if not words:
        return sentence + " This holds in every version."
    old = words[-1]
    options = [v for v in vocabulary if v != old]
    new = options[int(rng.integers(len(options)))]
    return re.sub(rf"\b{re.escape(old)}\b", new, sentence, count=1, flags=re.IGNORECASE)


def respond(
    policy: str,
    prompt: Prompt,
    doc: Document,
    rng: np.random.Generator,
    vocabulary: list[str],
    family: str = "A",
) -> Response:
    """The response of ``policy`` (one of :data:`POLICIES`) to ``prompt`` on ``doc``."""
    checks.choice(policy, "policy", POLICIES)
    rng = checks.generator(rng)
    if doc.doc_id != prompt.doc_id:
        raise checks.InputError(
            f"prompt {prompt.prompt_id} is on {prompt.doc_id}, not {doc.doc_id}"
        )
    frame = FRAMES[int(rng.integers(len(FRAMES)))]
    targets = [doc.sentences[i] for i in prompt.targets]
    if policy == "evasive":
        return Response(
            prompt.prompt_id, policy, family, (doc.sentences[0],), ("supported",), False
        )
    if policy == "hedging":
        return Response(prompt.prompt_id, policy, family, HEDGES, ("no_rad",) * len(HEDGES), False)
    body = [paraphrase(s) for s in targets] if policy == "paraphrasing" else list(targets)
    gold = ["supported"] * len(body)
    if policy == "hallucinating":
        k = int(rng.integers(len(body)))
        changed = perturb(body[k], rng, vocabulary)
        if changed != body[k]:
            body[k], gold[k] = changed, "unsupported"
    return Response(prompt.prompt_id, policy, family, (frame, *body), ("no_rad", *gold), True)
