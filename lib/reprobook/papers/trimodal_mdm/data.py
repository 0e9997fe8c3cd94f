"""A tri-modal toy corpus generated offline: text (printable bytes of Python's help topics and
scikit-learn's dataset descriptions), image-text (scikit-learn's 8x8 digits at 17 grey levels
with template captions) and audio-text (synthetic two-tone "spoken digits" through a 32-code
k-means codec). Our stand-in for the web corpora and tokenizers of "The Design Space of
Tri-Modal Masked Diffusion Models" (arXiv 2602.21472), which cannot be had offline.

One shared vocabulary: 95 printable characters, 17 grey levels, 32 audio codes, then the
special tokens. Every sequence has ``LENGTH`` = 80 tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from reprobook.core import checks

N_TEXT, N_GREY, N_CODES = 95, 17, 32
IMG0 = N_TEXT  # first image token
AUD0 = N_TEXT + N_GREY  # first audio token
PAD, IMG, AUD, MASK = AUD0 + N_CODES, AUD0 + N_CODES + 1, AUD0 + N_CODES + 2, AUD0 + N_CODES + 3
VOCAB = MASK + 1  # 148 tokens, [MASK] included
CAPTION = 15  # caption tokens (padded), then a marker, then 64 modality tokens
LENGTH = CAPTION + 1 + 64
NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
IMAGE_TEMPLATES = ("a drawn {w}", "digit {d}", "the number {d}", "handwritten {d}", "a {w}")
AUDIO_TEMPLATES = ("say {w}", "spoken {w}", "voice: {d}", "the word {w}", "audio {d}")
MODALITIES = ("text", "image", "audio")


def encode_text(s: str) -> np.ndarray:
    """Characters as tokens 0..94 (printable ASCII 32..126); a non-ASCII character becomes
    '?' and a control character (tab, newline) a space."""
    codes = np.frombuffer(s.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64) - 32
    codes[(codes < 0) | (codes >= N_TEXT)] = 0
    return codes


def decode_text(tokens) -> str:
    """The inverse of :func:`encode_text` for text tokens; other tokens print as '?'."""
    return "".join(chr(int(t) + 32) if 0 <= int(t) < N_TEXT else "?" for t in tokens)


def text_corpus() -> np.ndarray:
    """The text part, as one token stream: the help topics of ``pydoc_data.topics`` and the
    dataset descriptions scikit-learn ships (whitespace runs collapsed)."""
    from pydoc_data.topics import topics

    import sklearn

    parts = [topics[k] for k in sorted(topics)]
    descr = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "descr")
    for name in sorted(n for n in os.listdir(descr) if n.endswith(".rst")):
        with open(os.path.join(descr, name), encoding="utf-8") as f:
            parts.append(f.read())
    return encode_text(" ".join(" ".join(p.split()) for p in parts))


def caption(digit: int, rng: np.random.Generator, templates) -> np.ndarray:
    """A template caption of ``digit``, tokenised and padded to ``CAPTION`` tokens."""
    tpl = templates[int(rng.integers(len(templates)))]
    toks = encode_text(tpl.format(w=NAMES[digit], d=digit))[:CAPTION]
    return np.concatenate([toks, np.full(CAPTION - toks.size, PAD)])


def synth_speech(digits: np.ndarray, rng: np.random.Generator, rate: int = 8000) -> np.ndarray:
    """Synthetic "spoken digits": 2,048 samples each, a first tone then a second, whose
    frequencies depend on the digit, with random pitch (+-6%), split point and noise."""
    digits = checks.array(digits, "digits", ndim=1, dtype=np.int64)
    n = digits.size
    t = np.arange(2048) / rate
    f1 = 300.0 + 180.0 * digits  # first tone, Hz
    f2 = 2200.0 - 150.0 * ((digits * 7) % 10)  # second tone, Hz, another order
    pitch = rng.uniform(0.94, 1.06, n)[:, None]
    split = rng.uniform(0.4, 0.6, n)[:, None] * t[-1]
    phase = rng.uniform(0, 2 * np.pi, (n, 2))
    a = np.sin(2 * np.pi * f1[:, None] * pitch * t + phase[:, :1])
    b = np.sin(2 * np.pi * f2[:, None] * pitch * t + phase[:, 1:])
    wave = np.where(t[None, :] < split, a, b)
    return wave + rng.normal(0.0, 0.3, wave.shape)


def frame_features(waves: np.ndarray) -> np.ndarray:
    """Log-magnitude spectra of 64 frames of 32 samples: shape (n, 64, 17)."""
    frames = waves.reshape(waves.shape[0], 64, 32)
    return np.log1p(np.abs(np.fft.rfft(frames * np.hanning(32), axis=-1)))


@dataclass
class Codec:
    """A 32-code audio codec: k-means (scikit-learn) on frame spectra."""

    kmeans: KMeans

    @classmethod
    def fit(cls, waves: np.ndarray, seed: int) -> Codec:
        feats = frame_features(waves).reshape(-1, 17)
        return cls(KMeans(N_CODES, n_init=2, random_state=seed).fit(feats))

    def encode(self, waves: np.ndarray) -> np.ndarray:
        """Code indices 0..31, shape (n, 64)."""
        feats = frame_features(waves)
        return self.kmeans.predict(feats.reshape(-1, 17)).reshape(feats.shape[0], 64)


def code_histograms(codes: np.ndarray) -> np.ndarray:
    """Features of a code sequence for the speech classifier: code counts in each half."""
    codes = np.asarray(codes)
    halves = [codes[:, :32], codes[:, 32:]]
    return np.concatenate(
        [np.stack([np.bincount(h, minlength=N_CODES) for h in half]) for half in halves], axis=1
    )


@dataclass
class Corpus:
    """Training and held-out sequences of each modality, and the labels of the digits."""

    train: dict[str, torch.Tensor]
    test: dict[str, torch.Tensor]
    test_digits: dict[str, np.ndarray]
    codec: Codec
    image_classifier: LogisticRegression
    audio_classifier: LogisticRegression


def pair_sequences(cond_tokens, marker: int, captions: np.ndarray) -> torch.Tensor:
    """caption (15) + marker (1) + modality tokens (64) per row: shape (n, 80)."""
    n = cond_tokens.shape[0]
    mark = np.full((n, 1), marker)
    return torch.as_tensor(np.concatenate([captions, mark, cond_tokens], axis=1), dtype=torch.long)


def text_sequences(stream: np.ndarray, n: int, rng: np.random.Generator) -> torch.Tensor:
    """n random 80-character windows of the token stream."""
    start = rng.integers(0, stream.size - LENGTH, n)
    return torch.as_tensor(stream[start[:, None] + np.arange(LENGTH)], dtype=torch.long)


def build_corpus(n_train: int, n_test: int, seed: int) -> Corpus:
    """The tri-modal corpus: ``n_train`` training and ``n_test`` held-out sequences per modality.
    Text: the last tenth of the stream is held out. Image-text: digits split in two (held-out
    images are never trained on). Audio-text: fresh synthetic utterances for the test set.
    The digit and speech classifiers (logistic regression) are fitted on training data only."""
    n_train = checks.integer(n_train, "n_train", minimum=10)
    n_test = checks.integer(n_test, "n_test", minimum=10)
    rng = np.random.default_rng(seed)
    stream = text_corpus()
    cut = int(0.9 * stream.size)
    digits = load_digits()
    order = rng.permutation(len(digits.target))
    tr, te = order[: len(order) // 2], order[len(order) // 2 :]
    px, lab = digits.data.astype(np.int64), digits.target
    i_tr, i_te = rng.choice(tr, n_train), rng.choice(te, n_test)
    a_tr, a_te = rng.integers(0, 10, n_train), rng.integers(0, 10, n_test)
    w_tr, w_te = synth_speech(a_tr, rng), synth_speech(a_te, rng)
    codec = Codec.fit(w_tr[: min(n_train, 400)], seed)
    c_tr, c_te = codec.encode(w_tr), codec.encode(w_te)
    cap = lambda ds, tpl: np.stack([caption(int(d), rng, tpl) for d in ds])  # noqa: E731
    train = {
        "text": text_sequences(stream[:cut], n_train, rng),
        "image": pair_sequences(IMG0 + px[i_tr], IMG, cap(lab[i_tr], IMAGE_TEMPLATES)),
        "audio": pair_sequences(AUD0 + c_tr, AUD, cap(a_tr, AUDIO_TEMPLATES)),
    }
    test = {
        "text": text_sequences(stream[cut:], n_test, rng),
        "image": pair_sequences(IMG0 + px[i_te], IMG, cap(lab[i_te], IMAGE_TEMPLATES)),
        "audio": pair_sequences(AUD0 + c_te, AUD, cap(a_te, AUDIO_TEMPLATES)),
    }
    img_clf = LogisticRegression(max_iter=2000).fit(px[tr], lab[tr])
    aud_clf = LogisticRegression(max_iter=2000).fit(code_histograms(c_tr), a_tr)
    return Corpus(train, test, {"image": lab[i_te], "audio": a_te}, codec, img_clf, aud_clf)


def mixture_batch(
    corpus: Corpus, batch: int, ratio: tuple[float, float, float], rng: np.random.Generator
) -> torch.Tensor:
    """A training batch whose rows come from text, image-text and audio-text with the
    probabilities ``ratio`` (normalised)."""
    p = checks.array(ratio, "ratio", shape=(3,))
    if np.any(p < 0) or p.sum() <= 0:
        raise checks.InputError(f"ratio must be 3 non-negative weights, not all 0, got {ratio}")
    which = rng.choice(3, batch, p=p / p.sum())
    rows = [
        corpus.train[m][rng.integers(0, len(corpus.train[m]))] for m in np.array(MODALITIES)[which]
    ]
    return torch.stack(rows)


def digit_tokens(seed: int, n_train: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The image-only sequences of the batch-size and gamma sweeps: a label token (17 + digit)
    then the 64 grey levels (0..16); vocabulary 27, [MASK] = 27. Returns (train, held-out):
    the digits split in halves by ``seed``."""
    d = load_digits()
    seqs = np.concatenate([17 + d.target[:, None], d.data.astype(np.int64)], axis=1)
    order = np.random.default_rng(seed).permutation(len(seqs))
    half = len(seqs) // 2
    tr = seqs[order[:half]] if n_train is None else seqs[order[:half]][:n_train]
    return torch.as_tensor(tr), torch.as_tensor(seqs[order[half:]])


DIGIT_VOCAB, DIGIT_MASK, DIGIT_LENGTH = 27, 27, 65
