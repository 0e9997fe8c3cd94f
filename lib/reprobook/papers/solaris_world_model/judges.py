"""Programmatic judges of DuetGrid videos, in place of the paper's VLM judge.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208). Its
evaluation asks a vision-language model one question about keyframes of each generated video
(is the other player there, did it come closer, did the camera turn, is the structure visible)
and scores the answers against the episode's ground truth. Our judges answer the same
questions from pixels alone, eqs. `solaris-world-model-presence` to
`solaris-world-model-rotation` of notebooks/19_solaris_world_model/index.md. They read the
observer's view (player 0); the other player is player 1.

A judge is only useful if it is right on real videos and cannot be fooled by broken ones;
:func:`broken` makes the two broken kinds that notebook 1 scores (frozen and shuffled videos).
"""

from __future__ import annotations

import numpy as np

from reprobook.core import checks

from . import world

TOLERANCE = 0.2  # a pixel has a colour when every channel is within this of it
MIN_PIXELS = 2  # pixels of a colour that count as "there" (a cell has 4)
STILL_PX = 1.0  # a centroid that moves less than this (pixels) has not moved
JUDGED_KINDS = ("translation", "rotation", "presence", "structure")
CHANCE = {"translation": 1 / 5, "rotation": 1 / 3, "presence": 1 / 2, "structure": 1 / 2}


def _frames(frames, name: str, ndim: int) -> np.ndarray:
    return checks.array(frames, name, ndim=ndim, shape=(None,) * (ndim - 3) + (16, 16, 3))


def color_mask(frames, color) -> np.ndarray:
    """Boolean mask (..., 16, 16) of the pixels of ``frames`` (..., 16, 16, 3) within
    ``TOLERANCE`` of ``color`` in every channel."""
    return np.all(np.abs(np.asarray(frames) - np.asarray(color)) < TOLERANCE, axis=-1)


def presence(frames, player: int = 1) -> np.ndarray:
    """Is ``player`` in view? (n,) bools for frames (n, 16, 16, 3).

    Implements eq. `solaris-world-model-presence` of notebooks/19_solaris_world_model/index.md.
    """
    frames = _frames(frames, "frames", 4)
    mask = color_mask(frames, world.PLAYER_COLORS[player])  # pixels of the player's colour
    return mask.sum(axis=(1, 2)) >= MIN_PIXELS  # eq. presence: at least MIN_PIXELS of them


def structure(frames) -> np.ndarray:
    """Is a placed block in view? (n,) bools, by counting block-coloured pixels (the same rule
    as eq. `solaris-world-model-presence` with the block's colour)."""
    frames = _frames(frames, "frames", 4)
    return color_mask(frames, world.BLOCK).sum(axis=(1, 2)) >= MIN_PIXELS


def translation(first, last, player: int = 1) -> list[str]:
    """How did ``player`` move in the observer's view between two frames (n, 16, 16, 3)?
    One of ``closer``, ``farther``, ``left``, ``right``, ``still``, or ``absent`` when it is
    missing from either frame.

    Implements eq. `solaris-world-model-translation` of notebooks/19_solaris_world_model/index.md.
    """
    first, last = _frames(first, "first", 4), _frames(last, "last", 4)
    checks.same_shape("first", first, "last", last)
    rows, cols = np.mgrid[0:16, 0:16]
    out = []
    for a, b in zip(first, last):
        ma = color_mask(a, world.PLAYER_COLORS[player])  # the marker before
        mb = color_mask(b, world.PLAYER_COLORS[player])  # and after
        if ma.sum() < MIN_PIXELS or mb.sum() < MIN_PIXELS:
            out.append("absent")
            continue
        drow = rows[mb].mean() - rows[ma].mean()  # eq. translation: centroid shift, rows
        dcol = cols[mb].mean() - cols[ma].mean()  # and columns
        if max(abs(drow), abs(dcol)) < STILL_PX:
            out.append("still")
        elif abs(drow) >= abs(dcol):
            out.append("closer" if drow > 0 else "farther")  # ahead is up: closer moves down
        else:
            out.append("left" if dcol < 0 else "right")
    return out


def _cells(frames: np.ndarray) -> np.ndarray:
    """Mean colour of each cell: (n, 16, 16, 3) -> (n, 8, 8, 3)."""
    n = frames.shape[0]
    return frames.reshape(n, 8, 2, 8, 2, 3).mean(axis=(2, 4))


def _turn_map(yaw: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a turn ``yaw``, the window cells after it that were also in the window before,
    as (new index, old index) pairs: after a right turn cell (a', b') was (b', -a'); after
    a left turn (-b', a')."""
    a = np.arange(world.VIEW_ROWS[0], world.VIEW_ROWS[1] + 1)
    b = np.arange(world.VIEW_COLS[0], world.VIEW_COLS[1] + 1)
    A, B = np.meshgrid(a, b, indexing="ij")
    old_a, old_b = {1: (B, -A), -1: (-B, A), 0: (A, B)}[yaw]
    ok = (old_a >= a[0]) & (old_a <= a[-1]) & (old_b >= b[0]) & (old_b <= b[-1])
    new_idx = np.nonzero(ok)
    return new_idx[0], new_idx[1], np.stack([old_a[ok] - a[0], old_b[ok] - b[0]])


def rotation(first, last) -> list[str]:
    """Did the observer turn ``left``, ``right`` or not at all (``none``) between two frames
    (n, 16, 16, 3)? The turn whose remapping of the first frame's cells best matches the last
    frame, in mean squared error over the cells both windows share.

    Implements eq. `solaris-world-model-rotation` of notebooks/19_solaris_world_model/index.md.
    """
    first, last = _frames(first, "first", 4), _frames(last, "last", 4)
    checks.same_shape("first", first, "last", last)
    ca, cb = _cells(first), _cells(last)  # cell colours before and after
    errors = []
    for yaw in (-1, 1, 0):  # candidate turns, in the order of ROTATION_CLASSES
        ni, nj, (oi, oj) = _turn_map(yaw)  # shared cells: new index <- old index
        diff = cb[:, ni, nj] - ca[:, oi, oj]  # eq. rotation: remapped first against last
        errors.append((diff**2).mean(axis=(1, 2)))
    best = np.argmin(np.stack(errors, axis=1), axis=1)  # the turn of least error
    return [world.ROTATION_CLASSES[k] for k in best]


def judge(kind: str, frames) -> list[str]:
    """The judge's answers for a set of episodes of ``kind``: frames (n, P, T, 16, 16, 3) in
    [0, 1], judged in player 0's view from its first and last frames."""
    kind = checks.choice(kind, "kind", JUDGED_KINDS)
    frames = _frames(frames, "frames", 6)
    first, last = frames[:, 0, 0], frames[:, 0, -1]
    if kind == "translation":
        return translation(first, last)
    if kind == "rotation":
        return rotation(first, last)
    yes = presence(last) if kind == "presence" else structure(last)
    return ["yes" if v else "no" for v in yes]


def accuracy(kind: str, frames, labels) -> float:
    """Share of episodes whose judged answer equals the ground-truth label."""
    answers = judge(kind, frames)
    if len(labels) != len(answers):
        raise checks.InputError(
            f"labels must hold one label per episode ({len(answers)}), got {len(labels)}"
        )
    return float(np.mean([a == b for a, b in zip(answers, labels)]))


def broken(frames, how: str, rng: np.random.Generator) -> np.ndarray:
    """A broken copy of a set of videos (n, P, T, 16, 16, 3) that keeps each first frame:
    ``frozen`` repeats it; ``shuffled`` takes frames 1.. from another episode of the set (a
    random derangement)."""
    how = checks.choice(how, "how", ("frozen", "shuffled"))
    frames = _frames(frames, "frames", 6).copy()
    rng = checks.generator(rng)
    if how == "frozen":
        frames[:, :, 1:] = frames[:, :, :1]
        return frames
    n = frames.shape[0]
    if n < 2:
        raise checks.InputError(f"shuffling needs at least 2 episodes, got {n}")
    perm = rng.permutation(n)
    while np.any(perm == np.arange(n)):  # a derangement: no episode keeps its own frames
        perm = rng.permutation(n)
    frames[:, :, 1:] = frames[perm, :, 1:]
    return frames
