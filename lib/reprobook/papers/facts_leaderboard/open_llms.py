"""Open language models on the public FACTS Grounding examples: the full profile's real path.

With ``llm="real"`` (the full and smoke profiles), notebook 01_protocol loads the public
Grounding release (:func:`public_examples`) and the open instruction-tuned models of the
configuration, and runs the protocol of the chapter's page on them:

1. each model answers the first ``n`` examples, with its own chat template and greedy decoding,
   given the example's ``full_prompt`` (the instruction, the document and the request, as the
   release writes them) as one user turn (:func:`respond`);
2. phase 1, eligibility (eq. `facts-eligible`): the models, in the configuration's order, rate
   each answer against the request *without* the document; a later model is asked only when
   every earlier one said "Major Issue(s)" (:func:`ask_eligibility`);
3. phase 2, grounding (eq. `facts-grounded`): every model labels each sentence of every answer
   "supported", "unsupported" or "no_rad" with the document in view (:func:`ask_labels`);
4. the scores of eqs. `facts-response` and `facts-grounding` per responder, by
   :mod:`.scoring` (:func:`responder_table`), and the judges' own-family gap
   (:func:`self_preference`).

The judge prompts (:data:`ELIGIBILITY_PROMPT`, :data:`GROUNDING_PROMPT`) are ours, written from
the page's description of the two phases; they are not the release's evaluation prompts, and
two open models are not the paper's judges, so nothing here is a leaderboard score. An answer a
judge returns in another form is unparseable: an eligible verdict in phase 1 and not grounded in
phase 2, as the protocol says. Every model and the data are loaded through
``reprobook.core.locate``: the hub at the full profile, tiny fixtures (``fixtures.py``) at smoke.
"""

from __future__ import annotations

import contextlib
import gc
import re
import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from reprobook import core
from reprobook.core import checks

from .corpus import GROUNDING_COLUMNS
from .judges import ELIGIBILITY_SCALE
from .scoring import MAJOR_ISSUES, eligibility, grounded, grounding_scores

__all__ = [
    "CHAPTER",
    "DATASET",
    "LLM_CHOICES",
    "NEEDED_COLUMNS",
    "ELIGIBILITY_PROMPT",
    "GROUNDING_PROMPT",
    "uses_real_models",
    "model_find",
    "short_name",
    "public_examples",
    "load",
    "generate",
    "split_sentences",
    "parse_eligibility",
    "parse_labels",
    "respond",
    "ask_eligibility",
    "ask_labels",
    "answer_and_judge",
    "responder_table",
    "unreadable",
    "self_preference",
]

CHAPTER = "facts_leaderboard"
DATASET = "hf-dataset:google/FACTS-grounding-public"
LLM_CHOICES = ("emulated", "real")
# the columns this path reads; the release's other columns (GROUNDING_COLUMNS) are kept if there
NEEDED_COLUMNS = ("system_instruction", "user_request", "context_document", "full_prompt")

ELIGIBILITY_PROMPT = """You will see a user's request and an AI assistant's response to it.
The assistant was given a document that you do not see. Do not judge whether the response is
true; judge only whether it addresses the request, that is, whether it attempts to do what was
asked.

Request:
{request}

Response:
{response}

Rate the response with exactly one of: No Issues, Minor Issue(s), Major Issue(s).
Use Major Issue(s) when the response does not address the request at all.
Reply with the rating only."""

GROUNDING_PROMPT = """You will see a document, a user's request and the numbered sentences of
an AI assistant's response. Decide for each sentence whether the document supports it:
- supported: the document states it or clearly implies it;
- unsupported: the document does not back it, or contradicts it;
- no_rad: the sentence makes no factual claim (a greeting, a transition, an offer of help).

Document:
{document}

Request:
{request}

Sentences:
{sentences}

Reply with one line per sentence, in order, written as <number>: <label>, and nothing else."""


def uses_real_models(choice: str, profile: str) -> bool:
    """Whether notebook 01_protocol runs the open models: ``choice`` is the configuration's
    ``llm``, "real" (the models and the public examples, at the full and smoke profiles) or
    "emulated" (the scripted stand-ins only). The reduced profile uses no inputs, so "real"
    there is refused before any work."""
    checks.choice(choice, "llm", LLM_CHOICES)
    if choice == "real" and not core.runs_full_path(profile):
        raise checks.InputError(
            f"llm='real' runs the open models, which the {profile} profile does not load; "
            "run it at the full profile (or smoke, on tiny fixtures), or keep llm='emulated'"
        )
    return choice == "real"


def model_find(name: str) -> str:
    """The input a model id is checked as (``"hf-model:Qwen/Qwen2.5-7B-Instruct"``)."""
    return f"hf-model:{name}"


def short_name(name: str) -> str:
    """A model id without its organisation (``"Qwen2.5-7B-Instruct"``)."""
    return str(name).rsplit("/", 1)[-1]


def _check_examples(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    missing = [c for c in NEEDED_COLUMNS if c not in frame.columns]
    if missing:
        raise checks.InputError(
            f"{where} lacks the Grounding column(s) {missing}; this path reads "
            f"{list(NEEDED_COLUMNS)}"
        )
    for col in ("context_document", "user_request", "full_prompt"):
        empty = frame[col].isna() | (frame[col].astype(str).str.strip() == "")
        if empty.any():
            raise checks.InputError(
                f"{where}: empty {col} in row(s) {list(frame.index[empty][:5])}"
            )
    kept = [c for c in GROUNDING_COLUMNS if c in frame.columns]
    return frame[kept].reset_index(drop=True)


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    """Importing ``datasets`` or ``transformers`` in a kernel without ipywidgets warns that
    tqdm's notebook bars are missing; the bars are not used here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        yield


def public_examples(profile: str, n: int) -> pd.DataFrame:
    """The first ``n`` public FACTS Grounding examples (configuration ``examples``, split
    ``public``; all 860 when ``n`` is larger), loaded with ``core.load_hf_dataset`` (the hub's
    cache at full, the fixture at smoke), with the release's columns checked."""
    n = checks.integer(n, "n", minimum=1)
    with _quiet_progress():
        data = core.load_hf_dataset(CHAPTER, DATASET, profile, name="examples", split="public")
    frame = _check_examples(data.to_pandas(), "google/FACTS-grounding-public")
    return frame.head(n)


def load(name: str, profile: str):
    """``(model, tokenizer)`` of the open model ``name``, from ``core.locate``: bfloat16 on a
    GPU, float32 on the CPU, in eval mode. The tokenizer pads on the left (for batched
    generation) with its own pad token, or its end-of-sequence token when it has none (Llama).
    The model's generation defaults are replaced by plain greedy decoding that stops at the
    model's own end tokens, so no sampling or repetition penalty of the release applies."""
    import torch

    with _quiet_progress():
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging

    logging.disable_progress_bar()  # a bar per checkpoint shard clutters the notebook
    where = core.locate(CHAPTER, model_find(name), profile)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tok = AutoTokenizer.from_pretrained(where)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype).to(device).eval()
    eos = model.generation_config.eos_token_id
    model.generation_config = GenerationConfig(
        do_sample=False,
        eos_token_id=eos if eos is not None else tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=model.generation_config.bos_token_id,
    )
    return model, tok


def generate(
    model, tokenizer, conversations: Sequence[list[dict]], max_new_tokens: int, batch_size: int
) -> list[str]:
    """Greedy replies to ``conversations`` (each a list of ``{"role", "content"}`` turns),
    rendered with the tokenizer's chat template and its generation prompt, in batches of
    ``batch_size`` of similar length; at most ``max_new_tokens`` each, returned in the order
    given, stripped of special tokens and surrounding whitespace."""
    import torch

    max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", minimum=1)
    batch_size = checks.integer(batch_size, "batch_size", minimum=1)
    texts = [
        tokenizer.apply_chat_template(list(c), add_generation_prompt=True, tokenize=False)
        for c in conversations
    ]
    lengths = [len(tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
    out: list[str] = [""] * len(texts)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        enc = tokenizer(
            [texts[i] for i in chunk], return_tensors="pt", padding=True, add_special_tokens=False
        ).to(model.device)
        with torch.inference_mode():
            ids = model.generate(**enc, max_new_tokens=max_new_tokens)
        replies = tokenizer.batch_decode(ids[:, enc.input_ids.shape[1] :], skip_special_tokens=True)
        for i, reply in zip(chunk, replies):
            out[i] = reply.strip()
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]+|\d+[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences a grounding judge labels: each line of the response, its list marker
    ("-", "*", "2.") removed, cut at sentence ends; empty pieces dropped."""
    out = []
    for line in str(text).splitlines():
        for piece in _SENTENCE_END.split(_LIST_MARKER.sub("", line)):
            if piece.strip():
                out.append(piece.strip())
    return out


def parse_eligibility(reply: str) -> str | None:
    """The rating a phase-1 reply gives, the first rating of the scale to appear in it
    (case and the "(s)" ignored), or ``None`` when it names none (unparseable: eligible, by
    eq. `facts-eligible`)."""
    text = str(reply).lower()
    found = []
    for label in ELIGIBILITY_SCALE:
        m = re.search(re.escape(label.lower().replace("(s)", "")), text)
        if m:
            found.append((m.start(), label))
    return min(found)[1] if found else None


_LABEL_LINE = re.compile(
    r"^\W*(\d+)\s*[:.)\-]\s*\**\s*(unsupported|supported|no_rad)\b", re.I | re.M
)


def parse_labels(reply: str, n_sentences: int) -> list[str] | None:
    """The sentence labels a phase-2 reply gives, one per numbered sentence 1..n: a list in
    the order of the sentences, or ``None`` (unparseable: not grounded, eq. `facts-grounded`)
    when a sentence has no label or two different ones, or a number is out of range."""
    n_sentences = checks.integer(n_sentences, "n_sentences", minimum=0)
    labels: dict[int, str] = {}
    for number, label in _LABEL_LINE.findall(str(reply)):
        k, lab = int(number), label.lower()
        if not 1 <= k <= n_sentences or labels.get(k, lab) != lab:
            return None
        labels[k] = lab
    if n_sentences == 0 or len(labels) != n_sentences:
        return None
    return [labels[k] for k in range(1, n_sentences + 1)]


def respond(model, tokenizer, examples: pd.DataFrame, max_new_tokens: int, batch_size: int):
    """Step 1: the model's greedy answers to the examples' ``full_prompt``, one user turn each."""
    turns = [[{"role": "user", "content": p}] for p in examples["full_prompt"]]
    return generate(model, tokenizer, turns, max_new_tokens, batch_size)


def ask_eligibility(model, tokenizer, requests, responses, max_new_tokens: int, batch_size: int):
    """Phase 1 for one judge (eq. `facts-eligible`): its rating of each response against its
    request, the document withheld; ``None`` where the reply names no rating."""
    turns = [
        [{"role": "user", "content": ELIGIBILITY_PROMPT.format(request=q, response=r)}]
        for q, r in zip(requests, responses)
    ]
    return [
        parse_eligibility(r) for r in generate(model, tokenizer, turns, max_new_tokens, batch_size)
    ]


def ask_labels(
    model, tokenizer, documents, requests, responses, max_new_tokens: int, batch_size: int
):
    """Phase 2 for one judge (eq. `facts-grounded`): its label for each sentence of each
    response, the document in view; ``None`` where the reply cannot be read, and ``[]`` for a
    response without sentences (not grounded either way)."""
    sentences = [split_sentences(r) for r in responses]
    asked = [i for i, s in enumerate(sentences) if s]
    turns = [
        [
            {
                "role": "user",
                "content": GROUNDING_PROMPT.format(
                    document=documents[i],
                    request=requests[i],
                    sentences="\n".join(f"{k}. {s}" for k, s in enumerate(sentences[i], 1)),
                ),
            }
        ]
        for i in asked
    ]
    replies = generate(model, tokenizer, turns, max_new_tokens, batch_size)
    out: list[list[str] | None] = [[] for _ in responses]
    for i, reply in zip(asked, replies):
        out[i] = parse_labels(reply, len(sentences[i]))
    return out


def _release(model) -> None:
    import torch

    del model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def answer_and_judge(
    examples: pd.DataFrame,
    models: Sequence[str],
    profile: str,
    *,
    response_tokens: int,
    eligibility_tokens: int,
    label_tokens: int,
    batch_size: int,
    loader: Callable | None = None,
) -> pd.DataFrame:
    """Steps 1-3 of the module's protocol on ``examples`` with the open ``models`` (hub ids, in
    the eligibility order), one loaded at a time (``loader(name, profile)``, :func:`load` by
    default). One row per (responder, example): the answer, its sentence count, whether each
    judge was asked for a rating (``asked_<judge>``) and its rating (``rating_<judge>``,
    ``None`` where not asked or unparseable), the eligibility and
    the number of judges asked (eq. `facts-eligible`), each judge's sentence labels
    (``labels_<judge>``) and grounded verdict (``g_<judge>``, eq. `facts-grounded`)."""
    if not models:
        raise checks.InputError("models must name at least one open model, got none")
    loader = loader or load
    names = [short_name(m) for m in models]
    answers = {}
    for name, full in zip(names, models):
        model, tok = loader(full, profile)
        answers[name] = respond(model, tok, examples, response_tokens, batch_size)
        _release(model)
    frame = pd.DataFrame(
        [
            {"responder": name, "example": int(i), "response": answers[name][k]}
            for name in names
            for k, i in enumerate(examples.index)
        ]
    )
    rows = examples.loc[frame.example]
    requests, documents = list(rows.user_request), list(rows.context_document)
    frame["sentences"] = [len(split_sentences(r)) for r in frame.response]
    pending = np.ones(len(frame), dtype=bool)  # every earlier judge said "Major Issue(s)"
    for name, full in zip(names, models):
        model, tok = loader(full, profile)
        frame[f"asked_{name}"] = pending.copy()
        ask = np.flatnonzero(pending)
        ratings = ask_eligibility(
            model,
            tok,
            [requests[i] for i in ask],
            [frame.response[i] for i in ask],
            eligibility_tokens,
            batch_size,
        )
        column = [None] * len(frame)
        for i, r in zip(ask, ratings):
            column[i] = r
            pending[i] = r == MAJOR_ISSUES
        frame[f"rating_{name}"] = column
        labels = ask_labels(
            model, tok, documents, requests, list(frame.response), label_tokens, batch_size
        )
        frame[f"labels_{name}"] = pd.Series(labels, index=frame.index, dtype=object)
        frame[f"g_{name}"] = [grounded(lab) for lab in labels]
        _release(model)
    decided = [
        eligibility([(lambda v=row[f"rating_{n}"]: v) for n in names])
        for _, row in frame.iterrows()
    ]
    frame["eligible"] = [ok for ok, _ in decided]
    frame["asked"] = [k for _, k in decided]
    return frame


def responder_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per responder: the eligible share, the adjusted and unadjusted Grounding scores over the
    judge panel (eqs. `facts-response` and `facts-grounding`) and each judge's grounded share
    (``by <judge>``), from :func:`answer_and_judge`' rows."""
    judges = [c for c in frame.columns if c.startswith("g_")]
    out = {}
    for responder, d in frame.groupby("responder", sort=False):
        adjusted, unadjusted = grounding_scores(d.eligible.to_numpy(bool), d[judges].to_numpy(bool))
        row = {"eligible": float(d.eligible.mean()), "adjusted": adjusted, "unadjusted": unadjusted}
        row.update({f"by {c[2:]}": float(d[c].mean()) for c in judges})
        out[responder] = row
    return pd.DataFrame(out).T


def unreadable(frame: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """Per judge, the share of its replies the parsers could not read: of the eligibility
    ratings it was asked for (counted eligible) and of the label replies on answers with
    sentences (counted not grounded); ``None`` where it was asked for none."""
    out = {}
    for column in [c for c in frame.columns if c.startswith("labels_")]:
        judge = column[len("labels_") :]
        asked, has = frame[f"asked_{judge}"], frame.sentences > 0
        ratings = frame.loc[asked, f"rating_{judge}"].isna()
        labels = frame.loc[has, column].isna()
        out[judge] = {
            "ratings": float(ratings.mean()) if len(ratings) else None,
            "labels": float(labels.mean()) if len(labels) else None,
        }
    return out


def self_preference(frame: pd.DataFrame) -> float | None:
    """The judges' own-family gap, a difference of differences over two models that both answer
    and judge: half of [judge A's grounded share on A's answers minus on B's] minus [judge B's
    on A's minus on B's]. Whatever both judges agree on (one model's answers being better
    grounded) cancels; what is left is the mean extra credit a judge gives its own model's
    answers (eq. `facts-advantage` with two families and no gold labels). ``None`` unless
    exactly two models answered and judged."""
    names = list(dict.fromkeys(frame.responder))
    if len(names) != 2 or not all(f"g_{n}" in frame.columns for n in names):
        return None
    a, b = names
    share = {
        (j, r): float(frame.loc[frame.responder == r, f"g_{j}"].mean())
        for j in names
        for r in names
    }
    return 0.5 * ((share[a, a] - share[a, b]) - (share[b, a] - share[b, b]))
