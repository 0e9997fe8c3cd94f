"""Scoring a panel of judges against the generator's gold labels: the grounded-verdict matrix,
sentence macro-F1, split verdicts, agreement, and the family advantage that self-preference
gives (eq. `facts-advantage`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reprobook.core import checks

from .corpus import Document
from .policies import Response
from .scoring import SENTENCE_LABELS, grounded

__all__ = [
    "judge_all",
    "grounded_matrix",
    "gold_grounded",
    "confusion_by_prompt",
    "macro_f1",
    "f1_gain",
    "split_rate",
    "family_advantage",
]


def judge_all(
    judges: Sequence, responses: Sequence[Response], docs: dict[str, Document], prompts, rng
) -> list[list[list[str] | None]]:
    """Every judge's sentence labels for every response (``None`` where unparseable):
    ``out[j][i]`` is judge ``j`` on response ``i``."""
    rng = checks.generator(rng)
    by_id = {p.prompt_id: p for p in prompts}
    return [[j.labels(r, docs[by_id[r.prompt_id].doc_id], rng) for r in responses] for j in judges]


def grounded_matrix(labels: list[list[list[str] | None]]) -> np.ndarray:
    """The (n responses, J judges) matrix of grounded verdicts, eq. `facts-grounded`."""
    return np.array([[grounded(lab) for lab in per_judge] for per_judge in labels]).T


def gold_grounded(responses: Sequence[Response]) -> np.ndarray:
    """Each response's gold grounded verdict (from the generator's sentence labels)."""
    return np.array([grounded(r.gold) for r in responses])


def confusion_by_prompt(labels, responses: Sequence[Response], n_prompts: int) -> np.ndarray:
    """Per judge and prompt, the 3 x 3 confusion counts of sentence labels (rows gold, columns
    the judge's, in the order of ``SENTENCE_LABELS``), shape (J, n_prompts, 3, 3). An
    unparseable answer (None) adds nothing."""
    n_prompts = checks.integer(n_prompts, "n_prompts", minimum=1)
    code = {lab: k for k, lab in enumerate(SENTENCE_LABELS)}
    out = np.zeros((len(labels), n_prompts, 3, 3))
    for j, per_judge in enumerate(labels):
        for r, lab in zip(responses, per_judge):
            for g, p in zip(r.gold, lab or ()):
                out[j, r.prompt_id, code[g], code[p]] += 1
    return out


def macro_f1(confusion) -> np.ndarray:
    """Macro-F1 over the three labels from confusion counts (..., 3, 3): per label
    2 TP / (gold count + predicted count), 0 for a label that neither side uses, averaged;
    equal to scikit-learn's ``f1_score(average="macro", zero_division=0)`` on the same labels."""
    m = np.asarray(confusion, dtype=float)
    tp = np.diagonal(m, axis1=-2, axis2=-1)
    denom = m.sum(-1) + m.sum(-2)
    return np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0).mean(-1)


def f1_gain(confusion, baseline):
    """The statistic of a paired bootstrap over prompts: for prompt indices ``idx`` (resampled,
    repeats allowed), a judge's macro-F1 on those prompts minus the baseline judge's on the same
    prompts. ``confusion`` and ``baseline`` are one judge's per-prompt confusion counts, shape
    (n_prompts, 3, 3), as :func:`confusion_by_prompt` gives them for each judge."""
    own = np.asarray(confusion, dtype=float)
    base = np.asarray(baseline, dtype=float)
    if own.shape != base.shape or own.ndim != 3 or own.shape[1:] != (3, 3):
        raise checks.InputError(
            f"f1_gain needs two (n_prompts, 3, 3) arrays, got shapes {own.shape} and {base.shape}"
        )

    def gain(idx) -> float:
        idx = np.asarray(idx, dtype=int)
        return float(macro_f1(own[idx].sum(0)) - macro_f1(base[idx].sum(0)))

    return gain


def split_rate(verdicts) -> float:
    """The share of responses on which the judges' grounded verdicts are not unanimous."""
    v = checks.array(verdicts, "verdicts", ndim=2, dtype=bool, what="(n, J)")
    return float(np.mean(v.any(axis=1) & ~v.all(axis=1)))


def family_advantage(scores, gold, families) -> dict[str, float]:
    """Eq. `facts-advantage`: for each family f, the inflation of its responses' scores over
    their gold scores, minus the mean inflation of the other families' responses."""
    s = checks.array(scores, "scores", ndim=1)
    g = checks.array(gold, "gold", ndim=1)
    fam = np.asarray(families)
    if not (s.shape == g.shape == fam.shape):
        raise checks.InputError(
            f"scores, gold and families must have one entry per response, got shapes "
            f"{s.shape}, {g.shape} and {fam.shape}"
        )
    names = sorted(set(fam.tolist()))
    if len(names) < 2:
        raise checks.InputError(f"family_advantage needs two families or more, got {names}")
    inflation = {f: float(np.mean(s[fam == f] - g[fam == f])) for f in names}
    return {
        f: inflation[f] - float(np.mean([inflation[o] for o in names if o != f])) for f in names
    }


def protocol_frame(prompts, responses, docs, eligibility_judges, grounding_judges, rng):
    """Both phases of Grounding v2 on every response: one row per (policy, prompt) with the
    eligibility (eq. `facts-eligible`), how many eligibility judges were asked, each grounding
    judge's verdict (eq. `facts-grounded`, columns ``g_<name>``) and the gold values.
    ``responses`` maps a policy to its responses, in the order of ``prompts``."""
    import pandas as pd

    from .scoring import eligibility

    rng = checks.generator(rng)
    rows = []
    for policy, answers in responses.items():
        for prompt, response in zip(prompts, answers):

            def ask(judge, p=prompt, r=response):
                return lambda: judge.verdict(p, r, rng)

            ok, asked = eligibility([ask(j) for j in eligibility_judges])
            doc = docs[prompt.doc_id]
            row = {"policy": policy, "eligible": ok, "asked": asked}
            for j in grounding_judges:
                row[f"g_{j.name}"] = grounded(j.labels(response, doc, rng))
            row["gold_grounded"] = grounded(response.gold)
            row["on_request"] = response.on_request
            rows.append(row)
    return pd.DataFrame(rows)


def policy_table(frame):
    """Per policy: the eligible share, the adjusted and unadjusted Grounding scores
    (eq. `facts-grounding`) and the gold shares, from :func:`protocol_frame`'s rows."""
    from .scoring import grounding_scores

    verdicts = [c for c in frame.columns if c.startswith("g_")]
    out = {}
    for policy, d in frame.groupby("policy", sort=False):
        adjusted, unadjusted = grounding_scores(d.eligible, d[verdicts])
        out[policy] = {
            "eligible": d.eligible.mean(),
            "adjusted": adjusted,
            "unadjusted": unadjusted,
            "gold grounded": d.gold_grounded.mean(),
            "gold on request": d.on_request.mean(),
        }
    import pandas as pd

    return pd.DataFrame(out).T
