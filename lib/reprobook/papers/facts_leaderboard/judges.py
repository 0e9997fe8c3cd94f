"""Offline judges for FACTS-lite: stand-ins for the LLM judges, with known failure modes.

Eligibility (phase 1): :class:`RequestJudge` reads only the request and the response, as the
v2 judges do (the document is withheld), and says "Major Issue(s)" when the response makes no
claim or touches fewer than ``min_terms`` of the request's key terms.

Grounding (phase 2), each labelling every sentence "supported", "unsupported" or "no_rad":

- :class:`LexicalJudge`: a sentence is supported when one document sentence holds all its
  numbers and at least ``coverage`` of its content words;
- :class:`TfidfJudge`: supported when its TF-IDF cosine with some document sentence reaches
  ``threshold`` (it does not look at numbers on their own);
- :class:`TrivialJudge`: the baseline that never finds anything, calling every sentence that
  makes a claim supported;
- :class:`SimulatedJudge`: reads the gold labels and errs at set rates, more leniently on its
  own family's responses (self-preference), and sometimes returns nothing parseable.

All judges call a sentence "no_rad" when it has no number and fewer than two content words that
occur in the document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from reprobook.core import checks

from .corpus import Document, Prompt, content_words, numbers
from .policies import Response
from .scoring import MAJOR_ISSUES

__all__ = [
    "ELIGIBILITY_SCALE",
    "makes_no_claim",
    "RequestJudge",
    "LexicalJudge",
    "TfidfJudge",
    "TrivialJudge",
    "SimulatedJudge",
]

ELIGIBILITY_SCALE = ("No Issues", "Minor Issue(s)", MAJOR_ISSUES)


def makes_no_claim(sentence: str, vocabulary: set[str]) -> bool:
    """The shared "no_rad" rule: no number, and fewer than two content words that the document
    (``vocabulary``: its content words) uses."""
    if numbers(sentence):
        return False
    return sum(w in vocabulary for w in set(content_words(sentence))) < 2


@dataclass(frozen=True)
class RequestJudge:
    """An eligibility judge: "Major Issue(s)" when the response's claims touch fewer than
    ``min_terms`` key terms of the request (or it makes no claim at all), "Minor Issue(s)" when
    they touch some but not all, else "No Issues". With probability ``p_flip`` it turns "Major"
    into "No Issues" or back, and with ``p_unparseable`` it returns nothing usable (None)."""

    name: str
    min_terms: int = 1
    p_flip: float = 0.0
    p_unparseable: float = 0.0

    def __post_init__(self):
        checks.integer(self.min_terms, "min_terms", minimum=1)
        checks.probability(self.p_flip, "p_flip")
        checks.probability(self.p_unparseable, "p_unparseable")

    def verdict(self, prompt: Prompt, response: Response, rng: np.random.Generator) -> str | None:
        rng = checks.generator(rng)
        claims = _claims_without_document(response.sentences)
        said = {w for s in claims for w in content_words(s)}
        hits = sum(t in said for t in prompt.key_terms)
        if not claims or hits < self.min_terms:
            v = MAJOR_ISSUES
        elif hits < len(prompt.key_terms):
            v = "Minor Issue(s)"
        else:
            v = "No Issues"
        if rng.random() < self.p_flip:
            v = "No Issues" if v == MAJOR_ISSUES else MAJOR_ISSUES
        if rng.random() < self.p_unparseable:
            return None
        return v


# Without the document, the eligibility judge takes a sentence for a claim when it states a
# number or has two content words besides these framing and caveat words.
_FRAMING = frozenset(
    "here document says short covers following alone cannot settle question consult "
    "specialist source relying answer best".split()
)


def _claims_without_document(sentences) -> list[str]:
    return [
        s
        for s in sentences
        if numbers(s) or sum(w not in _FRAMING for w in set(content_words(s))) >= 2
    ]


def _doc_vocabulary(doc: Document) -> set[str]:
    return set(content_words(doc.text))


@dataclass(frozen=True)
class LexicalJudge:
    """Sentence labels by word overlap (eq. `facts-lexical`): a claim is supported when one
    document sentence contains every number it states and at least ``coverage`` of its content
    words."""

    name: str
    coverage: float = 0.8

    def __post_init__(self):
        checks.probability(self.coverage, "coverage", open_low=True)

    def labels(self, response: Response, doc: Document, rng=None) -> list[str]:
        vocab = _doc_vocabulary(doc)
        doc_words = [set(content_words(s)) for s in doc.sentences]
        doc_numbers = [set(numbers(s)) for s in doc.sentences]
        out = []
        for s in response.sentences:
            if makes_no_claim(s, vocab):
                out.append("no_rad")
                continue
            words, nums = set(content_words(s)), set(numbers(s))
            ok = any(
                nums <= dn and len(words & dw) >= self.coverage * len(words)
                for dw, dn in zip(doc_words, doc_numbers)
            )
            out.append("supported" if ok else "unsupported")
        return out


@dataclass
class TfidfJudge:
    """Sentence labels by TF-IDF similarity: a claim is supported when its cosine similarity
    with its nearest document sentence reaches ``threshold``. The vectoriser is fitted on the
    corpus's sentences (``fit``) before use."""

    name: str
    threshold: float = 0.6
    _vectorizer: TfidfVectorizer | None = field(default=None, repr=False)

    def __post_init__(self):
        checks.probability(self.threshold, "threshold")

    def fit(self, docs: list[Document]) -> TfidfJudge:
        corpus = [s for d in docs for s in d.sentences]
        self._vectorizer = TfidfVectorizer(sublinear_tf=True).fit(corpus)
        return self

    def labels(self, response: Response, doc: Document, rng=None) -> list[str]:
        if self._vectorizer is None:
            raise RuntimeError(f"{self.name}: call fit(documents) before labelling")
        vocab = _doc_vocabulary(doc)
        doc_m = self._vectorizer.transform(doc.sentences)
        out = []
        for s in response.sentences:
            if makes_no_claim(s, vocab):
                out.append("no_rad")
                continue
            sim = (self._vectorizer.transform([s]) @ doc_m.T).toarray().max()
            out.append("supported" if sim >= self.threshold else "unsupported")
        return out


@dataclass(frozen=True)
class TrivialJudge:
    """The baseline a usable grounding judge must beat: it applies the shared "no_rad" rule and
    calls every other sentence supported, so it never finds an unsupported sentence. Its
    macro-F1 is what a judge scores for labelling claims apart from non-claims alone."""

    name: str = "trivial"

    def labels(self, response: Response, doc: Document, rng=None) -> list[str]:
        vocab = _doc_vocabulary(doc)
        return ["no_rad" if makes_no_claim(s, vocab) else "supported" for s in response.sentences]


@dataclass(frozen=True)
class SimulatedJudge:
    """A judge of known error rates (eq. `facts-simulated-judge`): from the gold labels it
    misses an unsupported sentence with probability ``p_miss`` (raised to
    ``p_miss + self_leniency * (1 - p_miss)`` on responses of its own ``family``), flags a
    supported one with ``p_false``, and returns nothing parseable with ``p_unparseable``."""

    name: str
    family: str
    p_miss: float = 0.1
    p_false: float = 0.05
    self_leniency: float = 0.0
    p_unparseable: float = 0.0

    def __post_init__(self):
        for name in ("p_miss", "p_false", "self_leniency", "p_unparseable"):
            checks.probability(getattr(self, name), name)

    def labels(self, response: Response, doc: Document, rng: np.random.Generator):
        rng = checks.generator(rng)
        miss = self.p_miss
        if response.family == self.family:
            miss = miss + self.self_leniency * (1 - miss)
        out = []
        for gold in response.gold:
            u = rng.random()
            if gold == "unsupported":
                out.append("supported" if u < miss else "unsupported")
            elif gold == "supported":
                out.append("unsupported" if u < self.p_false else "supported")
            else:
                out.append(gold)
        if rng.random() < self.p_unparseable:
            return None
        return out
