"""The FACTS scores: the suite's aggregate, the two-phase Grounding v2 score, the four
Parametric/Search metrics and the Multimodal rubric verdict.

Every function here is the protocol as the chapter's index page writes it; none calls a model.
The judges' verdicts come in as plain values (strings, booleans), so the same code scores our
offline stand-ins and would score real judges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from reprobook.core import checks

__all__ = [
    "BENCHMARKS",
    "SPLIT_SIZES",
    "MAJOR_ISSUES",
    "SENTENCE_LABELS",
    "QA_LABELS",
    "public_total",
    "facts_score",
    "eligibility",
    "grounded",
    "response_score",
    "grounding_scores",
    "qa_metrics",
    "rubric_verdict",
]

BENCHMARKS = ("multimodal", "parametric", "search", "grounding")

# Public and private sizes of the four sub-benchmarks as the paper gives them (Grounding: the
# December 2024 public release of 860 prompts; the current public release has 856).
SPLIT_SIZES: dict[str, dict[str, int]] = {
    "multimodal": {"public": 711, "private": 811},
    "parametric": {"public": 1052, "private": 1052},
    "search": {"public": 890, "private": 994},
    "grounding": {"public": 860, "private": 859},
}

MAJOR_ISSUES = "Major Issue(s)"  # the eligibility scale's worst value
SENTENCE_LABELS = ("supported", "unsupported", "no_rad")
QA_LABELS = ("correct", "incorrect", "not_attempted")


def public_total(sizes: Mapping[str, Mapping[str, int]] = SPLIT_SIZES) -> int:
    """The number of public examples over the four sub-benchmarks."""
    return int(sum(int(s["public"]) for s in sizes.values()))


def facts_score(accuracies: Mapping[str, Mapping[str, float]]) -> float:
    """The FACTS Score, eq. `facts-score`: each sub-benchmark's accuracy is the unweighted mean
    of its public and private accuracies, and the score is the unweighted mean of the four.

    ``accuracies`` maps each of :data:`BENCHMARKS` to ``{"public": a, "private": b}`` with
    accuracies in [0, 1].
    """
    if not isinstance(accuracies, Mapping) or set(accuracies) != set(BENCHMARKS):
        got = sorted(accuracies) if isinstance(accuracies, Mapping) else type(accuracies).__name__
        raise checks.InputError(
            f"accuracies must map exactly the four sub-benchmarks {list(BENCHMARKS)}, got {got}"
        )
    per_benchmark = []
    for name in BENCHMARKS:
        split = accuracies[name]
        if not isinstance(split, Mapping) or set(split) != {"public", "private"}:
            raise checks.InputError(
                f"accuracies[{name!r}] must map 'public' and 'private' to accuracies, got {split!r}"
            )
        pub = checks.probability(split["public"], f"accuracies[{name!r}]['public']")
        priv = checks.probability(split["private"], f"accuracies[{name!r}]['private']")
        per_benchmark.append((pub + priv) / 2)
    return float(sum(per_benchmark) / len(per_benchmark))


def _is_major(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.strip() == MAJOR_ISSUES


def eligibility(judges: Sequence[Callable[[], object]]) -> tuple[bool, int]:
    """Phase 1 of Grounding v2, eq. `facts-eligible`: ask the eligibility judges in their fixed
    order; the response is eligible as soon as one verdict is anything but "Major Issue(s)"
    (an unparseable verdict, ``None`` or any other text, counts as eligible), and the judges
    after it are not asked. Ineligible only when every judge says "Major Issue(s)".

    ``judges`` are zero-argument callables, each returning one judge's verdict, so that a judge
    is only consulted when needed. Returns ``(eligible, judges_consulted)``.
    """
    if isinstance(judges, (str, bytes)) or not isinstance(judges, Sequence) or not judges:
        raise checks.InputError(
            f"judges must be a non-empty sequence of zero-argument callables, got {judges!r}"
        )
    for i, judge in enumerate(judges):
        if not callable(judge):
            raise checks.InputError(f"judges[{i}] must be callable, got {type(judge).__name__}")
        if not _is_major(judge()):
            return True, i + 1
    return False, len(judges)


def grounded(labels: Iterable[str] | None) -> bool:
    """Phase 2 for one judge, eq. `facts-grounded`: the judge's verdict is *grounded* when it
    labelled at least one sentence and none of them "unsupported" ("supported" and "no_rad",
    a sentence that needs no support, both pass). ``None`` (the judge's answer could not be
    parsed) and an empty list are not grounded."""
    if labels is None:
        return False
    labels = list(labels)
    for lab in labels:
        checks.choice(lab, "sentence label", SENTENCE_LABELS)
    return len(labels) > 0 and "unsupported" not in labels


def response_score(is_eligible: bool, verdicts: Sequence[bool]) -> float:
    """One response's adjusted score, eq. `facts-response`: 0 when ineligible, else the share
    of grounding judges whose verdict is grounded (a value in {0, 1/J, ..., 1})."""
    is_eligible = checks.boolean(is_eligible, "is_eligible")
    v = checks.array(verdicts, "verdicts", ndim=1, dtype=bool)
    if v.size == 0:
        raise checks.InputError("verdicts must hold one verdict per judge, got none")
    return float(v.mean()) if is_eligible else 0.0


def grounding_scores(eligible, verdicts) -> tuple[float, float]:
    """The benchmark's ``(adjusted, unadjusted)`` Grounding scores, eq. `facts-grounding`:
    the mean over responses of :func:`response_score`, and the same mean with eligibility
    ignored. ``eligible`` has shape (n,), ``verdicts`` shape (n, J) (one column per judge)."""
    e = checks.array(eligible, "eligible", ndim=1, dtype=bool, what="(n,)")
    v = checks.array(verdicts, "verdicts", ndim=2, dtype=bool, what="(n, J)")
    if v.shape[0] != e.shape[0] or v.shape[0] == 0 or v.shape[1] == 0:
        raise checks.InputError(
            f"eligible (n,) and verdicts (n, J) must agree on n >= 1 responses with J >= 1, "
            f"got {e.shape} and {v.shape}"
        )
    per_response = v.mean(axis=1)
    return float(np.mean(per_response * e)), float(np.mean(per_response))


def qa_metrics(labels: Iterable[str]) -> dict[str, float]:
    """The Parametric and Search metrics, eq. `facts-qa`, from the autorater's labels
    ("correct", "incorrect", "not_attempted"): accuracy = correct / all (the suite's
    component), attempted accuracy = correct / attempted, hedging = not attempted / all, and F1,
    the harmonic mean of accuracy and attempted accuracy (0 when both are 0). Attempted accuracy
    is NaN when nothing was attempted."""
    labs = list(labels)
    for lab in labs:
        checks.choice(lab, "QA label", QA_LABELS)
    n = len(labs)
    if n == 0:
        raise checks.InputError("labels must hold at least one autorater label, got none")
    correct = labs.count("correct")
    attempted = n - labs.count("not_attempted")
    acc = correct / n
    att = correct / attempted if attempted else float("nan")
    both = acc + (att if attempted else 0.0)
    f1 = 2 * acc * att / both if attempted and both > 0 else 0.0
    return {
        "accuracy": acc,
        "attempted_accuracy": att,
        "hedging": (n - attempted) / n,
        "f1": f1,
        "n": n,
    }


def rubric_verdict(
    stated: Mapping[str, str], essential: Mapping[str, str], non_essential: Mapping[str, str]
) -> dict[str, bool]:
    """The Multimodal rubric verdict, eq. `facts-rubric`: *coverage* holds when the response
    states every essential fact with the rubric's value; *no contradiction* holds when no
    stated fact that the rubric knows (essential or not) has another value. A response is
    accurate when both hold. Facts the rubric does not know are neither credited nor held
    against the response (the image would decide them; our rubrics are complete)."""
    for name, m in (("stated", stated), ("essential", essential), ("non_essential", non_essential)):
        if not isinstance(m, Mapping):
            raise checks.InputError(f"{name} must map fact names to values, got {m!r}")
    overlap = set(essential) & set(non_essential)
    if overlap:
        raise checks.InputError(f"a fact is both essential and not: {sorted(overlap)}")
    rubric = {**essential, **non_essential}
    coverage = all(stated.get(k) == v for k, v in essential.items())
    no_contradiction = all(rubric[k] == v for k, v in stated.items() if k in rubric)
    return {
        "coverage": coverage,
        "no_contradiction": no_contradiction,
        "accurate": coverage and no_contradiction,
    }
