"""The LLM tier prior of the full profile: an open instruction-tuned model sorts each
variable's levels into the three ordinal tiers that the tier graph reads.

For each level of a variable the model is shown the reaction, the variable, every level of it
(so that it can compare them) and the level in question, and asked for that level's tier as a
single digit, 1 (low yield expected) to 3 (high). Nothing is sampled and no reasoning is
generated: the answer is read off the model's next-token distribution at the start of its
reply, restricted to the three digits, and the level's tier is the most likely digit
(eq. `tagbo-llm`). Those tiers feed the same graph, kernel and BO loop as the emulated prior of
:mod:`.priors`, in its place.

The prompt and the reading of the answer are ours: the paper's prompts are not public. The model
is loaded from ``core.locate("tagbo", config.LLM_FIND, profile)``: the hub id at the full
profile, the chapter's tiny random fixture (:mod:`.fixtures`) at smoke.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reprobook import core
from reprobook.core import checks

from . import config, data, priors

__all__ = ["TASKS", "tier_messages", "answer_probabilities", "TierElicitor", "load"]

SYSTEM = (
    "You are an expert synthetic chemist who plans the optimisation of reaction conditions. "
    "You judge conditions from chemical knowledge alone; no yields are given to you."
)
TASKS = {  # what the reaction is, by table; {substrate} is the pool's fixed reactant(s)
    "suzuki": (
        "a palladium-catalysed Suzuki-Miyaura cross-coupling of the reactants {substrate} (SMILES)"
    ),
    "buchwald": (
        "a palladium-catalysed Buchwald-Hartwig amination of the aryl halide {substrate} "
        "(SMILES) with p-toluidine, run with an isoxazole additive"
    ),
}
DIGITS = tuple(str(k) for k in range(1, priors.N_TIERS + 1))  # the answers "1", "2", "3"


def _name(level: str, variable: str) -> str:
    return f"none (no {variable})" if level == data.NONE_LEVEL else level


def tier_messages(pool: data.Pool, variable: int, level: int) -> list[dict[str, str]]:
    """The chat that asks for the tier of level ``level`` of variable ``variable`` of
    ``pool``: a system message and one user message (the reaction, every level of the
    variable, the level asked about, and the answer wanted)."""
    j = checks.integer(variable, "variable", minimum=0, maximum=len(pool.variables) - 1)
    levels = pool.levels[j]
    ell = checks.integer(level, "level", minimum=0, maximum=len(levels) - 1)
    name = pool.variables[j]
    listed = "\n".join(f"- {_name(v, name)}" for v in levels)
    user = (
        f"We want the highest yield in {TASKS[pool.name].format(substrate=pool.substrate)}. "
        f"The conditions vary by {', '.join(pool.variables)}. The candidates for the "
        f"{name} are:\n{listed}\n\n"
        f"Sort this {name} into one of three tiers of expected yield, 1 (low), 2 (medium) "
        f"or 3 (high), compared with the other candidates: {_name(levels[ell], name)}\n"
        "Answer with the digit of the tier only."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def answer_ids(tokenizer) -> list[int]:
    """The token ids of the answers "1", "2", "3"; an error when one is not a single token."""
    ids = [tokenizer.encode(d, add_special_tokens=False) for d in DIGITS]
    if any(len(i) != 1 for i in ids):
        raise checks.InputError(f"the tokenizer splits the answers {DIGITS} into {ids}")
    return [i[0] for i in ids]


def answer_probabilities(model, tokenizer, messages) -> np.ndarray:
    """p_k, k = 1..3: the model's next-token probabilities of the digits "1", "2", "3" at the
    start of its reply to ``messages``, renormalised over the three (a softmax of their
    logits), as a (3,) float64 array.

    Implements p_{l,k} of eq. `tagbo-llm` of notebooks/09_tagbo/index.md."""
    import torch

    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    batch = tokenizer(text, return_tensors="pt", add_special_tokens=False)  # up to the reply
    batch = {k: v.to(model.device) for k, v in batch.items()}
    with torch.inference_mode():
        logits = model(**batch).logits[0, -1]  # the logits of the reply's first token
    z = logits[answer_ids(tokenizer)].double().cpu()  # z_{l,k}: those of "1", "2", "3"
    return torch.softmax(z, dim=0).numpy()  # eq. tagbo-llm: p_{l,k}


class TierElicitor:
    """An LLM asked for tiers: ``probabilities(pool)`` gives each level's answer distribution,
    ``tiers(pool)`` its answers, per variable; both cached per pool."""

    def __init__(self, model, tokenizer, name: str = "") -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        answer_ids(tokenizer)  # refuse a tokenizer that cannot answer with one token
        self._cache: dict[tuple[str, str], list[np.ndarray]] = {}

    def probabilities(self, pool: data.Pool) -> list[np.ndarray]:
        """Per variable j, the (L_j, 3) array of p_{l,k}, the model's answer distribution
        for each level l (:func:`answer_probabilities`)."""
        key = (pool.name, pool.substrate)
        if key not in self._cache:
            self._cache[key] = [
                np.stack(
                    [
                        answer_probabilities(self.model, self.tokenizer, tier_messages(pool, j, i))
                        for i in range(n)
                    ]
                )
                for j, n in enumerate(pool.sizes)
            ]
        return self._cache[key]

    def tiers(self, pool: data.Pool) -> list[np.ndarray]:
        """o_l = argmax_k p_{l,k}: the tier each level's answer gives (the lowest of equally
        likely ones), per variable, as integers in 1..3.

        Implements eq. `tagbo-llm` of notebooks/09_tagbo/index.md."""
        return [1 + np.argmax(P, axis=1) for P in self.probabilities(pool)]  # eq. tagbo-llm


def load(profile: str, **kwargs: Any) -> TierElicitor:
    """The LLM of ``config.LLM_MODEL`` with its tokenizer, from where ``core.locate`` says
    (the hub id at full, the tiny fixture at smoke): bfloat16 on a GPU when there is one,
    float32 on the CPU otherwise. ``kwargs`` go to ``from_pretrained`` of the model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no loading bars on the page
    where = core.locate("tagbo", config.LLM_FIND, profile)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kwargs.setdefault("dtype", torch.bfloat16 if device == "cuda" else torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(where)
    model = AutoModelForCausalLM.from_pretrained(where, **kwargs).to(device).eval()
    name = config.LLM_MODEL + (" (the tiny random fixture)" if profile == "smoke" else "")
    return TierElicitor(model, tokenizer, name)
