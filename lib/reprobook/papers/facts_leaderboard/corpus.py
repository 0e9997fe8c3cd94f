"""FACTS-lite's documents and requests, built offline from text that ships with the environment.

The context documents are the dataset descriptions scikit-learn installs under
``sklearn/datasets/descr`` and the help topics of Python's ``pydoc_data.topics``: both are
prose with many checkable facts (counts, names, defaults). A request asks about a few of a
document's sentences, its *targets*; the generator knows them, which gives every response gold
sentence labels. The public Grounding release has another schema (:data:`GROUNDING_COLUMNS`):
the full profile loads it from the hub (:mod:`.open_llms`), and :func:`load_grounding` reads a
local copy of it (CSV or JSON lines), tested on a small made-up file in that schema.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from reprobook.core import checks

__all__ = [
    "Document",
    "Prompt",
    "GROUNDING_COLUMNS",
    "STOPWORDS",
    "documents",
    "sentences",
    "content_words",
    "numbers",
    "grounding_prompts",
    "load_grounding",
    "corpus_digest",
]

STOPWORDS = frozenset(
    """a an and are as at be been being but by can could do does each for from has have if in
    into is it its may more most must no not of on one or other so some such than that the their
    them then there these they this those to two was we were what when where which while who will
    with would also only any all both same used use using see two three four five very""".split()
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_'’]*|\d+(?:\.\d+)?")
_URL = re.compile(r"\S+@\S+|https?://\S+|\S+\.(?:com|org|edu|gov|net)\S*")
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|e\.g|i\.e|etc|vs|al|approx|Fig|No)\.$")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?(?![A-Za-z0-9_])")


@dataclass(frozen=True)
class Document:
    """One context document: its id, title, source package and sentences."""

    doc_id: str
    title: str
    source: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


@dataclass(frozen=True)
class Prompt:
    """One FACTS-lite prompt: the document, the kind of request, its text, the key terms an
    eligible answer must touch, and the indices of the document's target sentences."""

    prompt_id: int
    doc_id: str
    kind: str
    request: str
    key_terms: tuple[str, ...]
    targets: tuple[int, ...]


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that carry content: not stopwords, longer than two
    characters, numbers kept (they are the facts a hallucination changes)."""
    words = (w.lower().split("'")[0].split("’")[0] for w in _WORD.findall(_URL.sub(" ", text)))
    return [w for w in words if (w[0].isdigit() or len(w) > 2) and w not in STOPWORDS]


def numbers(text: str) -> list[str]:
    """The numbers written in ``text``, as strings (``"150"``, ``"0.83"``)."""
    return _NUMBER.findall(text)


def sentences(text: str) -> list[str]:
    """Prose sentences of a reStructuredText or pydoc help text: headings, underlines, tables,
    directives and indented code are dropped, inline markup is removed, and the rest is split at
    sentence ends. Sentences of 5 to 60 words are kept."""
    kept = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines or lines[0].startswith((" ", "\t", "..")):
            continue
        if any(re.fullmatch(r"[=\-*~^#+ ]{3,}", ln.strip()) for ln in lines):
            continue
        if re.match(r":[^:]+:", lines[0]):  # a field list: one unit per field
            units = []
            for ln in lines:
                if re.match(r":[^:]+:", ln) or not units:
                    units.append(ln.strip())
                else:
                    units[-1] += " " + ln.strip()
        else:
            units = [" ".join(ln.strip() for ln in lines)]
        for joined in units:
            kept.extend(_split(joined))
    return kept


def _split(text: str) -> list[str]:
    """One paragraph's sentences, its inline markup removed; an abbreviation ("R.A.", "e.g.")
    does not end a sentence."""
    text = re.sub(r":\w+:`([^`<]*)(?:<[^>]*>)?`", r"\1", text)  # :ref:`x <y>` -> x
    text = re.sub(r"^:([^:]+):\s*", r"\1: ", text)  # :Field: value -> Field: value
    text = text.replace("**", "").replace("``", '"').replace("`", "")
    pieces: list[str] = []
    for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", text):
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] += " " + s
        else:
            pieces.append(s)
    out = []
    for s in pieces:
        s = s.strip()
        if 5 <= len(s.split()) <= 60:
            out.append(s if s[-1] in ".!?" else s + ".")
    return out


def _sklearn_texts() -> list[tuple[str, str, str]]:
    out = []
    folder = resources.files("sklearn.datasets") / "descr"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".rst"):
            text = entry.read_text(encoding="utf-8")
            title = next(
                (ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("..")),
                entry.name,
            )
            out.append((f"sklearn:{entry.name[:-4]}", title, text))
    return out


def _pydoc_texts() -> list[tuple[str, str, str]]:
    from pydoc_data import topics

    out = []
    for key in sorted(topics.topics):
        text = topics.topics[key]
        title = text.splitlines()[0].strip() if text.strip() else key
        out.append((f"python:{key}", title, text))
    return out


def documents(max_chars: int = 3000, min_sentences: int = 6) -> list[Document]:
    """The FACTS-lite documents: each scikit-learn dataset description and each Python help
    topic with at least ``min_sentences`` prose sentences, cut to its first sentences that fit
    in ``max_chars`` characters. Deterministic for a given scikit-learn and Python."""
    max_chars = checks.integer(max_chars, "max_chars", minimum=200)
    min_sentences = checks.integer(min_sentences, "min_sentences", minimum=1)
    docs = []
    for doc_id, title, text in _sklearn_texts() + _pydoc_texts():
        sents, size = [], 0
        for s in sentences(text):
            if size + len(s) + 1 > max_chars:
                break
            sents.append(s)
            size += len(s) + 1
        if len(sents) >= min_sentences:
            source = "scikit-learn" if doc_id.startswith("sklearn") else "python"
            docs.append(Document(doc_id, title, source, tuple(sents)))
    return docs


def corpus_digest(docs: list[Document]) -> str:
    """A short digest of the documents' text: two runs used the same corpus when it agrees
    (it changes with the installed scikit-learn and Python)."""
    h = hashlib.sha256()
    for d in docs:
        h.update(d.doc_id.encode())
        h.update(d.text.encode())
    return h.hexdigest()[:12]


_REQUESTS = {
    "question": "What does the document say about {a} and {b}?",
    "fact_finding": "List the facts the document gives on {a}, {b} and {c}.",
    "summary": "Summarise the document's account of {a} and {b}.",
}


def _document_frequency(docs: list[Document]) -> dict[str, int]:
    df: dict[str, int] = {}
    for d in docs:
        for w in set(content_words(d.text)):
            df[w] = df.get(w, 0) + 1
    return df


def grounding_prompts(
    docs: list[Document], n: int, rng: np.random.Generator, n_targets: int = 2
) -> list[Prompt]:
    """``n`` prompts over ``docs``: each picks a document and a request kind uniformly, then
    ``n_targets`` consecutive target sentences at a random place; the key terms are the
    targets' rarest content words (fewest documents), which the request names. Deterministic
    given ``rng``."""
    n = checks.integer(n, "n", minimum=1)
    n_targets = checks.integer(n_targets, "n_targets", minimum=1, maximum=4)
    rng = checks.generator(rng)
    if not docs:
        raise checks.InputError("docs must hold at least one Document, got none")
    df = _document_frequency(docs)
    kinds = sorted(_REQUESTS)
    prompts = []
    for i in range(n):
        doc = docs[int(rng.integers(len(docs)))]
        kind = kinds[int(rng.integers(len(kinds)))]
        start = int(rng.integers(1, len(doc.sentences) - n_targets + 1))  # sentence 0: the lead
        targets = tuple(range(start, start + n_targets))
        words = []
        for t in targets:
            for w in content_words(doc.sentences[t]):
                if not w[0].isdigit() and w not in words:
                    words.append(w)
        words.sort(key=lambda w: (df.get(w, 0), w))
        terms = tuple(words[:3]) if len(words) >= 3 else tuple(words + ["it"] * (3 - len(words)))
        request = _REQUESTS[kind].format(a=terms[0], b=terms[1], c=terms[2])
        prompts.append(Prompt(i, doc.doc_id, kind, request, terms, targets))
    return prompts


# The public Grounding release (Hugging Face google/FACTS-grounding-public, Kaggle
# deepmind/FACTS-grounding-examples): one row per prompt.
GROUNDING_COLUMNS = (
    "system_instruction",
    "user_request",
    "context_document",
    "full_prompt",
    "domain",
    "type",
    "high_level_type",
)


def load_grounding(path: str | Path) -> pd.DataFrame:
    """Read a Grounding release in the public schema (:data:`GROUNDING_COLUMNS`) from a CSV or
    JSON-lines file; refuse a file that lacks a column or has an empty document or request."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"no Grounding file at {p}: download google/FACTS-grounding-public (860 rows, the "
            "release the paper used) or Kaggle's deepmind/FACTS-grounding-examples (856 rows) "
            "and pass its CSV or JSON-lines path"
        )
    if p.suffix == ".csv":
        frame = pd.read_csv(p)
    elif p.suffix in (".jsonl", ".json"):
        frame = pd.read_json(p, lines=p.suffix == ".jsonl")
    else:
        raise checks.InputError(f"path must end in .csv, .json or .jsonl, got {p.name!r}")
    missing = [c for c in GROUNDING_COLUMNS if c not in frame.columns]
    if missing:
        raise checks.InputError(
            f"{p.name} lacks the Grounding column(s) {missing}; the schema is "
            f"{list(GROUNDING_COLUMNS)}"
        )
    for col in ("context_document", "user_request"):
        empty = frame[col].isna() | (frame[col].astype(str).str.strip() == "")
        if empty.any():
            rows = list(frame.index[empty][:5])
            raise checks.InputError(f"{p.name}: empty {col} in row(s) {rows}")
    return frame[list(GROUNDING_COLUMNS)].reset_index(drop=True)
