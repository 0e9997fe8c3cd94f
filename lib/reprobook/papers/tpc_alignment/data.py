"""Shapes and captions: the offline image-caption data of the chapter on Text as Partial Constraint.

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language Learning",
arXiv 2607.03143. The paper trains on MS-COCO / Flickr30K (K = 5 human captions per image) and on
web pairs with synthesised views (a core-only view, a paraphrase, a back-translation). None of it
is available offline, so this module generates a procedural stand-in in which the paper's central
idea is ground truth: every caption states the image's *core* (the main object's shape and colour)
and each view states a random subset of the other, *non-core* attributes (controlled omission),
with several templates and synonyms (paraphrase). View 0 is core-only, like the paper's synthesised
core-only view.

* :class:`Vocabulary` / :data:`VOCAB` - the fixed word list and tokeniser.
* :func:`generate` -> :class:`ShapesCaptions` - images (vectorised rendering), attributes, K caption
  views, which non-core attributes each view states, one hard negative per view.
* :func:`class_prompts`, :data:`CLASS_NAMES` - the 40 shape-colour classes for zero-shot use.
* :func:`caption_relevance` - which images each caption truly describes (semantic ground truth).
* :func:`parse_caption` - reads the attributes a caption states back from its text.
* :class:`ShapesCaptionsDataModule` - batches for Lightning.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import numpy as np
import torch

from reprobook.core import checks

__all__ = [
    "SHAPES",
    "COLOURS",
    "COLOUR_RGB",
    "SIZES",
    "POSITIONS",
    "FILLS",
    "BACKGROUNDS",
    "DISTRACTORS",
    "NONCORE",
    "ATTRIBUTES",
    "HARD_NEGATIVE_ATTRS",
    "CLASS_NAMES",
    "PROMPT_TEMPLATES",
    "Vocabulary",
    "VOCAB",
    "ShapesCaptions",
    "generate",
    "class_prompts",
    "caption_relevance",
    "parse_caption",
    "ShapesCaptionsDataModule",
]

# ---------------------------------------------------------------------------------------------
# attributes
# ---------------------------------------------------------------------------------------------

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "cross", "ring")
COLOURS: tuple[str, ...] = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "white")
#: RGB in [0, 1] of each colour (well separated on a dark background).
COLOUR_RGB = np.array(
    [
        [0.92, 0.12, 0.12],
        [1.00, 0.55, 0.05],
        [0.95, 0.92, 0.10],
        [0.12, 0.78, 0.18],
        [0.10, 0.85, 0.92],
        [0.18, 0.32, 1.00],
        [0.62, 0.18, 0.88],
        [0.95, 0.95, 0.95],
    ],
    dtype=np.float32,
)
SIZES: tuple[str, ...] = ("small", "large")
POSITIONS: tuple[str, ...] = ("centre", "top left", "top right", "bottom left", "bottom right")
FILLS: tuple[str, ...] = ("solid", "striped")
BACKGROUNDS: tuple[str, ...] = ("plain", "noisy")
DISTRACTORS: tuple[str, ...] = ("none", "one", "two")  # value = number of distractor objects

#: The non-core attributes in the order of ``stated[..., a]``.
NONCORE: tuple[str, ...] = ("size", "position", "fill", "background", "distractors")
#: Every attribute and its value names.
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "shape": SHAPES,
    "colour": COLOURS,
    "size": SIZES,
    "position": POSITIONS,
    "fill": FILLS,
    "background": BACKGROUNDS,
    "distractors": DISTRACTORS,
}
#: ``hard_negative_attr`` indexes this tuple.
HARD_NEGATIVE_ATTRS: tuple[str, ...] = ("shape", "colour", *NONCORE)

#: Class c = shape * 8 + colour, named "red circle" etc.
CLASS_NAMES: list[str] = [f"{c} {s}" for s in SHAPES for c in COLOURS]

# Phrasings. Each non-core value has exactly two synonymous phrases; a view draws one index per
# attribute and a hard negative keeps that index, so it differs from its view in one value only.
_ADJECTIVES: dict[str, tuple[tuple[str, str], ...]] = {
    "size": (("small", "little"), ("large", "big")),
    "fill": (("solid", "filled"), ("striped", "stripy")),
}
_PHRASES: dict[str, tuple[tuple[str, str], ...]] = {
    "position": (
        ("in the centre", "in the middle"),
        ("in the top left", "at the upper left"),
        ("in the top right", "at the upper right"),
        ("in the bottom left", "at the lower left"),
        ("in the bottom right", "at the lower right"),
    ),
    "background": (
        ("on a plain background", "on a clean backdrop"),
        ("on a noisy background", "with a grainy backdrop"),
    ),
    "distractors": (
        ("alone", "on its own"),
        ("with one other shape", "beside one more object"),
        ("with two other shapes", "beside two more objects"),
    ),
}
_SYNONYMS: dict[str, tuple[tuple[str, str], ...]] = {**_ADJECTIVES, **_PHRASES}

# Caption openings; "{a}" is the article a/an chosen from the next word.
_CORE_TEMPLATES: tuple[str, ...] = (
    "{a}",
    "the",
    "a photo of {a}",
    "there is {a}",
    "an image of {a}",
    "a picture showing {a}",
)
_VIEW_TEMPLATES: tuple[str, ...] = (
    "{a}",
    "the",
    "",
    "there is {a}",
    "a photo of {a}",
    "an image of {a}",
)
#: The zero-shot prompt templates (T = 6); "{c}" is the class name.
PROMPT_TEMPLATES: tuple[str, ...] = (
    "a photo of {a} {c}",
    "{a} {c}",
    "an image of {a} {c}",
    "a picture of the {c}",
    "there is {a} {c}",
    "a drawing of {a} {c}",
)

_TEMPLATE_LEN = {t: len(t.split()) for t in (*_CORE_TEMPLATES, *_VIEW_TEMPLATES)}
_TRAILING = ("position", "background", "distractors")
_TRAILING_ORDERS = tuple(itertools.permutations(range(3)))  # 6 orders of the trailing phrases


def _article(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"


def _fill_opening(template: str, rest: list[str]) -> list[str]:
    """The opening's words with "{a}" resolved against the first word of ``rest``."""
    words = template.split()
    return [(_article(rest[0]) if w == "{a}" else w) for w in words]


# ---------------------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------------------


def _all_words() -> list[str]:
    words: set[str] = {"a", "an"}
    for names in (SHAPES, COLOURS):
        words.update(names)
    for syn in _SYNONYMS.values():
        for pair in syn:
            for phrase in pair:
                words.update(phrase.split())
    for template in (*_CORE_TEMPLATES, *_VIEW_TEMPLATES, *PROMPT_TEMPLATES):
        words.update(w for w in template.split() if not w.startswith("{"))
    return sorted(words)


class Vocabulary:
    """A fixed word list: ``<pad>`` = 0, ``<unk>`` = 1, then the words in sorted order.

    Tokenisation is lower-casing and splitting on spaces; a caption becomes a row of word ids
    padded with 0 to ``max_len``.
    """

    PAD, UNK = 0, 1

    def __init__(self, words: Iterable[str]):
        specials = ["<pad>", "<unk>"]
        seen = list(dict.fromkeys(w for w in words if w not in specials))
        for w in seen:
            if not w or " " in w or w != w.lower():
                raise ValueError(
                    f"vocabulary words must be non-empty lower-case without spaces, got {w!r}"
                )
        self.words: list[str] = specials + seen
        self.index: dict[str, int] = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def encode(self, texts: Sequence[str], max_len: int) -> torch.Tensor:
        """LongTensor (n, max_len) of word ids, padded with 0.

        Raises ValueError naming the caption when it has more than ``max_len`` words or a word
        outside the vocabulary (``<unk>`` is never produced silently)."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of captions, not one string")
        checks.integer(max_len, "max_len", minimum=1)
        out = np.zeros((len(texts), max_len), dtype=np.int64)
        index = self.index
        for row, text in enumerate(texts):
            words = text.lower().split()
            if len(words) > max_len:
                raise ValueError(
                    f"caption {text!r} has {len(words)} words, more than max_len={max_len}"
                )
            try:
                out[row, : len(words)] = [index[w] for w in words]
            except KeyError as err:
                raise ValueError(
                    f"caption {text!r} has the word {err.args[0]!r}, which is not in the "
                    f"vocabulary ({len(self)} words: {', '.join(self.words[2:])})"
                ) from None
        return torch.from_numpy(out)

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """The captions of a LongTensor (n, L) (or one row (L,)), pad ids dropped."""
        tokens = torch.as_tensor(tokens)
        if tokens.dim() == 1:
            tokens = tokens[None]
        if tokens.dim() != 2:
            raise ValueError(
                f"decode takes token ids of shape (n, L) or (L,), got {tuple(tokens.shape)}"
            )
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= len(self)):
            raise ValueError(
                f"token ids must lie in [0, {len(self)}), "
                f"got [{int(tokens.min())}, {int(tokens.max())}]"
            )
        return [" ".join(self.words[i] for i in row if i != self.PAD) for row in tokens.tolist()]


#: The chapter's vocabulary (64 entries): every word the templates and attributes produce.
VOCAB = Vocabulary(_all_words())


# ---------------------------------------------------------------------------------------------
# the data set
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapesCaptions:
    """N images with K caption views each.

    Fields (N images, K views, L tokens, S pixels):
        images: uint8 (N, 3, S, S).
        attrs: {"shape", "colour", "size", "position", "fill", "background", "distractors"} ->
            LongTensor (N,) of value indices into :data:`ATTRIBUTES`.
        labels: LongTensor (N,), shape * 8 + colour.
        captions: N lists of K strings.
        tokens: LongTensor (N, K, L).
        stated: BoolTensor (N, K, 5): whether view k states each :data:`NONCORE` attribute.
        hard_negatives: LongTensor (N, K, L): view k with one stated attribute given another value.
        hard_negative_attr: LongTensor (N, K): which one, an index into :data:`HARD_NEGATIVE_ATTRS`.
        spec: the generation parameters (JSON-able; a checkpoint key).
        wrong: BoolTensor (N, K, 5) or None: whether view k states a *wrong* value of each
            non-core attribute (only with ``p_wrong`` > 0; None means every stated value is true).
        said_values: LongTensor (N, K, 5) or None: the value each view states for each non-core
            attribute (the image's own value unless ``wrong``); None when ``wrong`` is None.
    """

    images: torch.Tensor
    attrs: dict[str, torch.Tensor]
    labels: torch.Tensor
    captions: list[list[str]]
    tokens: torch.Tensor
    stated: torch.Tensor
    hard_negatives: torch.Tensor
    hard_negative_attr: torch.Tensor
    spec: dict[str, Any] = field(default_factory=dict)
    wrong: torch.Tensor | None = None
    said_values: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def n_views(self) -> int:
        return int(self.tokens.shape[1])

    def float_images(self, idx: torch.Tensor | Sequence[int] | slice | None = None) -> torch.Tensor:
        """float32 (n, 3, S, S) in [0, 1] (all images, or those at ``idx``)."""
        x = self.images if idx is None else self.images[idx]
        return x.float().div_(255.0)

    def subset(self, idx: torch.Tensor | Sequence[int]) -> ShapesCaptions:
        """The images at ``idx`` with their captions; ``spec`` records the subset's digest."""
        idx = torch.as_tensor(idx, dtype=torch.long).reshape(-1)
        if idx.numel() and (int(idx.min()) < -len(self) or int(idx.max()) >= len(self)):
            raise IndexError(
                f"subset indices must lie in [0, {len(self)}), "
                f"got [{int(idx.min())}, {int(idx.max())}]"
            )
        pos = idx.tolist()
        digest = hashlib.sha256(np.asarray(pos, dtype=np.int64).tobytes()).hexdigest()[:16]
        return ShapesCaptions(
            images=self.images[idx],
            attrs={k: v[idx] for k, v in self.attrs.items()},
            labels=self.labels[idx],
            captions=[self.captions[i] for i in pos],
            tokens=self.tokens[idx],
            stated=self.stated[idx],
            hard_negatives=self.hard_negatives[idx],
            hard_negative_attr=self.hard_negative_attr[idx],
            spec={**self.spec, "subset": {"n": len(pos), "sha256": digest}},
            wrong=None if self.wrong is None else self.wrong[idx],
            said_values=None if self.said_values is None else self.said_values[idx],
        )


# geometry, in units of the image side
_POSITION_XY = np.array(
    [[0.5, 0.5], [0.3, 0.3], [0.7, 0.3], [0.3, 0.7], [0.7, 0.7]], dtype=np.float32
)
_SIZE_HALF = np.array([0.13, 0.22], dtype=np.float32)  # half extent of a small / large main object
_JITTER = 0.03  # uniform jitter of the main object's centre
_DISTRACTOR_HALF = 0.075
_SLOTS = np.array(
    [
        [0.1, 0.1],
        [0.5, 0.1],
        [0.9, 0.1],
        [0.1, 0.5],
        [0.9, 0.5],
        [0.1, 0.9],
        [0.5, 0.9],
        [0.9, 0.9],
    ],
    dtype=np.float32,
)
_SLOT_JITTER = 0.015
_MARGIN = 0.01
_CHUNK = 4096  # images rendered at once (noise is drawn per chunk from its own seed)


def _shape_masks(
    shape: np.ndarray, cx: np.ndarray, cy: np.ndarray, half: np.ndarray, size: int
) -> np.ndarray:
    """bool (n, S, S): pixels (centres) inside each object.

    With (u, w) = ((x - cx) / half, (y - cy) / half), y pointing down: circle u^2 + w^2 <= 1;
    square max(|u|, |w|) <= 0.85; triangle (apex up) w <= 0.8 and |u| <= (w + 1) / 1.8;
    cross (|u| <= 0.3, |w| <= 1) or (|w| <= 0.3, |u| <= 1); ring 0.55 <= sqrt(u^2 + w^2) <= 1.
    """
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    u = (grid[None, None, :] - cx[:, None, None]) / half[:, None, None]  # (n, 1, S)
    w = (grid[None, :, None] - cy[:, None, None]) / half[:, None, None]  # (n, S, 1)
    au, aw = np.abs(u), np.abs(w)
    r2 = u * u + w * w  # (n, S, S)
    masks = np.stack(
        [
            r2 <= 1.0,
            np.maximum(au, aw) <= 0.85,
            (w <= 0.8) & (au <= (w + 1.0) / 1.8),
            ((au <= 0.3) & (aw <= 1.0)) | ((aw <= 0.3) & (au <= 1.0)),
            (r2 <= 1.0) & (r2 >= 0.55**2),
        ]
    )  # (5, n, S, S)
    return np.take_along_axis(masks, shape[None, :, None, None], axis=0)[0]


def _render(p: dict[str, np.ndarray], size: int, seed: int) -> np.ndarray:
    """uint8 (N, 3, S, S) images from the drawn parameters ``p`` (vectorised, in chunks)."""
    n = p["shape"].shape[0]
    out = np.empty((n, 3, size, size), dtype=np.uint8)
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    stripes = (
        np.floor((grid[None, :] + grid[:, None]) * size / 3.0) % 2 == 0
    )  # (S, S) diagonal bands
    for start in range(0, n, _CHUNK):
        sl = slice(start, min(n, start + _CHUNK))
        m = sl.stop - sl.start
        noise_rng = np.random.default_rng(np.random.SeedSequence([seed, 1, start // _CHUNK]))
        base = p["bg_level"][sl][:, None, None, None]
        noise = noise_rng.random((m, 3, size, size), dtype=np.float32) * np.float32(
            0.3
        )  # U[0, 0.3)
        img = base + noise * p["background"][sl][:, None, None, None].astype(
            np.float32
        )  # (m, 3, S, S)
        for j in range(2):  # distractors (drawn first; they never overlap the main object)
            mask = _shape_masks(
                p["d_shape"][sl, j],
                p["d_xy"][sl, j, 0],
                p["d_xy"][sl, j, 1],
                np.full(m, _DISTRACTOR_HALF, np.float32),
                size,
            )
            mask &= (p["distractors"][sl] > j)[:, None, None]
            rgb = COLOUR_RGB[p["d_colour"][sl, j]][:, :, None, None]
            img = np.where(mask[:, None], rgb, img)
        mask = _shape_masks(
            p["shape"][sl], p["xy"][sl, 0], p["xy"][sl, 1], _SIZE_HALF[p["size"][sl]], size
        )
        rgb = COLOUR_RGB[p["colour"][sl]][:, :, None, None]  # (m, 3, 1, 1)
        dark = (p["fill"][sl] == 1)[:, None, None] & ~stripes[
            None
        ]  # (m, S, S) unlit bands of striped objects
        colour = np.where(dark[:, None], 0.3 * rgb, rgb)
        img = np.where(mask[:, None], colour, img)
        out[sl] = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    return out


def _caption_words(
    values: dict[str, int],
    stated: Sequence[str],
    syn: dict[str, int],
    template: str,
    adj_swap: bool,
    order: tuple[int, ...],
) -> list[str]:
    """The words of one caption: opening, adjectives, colour, shape, trailing phrases."""
    adjs = [_ADJECTIVES[a][values[a]][syn[a]] for a in ("size", "fill") if a in stated]
    if adj_swap:
        adjs.reverse()
    body = adjs + [COLOURS[values["colour"]], SHAPES[values["shape"]]]
    for t in order:
        a = _TRAILING[t]
        if a in stated:
            body += _PHRASES[a][values[a]][syn[a]].split()
    return _fill_opening(template, body) + body


def _draw_parameters(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    p: dict[str, np.ndarray] = {
        "shape": rng.integers(0, len(SHAPES), n),
        "colour": rng.integers(0, len(COLOURS), n),
        "size": rng.integers(0, 2, n),
        "position": rng.integers(0, len(POSITIONS), n),
        "fill": rng.integers(0, 2, n),
        "background": rng.integers(0, 2, n),
        "distractors": rng.integers(0, 3, n),
    }
    half = _SIZE_HALF[p["size"]]
    p["xy"] = _POSITION_XY[p["position"]] + rng.uniform(-_JITTER, _JITTER, (n, 2)).astype(
        np.float32
    )
    p["bg_level"] = rng.uniform(0.04, 0.14, n).astype(np.float32)
    slots = _SLOTS[None] + rng.uniform(-_SLOT_JITTER, _SLOT_JITTER, (n, len(_SLOTS), 2)).astype(
        np.float32
    )
    gap = np.abs(slots - p["xy"][:, None, :])  # (n, 8, 2)
    free = (gap > (half + _DISTRACTOR_HALF + _MARGIN)[:, None, None]).any(
        axis=-1
    )  # boxes do not overlap
    if (free.sum(axis=1) < 2).any():  # pragma: no cover - excluded by the geometry above
        raise RuntimeError("the layout left fewer than two free slots for distractors")
    score = np.where(free, rng.random((n, len(_SLOTS))), -1.0)
    chosen = np.argsort(-score, axis=1, kind="stable")[:, :2]  # (n, 2) two distinct free slots
    p["d_xy"] = np.take_along_axis(slots, chosen[:, :, None], axis=1)  # (n, 2, 2)
    p["d_shape"] = (p["shape"][:, None] + rng.integers(1, len(SHAPES), (n, 2))) % len(SHAPES)
    p["d_colour"] = (p["colour"][:, None] + rng.integers(1, len(COLOURS), (n, 2))) % len(COLOURS)
    return p


def generate(
    n: int,
    seed: int,
    *,
    image_size: int = 32,
    n_views: int = 5,
    p_mention: float = 0.5,
    max_len: int = 16,
    p_wrong: float = 0.0,
) -> ShapesCaptions:
    """``n`` images, each with ``n_views`` captions, deterministic under ``seed``.

    Image: a dark background (plain, or with uniform pixel noise in [0, 0.3]), a main object
    (5 shapes x 8 colours, small or large, solid or with diagonal stripes, in one of 5 regions
    with a little jitter) and 0-2 smaller distractors whose shape and colour both differ from
    the main object's, in free border slots so they never cover it.

    Captions: view 0 states the core only ("a red circle", with a random opening); views
    1..K-1 state each non-core attribute independently with probability ``p_mention``, with
    synonyms, a random opening and random word order of the adjectives and of the trailing
    phrases. Openings too long for ``max_len`` are not drawn. Hard negative of a view: the same
    wording with one stated attribute (core or non-core, uniformly) set to another value.

    ``p_wrong`` (our extension, not the paper's): each non-core attribute a view states is stated
    with a wrong value (uniform among the others) with this probability, drawn from a separate
    random stream, so ``p_wrong = 0`` gives exactly the data (and spec) it gave before the knob
    existed. The core is always stated right.
    """
    checks.integer(n, "n", minimum=1)
    checks.integer(seed, "seed", minimum=0, maximum=2**32 - 1)
    checks.integer(image_size, "image_size", minimum=16)
    checks.integer(n_views, "n_views", minimum=1)
    checks.probability(p_mention, "p_mention")
    checks.integer(max_len, "max_len", minimum=4)
    checks.probability(p_wrong, "p_wrong")

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    p = _draw_parameters(n, rng)
    images = _render(p, image_size, seed)

    k = n_views
    stated = rng.random((n, k, len(NONCORE))) < p_mention
    stated[:, 0] = False  # view 0 is core-only
    syn = rng.integers(0, 2, (n, k, len(NONCORE)))
    opening = rng.random((n, k))
    adj_swap = rng.random((n, k)) < 0.5
    order = rng.integers(0, len(_TRAILING_ORDERS), (n, k))
    neg_pick = rng.random((n, k))
    neg_shift = rng.random((n, k))
    if p_wrong > 0:
        wrong_rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
        wrong = stated & (wrong_rng.random((n, k, len(NONCORE))) < p_wrong)
        wrong_shift = wrong_rng.random((n, k, len(NONCORE)))
    else:
        wrong = np.zeros((n, k, len(NONCORE)), dtype=bool)
        wrong_shift = np.zeros((n, k, len(NONCORE)))
    said_values = (
        np.stack([p[a] for a in NONCORE], axis=-1)[:, None, :].repeat(k, axis=1).astype(np.int64)
    )  # (N, K, 5)
    for a_i, a in enumerate(NONCORE):
        m = len(ATTRIBUTES[a])
        shift = 1 + (wrong_shift[:, :, a_i] * (m - 1)).astype(np.int64)
        said_values[:, :, a_i] = np.where(
            wrong[:, :, a_i], (said_values[:, :, a_i] + shift) % m, said_values[:, :, a_i]
        )
    said_l = said_values.tolist()

    attr_values = {a: p[a] for a in HARD_NEGATIVE_ATTRS}
    vals_list = {a: v.tolist() for a, v in attr_values.items()}
    stated_l, syn_l = stated.tolist(), syn.tolist()
    captions: list[list[str]] = []
    negatives: list[str] = []
    neg_attr = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        values = {a: vals_list[a][i] for a in HARD_NEGATIVE_ATTRS}
        row: list[str] = []
        for v in range(k):
            said = [a for a, s in zip(NONCORE, stated_l[i][v]) if s]
            if p_wrong > 0:  # the values this view states (wrong ones included)
                values = {
                    **{a: vals_list[a][i] for a in HARD_NEGATIVE_ATTRS},
                    **dict(zip(NONCORE, said_l[i][v])),
                }
            synd = dict(zip(NONCORE, syn_l[i][v]))
            swap, orde = bool(adj_swap[i, v]), _TRAILING_ORDERS[order[i, v]]
            # hard negative: one stated attribute (core or non-core) changed, same wording
            candidates = ["shape", "colour", *said]
            attr = candidates[int(neg_pick[i, v] * len(candidates))]
            n_values = len(ATTRIBUTES[attr])
            new = dict(values)
            new[attr] = (values[attr] + 1 + int(neg_shift[i, v] * (n_values - 1))) % n_values
            neg_attr[i, v] = HARD_NEGATIVE_ATTRS.index(attr)
            # the opening is drawn among those that fit both the caption and its negative
            templates = _CORE_TEMPLATES if v == 0 else _VIEW_TEMPLATES
            body = _caption_words(values, said, synd, "", swap, orde)
            body_neg = _caption_words(new, said, synd, "", swap, orde)
            room = max_len - max(len(body), len(body_neg))
            fits = [t for t in templates if _TEMPLATE_LEN[t] <= room]
            if not fits:
                raise ValueError(
                    f"a caption of {max_len - room} words does not fit max_len={max_len}"
                )
            template = fits[int(opening[i, v] * len(fits))]
            row.append(" ".join(_fill_opening(template, body) + body))
            negatives.append(" ".join(_fill_opening(template, body_neg) + body_neg))
        captions.append(row)

    tokens = VOCAB.encode([c for row in captions for c in row], max_len).reshape(n, k, max_len)
    hard = VOCAB.encode(negatives, max_len).reshape(n, k, max_len)
    attrs = {
        a: torch.from_numpy(np.asarray(attr_values[a], dtype=np.int64)) for a in HARD_NEGATIVE_ATTRS
    }
    labels = attrs["shape"] * len(COLOURS) + attrs["colour"]
    spec = {
        "generator": "shapes_captions_v1",
        "n": n,
        "seed": seed,
        "image_size": image_size,
        "n_views": n_views,
        "p_mention": float(p_mention),
        "max_len": max_len,
    }
    if p_wrong > 0:
        spec["p_wrong"] = float(p_wrong)
    return ShapesCaptions(
        images=torch.from_numpy(images),
        attrs=attrs,
        labels=labels,
        captions=captions,
        tokens=tokens,
        stated=torch.from_numpy(stated),
        hard_negatives=hard,
        hard_negative_attr=torch.from_numpy(neg_attr),
        spec=spec,
        wrong=torch.from_numpy(wrong) if p_wrong > 0 else None,
        said_values=torch.from_numpy(said_values) if p_wrong > 0 else None,
    )


def class_prompts(max_len: int = 16) -> torch.Tensor:
    """LongTensor (40, T, L), T = 6: class c under each of :data:`PROMPT_TEMPLATES`
    ("a photo of a red circle", "a red circle", "an image of a red circle", ...)."""
    texts = []
    for name in CLASS_NAMES:
        for template in PROMPT_TEMPLATES:
            texts.append(template.replace("{a}", _article(name)).replace("{c}", name))
    return VOCAB.encode(texts, max_len).reshape(len(CLASS_NAMES), len(PROMPT_TEMPLATES), max_len)


def caption_relevance(data: ShapesCaptions, *, include_own: bool = False) -> torch.Tensor:
    """BoolTensor (N*K, N): [i*K + k, j] is True iff image j has the core (shape, colour) of image
    i and, for every non-core attribute that view (i, k) states, the same value as image i.

    A core-only caption is therefore relevant to every image of its class; row i*K + k is always
    True at column i. With wrong statements (``data.said_values``), relevance follows what the
    caption *says*: image j must have the stated value, so a caption with a wrong detail is not
    relevant to its own image. ``include_own=True`` marks every caption relevant to its own image
    anyway (the target of retrieval when details may be wrong; the candidate sets of
    :func:`diagnostics.candidate_sets` then leave out only the *other* matching images).
    """
    n, k = len(data), data.n_views
    core = data.labels[:, None] == data.labels[None, :]  # (N, N)
    rel = core[:, None, :].expand(n, k, n).clone()  # (N, K, N)
    for a, name in enumerate(NONCORE):
        said = data.stated[:, :, a]  # (N, K)
        if data.said_values is None:
            same = (data.attrs[name][:, None] == data.attrs[name][None, :])[:, None, :]  # (N, 1, N)
        else:
            same = (
                data.said_values[:, :, a][:, :, None] == data.attrs[name][None, None, :]
            )  # (N, K, N)
        rel &= ~said[:, :, None] | same
    if include_own:
        rel[torch.arange(n), :, torch.arange(n)] = True
    return rel.reshape(n * k, n)


def parse_caption(text: str) -> dict[str, int | None]:
    """The attribute values a caption states, read from its text (None: not stated).

    Independent of how :func:`generate` wrote it: looks each synonym phrase up in the text.
    Raises ValueError when the core is missing or an attribute is stated twice.
    """
    words = text.lower().split()
    padded = " " + " ".join(words) + " "
    out: dict[str, int | None] = {}
    for name, values in (("shape", SHAPES), ("colour", COLOURS)):
        hits = [v for v, word in enumerate(values) if word in words]
        if len(hits) != 1:
            raise ValueError(f"caption {text!r} must state exactly one {name}, found {len(hits)}")
        out[name] = hits[0]
    for name in NONCORE:
        hits = {
            v
            for v, pair in enumerate(_SYNONYMS[name])
            for phrase in pair
            if f" {phrase} " in padded
        }
        if len(hits) > 1:
            raise ValueError(f"caption {text!r} states {name} more than once")
        out[name] = hits.pop() if hits else None
    return out


# ---------------------------------------------------------------------------------------------
# Lightning data module
# ---------------------------------------------------------------------------------------------


class _BatchView(torch.utils.data.Dataset):
    """Indexed with a list of indices (from a BatchSampler): one whole batch, no per-item
    collate."""

    def __init__(self, data: ShapesCaptions):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, idx: list[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(idx, dtype=torch.long)
        return {
            "images": self.data.float_images(index),
            "tokens": self.data.tokens[index],
            "index": index,
        }


class ShapesCaptionsDataModule(L.LightningDataModule):
    """Training batches
    ``{"images": float (B, 3, S, S) in [0, 1], "tokens": (B, K, L), "index": (B,)}``, reshuffled
    each epoch by a ``torch.Generator`` seeded with ``seed``; ``drop_last``; no workers."""

    def __init__(self, train: ShapesCaptions, batch_size: int = 128, seed: int = 0):
        super().__init__()
        checks.integer(batch_size, "batch_size", minimum=1)
        if batch_size > len(train):
            raise ValueError(
                f"batch_size={batch_size} exceeds the {len(train)} training images (drop_last)"
            )
        self.train_data = train
        self.batch_size = batch_size
        self.seed = seed

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        gen = torch.Generator().manual_seed(self.seed)
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(range(len(self.train_data)), generator=gen),
            batch_size=self.batch_size,
            drop_last=True,
        )
        return torch.utils.data.DataLoader(
            _BatchView(self.train_data), sampler=sampler, batch_size=None, num_workers=0
        )
