"""Data of chapter 14: a data-rich vision donor, a data-scarce audio recipient, and the text.

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id; only the abstract was available). Everything here is our toy design, not the paper's data:

* vision (donor): scikit-learn's bundled 8x8 ``load_digits`` images, 64 raw pixels;
* audio (recipient): generated "digit sounds", class k with fundamental f0 = 200 + 60 k Hz,
  harmonics of random amplitude, a random detune, an attack/decay envelope and white noise at
  a random SNR; the hand-made encoder's input is the log energy in log-spaced frequency bands of
  the magnitude spectrum (:func:`band_energies`, with ``scipy.signal.periodogram``);
* text: a small vocabulary and three templates that share positions, so that the four soft
  tokens of a modality stand where the caption "this is a <digit>" stands in text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal

from reprobook.core import checks

__all__ = [
    "VOCAB",
    "TOKEN",
    "DIGIT_IDS",
    "N_SOFT",
    "SOFT_POSITIONS",
    "ANSWER_POSITION",
    "Split",
    "vision_splits",
    "digit_sounds",
    "band_energies",
    "audio_splits",
    "prompt_ids",
    "caption_ids",
    "copy_ids",
    "text_corpus",
    "rotation",
]

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
VOCAB = (
    ("<pad>", "<bos>", "<eos>", "<soft>") + DIGITS + ("this", "is", "a", "what", "?", "copy", ":")
)
TOKEN = {w: i for i, w in enumerate(VOCAB)}
DIGIT_IDS = np.array([TOKEN[w] for w in DIGITS])  # token id of each class's word
N_SOFT = 4  # soft tokens per sample (positions 1..4, where the caption's 4 words stand)
SOFT_POSITIONS = np.arange(1, 1 + N_SOFT)
ANSWER_POSITION = 8  # the position ("?") whose next-token prediction is the answer
SEQ_LEN = 10  # model inputs: <bos> x x x x what is this ? <answer>  (targets shifted by one)


@dataclass(frozen=True)
class Split:
    """Features ``x`` (n, 64) of one modality and class labels ``y`` (n,) in 0..9."""

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def take(self, n: int) -> Split:
        """The first ``n`` samples (calibration subsets are nested: 4 within 8 within 16 ...)."""
        n = checks.integer(n, "n", minimum=1, maximum=len(self))
        return Split(self.x[:n], self.y[:n])


def vision_splits(n_cal: int, n_test: int, seed: int) -> tuple[Split, Split, Split]:
    """``load_digits`` shuffled by ``seed`` into (train, calibration, test); the training split
    holds the 1,797 - n_cal - n_test images left. Features are the 64 raw pixels (0..16)."""
    from sklearn.datasets import load_digits

    n_cal = checks.integer(n_cal, "n_cal", minimum=1)
    n_test = checks.integer(n_test, "n_test", minimum=1)
    digits = load_digits()
    x, y = digits.data.astype(np.float64), digits.target.astype(np.int64)
    if n_cal + n_test >= len(y):
        raise checks.InputError(
            f"n_cal + n_test must leave training images of the {len(y)}, got {n_cal + n_test}"
        )
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    test, cal = slice(0, n_test), slice(n_test, n_test + n_cal)
    train = slice(n_test + n_cal, None)
    return Split(x[train], y[train]), Split(x[cal], y[cal]), Split(x[test], y[test])


def digit_sounds(
    labels,
    rng: np.random.Generator,
    *,
    sample_rate: int = 4000,
    duration: float = 0.25,
    n_harmonics: int = 3,
    detune: float = 0.04,
    snr_db: tuple[float, float] = (0.0, 10.0),
) -> np.ndarray:
    """Waveforms (n, sample_rate * duration) of the "digit sounds" of ``labels``.

    Class k sounds at f0 = (200 + 60 k)(1 + u) Hz, u ~ U(-detune, detune), with harmonics
    h f0 (h = 1..n_harmonics) of amplitudes U(0.2, 1) (those at or above the Nyquist frequency
    are left out), an envelope (1 - exp(-t / a)) exp(-r t) with attack a ~ U(5, 40) ms and decay
    r ~ U(2, 12) /s, and white noise at an SNR drawn from U(snr_db)."""
    labels = np.asarray(labels)
    rng = checks.generator(rng)
    sample_rate = checks.integer(sample_rate, "sample_rate", minimum=100)
    duration = checks.real(duration, "duration", above=0)
    n_harmonics = checks.integer(n_harmonics, "n_harmonics", minimum=1)
    detune = checks.real(detune, "detune", minimum=0, below=1)
    if labels.ndim != 1 or not np.all((labels >= 0) & (labels <= 9)):
        raise checks.InputError(f"labels must be a 1-D array of classes 0..9, got {labels!r}")
    n, t = len(labels), np.arange(int(round(sample_rate * duration))) / sample_rate
    f0 = (200.0 + 60.0 * labels) * (1 + rng.uniform(-detune, detune, n))  # (n,)
    h = np.arange(1, n_harmonics + 1)  # (H,)
    freq = f0[:, None] * h[None, :]  # (n, H)
    amp = rng.uniform(0.2, 1.0, (n, n_harmonics)) * (freq < sample_rate / 2)
    phase = rng.uniform(0, 2 * np.pi, (n, n_harmonics))
    tone = np.einsum("nh,nht->nt", amp, np.sin(2 * np.pi * freq[..., None] * t + phase[..., None]))
    attack, decay = rng.uniform(0.005, 0.04, n), rng.uniform(2.0, 12.0, n)
    tone *= (1 - np.exp(-t / attack[:, None])) * np.exp(-decay[:, None] * t)
    snr = rng.uniform(snr_db[0], snr_db[1], n)
    power = np.mean(tone**2, axis=1)
    noise = rng.normal(size=tone.shape) * np.sqrt(power / 10 ** (snr / 10))[:, None]
    return tone + noise


def band_energies(
    waves, sample_rate: int = 4000, n_bands: int = 64, f_low: float = 100.0
) -> np.ndarray:
    """log(1e-8 + energy) of the magnitude spectrum in ``n_bands`` log-spaced bands from
    ``f_low`` to the Nyquist frequency: the audio encoder's hand-made input, (n, n_bands).
    The encoder then standardises and rotates them (:class:`.model.MLLM`).

    Implements eq. `dcat-merging-encoder` of notebooks/14_dcat_merging/index.md.
    """
    waves = checks.array(waves, "waves", ndim=2)
    freqs, power = signal.periodogram(waves, fs=sample_rate, window="hann", axis=-1)
    edges = np.geomspace(f_low, sample_rate / 2, n_bands + 1)
    band = np.clip(np.searchsorted(edges, freqs, side="right") - 1, -1, n_bands)
    out = np.zeros((waves.shape[0], n_bands))
    for b in range(n_bands):
        sel = band == b
        out[:, b] = power[:, sel].sum(axis=1) if sel.any() else 0.0
    return np.log(1e-8 + out)


def audio_splits(
    n_train: int,
    n_cal: int,
    n_test: int,
    seed: int,
    **sound,
) -> tuple[Split, Split, Split]:
    """(train, calibration, test) of digit sounds as band energies, balanced over the classes
    (class k at every tenth position, shuffled), generated from ``seed``. ``sound`` goes to
    :func:`digit_sounds` (and its ``sample_rate`` to :func:`band_energies`)."""
    rng = np.random.default_rng([seed, 14])
    splits = []
    for name, n in (("n_train", n_train), ("n_cal", n_cal), ("n_test", n_test)):
        n = checks.integer(n, name, minimum=1)
        y = rng.permutation(np.arange(n) % 10)
        waves = digit_sounds(y, rng, **sound)
        splits.append(Split(band_energies(waves, sound.get("sample_rate", 4000)), y))
    return tuple(splits)


def rotation(dim: int, seed: int) -> np.ndarray:
    """A fixed random orthogonal (dim, dim) matrix (Haar, from ``scipy.stats.ortho_group``):
    each modality's encoder ends with its own, so the two modalities share no coordinates."""
    from scipy.stats import ortho_group

    return ortho_group.rvs(checks.integer(dim, "dim", minimum=2), random_state=seed)


def prompt_ids(labels) -> np.ndarray:
    """The multimodal prompt, the same for both modalities: ``<bos> <soft>x4 what is this ?
    <answer> <eos>`` (n, 11); the <soft> places are filled with the projector's tokens."""
    labels = np.asarray(labels, dtype=np.int64)
    head = [TOKEN["<bos>"]] + [TOKEN["<soft>"]] * N_SOFT
    q = [TOKEN[w] for w in ("what", "is", "this", "?")]
    rows = [head + q + [DIGIT_IDS[k], TOKEN["<eos>"]] for k in labels]
    return np.array(rows, dtype=np.int64)


def caption_ids(labels) -> np.ndarray:
    """The text-only question and the caption paired with a sample of class k:
    ``<bos> this is a <k> what is this ? <k> <eos>`` (n, 11); positions 1..4 are the caption."""
    labels = np.asarray(labels, dtype=np.int64)
    q = [TOKEN[w] for w in ("what", "is", "this", "?")]
    rows = [
        [TOKEN["<bos>"], TOKEN["this"], TOKEN["is"], TOKEN["a"], DIGIT_IDS[k]]
        + q
        + [DIGIT_IDS[k], TOKEN["<eos>"]]
        for k in labels
    ]
    return np.array(rows, dtype=np.int64)


def copy_ids(words) -> np.ndarray:
    """``<bos> copy a b c : a b c <eos> <pad>`` (n, 11) for digit triples ``words`` (n, 3)."""
    words = np.asarray(words, dtype=np.int64)
    d = DIGIT_IDS[words]
    n = len(d)
    col = lambda v: np.full((n, 1), TOKEN[v])  # noqa: E731
    return np.concatenate(
        [col("<bos>"), col("copy"), d, col(":"), d, col("<eos>"), col("<pad>")], axis=1
    )


def text_corpus(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` text-only pre-training sequences (n, 11): half questions about a caption
    (:func:`caption_ids`), half copies of three digit words (:func:`copy_ids`), shuffled."""
    n = checks.integer(n, "n", minimum=2)
    rng = checks.generator(rng)
    qa = caption_ids(rng.integers(0, 10, n // 2))
    cp = copy_ids(rng.integers(0, 10, (n - n // 2, 3)))
    both = np.concatenate([qa, cp])
    return both[rng.permutation(n)]
