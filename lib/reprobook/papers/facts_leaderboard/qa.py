"""FACTS-lite's short-answer questions, two responders and the autorater (Parametric and Search).

Each factoid is a documented Python name and the first sentence of its docstring ("Return the
arc cosine (measured in radians) of x." -> ``math.acos``). The question restates that sentence
in other words (a fixed synonym table, the name masked) and asks which name it describes; the
answer is the name. Half of the factoids are *memorised* by the closed-book responder; the search
tool's index holds every docstring, so search can reach the other half.

- :func:`closed_book`: recalls a memorised answer (wrong with probability ``p_recall_error``) with
  high confidence; otherwise guesses a name of the same namespace with low confidence.
- :func:`search_answers`: BM25 over the docstrings (``rank_bm25``); the top document's name is the
  answer and the confidence is the top score's margin over the runner-up.

A responder abstains below a confidence threshold; the autorater compares the answer with the
gold name (eq. `facts-qa` turns its labels into the four metrics).
"""

from __future__ import annotations

import builtins
import inspect
import itertools
import json
import math
import operator
import os.path
import re
import statistics
import string
import textwrap
from dataclasses import dataclass

import numpy as np
from rank_bm25 import BM25Okapi

from reprobook.core import checks

from .corpus import content_words

__all__ = [
    "Factoid",
    "factoids",
    "split_memorised",
    "closed_book",
    "search_answers",
    "autorate",
    "sweep",
]

_NAMESPACES = {
    "builtins": builtins,
    "math": math,
    "str": str,
    "list": list,
    "dict": dict,
    "os.path": os.path,
    "statistics": statistics,
    "itertools": itertools,
    "textwrap": textwrap,
    "string": string,
    "json": json,
    "operator": operator,
}
_REWORDS = {
    "return": "give back",
    "returns": "gives back",
    "the": "a",
    "of": "for",
    "number": "count",
    "value": "quantity",
    "string": "text",
    "list": "sequence",
    "given": "supplied",
    "object": "item",
    "true": "yes",
}


@dataclass(frozen=True)
class Factoid:
    """One question: its id, namespace, gold answer (a name), the docstring sentence it comes
    from (the search index's document) and the question's text."""

    qid: int
    namespace: str
    answer: str
    passage: str
    question: str


def _first_sentence(obj) -> str | None:
    doc = inspect.getdoc(obj)
    if not doc:
        return None
    for para in doc.split("\n\n"):
        text = " ".join(para.split())
        words = text.split()
        if len(words) >= 4 and "(" not in words[0] and "->" not in text and "-- " not in text:
            return re.split(r"(?<=\.)\s", text)[0]
    return None


def _question(namespace: str, name: str, sentence: str) -> str:
    masked = re.sub(rf"\b{re.escape(name)}\b", "it", sentence, flags=re.IGNORECASE)
    words = [_REWORDS.get(w.lower(), w) for w in masked.rstrip(".").split()]
    return f"In Python's {namespace}, which name is described as: {' '.join(words)}?"


def factoids() -> list[Factoid]:
    """Every documented public callable of the namespaces above whose docstring's first
    sentence has four or more words, as a :class:`Factoid` (about 400 on Python 3.11).
    Deterministic for a given Python."""
    out = []
    for namespace, mod in _NAMESPACES.items():
        names = getattr(mod, "__all__", None) or dir(mod)
        for name in sorted(set(names)):
            if name.startswith("_"):
                continue
            obj = getattr(mod, name, None)
            if not callable(obj) or (isinstance(obj, type) and issubclass(obj, BaseException)):
                continue
            sentence = _first_sentence(obj)
            if sentence is None:
                continue
            out.append(
                Factoid(len(out), namespace, name, sentence, _question(namespace, name, sentence))
            )
    return out


def split_memorised(items: list[Factoid], rng: np.random.Generator) -> np.ndarray:
    """A boolean mask: the random half of the factoids that the closed-book responder knows."""
    rng = checks.generator(rng)
    mask = np.zeros(len(items), dtype=bool)
    mask[rng.permutation(len(items))[: len(items) // 2]] = True
    return mask


def closed_book(
    items: list[Factoid],
    memorised: np.ndarray,
    rng: np.random.Generator,
    p_recall_error: float = 0.1,
) -> tuple[list[str], np.ndarray]:
    """The closed-book responder's answers and confidences: a memorised factoid is answered
    (wrongly, another name of its namespace, with probability ``p_recall_error``) with
    confidence drawn from Beta(8, 2); any other is a guess from its namespace with confidence
    from Beta(2, 5)."""
    rng = checks.generator(rng)
    p = checks.probability(p_recall_error, "p_recall_error")
    memorised = checks.array(memorised, "memorised", shape=(len(items),), dtype=bool)
    by_ns: dict[str, list[str]] = {}
    for f in items:
        by_ns.setdefault(f.namespace, []).append(f.answer)
    answers, conf = [], np.empty(len(items))
    for i, f in enumerate(items):
        others = [a for a in by_ns[f.namespace] if a != f.answer] or [f.answer]
        if memorised[i]:
            wrong = rng.random() < p
            answers.append(others[int(rng.integers(len(others)))] if wrong else f.answer)
            conf[i] = rng.beta(8, 2)
        else:
            pool = by_ns[f.namespace]
            answers.append(pool[int(rng.integers(len(pool)))])
            conf[i] = rng.beta(2, 5)
    return answers, conf


def search_answers(items: list[Factoid], k1: float = 1.5, b: float = 0.75):
    """The search responder's answers and confidences: BM25 (Okapi, ``k1``, ``b``) over the
    content words of every factoid's docstring sentence; the answer is the top document's name
    and the confidence ``(s1 - s2) / s1`` (0 when nothing scores). Documents with equal scores
    rank in index order (a stable sort): NumPy's default sort leaves the order of ties to its
    SIMD kernels, which differ between CPUs, and about one question in fifteen has a tie at
    the top."""
    index = BM25Okapi([content_words(f.passage) or ["_"] for f in items], k1=k1, b=b)
    answers, conf = [], np.empty(len(items))
    for i, f in enumerate(items):
        scores = index.get_scores(content_words(f.question))
        top = np.argsort(-scores, kind="stable")[:2]  # the two best, ties by index
        s1, s2 = float(scores[top[0]]), float(scores[top[1]])
        answers.append(items[top[0]].answer)
        conf[i] = (s1 - s2) / s1 if s1 > 0 else 0.0
    return answers, conf


def autorate(items: list[Factoid], answers: list[str], confidence, threshold: float) -> list[str]:
    """The autorater's labels: "not_attempted" where the confidence is below ``threshold``
    (the responder abstains), else "correct" when the answer is the gold name."""
    threshold = checks.real(threshold, "threshold", minimum=0, maximum=1)
    conf = checks.array(confidence, "confidence", shape=(len(items),))
    if len(answers) != len(items):
        raise checks.InputError(f"answers must hold {len(items)} answers, got {len(answers)}")
    return [
        "not_attempted" if c < threshold else ("correct" if a == f.answer else "incorrect")
        for f, a, c in zip(items, answers, conf)
    ]


def sweep(items, answers, confidence, thresholds) -> list[dict]:
    """:func:`~.scoring.qa_metrics` at each abstention threshold."""
    from .scoring import qa_metrics

    return [
        {"threshold": float(t), **qa_metrics(autorate(items, answers, confidence, float(t)))}
        for t in thresholds
    ]
