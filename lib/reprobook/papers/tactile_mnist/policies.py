"""Scripted movement policies and episode roll-outs for the chapter on Tactile MNIST.

Paper: "Tactile MNIST: Benchmarking Active Tactile Perception", Schneider et al., arXiv
2506.06361. The benchmark's agents output ``{"action": movement, "prediction": logits}`` at every
step (the ap_gym active-perception interface). This module supplies the *movement* half with three
hand-written strategies, the stand-ins of the chapter's claim C2 for the baselines the paper
takes from APPLE (random actions, a fixed grid, and a learned policy):

* :class:`RandomPolicy`: an action drawn uniformly from the inner action box ("APPLE-RND");
* :class:`RasterPolicy`: a fixed boustrophedon (lawn-mower) path over [-1, 1]^2 sized to the
  step budget ("APPLE-GRID"), steered from the position the observation reports;
* :class:`GradientPolicy`: a step towards the contrast-weighted centroid of the current glimpse
  or tactile image (follow the gradient towards bright pixels / contact), with an exploratory
  step when the image is flat.

:func:`rollout` runs a policy in an environment with uniform (all-zero) logits as the
prediction and returns :class:`Trajectories`, the arrays a supervised predictor is trained on
(``model.py``). Everything here is NumPy; torch is never imported.

Observation convention (the spec's adapter, :func:`detect_keys`): an image key (``"glimpse"``,
(g, g, C), in ap_gym's image environments; ``"sensor_img"``, (S, S, 1), in the tactile
environments), a position key (``"glimpse_pos"`` (2,) or ``"sensor_pos"`` (3,), in [-1, 1]) and
``"time_step"`` (a scalar in [-1, 1]). Positions are in the environment's normalised units, and a
policy's ``max_step`` is the largest distance one action moves the sensor in those units (0.2 in
ap_gym's CircleSquare-v0: the unit-ball-projected action times ``max_step_length``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reprobook.core import checks

__all__ = [
    "IMAGE_KEYS",
    "POSITION_KEYS",
    "TIME_KEY",
    "ObservationKeys",
    "detect_keys",
    "inner_action_space",
    "Policy",
    "RandomPolicy",
    "RasterPolicy",
    "GradientPolicy",
    "raster_waypoints",
    "make_policy",
    "POLICIES",
    "Trajectories",
    "rollout",
]

IMAGE_KEYS: tuple[str, ...] = ("glimpse", "sensor_img")  # the image keys the adapter knows
POSITION_KEYS: tuple[str, ...] = ("glimpse_pos", "sensor_pos")  # the position keys it knows
TIME_KEY = "time_step"
POLICY_STREAM = 0x7AC7  # first entry of the per-episode policy seed [POLICY_STREAM, seed, e]


# --- the observation adapter ---------------------------------------------------------------------


@dataclass(frozen=True)
class ObservationKeys:
    """Which keys of an observation dict hold the image, the sensor position and the time step."""

    image: str
    position: str
    time: str = TIME_KEY

    def split(self, obs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
        """(image (H, W, C) float32, position (d,) float32, time step float) of one observation."""
        missing = [k for k in (self.image, self.position, self.time) if k not in obs]
        if missing:
            raise KeyError(f"observation lacks the keys {missing}; it has {sorted(obs)}")
        image = np.asarray(obs[self.image], dtype=np.float32)
        if image.ndim == 2:  # (H, W): one channel
            image = image[..., None]
        if image.ndim != 3:
            raise ValueError(
                f"observation[{self.image!r}] must be an image (H, W, C), got shape {image.shape}"
            )
        pos = np.asarray(obs[self.position], dtype=np.float32).reshape(-1)
        return image, pos, float(np.asarray(obs[self.time]))

    def split_batch(self, obs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`split` for a vector env's observation (every entry with a leading env axis N):
        images (N, H, W, C), positions (N, d) and time steps (N,), all float32 and fresh copies
        (never views of the env's buffers); row i holds the values ``split`` gives for env i."""
        missing = [k for k in (self.image, self.position, self.time) if k not in obs]
        if missing:
            raise KeyError(f"observation lacks the keys {missing}; it has {sorted(obs)}")
        images = np.array(obs[self.image], dtype=np.float32)
        if images.ndim == 3:  # (N, H, W): one channel
            images = images[..., None]
        if images.ndim != 4:
            raise ValueError(
                f"observation[{self.image!r}] must be a batch of images (N, H, W, C), "
                f"got shape {images.shape}"
            )
        n = images.shape[0]
        positions = np.array(obs[self.position], dtype=np.float32).reshape(n, -1)
        return images, positions, np.array(obs[self.time], dtype=np.float32).reshape(n)


def _keys_of(obj: Any) -> list[str]:
    import gymnasium as gym

    if isinstance(obj, gym.vector.VectorEnv):
        obj = obj.single_observation_space
    elif isinstance(obj, gym.Env):
        obj = obj.observation_space
    if isinstance(obj, gym.spaces.Dict):
        return list(obj.spaces)
    if isinstance(obj, Mapping):
        return list(obj)
    raise TypeError(
        f"expected an environment, a Dict observation space or an observation dict, "
        f"got {type(obj).__name__}"
    )


def detect_keys(obj: Any) -> ObservationKeys:
    """The :class:`ObservationKeys` of an environment, its observation space or one observation.

    Exactly one of :data:`IMAGE_KEYS` and one of :data:`POSITION_KEYS` must be present, and
    ``"time_step"``; otherwise a ValueError names what was found and what is allowed."""
    keys = _keys_of(obj)
    images = [k for k in IMAGE_KEYS if k in keys]
    positions = [k for k in POSITION_KEYS if k in keys]
    problems = []
    if len(images) != 1:
        problems.append(f"exactly one image key of {IMAGE_KEYS} (found {images or 'none'})")
    if len(positions) != 1:
        problems.append(
            f"exactly one position key of {POSITION_KEYS} (found {positions or 'none'})"
        )
    if TIME_KEY not in keys:
        problems.append(f"the key {TIME_KEY!r}")
    if problems:
        raise ValueError(
            f"observation keys {sorted(keys)} do not follow the convention: need "
            + "; ".join(problems)
        )
    return ObservationKeys(images[0], positions[0])


def inner_action_space(env: Any):
    """The movement ("inner") action space of an ap_gym environment: ``env.inner_action_space``
    when it has one, else ``env.action_space["action"]`` (for a vector env, the single-env
    spaces); it must be a bounded 1-D Box."""
    import gymnasium as gym

    vector = isinstance(env, gym.vector.VectorEnv)
    space = getattr(env, "single_inner_action_space" if vector else "inner_action_space", None)
    if space is None:
        outer = getattr(env, "single_action_space" if vector else "action_space", None)
        if isinstance(outer, gym.spaces.Dict) and "action" in outer.spaces:
            space = outer["action"]
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(
            f"the environment's inner action space must be a gymnasium Box, got {space!r}; "
            "expected env.inner_action_space or env.action_space['action']"
        )
    if (
        not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))
        or len(space.shape) != 1
    ):
        raise ValueError(f"the inner action space must be a bounded 1-D Box, got {space}")
    return space


# --- policies ----------------------------------------------------------------------------------


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a . b over the last axis, each row's sum computed by ``ndarray.dot`` of two 1-D arrays
    (the BLAS dot, which ``np.linalg.norm`` also uses; its rounding can differ from a sum of
    products), so that the batched policies give bitwise what the per-env ones give.
    ``np.vecdot`` (NumPy >= 2) calls that dot per row; older NumPy loops here."""
    a, b = np.broadcast_arrays(a, b)
    a, b = np.ascontiguousarray(a, np.float64), np.ascontiguousarray(b, np.float64)
    if hasattr(np, "vecdot"):
        return np.vecdot(a, b)
    rows = zip(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]))
    return np.array([x.dot(y) for x, y in rows], dtype=np.float64).reshape(a.shape[:-1])


def _norms(v: np.ndarray) -> np.ndarray:
    """||v|| over the last axis, bitwise as ``np.linalg.norm`` of each row (sqrt(v . v))."""
    return np.sqrt(_dots(v, v))


class Policy:
    """A scripted movement policy over a 1-D inner action Box (2-D image envs, 3-D tactile envs).

    ``reset(obs, rng)`` starts an episode (per-episode state lives on the instance);
    ``act(obs, rng)`` returns the inner action (float32, inside the box). The planar part of an
    action is its first two components; further components (the tactile z) are 0.

    Vector envs: ``state = reset_batch(obs, rngs)`` starts one episode per env (``obs`` with a
    leading env axis N, ``rngs`` one generator per env) and ``act_batch(obs, rngs, state)``
    returns the actions (N, k), row i exactly what ``act`` returns for env i with ``rngs[i]``.
    Here they run a copy of the policy per env; the three policies below override them with
    NumPy over the env axis (same operations, same values). A subclass that changes ``reset``
    or ``act`` must override these two as well, or restore this class's versions."""

    name = "policy"

    def __init__(self, action_space: Any, keys: ObservationKeys | None = None):
        import gymnasium as gym

        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ValueError(f"action_space must be a 1-D gymnasium Box, got {action_space!r}")
        if action_space.shape[0] < 2:
            raise ValueError(
                f"the inner action must have at least 2 components (planar movement), "
                f"got shape {action_space.shape}"
            )
        self.action_space = action_space
        self.low = np.asarray(action_space.low, dtype=np.float64)
        self.high = np.asarray(action_space.high, dtype=np.float64)
        if not (np.all(self.low <= 0) and np.all(self.high >= 0)):
            raise ValueError(f"the action box must contain 0, got low={self.low}, high={self.high}")
        self.keys = keys

    # helpers ---------------------------------------------------------------------------------
    def _split(self, obs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
        if self.keys is None:
            self.keys = detect_keys(obs)
        return self.keys.split(obs)

    def _split_batch(self, obs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.keys is None:
            self.keys = detect_keys(obs)
        return self.keys.split_batch(obs)

    def _planar(self, v2: np.ndarray) -> np.ndarray:
        """Planar vectors (..., 2) as full inner actions (..., k): zeros after the first two
        components, clipped into the box (a no-op for the unit-norm and smaller vectors the
        policies make)."""
        a = np.zeros((*v2.shape[:-1], *self.action_space.shape), dtype=np.float64)
        a[..., :2] = v2
        return np.clip(a, self.low, self.high).astype(np.float32)

    # interface -------------------------------------------------------------------------------
    def reset(self, obs: Mapping[str, Any], rng: np.random.Generator) -> None:
        """Start an episode whose first observation is ``obs``."""

    def act(self, obs: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, obs: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        return self.act(obs, rng)

    def reset_batch(self, obs: Mapping[str, Any], rngs: Sequence[np.random.Generator]) -> Any:
        """Start one episode in each env of a vector env; returns the per-episode state that
        :meth:`act_batch` takes (here: a copy of the policy per env, reset on its own
        observation)."""
        import copy

        copies = [copy.deepcopy(self) for _ in rngs]
        for i, (pol, rng) in enumerate(zip(copies, rngs)):
            pol.reset({k: v[i] for k, v in obs.items()}, rng)
        return copies

    def act_batch(
        self, obs: Mapping[str, Any], rngs: Sequence[np.random.Generator], state: Any
    ) -> np.ndarray:
        """The inner actions (N, k) float32 of a vector env, row i that of env i (here: each
        env's copy of the policy acts on its own observation)."""
        return np.stack(
            [
                pol.act({k: v[i] for k, v in obs.items()}, rng)
                for i, (pol, rng) in enumerate(zip(state, rngs))
            ]
        )


class RandomPolicy(Policy):
    """a ~ U(low, high) componentwise over the whole inner action box ("no active strategy",
    APPLE-RND's movement). For a 3-D (tactile) box the z component is 0 like every policy's."""

    name = "random"

    def act(self, obs, rng):
        return self._draw(rng).astype(np.float32)

    def _draw(self, rng: np.random.Generator) -> np.ndarray:
        a = rng.uniform(self.low, self.high)  # one draw per component, from this env's stream
        a[2:] = 0.0
        return a

    def reset_batch(self, obs, rngs):
        return None  # no per-episode state

    def act_batch(self, obs, rngs, state):
        return np.stack([self._draw(rng) for rng in rngs]).astype(np.float32)


def raster_waypoints(budget: float, n_rows: int | None = None) -> tuple[np.ndarray, int, float]:
    """The turning points of a boustrophedon over the square [-a, a]^2 and its number of rows.

    The square [-1, 1]^2 is cut into n x n cells of side 2/n; the path runs along the centre
    line of each row of cells, from the first cell centre to the last, and turns to the next row
    (a snake): rows at y_k = a (-1 + (2k + 1)/n), k = 0..n-1, each from x = -a(1 - 1/n) to
    a(1 - 1/n). Its length is a (2n - 2/n). With ``n_rows=None``, n is the largest n >= 2 whose
    path fits the budget (length <= budget at a = 1); ASSUMED sizing rule. The half-width
    a = min(1, budget / (2n - 2/n)) shrinks the pattern about the centre when even two rows do not
    fit. Returns (waypoints (2n, 2), n, a). Implements eq. `tac-raster` of
    notebooks/10_tactile_mnist/index.md.
    """
    checks.real(budget, "budget (the path length available)", above=0)

    def length(n: int) -> float:
        return 2 * n - 2 / n

    if n_rows is None:
        n = 2
        while length(n + 1) <= budget:
            n += 1
    else:
        n = checks.integer(n_rows, "n_rows (None: sized from the budget)", minimum=2)
    a = min(1.0, budget / length(n))
    centres = a * (-1 + (2 * np.arange(n) + 1) / n)
    x0, x1 = centres[0], centres[-1]
    points = []
    for k, y in enumerate(centres):
        ends = (x0, x1) if k % 2 == 0 else (x1, x0)
        points.extend([(ends[0], y), (ends[1], y)])
    return np.asarray(points, dtype=np.float64), n, a


class RasterPolicy(Policy):
    """A fixed lawn-mower pattern (APPLE-GRID's kind of movement), steered from the observed
    position.

    Path: :func:`raster_waypoints` with the budget (step_limit - 1) * max_step, the distance the
    sensor can cover before the last observation that a prediction sees. At reset the pattern is
    mirrored (in x and/or y; 4 choices) so that it starts at the turning point nearest to the
    start position; travelling there comes out of the budget, so the tail of the pattern may not
    be reached. Each step walks ``max_step`` along the remaining polyline from the *current*
    position (passing turning points within the step), and the action is that displacement
    divided by ``max_step`` (norm <= 1, so the env's unit-ball projection leaves it unchanged).
    After the last turning point the policy holds still (zero action).
    """

    name = "raster"
    MIRRORS = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))  # (x, y) signs, in reset order

    def __init__(
        self,
        action_space,
        max_step: float,
        step_limit: int = 16,
        n_rows: int | None = None,
        keys: ObservationKeys | None = None,
    ):
        super().__init__(action_space, keys)
        # the largest move per step, in normalised position units
        checks.real(max_step, "max_step", above=0)
        checks.integer(step_limit, "step_limit", minimum=2)
        self.max_step = float(max_step)
        self.step_limit = step_limit
        self.pattern, self.n_rows, self.half_width = raster_waypoints(
            (step_limit - 1) * self.max_step, n_rows
        )
        self.waypoints = self.pattern.copy()
        self.index = 0

    def reset(self, obs, rng):
        _, pos, _ = self._split(obs)
        start = pos[:2].astype(np.float64)
        best = None
        for sx, sy in self.MIRRORS:
            wp = self.pattern * np.array([sx, sy])
            d = float(np.linalg.norm(wp[0] - start))
            if best is None or d < best[0] - 1e-12:
                best = (d, wp)
        self.waypoints = best[1]
        self.index = 0

    def act(self, obs, rng):
        _, pos, _ = self._split(obs)
        here = pos[:2].astype(np.float64)
        point, left = here.copy(), self.max_step
        i = self.index
        while i < len(self.waypoints):
            gap = self.waypoints[i] - point
            d = float(np.linalg.norm(gap))
            if d <= left:
                point, left, i = self.waypoints[i].copy(), left - d, i + 1
            else:
                point = point + gap * (left / d)
                break
        self.index = i
        move = (point - here) / self.max_step
        norm = float(np.linalg.norm(move))
        if norm > 1.0:  # rounding only
            move /= norm
        return self._planar(move)

    # vector envs: reset and act above for N envs at once, with the same operations

    def reset_batch(self, obs, rngs):
        _, positions, _ = self._split_batch(obs)
        return {"waypoints": self._mirrored(positions), "index": np.zeros(len(rngs), np.int64)}

    def act_batch(self, obs, rngs, state):
        _, positions, _ = self._split_batch(obs)
        moves, state["index"] = self._walk(state["waypoints"], state["index"], positions)
        return self._planar(moves)

    def _mirrored(self, positions: np.ndarray) -> np.ndarray:
        """:meth:`reset`'s choice for N start positions (N, d): the pattern mirrored to start
        at the turning point nearest each, waypoints (N, 2n, 2). The mirror images are tried in
        the order of MIRRORS; a later one wins only when nearer by more than 1e-12."""
        start = positions[:, :2].astype(np.float64)
        signs = np.array(self.MIRRORS)
        patterns = self.pattern[None] * signs[:, None]  # (4, 2n, 2)
        gap = patterns[None, :, 0] - start[:, None]  # (N, 4, 2): start to each first point
        dist = _norms(gap)
        best, best_dist = np.zeros(len(start), np.int64), dist[:, 0]
        for j in range(1, len(signs)):
            nearer = dist[:, j] < best_dist - 1e-12
            best[nearer], best_dist = j, np.where(nearer, dist[:, j], best_dist)
        return patterns[best]

    def _walk(
        self, waypoints: np.ndarray, index: np.ndarray, positions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`act`'s step for N envs: walk ``max_step`` along the polyline ``waypoints[i]``
        (N, 2n, 2) from the position (N, d), through the turning points from ``index[i]`` on
        (N,). Returns the moves (N, 2) (displacement / max_step, norm <= 1) and the indices of
        the next turning points (N,)."""
        here = positions[:, :2].astype(np.float64)
        point, left, index = here.copy(), np.full(len(here), self.max_step), index.copy()
        walking = np.flatnonzero(index < waypoints.shape[1])  # envs still on their path
        while walking.size:
            target = waypoints[walking, index[walking]]
            gap = target - point[walking]
            d = _norms(gap)
            passed = d <= left[walking]  # the turning point is within this step
            on, stop = walking[passed], walking[~passed]
            point[on], left[on], index[on] = target[passed], left[on] - d[passed], index[on] + 1
            point[stop] = point[stop] + gap[~passed] * (left[stop] / d[~passed])[:, None]
            walking = on[index[on] < waypoints.shape[1]]
        move = (point - here) / self.max_step
        norm = _norms(move)
        over = norm > 1.0  # rounding only
        move[over] /= norm[over, None]
        return move, index


class GradientPolicy(Policy):
    """Follow the gradient towards bright pixels (image envs) or contact (tactile envs).

    With the image I (H, W, C) averaged over channels (negated when ``invert``), the contrast
    weights are w = I - min I (ASSUMED: the minimum is subtracted so that a uniformly bright
    background, as in CircleSquare's distance gradient, does not pull the centroid to the
    centre). The centroid offset from the image centre, in pixels,

        c = sum_ij w_ij (i - (H-1)/2, j - (W-1)/2) / sum_ij w_ij,

    is mapped to the plane (rows along position axis ``row_axis``, columns along the other; in
    ap_gym's image envs rows run along the second coordinate, y, measured from its
    ``get_glimpse``) and the action is the unit vector along it: a full step towards the contrast.

    When the image is flat (max w < ``flat_tol``: nothing touched, or the glimpse lies wholly on
    the object) or the centroid sits at the centre (|c| < ``centre_tol`` pixels), the policy takes
    an exploratory full step: ``explore="random"`` (default) draws a uniform direction,
    ``explore="centre"`` heads for the cell centre (0, 0) (random when already within one step
    of it). ASSUMED choices; "random" suits CircleSquare, where a flat glimpse means the sensor is
    on the object, and "centre" suits the tactile cell, whose digit sits at the centre.
    """

    name = "gradient"
    EXPLORE = ("random", "centre")

    def __init__(
        self,
        action_space,
        explore: str = "random",
        row_axis: int = 1,
        invert: bool = False,
        flat_tol: float = 1e-3,
        centre_tol: float = 1e-3,
        max_step: float | None = None,
        keys: ObservationKeys | None = None,
    ):
        super().__init__(action_space, keys)
        if explore not in self.EXPLORE:
            raise ValueError(f"explore must be one of {self.EXPLORE}, got {explore!r}")
        if row_axis not in (0, 1):
            raise ValueError(
                f"row_axis (the position coordinate that image rows run along) must be 0 or 1, "
                f"got {row_axis!r}"
            )
        checks.real(flat_tol, "flat_tol", minimum=0)
        checks.real(centre_tol, "centre_tol", minimum=0)
        if max_step is not None:
            checks.real(max_step, "max_step", above=0)
        self.explore, self.row_axis, self.invert = explore, row_axis, bool(invert)
        self.flat_tol, self.centre_tol = float(flat_tol), float(centre_tol)
        self.max_step = None if max_step is None else float(max_step)
        self.explored = 0  # exploratory steps taken in the current episode

    def reset(self, obs, rng):
        self.explored = 0

    def direction(self, image: np.ndarray) -> np.ndarray | None:
        """The unit planar direction towards the contrast-weighted centroid, or None when the
        image is flat or the centroid is at the centre. Implements eq. `tac-gradient` of
        notebooks/10_tactile_mnist/index.md."""
        intensity = image.mean(axis=-1).astype(np.float64)  # I: (H, W), channels averaged
        if self.invert:  # a dark object on a bright background
            intensity = -intensity
        w = intensity - intensity.min()  # eq. tac-gradient: contrast weights w = I - min I
        total = w.sum()
        if w.max() < self.flat_tol or total <= 0:  # a flat image: nothing to follow
            return None
        h, wd = w.shape
        rows = np.arange(h) - (h - 1) / 2  # pixel offsets from the image centre
        cols = np.arange(wd) - (wd - 1) / 2
        c_row = float(rows @ w.sum(axis=1)) / total  # eq. tac-gradient: the centroid offset c
        c_col = float(w.sum(axis=0) @ cols) / total
        if math.hypot(c_row, c_col) < self.centre_tol:  # already centred on the contrast
            return None
        v = np.zeros(2)  # image rows and columns onto the position axes
        v[self.row_axis] = c_row
        v[1 - self.row_axis] = c_col
        return v / np.linalg.norm(v)  # eq. tac-gradient: a full step along c / ||c||

    def _explore(self, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The exploratory planar step (2,) from position ``pos`` (d,), drawn from ``rng``."""
        towards = -pos[:2].astype(np.float64)
        dist = float(np.linalg.norm(towards))
        reach = self.max_step if self.max_step is not None else 0.0
        if self.explore == "centre" and dist > max(reach, 1e-9):
            return towards / dist
        if self.explore == "centre" and dist > 1e-9:
            return towards / reach  # land on the centre
        angle = rng.uniform(0.0, 2 * math.pi)
        return np.array([math.cos(angle), math.sin(angle)])

    def act(self, obs, rng):
        image, pos, _ = self._split(obs)
        v = self.direction(image)
        if v is None:
            self.explored += 1
            v = self._explore(pos, rng)
        return self._planar(v)

    # vector envs: direction and act above for N envs at once, with the same operations

    def direction_batch(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`direction` of N images (N, H, W, C) at once, with the same operations: the
        unit planar directions (N, 2), and where there is one (N,) (a zero row and False where
        :meth:`direction` gives None). Implements eq. `tac-gradient` of
        notebooks/10_tactile_mnist/index.md."""
        intensity = images.mean(axis=-1).astype(np.float64)  # I: (N, H, W), channels averaged
        if self.invert:  # a dark object on a bright background
            intensity = -intensity
        n, h, wd = intensity.shape
        lowest = intensity.reshape(n, h * wd).min(axis=1)
        w = intensity - lowest[:, None, None]  # eq. tac-gradient: contrast weights w = I - min I
        total = w.reshape(n, h * wd).sum(axis=1)
        # a flat image: nothing to follow
        flat = (w.reshape(n, h * wd).max(axis=1) < self.flat_tol) | (total <= 0)
        total = np.where(flat, 1.0, total)  # (its row is dropped below; no 0 / 0)
        rows = np.arange(h) - (h - 1) / 2  # pixel offsets from the image centre
        cols = np.arange(wd) - (wd - 1) / 2
        c_row = _dots(rows, w.sum(axis=2)) / total  # eq. tac-gradient: the centroid offset c
        c_col = _dots(w.sum(axis=1), cols) / total
        # already centred on the contrast (math.hypot per image, as direction computes it)
        centred = np.array(list(map(math.hypot, c_row, c_col))) < self.centre_tol
        found = ~flat & ~centred
        v = np.zeros((n, 2))  # image rows and columns onto the position axes
        v[:, self.row_axis] = c_row
        v[:, 1 - self.row_axis] = c_col
        v[found] /= _norms(v[found])[:, None]  # eq. tac-gradient: a full step along c / ||c||
        v[~found] = 0.0
        return v, found

    def reset_batch(self, obs, rngs):
        return {"explored": np.zeros(len(rngs), np.int64)}  # exploratory steps per env

    def act_batch(self, obs, rngs, state):
        images, positions, _ = self._split_batch(obs)
        v, found = self.direction_batch(images)
        for i in np.flatnonzero(~found):  # nothing to follow: an exploratory step
            state["explored"][i] += 1
            v[i] = self._explore(positions[i], rngs[i])
        return self._planar(v)


POLICIES: tuple[str, ...] = ("random", "raster", "gradient")


def make_policy(
    name: str, env: Any, max_step: float, step_limit: int = 16, **kwargs: Any
) -> Policy:
    """A policy by name ("random", "raster", "gradient") for ``env``'s inner action space and
    keys. ``max_step`` is the env's largest move per step in normalised position units (0.2 in
    CircleSquare-v0); extra keyword arguments go to the policy's constructor."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; the policies are {POLICIES}")
    space, keys = inner_action_space(env), detect_keys(env)
    if name == "random":
        return RandomPolicy(space, keys=keys, **kwargs)
    if name == "raster":
        return RasterPolicy(space, max_step=max_step, step_limit=step_limit, keys=keys, **kwargs)
    kwargs.setdefault("max_step", max_step)
    return GradientPolicy(space, keys=keys, **kwargs)


# --- roll-outs ---------------------------------------------------------------------------------


@dataclass
class Trajectories:
    """E episodes of T steps; step t holds the observation the prediction at step t sees (the
    reset observation for t = 0, the one after action t-1 otherwise), the inner action taken
    and the reward that followed it.

    images (E, T, H, W, C) float32; positions (E, T, d) float32; time (E, T) float32;
    labels (E,) int64 (the env's prediction target); actions (E, T, k) float32;
    base_rewards (E, T) and rewards (E, T) float64 (the env's reward for zero logits, that is
    base_reward - loss of the uniform prediction). ``keys`` names the observation keys used.
    """

    images: np.ndarray
    positions: np.ndarray
    time: np.ndarray
    labels: np.ndarray
    actions: np.ndarray
    base_rewards: np.ndarray
    rewards: np.ndarray
    keys: ObservationKeys | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.images.ndim != 5:
            raise ValueError(f"images must be (E, T, H, W, C), got shape {self.images.shape}")
        e, t = self.images.shape[:2]
        for name, ndim in (
            ("positions", 3),
            ("time", 2),
            ("labels", 1),
            ("actions", 3),
            ("base_rewards", 2),
            ("rewards", 2),
        ):
            arr = getattr(self, name)
            if arr.ndim != ndim or arr.shape[: min(ndim, 2)] != (e, t)[: min(ndim, 2)]:
                raise ValueError(
                    f"{name} must have {ndim} dimensions starting with {(e, t)[: min(ndim, 2)]} "
                    f"(E, T of images), got shape {arr.shape}"
                )

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.images.shape[1])

    def subset(self, index: Sequence[int] | np.ndarray | slice) -> Trajectories:
        """The episodes ``index`` (copies of the arrays)."""
        pick = lambda a: a[index].copy()
        return Trajectories(
            pick(self.images),
            pick(self.positions),
            pick(self.time),
            pick(self.labels),
            pick(self.actions),
            pick(self.base_rewards),
            pick(self.rewards),
            self.keys,
            dict(self.meta),
        )


def _target_label(info: Mapping[str, Any]) -> int:
    try:
        target = np.asarray(info["prediction"]["target"])
    except (KeyError, TypeError):
        raise ValueError(
            "the step info has no info['prediction']['target']; rollout needs an ap_gym "
            "active-perception environment"
        ) from None
    if target.ndim != 0 or not np.issubdtype(target.dtype, np.integer):
        raise ValueError(
            f"rollout supports classification targets (a scalar integer label), got {target!r}"
        )
    return int(target)


def rollout(env: Any, policy: Policy, n_episodes: int, seed: int) -> Trajectories:
    """Run ``policy`` for ``n_episodes`` episodes with zero logits (a uniform prediction).

    Episode e starts with ``env.reset(seed=seed + e)`` and the policy draws from
    ``np.random.default_rng([POLICY_STREAM, seed, e])``, so the same call gives the same arrays,
    and an episode does not depend on the episodes before it. Every episode must end (terminated
    or truncated) after the same number of steps T, the env's fixed step limit; the label is the
    step info's ``prediction.target`` and must stay the same within an episode.

    A gymnasium ``VectorEnv`` of N environments (``ap_gym.make_vec``; about 3 times faster per
    episode on CircleSquare) is also accepted: batch b runs episodes bN .. bN + N - 1 after
    ``env.reset(seed=seed + b)``, each with its own generator above (the policy acts on all N at
    once, :meth:`Policy.act_batch`, with the actions the per-env ``act`` would give); the extra
    episodes of the last batch are dropped. Its episodes differ from the single env's for the
    same seed (ap_gym seeds a vector env as a whole), and depend on N."""
    checks.integer(n_episodes, "n_episodes", minimum=1)
    checks.integer(seed, "seed", minimum=0)
    if not isinstance(policy, Policy):
        raise TypeError(
            f"policy must be a Policy (RandomPolicy, RasterPolicy, GradientPolicy), "
            f"got {type(policy).__name__}"
        )
    keys = detect_keys(env)
    if policy.keys is None:
        policy.keys = keys
    import gymnasium as gym

    vector = isinstance(env, gym.vector.VectorEnv)
    outer = env.single_action_space if vector else env.action_space
    if not (
        isinstance(outer, gym.spaces.Dict)
        and "prediction" in outer.spaces
        and "action" in outer.spaces
    ):
        raise ValueError(
            f"the env's action space must be a Dict with 'action' and 'prediction', got {outer}"
        )
    pred_space = outer["prediction"]
    zero_logits = np.zeros(pred_space.shape, dtype=pred_space.dtype or np.float32)
    if vector:
        return _rollout_vector(env, policy, n_episodes, seed, keys, zero_logits)

    episodes: list[dict[str, np.ndarray]] = []
    labels: list[int] = []
    length = None
    for e in range(n_episodes):
        rng = np.random.default_rng([POLICY_STREAM, seed, e])
        obs, _ = env.reset(seed=seed + e)
        policy.reset(obs, rng)
        rows: dict[str, list] = {
            "images": [],
            "positions": [],
            "time": [],
            "actions": [],
            "base_rewards": [],
            "rewards": [],
        }
        label = None
        done = False
        while not done:
            image, pos, time = keys.split(obs)
            action = policy.act(obs, rng)
            obs, reward, terminated, truncated, info = env.step(
                {"action": action, "prediction": zero_logits}
            )
            step_label = _target_label(info)
            if label is None:
                label = step_label
            elif step_label != label:
                raise ValueError(
                    f"episode {e}: the target changed within the episode ({label} -> {step_label})"
                )
            rows["images"].append(image)
            rows["positions"].append(pos)
            rows["time"].append(time)
            rows["actions"].append(action)
            rows["base_rewards"].append(float(np.asarray(info["base_reward"])))
            rows["rewards"].append(float(reward))
            done = bool(terminated or truncated)
            if len(rows["time"]) > 100_000:
                raise RuntimeError("episode did not end within 100,000 steps")
        if length is None:
            length = len(rows["time"])
        elif len(rows["time"]) != length:
            raise ValueError(
                f"episode {e} lasted {len(rows['time'])} steps, episode 0 {length}: rollout needs "
                "a fixed step limit"
            )
        episodes.append(rows)
        labels.append(label)

    return _stack_episodes(
        episodes, labels, keys, {"policy": policy.name, "seed": seed, "n_episodes": n_episodes}
    )


def _stack_episodes(
    episodes: list[dict[str, list]], labels: list[int], keys: ObservationKeys, meta: dict[str, Any]
) -> Trajectories:
    def stack(name: str, dtype) -> np.ndarray:
        return np.stack([np.asarray(ep[name], dtype=dtype) for ep in episodes])

    return Trajectories(
        images=stack("images", np.float32),
        positions=stack("positions", np.float32),
        time=stack("time", np.float32),
        labels=np.asarray(labels, dtype=np.int64),
        actions=stack("actions", np.float32),
        base_rewards=stack("base_rewards", np.float64),
        rewards=stack("rewards", np.float64),
        keys=keys,
        meta=meta,
    )


def _rollout_vector(
    env: Any,
    policy: Policy,
    n_episodes: int,
    seed: int,
    keys: ObservationKeys,
    zero_logits: np.ndarray,
) -> Trajectories:
    """:func:`rollout` on a gymnasium VectorEnv (see there): every step handles all N envs at
    once (``policy.act_batch``, whole-batch arrays), and a batch's steps are stacked into
    (N, T, ...) arrays when it ends."""
    n_envs = int(env.num_envs)
    logits = np.broadcast_to(zero_logits, (n_envs, *zero_logits.shape)).copy()
    fields = ("images", "positions", "time", "actions", "base_rewards", "rewards")
    batches: list[dict[str, np.ndarray]] = []  # per batch: the fields, (N, T, ...) each
    labels: list[np.ndarray] = []
    length = None
    for b in range(-(-n_episodes // n_envs)):
        rngs = [
            np.random.default_rng([POLICY_STREAM, seed, e])
            for e in range(b * n_envs, (b + 1) * n_envs)
        ]
        obs, _ = env.reset(seed=seed + b)
        state = policy.reset_batch(obs, rngs)
        steps: dict[str, list[np.ndarray]] = {name: [] for name in fields}  # per step, (N, ...)
        batch_labels = None
        while True:
            images, positions, time = keys.split_batch(obs)
            actions = policy.act_batch(obs, rngs, state)
            obs, reward, terminated, truncated, info = env.step(
                {"action": actions, "prediction": logits}
            )
            target = np.asarray(info["prediction"]["target"])
            if target.shape != (n_envs,) or not np.issubdtype(target.dtype, np.integer):
                raise ValueError(
                    "rollout supports classification targets (one integer label per env), "
                    f"got {target!r}"
                )
            if batch_labels is None:
                batch_labels = target.copy()
            elif not np.array_equal(target, batch_labels):
                raise ValueError(f"batch {b}: a target changed within the episode")
            base = np.array(info["base_reward"], dtype=np.float64).reshape(n_envs)
            reward = np.array(reward, dtype=np.float64).reshape(n_envs)
            for name, value in zip(fields, (images, positions, time, actions, base, reward)):
                steps[name].append(value)
            done = np.asarray(terminated) | np.asarray(truncated)
            if done.any():
                if not done.all():
                    raise ValueError(
                        f"batch {b}: the environments ended at different steps; rollout needs a "
                        "fixed step limit"
                    )
                break
            if len(steps["time"]) > 100_000:
                raise RuntimeError("episode did not end within 100,000 steps")
        if length is None:
            length = len(steps["time"])
        elif len(steps["time"]) != length:
            raise ValueError(
                f"batch {b} lasted {len(steps['time'])} steps, batch 0 {length}: rollout needs a "
                "fixed step limit"
            )
        keep = min(n_envs, n_episodes - b * n_envs)  # the last batch's extra episodes go
        batches.append({name: np.stack(values, axis=1)[:keep] for name, values in steps.items()})
        labels.append(batch_labels[:keep])

    def joined(arrays: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(arrays).astype(dtype, copy=False)

    return Trajectories(
        **{
            name: joined([batch[name] for batch in batches], dtype)
            for name, dtype in zip(fields, (np.float32,) * 4 + (np.float64,) * 2)
        },
        labels=joined(labels, np.int64),
        keys=keys,
        meta={"policy": policy.name, "seed": seed, "n_episodes": n_episodes, "num_envs": n_envs},
    )
