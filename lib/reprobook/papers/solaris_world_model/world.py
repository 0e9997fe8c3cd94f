"""DuetGrid: a small deterministic multiplayer world that stands in for Minecraft.

Chapter 19 (notebooks/19_solaris_world_model) of the book reproduces "Solaris: Building a
Multiplayer Video World Model in Minecraft" (arXiv 2602.22208). The paper records two bots
playing scripted cooperative episodes on a Minecraft server, one synchronised video and action
stream per player. Neither the game nor its recordings can be had here, so this module is our
substitute: a toroidal grid of terrain cells, ``P`` players with a position and one of four
headings, and placeable blocks. Each player sees an egocentric window of 8 x 8 cells (6 ahead,
1 behind, 4 to the left, 3 to the right), rotated to its heading and drawn at 2 pixels per cell:
a 16 x 16 RGB frame. Other players are drawn as a cell of their own colour.

Actions per frame follow the paper's split into keys and mouse: five keys (forward, back,
strafe left, strafe right, place a block in front) and a two-value mouse (yaw, pitch), where
yaw is -1 (turn left by 90 degrees), 0 or +1 (turn right); pitch is always 0. The action of
frame ``t`` moved the world from frame ``t - 1`` to frame ``t``; frame 0's action is zero.

Scripted episode types mirror the paper's evaluation sets (movement: ``translation`` and
``rotation``; grounding and consistency: ``presence``, the turn-to-look pair; building:
``structure``) plus random ``explore`` play. Everything is numpy and deterministic per seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reprobook.core import checks

KEYS = ("forward", "back", "left", "right", "place")
ACTION_DIM = len(KEYS) + 2  # keys, then the mouse (yaw, pitch)
CELL_PX = 2  # pixels per cell side
VIEW_ROWS = (-6, 1)  # rows of the window, ahead (negative) to behind, inclusive
VIEW_COLS = (-4, 3)  # columns, left (negative) to right, inclusive
FRAME = (VIEW_ROWS[1] - VIEW_ROWS[0] + 1) * CELL_PX  # 16 pixels
SELF_CELL = (-VIEW_ROWS[0], -VIEW_COLS[0])  # the viewer's own cell in the window: (6, 4)

TERRAIN = np.array(
    [
        [0.25, 0.55, 0.20],  # grass
        [0.80, 0.75, 0.45],  # sand
        [0.45, 0.45, 0.50],  # stone
        [0.15, 0.30, 0.70],  # water
    ],
    dtype=np.float32,
)
BLOCK = np.array([0.95, 0.55, 0.00], dtype=np.float32)  # placed blocks: orange
_PLAYER_BASE = np.array(
    [
        [1.00, 0.00, 0.00],  # player 0: red
        [1.00, 0.00, 1.00],  # player 1: magenta
        [0.00, 1.00, 1.00],  # player 2: cyan
        [1.00, 1.00, 1.00],  # player 3: white
        [1.00, 1.00, 0.00],  # player 4: yellow
        [0.00, 0.00, 0.00],  # player 5: black
    ],
    dtype=np.float32,
)
MAX_PLAYERS = 16
PLAYER_COLORS = np.concatenate([_PLAYER_BASE] * 3)[:MAX_PLAYERS]  # colours repeat past 6

# forward unit vectors (row, col) for headings 0..3 = north, east, south, west
FORWARD = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
EPISODE_TYPES = ("explore", "translation", "rotation", "presence", "structure")
TRANSLATION_CLASSES = ("closer", "farther", "left", "right", "still")
ROTATION_CLASSES = ("left", "right", "none")


@dataclass
class DuetGrid:
    """The state of one world: terrain (G x G ints), blocks (G x G bools), players."""

    terrain: np.ndarray
    blocks: np.ndarray
    pos: np.ndarray  # (P, 2) int cells
    heading: np.ndarray  # (P,) in 0..3
    history: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return int(self.terrain.shape[0])

    @property
    def n_players(self) -> int:
        return int(self.pos.shape[0])


def new_world(n_players: int, size: int, rng: np.random.Generator) -> DuetGrid:
    """A world of ``size`` x ``size`` cells with smooth random terrain, no blocks, and
    ``n_players`` players at random cells and headings."""
    n_players = checks.integer(n_players, "n_players", minimum=1, maximum=MAX_PLAYERS)
    size = checks.integer(size, "size", minimum=12)
    rng = checks.generator(rng)
    noise = rng.normal(size=(size, size))
    smooth = noise.copy()
    for shift in ((0, 1), (1, 0), (0, -1), (-1, 0)):  # one step of toroidal box smoothing
        smooth += np.roll(noise, shift, axis=(0, 1))
    edges = np.quantile(smooth, [0.45, 0.7, 0.88])
    terrain = np.searchsorted(edges, smooth).astype(np.int64)
    pos = rng.integers(0, size, size=(n_players, 2))
    heading = rng.integers(0, 4, size=n_players)
    return DuetGrid(terrain, np.zeros((size, size), bool), pos, heading)


def view_cells(world: DuetGrid, player: int) -> np.ndarray:
    """World cells (8, 8, 2) under each cell of ``player``'s window: window row ``a`` (ahead is
    negative) and column ``b`` map to ``pos - a * forward + b * right``, modulo the size."""
    f = FORWARD[world.heading[player]]
    r = FORWARD[(world.heading[player] + 1) % 4]
    a = np.arange(VIEW_ROWS[0], VIEW_ROWS[1] + 1)[:, None, None]
    b = np.arange(VIEW_COLS[0], VIEW_COLS[1] + 1)[None, :, None]
    return (world.pos[player] - a * f + b * r) % world.size


def render(world: DuetGrid, player: int) -> np.ndarray:
    """The egocentric RGB frame (16, 16, 3) in [0, 1] of ``player``: terrain, blocks, then the
    other players as cells of their colours. The viewer itself is not drawn."""
    cells = view_cells(world, player)
    rr, cc = cells[..., 0], cells[..., 1]
    img = TERRAIN[world.terrain[rr, cc]].copy()  # (8, 8, 3)
    img[world.blocks[rr, cc]] = BLOCK
    for q in range(world.n_players):
        if q == player:
            continue
        hit = (rr == world.pos[q, 0]) & (cc == world.pos[q, 1])
        img[hit] = PLAYER_COLORS[q]
    return np.repeat(np.repeat(img, CELL_PX, axis=0), CELL_PX, axis=1)


def step(world: DuetGrid, actions: np.ndarray) -> None:
    """Apply one frame of actions (P, 7) in place: moves (forward/back/strafe, one cell each,
    relative to the heading), a block placed in the cell ahead, then the turn (yaw sign)."""
    actions = np.asarray(actions, dtype=np.float32)
    for p in range(world.n_players):
        k = actions[p]
        f = FORWARD[world.heading[p]]
        r = FORWARD[(world.heading[p] + 1) % 4]
        move = (k[0] - k[1]) * f + (k[3] - k[2]) * r
        world.pos[p] = (world.pos[p] + move.astype(np.int64)) % world.size
        if k[4] > 0.5:
            ahead = (world.pos[p] + f) % world.size
            world.blocks[ahead[0], ahead[1]] = True
        world.heading[p] = (world.heading[p] + int(np.sign(k[5]))) % 4


def action(keys: tuple[str, ...] = (), yaw: int = 0) -> np.ndarray:
    """One player's action vector (7,): the named keys pressed, and the yaw (-1, 0, +1)."""
    out = np.zeros(ACTION_DIM, np.float32)
    for key in keys:
        out[KEYS.index(checks.choice(key, "key", KEYS))] = 1.0
    out[len(KEYS)] = float(checks.choice(yaw, "yaw", (-1, 0, 1)))
    return out


def key_for_direction(heading: int, direction: np.ndarray) -> str:
    """The movement key that moves a player of this heading one cell along ``direction``."""
    f = FORWARD[heading]
    r = FORWARD[(heading + 1) % 4]
    for key, vec in (("forward", f), ("back", -f), ("right", r), ("left", -r)):
        if np.array_equal(vec, direction):
            return key
    raise checks.InputError(f"direction must be a unit grid vector, got {direction!r}")


def _place(world: DuetGrid, q: int, p: int, ahead: int, lateral: int) -> None:
    """Put player ``q`` at ``ahead`` cells in front of and ``lateral`` to the right of ``p``."""
    f = FORWARD[world.heading[p]]
    r = FORWARD[(world.heading[p] + 1) % 4]
    world.pos[q] = (world.pos[p] + ahead * f + lateral * r) % world.size


def _random_action(rng: np.random.Generator) -> np.ndarray:
    u = rng.random()
    if u < 0.35:
        return action(("forward",))
    if u < 0.45:
        return action(("left",))
    if u < 0.55:
        return action(("right",))
    if u < 0.6:
        return action(("back",))
    if u < 0.7:
        return action(yaw=-1)
    if u < 0.8:
        return action(yaw=1)
    if u < 0.85:
        return action(("place",))
    return action()


def _script(kind: str, world: DuetGrid, T: int, rng: np.random.Generator):
    """Set the world up for an episode of ``kind`` and return its actions (T, P, 7) and label.

    Observer is player 0 and actor player 1 (every other player explores at random)."""
    P = world.n_players
    acts = np.stack([[_random_action(rng) for _ in range(P)] for _ in range(T)])
    acts[0] = 0.0
    label = None
    if kind == "explore" or P == 1 and kind in ("translation", "presence"):
        return acts, label
    if kind == "rotation":  # the observer turns once at frame 1, then stands still
        label = ROTATION_CLASSES[rng.integers(3)]
        acts[:, 0] = 0.0
        acts[1, 0] = action(yaw={"left": -1, "right": 1, "none": 0}[label])
        if P > 1:  # the actor stands still ahead, in view
            _place(world, 1, 0, 3, int(rng.integers(-2, 3)))
            acts[:, 1] = 0.0
        return acts, label
    if kind == "structure":  # one block placed at frame 1, in view or behind the observer
        visible = bool(rng.integers(2)) if P > 1 else True
        label = "yes" if visible else "no"
        acts[:, : min(P, 2)] = 0.0
        builder = 0
        if P > 1:  # the actor stands 3 ahead facing our way of looking, or 3 behind facing away
            builder = 1
            _place(world, 1, 0, 3 if visible else -3, int(rng.integers(-2, 3)))
            world.heading[1] = (world.heading[0] + (0 if visible else 2)) % 4
        acts[1, builder] = action(("place",))
        return acts, label
    if kind == "translation":  # the actor, ahead of the observer, takes one step at frame 1
        label = TRANSLATION_CLASSES[rng.integers(len(TRANSLATION_CLASSES))]
        acts[:, :2] = 0.0
        _place(world, 1, 0, 4, 0)
        world.heading[1] = rng.integers(4)
        f = FORWARD[world.heading[0]]
        r = FORWARD[(world.heading[0] + 1) % 4]
        way = {"closer": -f, "farther": f, "left": -r, "right": r}.get(label)
        if way is not None:
            acts[1, 1] = action((key_for_direction(int(world.heading[1]), way),))
        return acts, label
    if kind == "presence":  # turn to look at the actor (yes) or away from it (no)
        label = "yes" if rng.integers(2) else "no"
        acts[:, :2] = 0.0
        _place(world, 1, 0, -4 if label == "yes" else 4, int(rng.integers(-1, 2)))
        turn = int(rng.choice([-1, 1]))
        acts[1, 0] = action(yaw=turn)
        acts[2, 0] = action(yaw=turn)
        return acts, label
    raise checks.InputError(f"kind must be one of {EPISODE_TYPES}, got {kind!r}")


def episode(kind: str, n_players: int, T: int, seed: int, size: int = 24) -> dict:
    """One scripted episode: frames (P, T, 16, 16, 3), actions (P, T, 7) and its label.

    Deterministic in ``seed``. ``kind`` is one of ``EPISODE_TYPES``."""
    kind = checks.choice(kind, "kind", EPISODE_TYPES)
    T = checks.integer(T, "T", minimum=1 if kind == "explore" else 4)
    rng = np.random.default_rng(checks.integer(seed, "seed", minimum=0))
    world = new_world(n_players, size, rng)
    acts, label = _script(kind, world, T, rng)
    frames = np.empty((n_players, T, FRAME, FRAME, 3), np.float32)
    for t in range(T):
        if t > 0:
            step(world, acts[t])
        for p in range(n_players):
            frames[p, t] = render(world, p)
    return {"frames": frames, "actions": acts.transpose(1, 0, 2).copy(), "label": label}


def episodes(kind: str, n: int, n_players: int, T: int, seed: int, size: int = 24) -> dict:
    """``n`` episodes of one kind, stacked: frames (n, P, T, 16, 16, 3), actions (n, P, T, 7),
    labels (n,). Episode ``i`` uses the seed ``seed * 100_003 + i``."""
    n = checks.integer(n, "n", minimum=1)
    eps = [episode(kind, n_players, T, seed * 100_003 + i, size) for i in range(n)]
    return {
        "frames": np.stack([e["frames"] for e in eps]),
        "actions": np.stack([e["actions"] for e in eps]),
        "labels": [e["label"] for e in eps],
        "kind": kind,
    }


def training_set(n: int, n_players: int, T: int, seed: int, mix: tuple[float, ...]) -> dict:
    """A training mixture: ``mix`` gives the share of each of ``EPISODE_TYPES``. Frames are
    scaled to [-1, 1]; returns tensors-ready arrays (n, P, T, 3, 16, 16) and (n, P, T, 7)."""
    mix = np.asarray(mix, float)
    if mix.shape != (len(EPISODE_TYPES),) or np.any(mix < 0) or mix.sum() <= 0:
        raise checks.InputError(
            f"mix must give a non-negative share to each of {EPISODE_TYPES}, got {mix!r}"
        )
    counts = np.floor(mix / mix.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    frames, acts = [], []
    for j, (kind, c) in enumerate(zip(EPISODE_TYPES, counts)):
        if c == 0:
            continue
        e = episodes(kind, int(c), n_players, T, seed * 10 + j)
        frames.append(e["frames"])
        acts.append(e["actions"])
    x = np.concatenate(frames).transpose(0, 1, 2, 5, 3, 4) * 2.0 - 1.0
    return {"x": x.astype(np.float32), "actions": np.concatenate(acts).astype(np.float32)}
